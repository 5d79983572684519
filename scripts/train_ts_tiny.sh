#!/usr/bin/env bash
# Regenerates data/models/ts-tiny: the embedded reference model (byte-level BPE 1024 + a 1.3M-parameter Llama)
# trained on ../shared/data/tinystories/tinystories.txt. About 8 minutes on 2 cores.
#   bash scripts/train_ts_tiny.sh [OUT_DIR]     (default data/models/ts-tiny)
set -euo pipefail
cd "$(dirname "$0")/.."
SHARED=${DRAFTLAB_SHARED:-../shared}
CORPUS=$SHARED/data/tinystories/tinystories.txt
OUT=${1:-data/models/ts-tiny}
WORK=$(mktemp -d)
trap 'rm -rf "$WORK"' EXIT

./build/draftlab train-tokenizer --corpus "$CORPUS" --vocab-size 1024 --out "$WORK/tokenizer"
./build/draftlab train-lm --corpus "$CORPUS" --tokenizer "$WORK/tokenizer/tokenizer.json" --out "$WORK/model" \
  --dim 128 --layers 6 --heads 4 --context 256 --batch 16 --steps 700 --lr 2e-3 --warmup 50 \
  --eval-every 100 --seed 0 --threads 2 --save-dtype float16

mkdir -p "$OUT"
cp "$WORK/model/config.json" "$WORK/model/model.safetensors" "$WORK/tokenizer/tokenizer.json" \
   "$WORK/tokenizer/tokenizer_config.json" "$OUT/"
cp "$WORK/model/training_log.h5" "$OUT/training_log.h5"
echo "wrote $OUT"
