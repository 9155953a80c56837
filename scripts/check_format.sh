#!/usr/bin/env bash
# Fails when a tracked C++/CUDA source differs from what clang-format makes of it (.clang-format,
# clang-format-14 from Debian, the version every machine of the project has). Prints each file
# that needs formatting; `scripts/check_format.sh --fix` formats them in place instead.
set -euo pipefail
cd "$(dirname "$0")/.."
clang_format=${CLANG_FORMAT:-clang-format-14}
command -v "$clang_format" >/dev/null || {
  echo "check_format: $clang_format missing (scripts/setup.sh installs it)" >&2
  exit 1
}
mapfile -t files < <(git ls-files '*.cpp' '*.hpp' '*.h' '*.cu' '*.cuh')
if [[ ${1:-} == --fix ]]; then
  "$clang_format" -i --style=file "${files[@]}"
  exit 0
fi
# --dry-run --Werror prints "FILE:LINE:COL: error: code should be clang-formatted" per change.
report=$(printf '%s\0' "${files[@]}" |
  xargs -0 -n 32 -P "$(nproc)" "$clang_format" --style=file --dry-run --Werror 2>&1 || true)
mapfile -t unformatted < <(sed -n 's/^\([^:]*\):[0-9]*:[0-9]*: error: .*clang-format.*/\1/p' <<<"$report" | sort -u)
if ((${#unformatted[@]})); then
  printf 'check_format: not clang-formatted: %s\n' "${unformatted[@]}" >&2
  echo "check_format: run scripts/check_format.sh --fix" >&2
  exit 1
fi
echo "check_format: ${#files[@]} files formatted"
