#!/usr/bin/env bash
# Runs the Python module's tests (tests/python) with the Python the module was built for; exits 77 (ctest: skipped)
# when that Python lacks pytest, numpy, scipy or pandas (apt: python3-pytest python3-numpy python3-scipy
# python3-pandas), saying which.
# Its JUnit report (REPORT) names every skipped case with its reason, for scripts/skip_gate.py: a case pytest skips
# inside a passing run is still a skip there.
#   usage: run_pytest.sh PYTHON PACKAGE_DIR DRAFTLAB_BINARY SOURCE_DIR [REPORT]
set -u
PY=$1 PKG=$2 BIN=$3 SRC=$4 REPORT=${5:-}
for module in pytest numpy scipy pandas; do
  if ! "$PY" -c "import $module" 2>/dev/null; then
    echo "SKIPPED: $PY has no $module (apt install python3-$module)"
    exit 77
  fi
done
cd "$SRC" && PYTHONPATH="$PKG" DRAFTLAB_BIN="$BIN" exec "$PY" -m pytest -q -rs -p no:cacheprovider \
  ${REPORT:+--junitxml="$REPORT"} tests/python
