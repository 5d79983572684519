#!/usr/bin/env bash
# `draftlab table` and `draftlab plot` on fixture files (tests/analysis/make_fixture.py): every experiment's table
# renders with the rows the fixture was built to give, figures come out as non-empty PNG and SVG, and a file
# that is not a results file is a clear error with exit code 1 and no output left behind.
#   usage: test_table_plot_cli.sh DRAFTLAB_BINARY
set -u
BIN=$1
SRC=$(cd "$(dirname "$0")/../.." && pwd)
PY=/usr/bin/python3
source "$(dirname "$0")/../test_lib.sh"
if ! $PY -c 'import h5py, matplotlib, numpy' 2>/dev/null; then
  skip_all "needs /usr/bin/python3 with h5py, matplotlib, numpy"
fi
$PY "$SRC/tests/analysis/make_fixture.py" --all "$TMP" || { echo "FAIL: make_fixture.py"; exit 1; }

has() {  # name, file, fixed string
  grep -qF -- "$3" "$2" && ok "$1" || bad "$1: '$3' not in: $(head -c 1500 "$2")"
}

# 1. Tables: exit 0 and the expected rows (numbers built into the fixture, see make_fixture.py).
for e in speed alpha calibration positions ablate-eagle2 ablate-inputs tree-vs-chain train-data sweep ablate-eagle3 \
         eagle3-alpha data-scaling; do
  formats=md
  case $e in speed | sweep) formats="md latex" ;; esac  # LaTeX shares the table model: two files check it
  for format in $formats; do
    "$BIN" table "$TMP/fixture-$e.h5" --format $format >"$TMP/$e.$format" 2>"$TMP/err"
    rc=$?
    [ $rc = 0 ] && [ -s "$TMP/$e.$format" ] && ok "table $e --format $format" || bad "table $e $format: exit $rc $(cat "$TMP/err")"
  done
done
has "speed: EAGLE-2 Table 1 header" "$TMP/speed.md" "| Method | MT-bench Speedup | MT-bench τ | GSM8K Speedup | GSM8K τ | Mean Speedup | Mean τ |"
has "speed: eagle2 2.00x, tau 4 at T=0" "$TMP/speed.md" "| eagle2 | 2.00x | 4.00 | 2.00x | 4.00 | 2.00x | 4.00 |"
has "speed: eagle2 1.60x at T=1" "$TMP/speed.md" "| eagle2 | 1.60x | 4.00 |"
has "speed: EAGLE chain tau 2.5" "$TMP/speed.md" "| EAGLE chain | 1.60x | 2.50 |"
has "speed: static tree 1.25x, tau 2.88" "$TMP/speed.md" "| static-tree | 1.25x | 2.88 |"
has "speed: both temperatures" "$TMP/speed.md" "**Temperature = 1**"
has "speed: lossless check" "$TMP/speed.md" "Output identical to vanilla on 24/24 question turns."
has "speed: caption names the machine" "$TMP/speed.md" "Machine: fixture-host (Fixture CPU (avx2)), 2 threads, OpenBLAS fixture, cpu float32. Models: head ts-tiny-eagle-head [sha256 cdcdcdcd]; target ts-tiny [sha256 abababab]"
has "speed: latex" "$TMP/speed.latex" "\\multicolumn{2}{c}{MT-bench}"
has "sweep: latex bold best" "$TMP/sweep.latex" "\\textbf{40} & \\textbf{5} & \\textbf{8}"
has "alpha: EAGLE Table 2 row" "$TMP/alpha.md" "| 0 | MT-bench | EAGLE chain | 2.50 | 0.75 | 0.67 | 0.50 | 0.00 | – |"
has "calibration: eagle2 bin [0.90, 0.95)" "$TMP/calibration.md" "| [0.90, 0.95) | 16 | 16 | 16 | 1.000 | 0.920 |"
has "calibration: eagle2 ECE" "$TMP/calibration.md" "ECE 0.1400 over 64 tested nodes"
has "positions: P1 3/4 everywhere" "$TMP/positions.md" "| P1 | 1 | 4 | 0.750 | 0.750 | 0.000 | 0.750 | 0.750 |"
has "tree-vs-chain: the tree's gain" "$TMP/tree-vs-chain.md" "| MT-bench | 0 | 4.00 (+1.50) | 2.00x | 2.88 (+0.38) | 1.25x | 2.50 | 1.60x |"
has "sweep: best point bold" "$TMP/sweep.md" "| **40** | **5** | **8** |"
has "sweep: best named" "$TMP/sweep.md" "total_tokens=40, depth=5, top_k=8 (2.00x"
has "ablate-inputs: 0-α and 1-α" "$TMP/ablate-inputs.md" "| T | Dataset | Method | Speedup | τ | 0-α | 1-α |"
has "eagle3-alpha: 0-α .. 7-α" "$TMP/eagle3-alpha.md" "| 0 | MT-bench | EAGLE chain | 2.50 | 0.75 | 0.67 | 0.50 | 0.00 | – | – | – | – |"
has "ablate-eagle3: EAGLE-3 Table 2" "$TMP/ablate-eagle3.md" "EAGLE-3 Table 2"
has "data-scaling: eagle head, 1000 tokens" "$TMP/data-scaling.md" "| eagle2 | eagle | 1000 | 0.620 | 2.00x | 4.00 |"
has "data-scaling: eagle3 head, 500 tokens" "$TMP/data-scaling.md" "| EAGLE chain | eagle3 | 500 | 0.620 | 1.60x | 2.50 |"
has "data-scaling: head without a log" "$TMP/data-scaling.md" "| static-tree | – | – | – | 1.25x | 2.88 |"
has "data-scaling: the data named" "$TMP/data-scaling.md" "EAGLE chain: corpus.txt (text), the first 0.5 of its training split."
for by in category subtask; do
  "$BIN" table "$TMP/fixture-speed.h5" --by $by --format text >"$TMP/by-$by" 2>&1 && grep -q "Speedup" "$TMP/by-$by" \
    && ok "table --by $by" || bad "table --by $by: $(cat "$TMP/by-$by")"
done
"$BIN" table "$TMP/fixture-speed.h5" --ci >"$TMP/ci.md" 2>&1
has "--ci adds intervals" "$TMP/ci.md" "| eagle2 | 2.00x [2.00, 2.00] | 4.00 [4.00, 4.00] |"

# 2. Figures as PNG (magic bytes) and SVG: every figure from the sweep fixture (it has confidences, a static tree,
#    a grid and training curves) in one run; the default choice for a speed file is its bars + training curves.
"$BIN" plot "$TMP/fixture-sweep.h5" --out "$TMP/fig-all" --figure all >"$TMP/out" 2>&1 || bad "plot --figure all: $(tail -5 "$TMP/out")"
for f in reliability positions speed sweep ablation training n_alpha scaling profile cost; do
  if [ -s "$TMP/fig-all/$f.png" ] && [ -s "$TMP/fig-all/$f.svg" ] && [ "$(head -c 4 "$TMP/fig-all/$f.png" | tail -c 3)" = "PNG" ] &&
     grep -q "<svg" "$TMP/fig-all/$f.svg"; then ok "plot: $f.png and .svg"; else bad "plot: $f missing or not PNG/SVG"; fi
done
"$BIN" plot "$TMP/fixture-speed.h5" --out "$TMP/fig-speed" >"$TMP/out" 2>&1 || bad "plot speed: $(tail -5 "$TMP/out")"
[ -s "$TMP/fig-speed/speed.png" ] && [ -s "$TMP/fig-speed/training.svg" ] && [ ! -e "$TMP/fig-speed/reliability.png" ] &&
  ok "plot: a speed file gives speed + training" || bad "plot speed: $(ls "$TMP/fig-speed")"
# A file that records its cost model (exp --cost): table adds the bounds' speed table, bounds predicts, and plot
# draws the model and its residuals on the runs, all without --cost. A malformed one is named as the attribute.
cat >"$TMP/cost.json" <<'JSON'
{"format": "draftlab-cost/1", "forward": "test", "threads": 1, "curves": [
 {"cached": 0, "results": [{"n": 1, "median_ms": 100}, {"n": 8, "median_ms": 110}]},
 {"cached": 64, "results": [{"n": 1, "median_ms": 120}, {"n": 8, "median_ms": 130}]}]}
JSON
cp "$TMP/fixture-speed.h5" "$TMP/costed.h5"
$PY -c "import h5py, sys; h5py.File(sys.argv[1], 'r+').attrs['cost_model'] = open(sys.argv[2]).read()" \
  "$TMP/costed.h5" "$TMP/cost.json"
"$BIN" table "$TMP/costed.h5" >"$TMP/costed.md" 2>&1
has "table: the recorded cost model adds the bounds' speed table" "$TMP/costed.md" "Speed, temperature = 0"
"$BIN" bounds "$TMP/costed.h5" >"$TMP/costed-bounds.md" 2>&1
has "bounds: the recorded cost model is used" "$TMP/costed-bounds.md" "Speed, temperature = 0"
"$BIN" plot "$TMP/costed.h5" --out "$TMP/fig-costed" >"$TMP/out" 2>&1 || bad "plot costed: $(tail -5 "$TMP/out")"
[ -s "$TMP/fig-costed/cost.png" ] && ok "plot: a file with a cost model gets the cost figure" ||
  bad "plot costed: $(ls "$TMP/fig-costed")"
cp "$TMP/fixture-speed.h5" "$TMP/bad-cost.h5"
$PY -c "import h5py, sys; h5py.File(sys.argv[1], 'r+').attrs['cost_model'] = '{\"format\": \"x\"}'" "$TMP/bad-cost.h5"
expect_error "table: malformed recorded cost model" "bad-cost.h5: attribute cost_model: format" "$BIN" table "$TMP/bad-cost.h5"

[ -z "$(find "$TMP" -name '*.tmp.*')" ] && ok "no temporary files left" || bad "temporary files left: $(find "$TMP" -name '*.tmp.*')"

# 3. Not a results file: exit 1, a message naming the file, nothing written.
echo "not hdf5" >"$TMP/notes.txt"
$PY -c "import h5py, sys; f = h5py.File(sys.argv[1], 'w'); f.attrs['schema'] = 'something-else/2'" "$TMP/other.h5"
# A run that does not say what it drafts (draft_shape, schema version 2): both readers name the attribute.
cp "$TMP/fixture-speed.h5" "$TMP/no-shape.h5"
$PY -c "import h5py, sys; del h5py.File(sys.argv[1], 'r+')['runs/0001'].attrs['draft_shape']" "$TMP/no-shape.h5"
expect_error "table: run without draft_shape" "/runs/0001 attribute draft_shape" "$BIN" table "$TMP/no-shape.h5"
expect_error "plot: run without draft_shape" "/runs/0001: attribute draft_shape" "$BIN" plot "$TMP/no-shape.h5" --out "$TMP/fig-bad"
expect_error "table: unknown --by" "--by: expected file, category or subtask" "$BIN" table "$TMP/fixture-speed.h5" --by topic
expect_error "table: text file" "notes.txt" "$BIN" table "$TMP/notes.txt"
expect_error "table: other HDF5 names the schema" "schema" "$BIN" table "$TMP/other.h5"
expect_error "table: missing file" "no/such.h5" "$BIN" table "$TMP/no/such.h5"
expect_error "table: bad format" "--format" "$BIN" table "$TMP/fixture-speed.h5" --format html
expect_error "plot: text file" "notes.txt" "$BIN" plot "$TMP/notes.txt" --out "$TMP/fig-bad"
expect_error "plot: other HDF5" "other.h5" "$BIN" plot "$TMP/other.h5" --out "$TMP/fig-bad"
[ ! -e "$TMP/fig-bad" ] || [ -z "$(ls -A "$TMP/fig-bad")" ] && ok "plot: nothing written on error" || bad "plot wrote $(ls "$TMP/fig-bad")"
DRAFTLAB_ANALYSIS_DIR=$TMP/nowhere expect_error "plot: script not found" "DRAFTLAB_ANALYSIS_DIR" \
  "$BIN" plot "$TMP/fixture-speed.h5" --out "$TMP/fig-x"

finish
