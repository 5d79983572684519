#!/usr/bin/env bash
# Trains the heads of EAGLE-3 Figure 1 (data scaling) for one target: an EAGLE-2 head and an EAGLE-3 head on the
# first 1/8, 1/4, 1/2 and all of the corpus's training split (--data-fraction; the validation split stays whole,
# smaller sets are prefixes of larger ones), every head with the same schedule, seed and settings as the committed
# ts-target-eagle-head / ts-target-eagle3-head (the recipes data/recipes/eagle-head.ini and eagle3.ini). With GENERATED=1 also one head of each architecture on the
# target's own continuations (gen-head-data, as scripts/train_ablation_heads.sh). A finished head is skipped.
#   bash scripts/train_scaling_heads.sh     MODEL (default data/models/ts-target), OUT (default
#                                           ../zoo/scaling-heads), FRACTIONS (default "0.125 0.25 0.5 1"),
#                                           FAMILIES (default "eagle eagle3"), THREADS (2), GENERATED (0);
#                                           STEPS, BATCH, CONTEXT, WARMUP, SAMPLES: override the recipe
# scripts/reproduce.sh data-scaling then measures them (SCALING_HEADS_DIR = OUT).
set -euo pipefail
cd "$(dirname "$0")/.."
DL=${DRAFTLAB:-./build/draftlab}
SHARED=${DRAFTLAB_SHARED:-../shared}
CORPUS=$SHARED/data/tinystories/tinystories.txt
MODEL=${MODEL:-data/models/ts-target}
OUT=${OUT:-../zoo/scaling-heads}
THREADS=${THREADS:-2}
mkdir -p "$OUT"
TRAIN=(--options-file data/recipes/eagle-head.ini --model "$MODEL" --threads "$THREADS")
for v in STEPS BATCH CONTEXT WARMUP SAMPLES; do  # overrides of the recipe (the command line wins)
  [ -n "${!v:-}" ] && TRAIN+=("--$(echo "$v" | tr 'A-Z' 'a-z')" "${!v}")
done

# The family's own settings, as in scripts/train_zoo.sh (target-head, target-eagle3).
family_args() {
  case $1 in
    eagle) ;;
    eagle3) echo --options-file data/recipes/eagle3.ini ;;
    *) echo "unknown head family '$1' (expected eagle or eagle3)" >&2; exit 2 ;;
  esac
}

for fraction in ${FRACTIONS:-0.125 0.25 0.5 1}; do
  for family in ${FAMILIES:-eagle eagle3}; do
    dir=$OUT/$family-corpus-$fraction
    [ -f "$dir/model.safetensors" ] && continue
    # shellcheck disable=SC2046
    $DL train-head "${TRAIN[@]}" $(family_args "$family") --corpus "$CORPUS" --data-fraction "$fraction" --out "$dir"
  done
done

if [ "${GENERATED:-0}" = 1 ]; then
  [ -f "$OUT/generated.tokens" ] || $DL gen-head-data --model "$MODEL" --corpus "$CORPUS" --prompt-tokens 8 \
    --max-prompts "${GEN_PROMPTS:-4000}" -n 200 --batch 8 --threads "$THREADS" --out "$OUT/generated.tokens"
  for family in ${FAMILIES:-eagle eagle3}; do
    dir=$OUT/$family-generated-1
    # shellcheck disable=SC2046
    [ -f "$dir/model.safetensors" ] || $DL train-head "${TRAIN[@]}" $(family_args "$family") \
      --data "$OUT/generated.tokens" --out "$dir"
  done
fi
echo "heads in $OUT"
