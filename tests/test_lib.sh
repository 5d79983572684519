# Sourced by the shell tests: pass/fail counters, ok/bad reporters and a temporary folder removed on exit.
# End a test with: finish  (exit 0 when all passed; 77, ctest's SKIP_RETURN_CODE for these tests, when a part was
# skipped for a missing input and nothing failed, so a skip never reads as a pass; 1 on any failure).
fails=0
passes=0
skips=0
ok() { passes=$((passes + 1)); echo "ok: $1"; }
bad() { fails=$((fails + 1)); echo "FAIL: $1"; }
skip_part() { skips=$((skips + 1)); echo "skipped: $1"; }
skip_all() { echo "skipped: $1"; echo "0 passed, 0 failed"; exit 77; }
finish() {
  echo "$passes passed, $fails failed, $skips parts skipped"
  [ "$fails" = 0 ] || exit 1
  [ "$skips" = 0 ] || exit 77
  exit 0
}
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
