#!/usr/bin/env bash
# Style and lint over the whole tree (docs/developing.md): ruff on the Python, clang-format on the
# C++ (.clang-format), mypy on the public Python API. The tools come with the test extra
# (scripts/setup.sh). scripts/test.sh runs this first; `lint.sh --fix` rewrites what it can.
set -euo pipefail
cd "$(dirname "$0")/.."
PYTHON=${PYTHON:-python3}
bin=$("$PYTHON" -c "import sysconfig; print(sysconfig.get_path('scripts'))")
cpp_files() {
  # unicode_tables.inc is generated (tools/gen_unicode_tables.py).
  git ls-files '*.cpp' '*.h' '*.inc' '*.c' | grep -v '/unicode_tables\.inc$'
}
if [ "${1:-}" = --fix ]; then
  "$PYTHON" -m ruff check --fix .
  cpp_files | xargs "$bin/clang-format" -i
  exit 0
fi
status=0
"$PYTHON" -m ruff check --quiet . || status=1
cpp_files | xargs "$bin/clang-format" --dry-run --Werror || status=1
"$PYTHON" -m mypy || status=1
[ "$status" = 0 ] && echo "lint: ruff, clang-format and mypy found nothing"
exit "$status"
