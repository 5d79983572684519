#!/usr/bin/env bash
# Runs the Python module's tests (tests/python) with the Python the module was built for; exits 77 (ctest: skipped)
# when that Python lacks pytest, numpy, scipy or pandas (apt: python3-pytest python3-numpy python3-scipy
# python3-pandas), saying which.
#   usage: run_pytest.sh PYTHON PACKAGE_DIR DRAFTLAB_BINARY SOURCE_DIR
set -u
PY=$1 PKG=$2 BIN=$3 SRC=$4
for module in pytest numpy scipy pandas; do
  if ! "$PY" -c "import $module" 2>/dev/null; then
    echo "SKIPPED: $PY has no $module (apt install python3-$module)"
    exit 77
  fi
done
cd "$SRC" && PYTHONPATH="$PKG" DRAFTLAB_BIN="$BIN" exec "$PY" -m pytest -q -p no:cacheprovider tests/python
