#!/usr/bin/env bash
# Every C++ file of the repository as .clang-format writes it (Debian's clang-format):
# prints the files that differ and fails if any does. `scripts/check-format.sh --fix`
# rewrites them instead.
set -euo pipefail
cd "$(dirname "$0")/.."
mapfile -t files < <(git ls-files -- '*.cpp' '*.hpp' '*.h' '*.cc' '*.cpp.in')
if [[ ${1:-} == --fix ]]; then
  clang-format -i "${files[@]}"
  exit 0
fi
bad=()
for f in "${files[@]}"; do
  if ! clang-format --dry-run --Werror "$f" >/dev/null 2>&1; then bad+=("$f"); fi
done
if ((${#bad[@]})); then
  printf '%s\n' "${bad[@]}"
  echo "scripts/check-format.sh: ${#bad[@]} of ${#files[@]} files are not as .clang-format writes them (scripts/check-format.sh --fix)" >&2
  exit 1
fi
echo "scripts/check-format.sh: ${#files[@]} files formatted"
