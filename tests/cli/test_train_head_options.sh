#!/usr/bin/env bash
# train-head checks every flag, the shared ones and each head family's own (HeadFamily::training_options), before
# the target or the data loads: each case below names a model and a corpus that do not exist, so a refusal that
# came after loading would name them instead. No output folder may be left behind. The controls at the end show
# that a well-formed command does reach the load (and fails there, naming the model).
#   usage: test_train_head_options.sh DRAFTLAB_BINARY
set -u
BIN=$1
source "$(dirname "$0")/../test_lib.sh"

refused() {  # NAME SUBSTRING ARGS...: refused before loading, naming SUBSTRING, with no folder made
  local name=$1 want=$2
  shift 2
  expect_error "$name" "$want" "$BIN" train-head -m "$TMP/no_model" --corpus "$TMP/no_corpus" --out "$TMP/out" "$@"
  if grep -q "no_model\|no_corpus" "$TMP/e"; then bad "$name: the message names the model or corpus (loaded first?)"; fi
  if [ -e "$TMP/out" ]; then bad "$name: left $TMP/out"; rm -rf "$TMP/out"; fi
}

refused "unknown family" "expected a head family (eagle, medusa, hydra, eagle3, peagle, dflash), got 'lookahead'" --kind lookahead
# A flag of another family, for each family.
refused "eagle flag for eagle3" "--input: applies to --kind eagle, not --kind eagle3" --kind eagle3 --input feature_only
refused "recipe for eagle3" "--recipe: applies to --kind eagle, medusa, hydra, not --kind eagle3" --kind eagle3 --recipe official
refused "eagle3 flag for eagle" "--ttt-steps: applies to --kind eagle3, not --kind eagle" --ttt-steps 3
refused "hydra flag for medusa" "--hydra-heads: applies to --kind hydra, not --kind medusa" --kind medusa --hydra-heads 2
refused "medusa flag for hydra" "--medusa-lm-head: applies to --kind medusa, not --kind hydra" --kind hydra --medusa-lm-head own
refused "parallel flag for eagle" "--teacher: applies to --kind medusa, hydra, not --kind eagle" --teacher
refused "draft vocabulary for medusa" "--draft-vocab: applies to --kind eagle, eagle3, peagle, not --kind medusa" --kind medusa --draft-vocab 64
# Values outside each family's table.
refused "eagle input" "--input: expected feature_shifted_token|feature_unshifted_token|feature_only|token_only" --input both
refused "eagle recipe" "--recipe: expected paper|official (--kind eagle), got 'papers'" --recipe papers
refused "eagle draft vocabulary" "--draft-vocab: expected 0..100000000 (--kind eagle), got '-1'" --draft-vocab -1
refused "eagle cls weight" "--cls-weight: expected 0..1000 (number)" --cls-weight heavy
refused "eagle3 ttt steps" "--ttt-steps: expected 1..64 (--kind eagle3), got '0'" --kind eagle3 --ttt-steps 0
refused "eagle3 ttt decay zero" "--ttt-decay: expected a number in (0, 1], got 0" --kind eagle3 --ttt-decay 0
refused "eagle3 ttt decay above one" "--ttt-decay: expected 0..1 (number) (--kind eagle3), got '1.5'" --kind eagle3 --ttt-decay 1.5
refused "eagle3 feature layers count" "--feature-layers: expected three layers, got '2,3'" --kind eagle3 --feature-layers 2,3
refused "eagle3 feature layers form" "--feature-layers: expected three layer indices >= 1 or top, got '0,1,2'" --kind eagle3 --feature-layers 0,1,2
refused "eagle3 variant" "--variant: expected eagle3|eagle3.1 (--kind eagle3), got 'eagle4'" --kind eagle3 --variant eagle4
refused "eagle3 mapping and draft vocabulary" "--vocab-mapping: the draft vocabulary comes from the file; --draft-vocab 64" \
  --kind eagle3 --vocab-mapping "$TMP/mapping.pt" --draft-vocab 64
refused "medusa decay" "--decay: expected a number in (0, 1], got 0" --kind medusa --decay 0
refused "medusa heads" "--medusa-heads: expected 1..64 (--kind medusa), got '0'" --kind medusa --medusa-heads 0
refused "medusa lm head" "--medusa-lm-head: expected shared|own (--kind medusa), got 'mine'" --kind medusa --medusa-lm-head mine
refused "hydra layers" "--hydra-layers: expected 1..64 (--kind hydra), got '0'" --kind hydra --hydra-layers 0
refused "hydra recipe" "--recipe: expected paper|official (--kind hydra), got 'hydra++'" --kind hydra --recipe hydra++
# The shared flags.
refused "feature cache dtype" "--feature-cache-dtype: expected float32 or float16, got bfloat16" --feature-cache-dtype bfloat16
refused "samples" "samples" --samples sentences
refused "data fraction" "--data-fraction" --data-fraction 0
refused "save dtype" "--save-dtype: expected float32, float16 or bfloat16, got 'int8'" --save-dtype int8
refused "accumulate" "--accumulate: expected a positive number" --accumulate 0
refused "steps" "--steps: expected a positive number" --steps 0
refused "batch" "--batch: expected a positive number" --batch 0
refused "keep-best without validation" "--keep-best: needs validation (--eval-every > 0)" --keep-best --eval-every 0
refused "validation split" "--validation-every: expected 2 or more, got 1" --validation-every 1
refused "misspelled flag" "unrecognised option '--ttt-stps'" --kind eagle3 --ttt-stps 3

# Controls: well-formed flags of each family reach the load, which names the missing model.
for args in "--kind eagle --input feature_only --recipe official" "--kind eagle3 --ttt-steps 3 --feature-layers top" "--kind eagle3 --variant eagle3.1" \
            "--kind medusa --teacher --medusa-heads 2" "--kind hydra --recipe official --hydra-layers 2"; do
  # shellcheck disable=SC2086
  expect_error "reaches the load: $args" "no_model" "$BIN" train-head -m "$TMP/no_model" --corpus "$TMP/no_corpus" \
    --out "$TMP/out" $args
done

# Options files (--options-file, every command; the recipes of data/recipes/): their values are checked like flags,
# before anything loads; an unknown name or an unreadable file is refused naming the file; the command line wins.
SRC=$(cd "$(dirname "$0")/../.." && pwd)
printf '# a comment\nkind = eagle3\nttt-steps = 0\n' >"$TMP/bad_value.ini"
refused "options file: a value out of range" "--ttt-steps: expected 1..64 (--kind eagle3), got '0'" --options-file "$TMP/bad_value.ini"
printf 'kind = eagle3\nttt-stps = 3\n' >"$TMP/bad_name.ini"
refused "options file: an unknown name" "--options-file $TMP/bad_name.ini: unrecognised option 'ttt-stps'" --options-file "$TMP/bad_name.ini"
refused "options file: missing" "--options-file $TMP/none.ini: cannot read the file" --options-file "$TMP/none.ini"
printf 'steps = 0\n' >"$TMP/zero_steps.ini"
refused "options file: its value applies" "--steps: expected a positive number" --options-file "$TMP/zero_steps.ini"
expect_error "options file: the command line wins" "no_model" "$BIN" train-head -m "$TMP/no_model" --corpus "$TMP/no_corpus" \
  --out "$TMP/out" --options-file "$TMP/zero_steps.ini" --steps 5
printf 'steps = 0\n' >"$TMP/first.ini"; printf 'steps = 5\n' >"$TMP/second.ini"
refused "options files: the earlier file wins" "--steps: expected a positive number" --options-file "$TMP/first.ini" \
  --options-file "$TMP/second.ini"
# Every recipe combination the training scripts use reaches the load.
for recipe in "eagle-head.ini" "eagle-head.ini eagle3.ini" "parallel-heads.ini medusa.ini" "parallel-heads.ini hydra.ini" \
              "ablation-head.ini" "dflash.ini" "eagle-head.ini peagle.ini"; do
  files=()
  for f in $recipe; do files+=(--options-file "$SRC/data/recipes/$f"); done
  expect_error "recipe $recipe reaches the load" "no_model" "$BIN" train-head -m "$TMP/no_model" --corpus "$TMP/no_corpus" \
    --out "$TMP/out" "${files[@]}"
done
# The recipes are what trained the committed heads: each flag of a recipe is in the command its head's training log
# recorded (the older heads predate --options-file; samples = windows was then the default).
if /usr/bin/python3 -c 'import h5py' 2>/dev/null; then
  if /usr/bin/python3 - "$SRC" <<'PYEOF2'
import h5py, os, shlex, sys
src = sys.argv[1]
# Per head: its recipes, in order, and the flags its training command gave on top (the command line wins; data/models'
# cards say why: the EAGLE-3 head's 504-token windows, the DFlash draft's run resumed to 1,500 steps, the P-EAGLE
# draft's 500).
heads = {"ts-target-eagle-head": (["eagle-head.ini"], {}), "ts-moe-eagle-head": (["eagle-head.ini"], {}),
         "ts-target-eagle3-head": (["eagle-head.ini", "eagle3.ini"], {"context": "504", "batch": "4"}),
         "ts-target-medusa": (["parallel-heads.ini", "medusa.ini"], {}),
         "ts-target-hydra": (["parallel-heads.ini", "hydra.ini"], {}),
         "ts-target-dflash-head": (["dflash.ini"], {"steps": "1500"}),
         "ts-target-peagle-head": (["eagle-head.ini", "peagle.ini"], {"steps": "500"})}
failed = False
for head, (recipes, overrides) in heads.items():
    with h5py.File(os.path.join(src, "data/models", head, "training_log.h5"), "r") as f:
        c = f.attrs["command_line"]
    c = c if isinstance(c, str) else c.decode()
    # The flags an options file set are recorded as "[FILE: --flag value ...]": read them as flags.
    words = [w.strip("[]") for w in shlex.split(c.replace("][", "] [")) if not (w.startswith("[") and w.endswith(":"))]
    expected = {}
    for recipe in recipes:
        for line in open(os.path.join(src, "data/recipes", recipe)):
            line = line.split("#")[0].strip()
            if line:
                key, value = (x.strip() for x in line.split("=", 1))
                expected[key] = value
    expected.update(overrides)
    for key, value in expected.items():
        if key == "samples" and value == "windows":
            ok = "--samples" not in words or words[words.index("--samples") + 1] == value
        elif value == "true":
            ok = "--" + key in words
        else:
            ok = "--" + key in words and words[words.index("--" + key) + 1] == value
        if not ok:
            print(f"{head}: {'+'.join(recipes)} with {overrides} says {key} = {value}, its log: {' '.join(words)}")
            failed = True
sys.exit(1 if failed else 0)
PYEOF2
  then ok "each recipe's flags are what its committed heads were trained with"; else bad "a recipe differs from its heads' logs"; fi
else
  skip_part "recipes against the committed heads' logs: needs python3-h5py"
fi

finish
