#!/usr/bin/env bash
# scripts/reproduce.sh and scripts/results_doc.sh list what the experiment catalog (analysis/experiment_catalog.cpp)
# lists, in its order: reproduce.sh runs exactly the catalog's runs (a branch for each, an unknown name refused before
# anything is written), and results_doc.sh, given a results folder with a file per run (the test fixtures), writes one
# section per run in the catalog's order under the table's heading, and the reproduce listing with every run.
#   usage: test_reproduce_lists.sh DRAFTLAB_BINARY
set -u
BIN=$1
SRC=$(cd "$(dirname "$0")/../.." && pwd)
PY=/usr/bin/python3
source "$(dirname "$0")/../test_lib.sh"

"$BIN" schema --experiments >"$TMP/catalog.tsv" || bad "draftlab schema --experiments failed"
mapfile -t RUNS < <(cut -f1 "$TMP/catalog.tsv")
[ ${#RUNS[@]} -ge 17 ] && ok "${#RUNS[@]} runs in the catalog" || bad "expected at least 17 runs, got ${#RUNS[@]}"

# Every run has its branch in reproduce.sh's case, and every branch is a run of the catalog.
mapfile -t BRANCHES < <(sed -n 's/^    \([a-z0-9|-][a-z0-9|-]*\)).*/\1/p' "$SRC/scripts/reproduce.sh" | tr '|' '\n' | sort -u)
want=$(printf '%s\n' "${RUNS[@]}" | sort -u)
got=$(printf '%s\n' "${BRANCHES[@]}")
[ "$want" = "$got" ] && ok "reproduce.sh has one branch per run of the catalog" ||
  bad "reproduce.sh's branches differ from the catalog's runs: $(diff <(echo "$want") <(echo "$got") | tr '\n' ' ')"

# An unknown name: exit 2 naming it and the runs, no results folder made.
DRAFTLAB=$BIN RESULTS_DIR=$TMP/never bash "$SRC/scripts/reproduce.sh" speed frobnicate >"$TMP/o" 2>"$TMP/e"
code=$?
[ $code = 2 ] && grep -q "frobnicate" "$TMP/e" && grep -q "moe-dense" "$TMP/e" && [ ! -e "$TMP/never" ] &&
  ok "reproduce.sh refuses an unknown run before writing anything" || bad "unknown run: exit $code: $(cat "$TMP/e")"

# results_doc.sh on fixture files, one per run (moe-dense: moe's fixture; quantized: a Markdown table).
if ! $PY -c 'import h5py, numpy' 2>/dev/null; then
  skip_part "results_doc.sh on fixtures: needs python3-h5py python3-numpy"
  finish
fi
$PY "$SRC/tests/analysis/make_fixture.py" --all "$TMP/fixtures" >/dev/null || bad "make_fixture.py failed"
mkdir -p "$TMP/results"
while IFS=$'\t' read -r run file experiment _; do
  if [ "${file%.md}" != "$file" ]; then
    printf '## %s table\n\n| method | speed |\n| --- | --- |\n| vanilla | 1.00x |\n' "$run" >"$TMP/results/$file"
  else
    cp "$TMP/fixtures/fixture-$experiment.h5" "$TMP/results/$file"
  fi
done <"$TMP/catalog.tsv"
mkdir -p "$TMP/doc"
DRAFTLAB=$BIN RESULTS_DOC=$TMP/doc/results.md bash "$SRC/scripts/results_doc.sh" "$TMP/results" >"$TMP/o" 2>"$TMP/e"
if [ -s "$TMP/doc/results.md" ]; then
  ok "results_doc.sh wrote the page"
  # Each run's section in the catalog's order: the driver's table heading (paper item: heading), or the benchmark's.
  order_ok=1 last=0
  while IFS=$'\t' read -r run file experiment item _; do
    line=$(grep -n -F "\`$TMP/results/$file\`" "$TMP/doc/results.md" | head -1 | cut -d: -f1)
    if [ -z "$line" ] || [ "$line" -le "$last" ]; then order_ok=0; echo "  $run: at line '${line:-none}' after $last"; fi
    last=${line:-$last}
    heading=$(sed -n "$((line - 2))p" "$TMP/doc/results.md")
    [[ $heading == "### $item"* ]] || { order_ok=0; echo "  $run: heading '$heading', want '### $item...'"; }
  done <"$TMP/catalog.tsv"
  [ $order_ok = 1 ] && ok "one section per run, in the catalog's order, under its paper item" || bad "sections out of order or missing"
  listed=1
  while IFS=$'\t' read -r run _ _ item _ note; do
    grep -q -F "# $item: $note" <(grep "^bash scripts/reproduce.sh $run  *# " "$TMP/doc/results.md") ||
      { listed=0; echo "  not listed as 'bash scripts/reproduce.sh $run ... # $item: $note'"; }
  done <"$TMP/catalog.tsv"
  [ $listed = 1 ] && ok "the reproduce listing has every run" || bad "the reproduce listing lacks runs"
  grep -q "^bash scripts/train_ablation_heads.sh .*# first" "$TMP/doc/results.md" &&
    [ "$(grep -c "^bash scripts/train_ablation_heads.sh" "$TMP/doc/results.md")" = 1 ] &&
    ok "a preparation step listed once, before the runs that need it" || bad "preparation steps in the listing"
  grep -q "Not in this run" "$TMP/doc/results.md" && bad "every run was present, yet the page lists some as missing" ||
    ok "nothing reported missing"
else
  bad "results_doc.sh wrote nothing: $(tail -5 "$TMP/e")"
fi

# Nothing present: exit 1, no page.
mkdir -p "$TMP/empty"
mkdir -p "$TMP/doc2"
DRAFTLAB=$BIN RESULTS_DOC=$TMP/doc2/results.md bash "$SRC/scripts/results_doc.sh" "$TMP/empty" >"$TMP/o" 2>"$TMP/e"
code=$?
[ $code = 1 ] && grep -q "no results file" "$TMP/e" && [ ! -e "$TMP/doc2/results.md" ] &&
  ok "results_doc.sh on an empty folder: exit 1, no page" || bad "empty folder: exit $code: $(cat "$TMP/e")"
finish
