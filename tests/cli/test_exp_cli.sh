#!/usr/bin/env bash
# End-to-end checks of `draftlab exp` and `draftlab merge`: a tiny run writes its results file and Spec-Bench
# JSONL; a run killed with SIGKILL leaves no output file (nor its temporary); bad input is a clear error (exit 1).
#   usage: test_exp_cli.sh DRAFTLAB_BINARY SHARED_DIR SOURCE_DIR
set -u
BIN=$1
export DRAFTLAB_SHARED=${DRAFTLAB_SHARED:-$2}
SRC=$3
source "$(dirname "$0")/../test_lib.sh"

MODEL=$SRC/data/models/ts-tiny
HEAD=$SRC/data/models/ts-tiny-eagle-head
if [ ! -f "$DRAFTLAB_SHARED/data/bench/mt_bench/question.jsonl" ]; then
  skip_all "$DRAFTLAB_SHARED/data/bench missing (set DRAFTLAB_SHARED)"
fi
TINY=(--model "$MODEL" --questions 2 -n 8 --repeats 1 --warmup 0)

# 1. A tiny run: exit 0, the results file, the summary, Spec-Bench files. Its settings come from an options file
# (--questions 1 there loses to the command line's 2, and the record leaves it out; -n 8 and --repeats 1 apply).
printf 'questions = 1\nmax-new-tokens = 8\nrepeats = 1\n' >"$TMP/tiny.ini"
"$BIN" exp alpha --model "$MODEL" --questions 2 --warmup 0 --options-file "$TMP/tiny.ini" --head "$HEAD" \
  --out "$TMP/alpha.h5" --jsonl "$TMP/jsonl" >"$TMP/out" 2>"$TMP/err"
rc=$?
[ $rc = 0 ] && ok "exp alpha exits 0" || { bad "exp alpha exit $rc"; cat "$TMP/err"; }
[ -f "$TMP/alpha.h5" ] && ok "results file written" || bad "no results file"
grep -q "eagle-chain .*mt_bench" "$TMP/out" && ok "summary table lists the method" || bad "summary: $(cat "$TMP/out")"
[ "$(wc -l <"$TMP/jsonl/mt_bench/ts-tiny-eagle-chain-float32-temp-0.0.jsonl" 2>/dev/null)" = 2 ] \
  && ok "Spec-Bench JSONL: 2 questions, named as Spec-Bench model ids" || bad "Spec-Bench JSONL missing or wrong line count"
if /usr/bin/python3 -c 'import h5py, numpy' 2>/dev/null; then
  recorded=$(/usr/bin/python3 -c 'import h5py, sys; c = h5py.File(sys.argv[1], "r").attrs["command_line"]
print(c if isinstance(c, str) else c.decode())' "$TMP/alpha.h5")
  [[ $recorded == *" --questions 2 "*"[$TMP/tiny.ini: --max-new-tokens 8 --repeats 1]" ]] &&
    /usr/bin/python3 -c 'import h5py, json, sys; s = json.loads(h5py.File(sys.argv[1], "r").attrs["settings"])
sys.exit(0 if (s["max_new_tokens"], s["repeats"], s["questions"]) == (8, 1, 2) else s)' "$TMP/alpha.h5" &&
    ok "the options file's settings applied and recorded with the command line" || bad "options file: recorded '$recorded'"
  /usr/bin/python3 "$SRC/tests/analysis/spec_bench_contract.py" "$TMP/alpha.h5" "$TMP/jsonl" >"$TMP/contract" 2>&1 \
    && ok "Spec-Bench JSONL reads as Spec-Bench's speed.py and equal.py read it" || bad "Spec-Bench contract: $(cat "$TMP/contract")"
fi
"$BIN" table "$TMP/jsonl" --format text >"$TMP/answers" 2>&1 && grep -q "mt_bench/ts-tiny-eagle-chain-float32-temp-0.0.jsonl .*x" "$TMP/answers" \
  && ok "draftlab table DIR tables Spec-Bench answer files" || bad "table of the answer folder: $(cat "$TMP/answers")"
ls "$TMP" | grep -q '\.tmp\.' && bad "a temporary file was left behind" || ok "no temporary file left"

# 2. Killed midway: no file under the requested name, no temporary file. The run is far longer than 3 s.
timeout -s KILL 3 "$BIN" exp speed --model "$MODEL" --head "$HEAD" --questions 80 -n 64 --repeats 3 --warmup 1 \
  --out "$TMP/killed.h5" >/dev/null 2>&1
rc=$?
[ $rc = 137 ] && ok "long run was killed (exit 137)" || bad "long run ended with $rc before the kill: test proves nothing"
[ ! -e "$TMP/killed.h5" ] && ok "killed run left no results file" || bad "killed run left $TMP/killed.h5"
ls "$TMP" | grep -q 'killed.h5' && bad "killed run left $(ls "$TMP" | grep killed)" || ok "killed run left no temporary file"

# 3. Sweep shards and merge.
for s in 0 1; do
  "$BIN" exp sweep --model "$MODEL" --questions 1 -n 8 --repeats 1 --warmup 0 --head "$HEAD" --total-tokens 6,10 --depth 2 --top-k 2 --shard $s/2 \
    --out "$TMP/sweep$s.h5" >/dev/null 2>"$TMP/err" || bad "sweep shard $s: $(cat "$TMP/err")"
done
# Progress with stderr in a file (no terminal, as under Slurm or nohup): plain lines with done/total and ETA;
# none with --quiet. ($CI silences progress too: unset here.)
env -u CI "$BIN" exp sweep --model "$MODEL" --questions 1 -n 8 --repeats 1 --warmup 0 --head "$HEAD" --total-tokens 6 \
  --depth 2 --top-k 2 --progress-every 0 --out "$TMP/progress.h5" >/dev/null 2>"$TMP/progress"
grep -q "^sweep: 2/2 question turns (100%), .*/s, ETA " "$TMP/progress" && [ "$(grep -c 'question turns' "$TMP/progress")" = 2 ] \
  && ok "progress lines in a log file: done/total, rate, ETA" || bad "progress in a log: $(cat "$TMP/progress")"
env -u CI "$BIN" exp sweep --model "$MODEL" --questions 1 -n 8 --repeats 1 --warmup 0 --head "$HEAD" --total-tokens 6 \
  --depth 2 --top-k 2 --progress-every 0 --quiet --out "$TMP/progress.h5" >/dev/null 2>"$TMP/progress"
[ ! -s "$TMP/progress" ] && ok "--quiet: no progress lines" || bad "--quiet printed: $(cat "$TMP/progress")"
"$BIN" merge "$TMP/merged.h5" "$TMP/sweep0.h5" "$TMP/sweep1.h5" >"$TMP/out" 2>"$TMP/err"
rc=$?
[ $rc = 0 ] && grep -q "4 runs from 2 files" "$TMP/out" && ok "merge: 4 runs (2 grid points + 2 baselines)" \
  || bad "merge exit $rc: $(cat "$TMP/out" "$TMP/err")"

# 4. compare: the same runner and results file as exp (experiment "compare"), its table from that file; output
# identical to the baseline; a label longer than the column keeps the table aligned.
LONG_LABEL="eagle2:total_tokens=10,depth=4,top_k=2,rank_by=value,rerank=true"
"$BIN" compare --model "$MODEL" -p "Once upon a time" -p "Tom had a red ball." -n 8 --repeats 1 --warmup 0 \
  -s pld -s "$LONG_LABEL" --head "$HEAD" -o "$TMP/compare.h5" --json "$TMP/compare.json" >"$TMP/out" 2>"$TMP/err"
rc=$?
[ $rc = 0 ] && ok "compare exits 0" || { bad "compare exit $rc"; cat "$TMP/err"; }
grep -q "output identical to vanilla: yes" "$TMP/out" && ok "compare: identical output" || bad "compare: $(cat "$TMP/out")"
row=$(grep -F "$LONG_LABEL " "$TMP/out" | awk '{print index($0, " prompts ")}')
[ -n "$row" ] && [ "$(grep "^vanilla " "$TMP/out" | awk '{print index($0, " prompts ")}')" = "$row" ] \
  && ok "compare: columns aligned under a long label" || bad "compare: misaligned table: $(cat "$TMP/out")"
"$BIN" table "$TMP/compare.h5" >"$TMP/table" 2>"$TMP/err" && grep -q "pld" "$TMP/table" \
  && ok "compare -o: draftlab table reads it" || bad "table of compare.h5: $(cat "$TMP/err")"
python3 -c "import json,sys; j=json.load(open('$TMP/compare.json')); sys.exit(0 if [m['method'] for m in j['methods']][:2]==['vanilla','pld'] else 1)" \
  && ok "compare --json: methods in order" || bad "compare --json: $(cat "$TMP/compare.json")"
expect_error "compare: unknown option" "unknown option 'deph'" "$BIN" compare --model "$MODEL" -p "x" -s "eagle2:deph=4"
expect_error "compare: option out of range" "expected 1..1024" "$BIN" compare --model "$MODEL" -p "x" -s "pld:num_tokens=0"

# 4b. Bounds: exp's speculation profile beside its results file; `draftlab bounds` on compare's runs with a cost
# model that bench/forward_cost measures on the same model; Sequoia's best tree for eagle2's acceptance, written as
# a tree file, runs as a static tree with output identical to vanilla; a bad cost file is refused, nothing written.
/usr/bin/python3 - "$TMP/alpha.speculation_profile.json" <<'PY' && ok "exp writes the speculation profile (AL check passes)" || bad "speculation profile beside alpha.h5"
import json, sys
j = json.load(open(sys.argv[1]))
runs = j["runs"]
assert j["schema_version"] == "1.0" and len(runs) >= 2, j
assert all(r["acceptance_length"]["consistent"] for r in runs), runs
assert any(r["positions"] >= 1 and r["marginal_acceptance"] for r in runs), runs
PY
FORWARD_COST=$(dirname "$BIN")/bench/forward_cost
"$FORWARD_COST" --model "$MODEL" --cache 0,32 --n 1,2,3,4,8,16 --warmup 1 --repeats 3 --threads 1 --out "$TMP/cost.json" \
  >/dev/null 2>"$TMP/err" && ok "forward_cost writes a cost model" || bad "forward_cost: $(cat "$TMP/err")"
"$BIN" bounds "$TMP/compare.h5" --cost "$TMP/cost.json" --profile "$TMP/profile.json" --run 2 --format text \
  >"$TMP/bounds" 2>"$TMP/err"
rc=$?
# Sequoia's tree from the measured curve is empty when, under load, extra rows look costly enough that no tree pays
# (seen with two tests at once on two cores): the tree file comes from the same curve made flat (rows past the first
# free) and 1000 times dearer, so that the run's recorded draft time (slow too under load) is negligible beside a
# forward: on it any acceptance earns a tree.
/usr/bin/python3 - "$TMP/cost.json" "$TMP/flat_cost.json" <<'PY'
import json, sys
j = json.load(open(sys.argv[1]))
for curve in j["curves"]:
    first = 1000.0 * curve["results"][0]["median_ms"]
    for r in curve["results"]:
        r["median_ms"] = r["min_ms"] = r["max_ms"] = first
        r["ratio_to_n1"] = 1.0
json.dump(j, open(sys.argv[2], "w"))
PY
"$BIN" bounds "$TMP/compare.h5" --cost "$TMP/flat_cost.json" --tree-out "$TMP/tree.json" --run 2 >/dev/null \
  2>>"$TMP/err" || bad "bounds --tree-out on a flat cost curve: $(cat "$TMP/err")"
[ $rc = 0 ] && grep -q "Sequoia bound" "$TMP/bounds" && grep -q "eagle2:total_tokens=10" "$TMP/bounds" \
  && ok "bounds: acceptance and speed tables" || bad "bounds exit $rc: $(cat "$TMP/bounds" "$TMP/err")"
"$BIN" table "$TMP/compare.h5" --cost "$TMP/cost.json" >"$TMP/table_cost" 2>"$TMP/err" && grep -q "Sequoia bound" "$TMP/table_cost" \
  && ok "table --cost: the bounds' speed table under the paper's" || bad "table --cost: $(cat "$TMP/table_cost" "$TMP/err")"
"$BIN" table "$TMP/alpha.h5" --profile >"$TMP/table_profile" 2>"$TMP/err" \
  && grep -q "Conditional acceptance per position" "$TMP/table_profile" && grep -q "| mt_bench | eagle-chain | " "$TMP/table_profile" \
  && ok "table --profile: the speculation profile tables" || bad "table --profile: $(cat "$TMP/table_profile" "$TMP/err")"
[ -s "$TMP/profile.json" ] && [ -s "$TMP/tree.json" ] && ok "bounds --profile and --tree-out write their files" \
  || bad "bounds: missing profile or tree file"
"$BIN" compare --model "$MODEL" --head "$HEAD" -p "Once upon a time" -n 12 --repeats 1 --warmup 0 \
  -s "static-tree:tree=$TMP/tree.json" >"$TMP/out" 2>"$TMP/err"
grep -q "output identical to vanilla: yes" "$TMP/out" && ok "Sequoia's tree runs as a static tree, lossless" \
  || bad "static tree of bounds --tree-out: $(cat "$TMP/out" "$TMP/err" "$TMP/tree.json")"
# compare --bounds --json: each method's bounds beside its row (bench/vs_llama_cpp.py's bound columns), as the
# printed speed table has them, and within what bounds are: Sequoia's bound is at least no drafting's 1.00x and at
# most the ceiling (every token accepted, drafting free), with n* = 0 exactly when it is 1.00x.
"$BIN" compare --model "$MODEL" --head "$HEAD" -p "Once upon a time" -p "Tom had a red ball." -n 16 --repeats 1 \
  --warmup 0 -s pld -s "eagle2:total_tokens=4,depth=4,top_k=1" --bounds --json "$TMP/bounds.json" >"$TMP/out" 2>"$TMP/err" \
  || bad "compare --bounds --json: $(cat "$TMP/err")"
/usr/bin/python3 - "$TMP/bounds.json" "$TMP/out" <<'PY' && ok "compare --bounds --json: bounds per method, as printed, within range" || bad "compare --bounds --json: $(cat "$TMP/bounds.json")"
import json, re, sys
j = json.load(open(sys.argv[1]))
text = open(sys.argv[2]).read()
methods = j["methods"]
assert methods[0]["method"] == "vanilla" and methods[0]["bounds"] is None
for m in methods[1:]:
    b = m["bounds"]
    assert b["decode_speedup"] > 0 and 1.0 <= b["sequoia_bound_speedup"] <= b["ceiling_speedup"] + 1e-9, b
    assert (b["sequoia_bound_nodes"] == 0) == (abs(b["sequoia_bound_speedup"] - 1.0) < 1e-12), b
    row = next(l for l in text.splitlines() if l.startswith("prompts") and f" {m['method']} " in l and "Sequoia" not in l
               and l.count("x") >= 5)
    assert f"{b['sequoia_bound_speedup']:.2f}x ({b['sequoia_bound_nodes']})" in row, (row, b)
    assert f"{b['ceiling_speedup']:.2f}x ({b['ceiling_nodes']})" in row, (row, b)
PY
# --oracle: one more untimed generation per question committing one token per cycle; its rows are every answer
# position; prompt lookup's walk over them (written here again in Python) is its own cycles; bounds shows the table.
"$BIN" compare --model "$MODEL" --head "$HEAD" -p "Once upon a time" -p "Tom had a red ball. Tom had a red ball." -n 48 \
  --repeats 1 --warmup 0 -s pld -s "eagle2:total_tokens=10,depth=4,top_k=2" --oracle -o "$TMP/oracle.h5" >"$TMP/out" 2>"$TMP/err" \
  && ok "compare --oracle exits 0" || bad "compare --oracle: $(cat "$TMP/out" "$TMP/err")"
/usr/bin/python3 - "$TMP/oracle.h5" <<'PY' && ok "--oracle: one row per answer position; pld's oracle walk is its own cycles" || bad "oracle table of oracle.h5"
import h5py, sys
f = h5py.File(sys.argv[1], "r")
runs = [f["runs"][k] for k in sorted(f["runs"])]
assert "oracle" not in runs[0], "the baseline has no oracle table"
for run in runs[1:]:
    q, o, c = run["questions"], run["oracle"], run["cycles"]
    for row in range(len(q["new_tokens"])):
        m = [int(x) for x, qq in zip(o["matched"][()], o["question"][()]) if qq == row]
        # a cycle per root after the prefill's token; one more when a stop token ended the answer
        assert len(m) in (q["new_tokens"][row] - 1, q["new_tokens"][row]), (len(m), q["new_tokens"][row])
        if run.attrs["strategy"] in ("pld", b"pld"):
            first, n = q["cycle_offset"][row], q["cycles"][row]
            own, t = [], 0
            while t < len(m):
                own.append(m[t] + 1)
                t += m[t] + 1
            assert own == list(c["accept_length"][first:first + n]), (own, c["accept_length"][first:first + n])
assert sum(runs[1]["oracle"]["matched"][()]) > 0, "pld drafted nothing that matched: the check would be vacuous"
PY
"$BIN" bounds "$TMP/oracle.h5" --cost "$TMP/cost.json" --format text >"$TMP/bounds" 2>"$TMP/err" \
  && grep -q "Oracle draft length" "$TMP/bounds" && grep -q "best of 2 per step" "$TMP/bounds" && grep -q "Oracle-K bound" "$TMP/bounds" \
  && ok "bounds: the oracle draft length table, best of the proposers" || bad "bounds of oracle.h5: $(cat "$TMP/bounds" "$TMP/err")"
# exp --cost records the model (attribute cost_model, the file's text): table then adds the bounds' table unasked.
"$BIN" exp calibration "${TINY[@]}" --head "$HEAD" --cost "$TMP/cost.json" --out "$TMP/costed.h5" >"$TMP/out" 2>"$TMP/err" \
  && "$BIN" table "$TMP/costed.h5" >"$TMP/table_costed" 2>>"$TMP/err" && grep -q "Sequoia bound" "$TMP/table_costed" \
  && /usr/bin/python3 -c "import h5py, sys; a = h5py.File(sys.argv[1], 'r').attrs['cost_model']
assert (a.decode() if isinstance(a, bytes) else a) == open(sys.argv[2]).read()" "$TMP/costed.h5" "$TMP/cost.json" \
  && ok "exp --cost records the cost model; table uses it" || bad "exp --cost: $(cat "$TMP/out" "$TMP/err" | tail -5)"
expect_error "bounds: a cost file of another format" "config.json: format: expected \"draftlab-cost/1\"" \
  "$BIN" bounds "$TMP/compare.h5" --cost "$MODEL/config.json" --profile "$TMP/p2.json"
expect_error "bounds: --tree-out without --run" "needs --run" "$BIN" bounds "$TMP/compare.h5" --tree-out "$TMP/t2.json"
[ ! -e "$TMP/p2.json" ] && [ ! -e "$TMP/t2.json" ] && ok "failed bounds wrote nothing" || bad "failed bounds left a file"

# 5. Bad input: exit 1, a message naming the problem, no output file.
expect_error "missing --out" "--out" "$BIN" exp alpha "${TINY[@]}" --head "$HEAD"
expect_error "unknown experiment" "expected an experiment name" "$BIN" exp speedy "${TINY[@]}" --out "$TMP/x.h5"
expect_error "alpha without a head" "--head" "$BIN" exp alpha "${TINY[@]}" --out "$TMP/x.h5"
expect_error "bad shard" "--shard" "$BIN" exp sweep "${TINY[@]}" --head "$HEAD" --shard 3/2 --out "$TMP/x.h5"
expect_error "unknown strategy option" "frobs" "$BIN" exp calibration "${TINY[@]}" --head "$HEAD" \
  --strategy eagle2:frobs=1 --out "$TMP/x.h5"
expect_error "missing dataset" "nothing.jsonl" "$BIN" exp calibration "${TINY[@]}" --head "$HEAD" \
  --datasets "$TMP/nothing.jsonl" --out "$TMP/x.h5"
expect_error "exp: a cost file of another format" "config.json: format: expected \"draftlab-cost/1\"" \
  "$BIN" exp calibration "${TINY[@]}" --head "$HEAD" --cost "$MODEL/config.json" --out "$TMP/x.h5"
expect_error "merge of different experiments" "experiment" "$BIN" merge "$TMP/m2.h5" "$TMP/alpha.h5" "$TMP/sweep0.h5"
expect_error "merge of a non-results file" "config.json" "$BIN" merge "$TMP/m3.h5" "$MODEL/config.json"
[ ! -e "$TMP/x.h5" ] && [ ! -e "$TMP/m2.h5" ] && ok "failed commands wrote nothing" || bad "a failed command left a file"

# Strategy options refused before any model loads: the rules across options (eagle2's auto_cost, sample_tree), a
# random-head option beside head=PATH, and head=PATH missing or of another family. The model does not exist, so a
# refusal that came after loading it would name it instead.
refused_before_load() {  # NAME SUBSTRING SPEC
  expect_error "compare -s $3 refused before loading" "$2" "$BIN" compare -m "$TMP/no_model" -p x -s "$3"
  if grep -q "no_model" "$TMP/e"; then bad "$1: the message names the model (loaded first?)"; fi
}
refused_before_load "auto_cost" "auto_cost applies to total_tokens=auto only" "eagle2:auto_cost=1/2/3"
refused_before_load "sample_tree" "does not combine with rerank=false" "eagle2:sample_tree=true,rerank=false"
refused_before_load "head_seed" "option head_seed: shapes a random head, but head=$HEAD" "eagle2:head_seed=3,head=$HEAD"
refused_before_load "missing head" "$TMP/no_head: not found (expected EAGLE head" "eagle-chain:head=$TMP/no_head"
refused_before_load "head of another family" "drafts with Medusa heads (run it with -s eagle2)" "medusa:head=$HEAD"
refused_before_load "EAGLE head for eagle3" "drafts with EAGLE-3 head (run it with -s eagle2)" "eagle3:head=$HEAD"

finish
