#!/usr/bin/env bash
# Regenerates data/models/ts-tiny-eagle-head: an EAGLE draft head for data/models/ts-tiny, trained on
# ../shared/data/tinystories/tinystories.txt. About 5 minutes on 2 cores.
#   bash scripts/train_ts_tiny_head.sh [OUT_DIR]     (default data/models/ts-tiny-eagle-head)
set -euo pipefail
cd "$(dirname "$0")/.."
SHARED=${DRAFTLAB_SHARED:-../shared}
OUT=${1:-data/models/ts-tiny-eagle-head}
WORK=$(mktemp -d)
trap 'rm -rf "$WORK"' EXIT
./build/draftlab train-head --samples windows --model data/models/ts-tiny --corpus "$SHARED/data/tinystories/tinystories.txt" \
  --out "$WORK/head" --steps 1800 --batch 16 --context 128 --lr 1e-3 --warmup 100 --seed 0 --threads 2 \
  --eval-every 300 --log-every 100
mkdir -p "$OUT"
cp "$WORK/head/config.json" "$WORK/head/model.safetensors" "$WORK/head/training_log.h5" "$OUT/"
echo "wrote $OUT"
