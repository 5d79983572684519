#!/usr/bin/env bash
# The exported notebooks (notebooks_export/*.ipynb): in sync with analysis/plot.py (scripts/export_notebooks.py
# --check), and each one executes top to bottom on a small fixture file and draws its figure.
#   usage: test_notebooks.sh
set -u
SRC=$(cd "$(dirname "$0")/../.." && pwd)
PY=/usr/bin/python3
source "$(dirname "$0")/../test_lib.sh"

if ! $PY -c 'import h5py, matplotlib, numpy, nbformat, nbconvert, ipykernel' 2>/dev/null || ! command -v jupyter-nbconvert >/dev/null; then
  skip_all "needs python3-h5py python3-matplotlib python3-nbformat jupyter-nbconvert python3-ipykernel"
fi

$PY "$SRC/scripts/export_notebooks.py" --check && ok "notebooks match analysis/plot.py" ||
  bad "notebooks out of date: run $PY scripts/export_notebooks.py"

$PY "$SRC/tests/analysis/make_fixture.py" --all "$TMP/fixtures" || bad "make_fixture.py failed"

# Three kernels at a time: kernel start-up, not the figures, is what takes the time.
export DRAFTLAB_FIXTURES=$TMP/fixtures PYDEVD_DISABLE_FILE_VALIDATION=1
mkdir -p "$TMP/out"
notebooks=("$SRC"/notebooks_export/*.ipynb)
want=$($PY -c "import sys; sys.path.insert(0, '$SRC/analysis'); import plot; print(len(plot.FIGURES))")
[ "${#notebooks[@]}" = "$want" ] && ok "${#notebooks[@]} notebooks, one per figure of plot.py" ||
  bad "expected $want notebooks (one per figure of plot.py), found ${#notebooks[@]}"
printf '%s\n' "${notebooks[@]}" | xargs -P 3 -I{} sh -c \
  'jupyter-nbconvert --to notebook --execute --ExecutePreprocessor.timeout=120 --output-dir "$0" "{}" >"$0/$(basename "{}").log" 2>&1' "$TMP/out"
for nb in "${notebooks[@]}"; do
  name=$(basename "$nb")
  out=$TMP/out/$name
  # Kernels started side by side can race for their ports, and one dies before it says hello (jupyter_client): that is
  # start-up, not the notebook (jupyter/nbconvert#1066), so such a notebook runs once more, alone. Any other failure
  # counts.
  if [ ! -s "$out" ] && grep -q "Kernel died before replying to kernel_info" "$TMP/out/$name.log"; then
    echo "note: $name's kernel died at start-up; running it again alone"
    jupyter-nbconvert --to notebook --execute --ExecutePreprocessor.timeout=120 --output-dir "$TMP/out" "$nb" \
      >"$TMP/out/$name.log" 2>&1
  fi
  if [ ! -s "$out" ]; then
    bad "$name did not execute: $(tail -5 "$TMP/out/$name.log")"
    continue
  fi
  # Executed: no error output, and at least one PNG drawn.
  if $PY - "$out" <<'PYEOF'
import json, sys
nb = json.load(open(sys.argv[1]))
outs = [o for c in nb["cells"] if c["cell_type"] == "code" for o in c.get("outputs", [])]
errors = [o for o in outs if o.get("output_type") == "error"]
images = [o for o in outs if "image/png" in o.get("data", {})]
sys.exit(0 if images and not errors else 1)
PYEOF
  then ok "$name executes and draws"; else bad "$name: error output or no figure"; fi
  # Committed notebooks carry no outputs.
  grep -q '"outputs": \[\]' "$nb" && ! grep -q '"image/png"' "$nb" && ok "$name is committed without outputs" ||
    bad "$name carries outputs"
done

finish
