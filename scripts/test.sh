#!/usr/bin/env bash
# The README's test command: sets up (scripts/setup.sh), checks the style (scripts/lint.sh), then
# runs the tests against the installed package in two passes side by side, the normal build (shared
# libkiln.so.0) and the static KILN_BUILD_SHARED=OFF build (scripts/test_static.sh), and prints the
# 20 slowest tests of each.
# `--full` adds the full tier (tests marked `full`, docs/developing.md); other arguments go to pytest.
set -euo pipefail
cd "$(dirname "$0")/.."
PYTHON=${PYTHON:-python3}
pytest_args=()
for arg in "$@"; do
  if [ "$arg" = --full ]; then export KILN_TEST_TIER=full; else pytest_args+=("$arg"); fi
done
start=$(date +%s)
bash scripts/setup.sh
echo "setup took $(( $(date +%s) - start )) s"
lint_rc=0
bash scripts/lint.sh || lint_rc=$?

# Both passes are mostly one Python thread each; on two cores they run best together. The static
# pass (its own build, then its tests) writes to a log that is printed when both have ended.
mkdir -p build
static_log=build/test_static.log
bash scripts/test_static.sh --durations=20 "${pytest_args[@]}" > "$static_log" 2>&1 &
static_pid=$!
shared_rc=0
"$PYTHON" -m pytest tests --durations=20 "${pytest_args[@]}" || shared_rc=$?
static_rc=0
wait "$static_pid" || static_rc=$?
echo "=== static build (KILN_BUILD_SHARED=OFF): scripts/test_static.sh, log $static_log ==="
cat "$static_log"
echo "test.sh: lint exit $lint_rc, shared pass exit $shared_rc, static pass exit $static_rc," \
     "$(( $(date +%s) - start )) s in all"
[ "$lint_rc" = 0 ] && [ "$shared_rc" = 0 ] && [ "$static_rc" = 0 ]
