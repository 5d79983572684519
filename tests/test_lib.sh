# Sourced by the shell tests: pass/fail counters, ok/bad reporters and a temporary folder removed on exit.
# End a test with: echo "$passes passed, $fails failed"; [ $fails = 0 ]
fails=0
passes=0
ok() { passes=$((passes + 1)); echo "ok: $1"; }
bad() { fails=$((fails + 1)); echo "FAIL: $1"; }
TMP=$(mktemp -d)
trap 'rm -rf "$TMP"' EXIT

# expect_error NAME SUBSTRING COMMAND...: the command must exit 1 with SUBSTRING in its stderr.
expect_error() {
  local name=$1 want=$2
  shift 2
  "$@" >"$TMP/o" 2>"$TMP/e"
  local code=$?
  if [ $code = 1 ]; then
    if grep -qF -- "$want" "$TMP/e"; then ok "$name"; else bad "$name: message lacks '$want': $(cat "$TMP/e")"; fi
  else
    bad "$name: exit code $code (want 1): $(tail -3 "$TMP/e")"
  fi
}
