# Sourced by the shell tests: pass/fail counters, ok/bad reporters and a temporary folder removed on exit.
# End a test with: echo "$passes passed, $fails failed"; [ $fails = 0 ]
fails=0
passes=0
ok() { passes=$((passes + 1)); echo "ok: $1"; }
bad() { fails=$((fails + 1)); echo "FAIL: $1"; }
TMP=$(mktemp -d)
trap 'rm -rf "$TMP"' EXIT
