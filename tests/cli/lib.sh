# Shared preamble of the CLI shell tests. A test script starts with
#   set -euo pipefail
#   source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
#   shardwise=...                  # the binary under test (expect_exit2 runs it)
#   cli_test_init NAME             # $python, a scratch dir $work (removed at exit), $failures
# records problems with `fail MESSAGE` and ends with `cli_test_finish "MESSAGE ON SUCCESS"`.

# The Debian python, which has numpy (the python3 on PATH may not). Its scripts can import
# tests/safetensors_container.py (an independent safetensors writer and reader).
python=/usr/bin/python3
export PYTHONPATH="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)${PYTHONPATH:+:$PYTHONPATH}"
failures=0

cli_test_init() {
  work=$(mktemp -d "${TMPDIR:-/tmp}/shardwise_$1.XXXXXX")
  trap 'rm -rf "$work"' EXIT
}

fail() {
  echo "FAIL: $*" >&2
  failures=$((failures + 1))
}

# expect_exit2 NAME ARGS...: `$shardwise ARGS` must exit 2 with exactly one line on stderr.
expect_exit2() {
  local name=$1
  shift
  local rc=0
  "$shardwise" "$@" >"$work/out" 2>"$work/err" || rc=$?
  if [[ $rc -ne 2 ]]; then
    fail "$name: expected exit 2, got $rc ($(head -c 300 "$work/err"))"
  elif [[ $(wc -l <"$work/err") -ne 1 ]] || ! grep -q . "$work/err"; then
    fail "$name: expected one error line, got: $(cat "$work/err")"
  else
    echo "ok: $name -> $(cat "$work/err")"
  fi
}

# expect_rc CODE NAME COMMAND...: runs COMMAND with stdout/stderr in $work/NAME.{out,err}; on
# another exit code records a failure, shows the output's tail and returns 1.
expect_rc() {
  local want=$1 name=$2
  shift 2
  local rc=0
  "$@" >"$work/$name.out" 2>"$work/$name.err" || rc=$?
  if [[ $rc -ne $want ]]; then
    fail "$name: exit code $rc, expected $want"
    sed 's/^/    /' "$work/$name.out" "$work/$name.err" | tail -20 >&2
    return 1
  fi
}

# cli_test_finish MESSAGE: exit 1 with the failure count, or print MESSAGE.
cli_test_finish() {
  if [[ $failures -ne 0 ]]; then
    echo "$failures failure(s)" >&2
    exit 1
  fi
  echo "$1"
}
