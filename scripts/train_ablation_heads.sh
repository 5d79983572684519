#!/usr/bin/env bash
# Trains the EAGLE heads the ablations compare (EAGLE Figure 8 and Table 6) for one target, all with the same
# budget: one head per input variant on the fixed corpus, and one (EAGLE's input) on target-generated data.
#   bash scripts/train_ablation_heads.sh        MODEL (default data/models/ts-target), OUT (default
#                                               ../zoo/ablation-heads), STEPS, BATCH, CONTEXT, LR, THREADS
# scripts/reproduce.sh ablate-inputs train-data then measures them.
set -euo pipefail
cd "$(dirname "$0")/.."
DL=${DRAFTLAB:-./build/draftlab}
SHARED=${DRAFTLAB_SHARED:-../shared}
CORPUS=$SHARED/data/tinystories/tinystories.txt
MODEL=${MODEL:-data/models/ts-target}
OUT=${OUT:-../zoo/ablation-heads}
STEPS=${STEPS:-600}
BATCH=${BATCH:-8}
CONTEXT=${CONTEXT:-256}
LR=${LR:-1e-3}
THREADS=${THREADS:-2}
mkdir -p "$OUT"
TRAIN=(--model "$MODEL" --steps "$STEPS" --batch "$BATCH" --context "$CONTEXT" --lr "$LR" --warmup 50 --seed 0
       --threads "$THREADS" --eval-every 100 --log-every 50)

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
echo "heads in $OUT"
