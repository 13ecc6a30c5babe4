#!/usr/bin/env bash
# clang-tidy (the profile in .clang-tidy) over the C++ files given, or over those changed since
# main's merge base. Needs clang-tidy-19 and the dev preset's compile_commands.json (configured here).
#   bash scripts/tidy.sh                      # changed files
#   bash scripts/tidy.sh runtime/loader/*.cpp
set -euo pipefail
cd "$(dirname "$0")/.."
tidy=$(command -v clang-tidy-19 || command -v clang-tidy || true)
[ -n "$tidy" ] || { echo "tidy.sh: needs clang-tidy (Debian clang-tidy-19)"; exit 2; }
build=build/preset-dev
[ -f "$build/compile_commands.json" ] || cmake --preset dev > /dev/null
cmake --build "$build" --target kiln_schema_cpp > /dev/null  # the generated schema header the runtime includes
if [ $# -gt 0 ]; then
  files=("$@")
else
  base=$(git merge-base HEAD origin/main 2>/dev/null || git rev-parse HEAD~1)
  mapfile -t files < <(git diff --name-only --diff-filter=d "$base" -- '*.cpp')
fi
# Only the files the build compiles (headers are checked through them, see HeaderFilterRegex).
listed=$(python3 -c "import json, sys; print('\n'.join(e['file'] for e in json.load(open(sys.argv[1]))))" \
  "$build/compile_commands.json")
checked=()
for f in "${files[@]}"; do
  grep -qxF "$PWD/$f" <<< "$listed" && checked+=("$f")
done
[ ${#checked[@]} -gt 0 ] || { echo "tidy.sh: no compiled C++ file to check"; exit 0; }
"$tidy" -p "$build" --quiet --warnings-as-errors="*" "${checked[@]}"
