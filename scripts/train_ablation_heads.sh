#!/usr/bin/env bash
# Trains the EAGLE heads the ablations compare (EAGLE Figure 8 and Table 6) for one target, all with the same
# budget: one head per input variant on the fixed corpus, and one (EAGLE's input) on target-generated data; and
# the EAGLE-3 head without fusion (EAGLE-3 Table 2).
#   bash scripts/train_ablation_heads.sh        MODEL (default data/models/ts-target), OUT (default
#                                               ../zoo/ablation-heads), THREADS; STEPS, BATCH, CONTEXT,
#                                               LR, SAMPLES: override data/recipes/ablation-head.ini
# scripts/reproduce.sh ablate-inputs train-data ablate-eagle3 then measures them.
set -euo pipefail
cd "$(dirname "$0")/.."
DL=${DRAFTLAB:-./build/draftlab}
SHARED=${DRAFTLAB_SHARED:-../shared}
CORPUS=$SHARED/data/tinystories/tinystories.txt
MODEL=${MODEL:-data/models/ts-target}
OUT=${OUT:-../zoo/ablation-heads}
THREADS=${THREADS:-2}
mkdir -p "$OUT"
# The recipe data/recipes/ablation-head.ini; STEPS, BATCH, CONTEXT, LR, SAMPLES override it (the command line wins).
TRAIN=(--options-file data/recipes/ablation-head.ini --model "$MODEL" --threads "$THREADS")
for v in STEPS BATCH CONTEXT LR SAMPLES; do
  [ -n "${!v:-}" ] && TRAIN+=("--$(echo "$v" | tr 'A-Z' 'a-z')" "${!v}")
done

# The four variants see the same windows, so the target runs once: the first builds the feature cache, the others
# read it (float32: replays exactly; 600 steps x 8 x 257 x d=256 is 1.3 GB, deleted at the end).
for v in feature_shifted_token feature_unshifted_token feature_only token_only; do
  [ -f "$OUT/$v/model.safetensors" ] || $DL train-head "${TRAIN[@]}" --corpus "$CORPUS" --input "$v" --out "$OUT/$v" \
    --feature-cache "$OUT/corpus-features.h5"
done
rm -f "$OUT/corpus-features.h5"

# Table 6: the same budget on the target's own continuations of the corpus's story openings (greedy, 8-token
# openings, as many continuations as give about the corpus's size in tokens; 8 decoded together, same text).
[ -f "$OUT/generated.tokens" ] || $DL gen-head-data --model "$MODEL" --corpus "$CORPUS" --prompt-tokens 8 \
  --max-prompts "${GEN_PROMPTS:-4000}" -n 200 --batch 8 --threads "$THREADS" --out "$OUT/generated.tokens"
[ -f "$OUT/generated/model.safetensors" ] || $DL train-head "${TRAIN[@]}" --data "$OUT/generated.tokens" --out "$OUT/generated"
# EAGLE-3 Table 2's middle row: training-time test without fusion (the last layer's output three times), on
# exactly the committed EAGLE-3 head's data and schedule (scripts/train_zoo.sh target-eagle3), so the two differ in
# the fused layers only.
[ -f "$OUT/eagle3-top/model.safetensors" ] || $DL train-head --options-file data/recipes/eagle-head.ini \
  --options-file data/recipes/eagle3.ini --feature-layers top --model "$MODEL" --corpus "$CORPUS" --out "$OUT/eagle3-top" \
  --threads "$THREADS"
echo "heads in $OUT"
