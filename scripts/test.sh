#!/usr/bin/env bash
# The README's test command: sets up (scripts/setup.sh), checks the style (scripts/lint.sh), then
# runs the tests against the installed package in three passes side by side: the shared build's
# (libkiln.so.0) in two (the tests that build C++ from the source tree, and the rest) and the static
# KILN_BUILD_SHARED=OFF build's (scripts/test_static.sh); prints the 20 slowest tests of each.
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

# Three pytest processes side by side, since each is mostly one Python thread and the machine has
# at least two cores: the tests that build the source tree again (fuzz, sanitizers, the kernel
# harness natively and for aarch64, the extension library; their builds use every core), the rest of
# the shared build's tests, and the static pass (its own build, then its tests). Each has its own
# base directory; the two logs are printed when all three have ended.
build_tests=(tests/test_fuzz.py tests/test_sanitizers.py tests/test_kernel_tiers.py tests/test_extension_library.py)
shared_pass_ignores=()
for f in "${build_tests[@]}"; do shared_pass_ignores+=(--ignore="$f"); done
# Run by the static pass only outside the full tier, so the three passes take about as long
# (scripts/test_static.sh; the Python code they reach is the same in both builds, and none of these
# needs the shared runtime: the static pass skips none of their tests). test_llm.py and
# test_quantized.py hold the whole-SmolLM2 tests.
if [ "${KILN_TEST_TIER:-}" != full ]; then
  for f in tests/test_llm_batch.py tests/test_serve.py tests/test_llm.py tests/test_quantized.py \
           tests/test_llm_files.py tests/test_llm_tokenizer.py tests/test_state.py tests/test_corrupt_files.py \
           tests/test_hostile_sizes_and_state.py tests/test_buffers_and_files.py tests/test_program_metadata.py \
           tests/test_llm_architectures.py; do
    shared_pass_ignores+=(--ignore="$f")
  done
fi
mkdir -p build
# The LLM programs the three passes export from SmolLM2 (tests/conftest.py's llm_programs): made once
# per run, by the first pass that needs each.
KILN_TEST_SHARED_FIXTURES=$(mktemp -d "${TMPDIR:-/tmp}/kiln-test-fixtures.XXXXXX")
export KILN_TEST_SHARED_FIXTURES
trap 'rm -rf "$KILN_TEST_SHARED_FIXTURES"' EXIT
static_log=build/test_static.log
builds_log=build/test_builds.log
bash scripts/test_static.sh --durations=20 "${pytest_args[@]}" > "$static_log" 2>&1 &
static_pid=$!
"$PYTHON" -m pytest "${build_tests[@]}" --durations=20 --basetemp="${TMPDIR:-/tmp}/kiln-builds-pytest" \
  "${pytest_args[@]}" > "$builds_log" 2>&1 &
builds_pid=$!
shared_rc=0
"$PYTHON" -m pytest tests "${shared_pass_ignores[@]}" --durations=20 "${pytest_args[@]}" || shared_rc=$?
builds_rc=0
wait "$builds_pid" || builds_rc=$?
static_rc=0
wait "$static_pid" || static_rc=$?
echo "=== tests that build the source tree again: log $builds_log ==="
cat "$builds_log"
echo "=== static build (KILN_BUILD_SHARED=OFF): scripts/test_static.sh, log $static_log ==="
cat "$static_log"
echo "test.sh: lint exit $lint_rc, shared pass exit $shared_rc, build pass exit $builds_rc," \
     "static pass exit $static_rc, $(( $(date +%s) - start )) s in all"
[ "$lint_rc" = 0 ] && [ "$shared_rc" = 0 ] && [ "$builds_rc" = 0 ] && [ "$static_rc" = 0 ]
