#!/usr/bin/env bash
# Regenerates the reference zoo (data/models/README.md) from ../shared/data/tinystories/tinystories.txt.
#   bash scripts/train_zoo.sh [STAGE ...]      stages: tiny tiny-head target target-head draft draft-pard target-medusa
#                                              target-hydra moe moe-head target-eagle3 target-peagle target-dflash
#                                              (default: all), and ablation (the EAGLE Figure 8 / Table 6 heads of
#                                              ts-target: not published, not in the default list)
# Every stage writes its model folder under data/models/ (or $ZOO_OUT) and keeps its full training output
# (resumable state, logs) in $ZOO_WORK (default ../zoo), so an interrupted stage continues with
# RESUME=1 bash scripts/train_zoo.sh STAGE.
# The heads' settings are train-head recipes in data/recipes/ (--options-file); the published heads were trained on
# random windows, before whole-sequence rows became train-head's default (2026-11-27), which the recipes say.
# Times on the 2-vCPU development machine (1 thread each, as it ran beside other work): tiny ~8 min,
# tiny-head ~5 min, target ~90 min + ~80 min + ~95 min (phases 2 and 3, 2 threads), target-head ~26 min (2 threads),
# draft ~15 min, target-medusa and target-hydra: see their cards (data/models/README.md).
set -euo pipefail
cd "$(dirname "$0")/.."
SHARED=${DRAFTLAB_SHARED:-../shared}
CORPUS=$SHARED/data/tinystories/tinystories.txt
OUT=${ZOO_OUT:-data/models}
WORK=${ZOO_WORK:-../zoo}
THREADS=${THREADS:-1}
RESUME_FLAG=""; [ "${RESUME:-0}" = 1 ] && RESUME_FLAG="--resume"
DL=${DRAFTLAB:-./build/draftlab}  # DRAFTLAB: another binary (e.g. a copy, while ./build is rebuilt)
mkdir -p "$WORK" "$OUT"
STAGES=("$@"); [ ${#STAGES[@]} = 0 ] && STAGES=(tiny tiny-head target target-head draft draft-pard target-medusa target-hydra moe moe-head target-eagle3 target-peagle target-dflash)

# Copies a trained HF folder (weights, config, tokenizer, log) into the zoo.
publish() {  # SRC DEST
  mkdir -p "$2"
  for f in config.json model.safetensors tokenizer.json tokenizer_config.json training_log.h5; do
    [ -f "$1/$f" ] && cp "$1/$f" "$2/"
  done
  # train-lm copies tokenizer.json only; the tokenizer's config comes from where it was trained.
  [ -f "$2/tokenizer_config.json" ] || [ ! -f "$WORK/tok4096/tokenizer_config.json" ] || \
    [ ! -f "$2/tokenizer.json" ] || cp "$WORK/tok4096/tokenizer_config.json" "$2/"
  echo "wrote $2"
}

tokenizer_4096() {
  [ -f "$WORK/tok4096/tokenizer.json" ] || $DL train-tokenizer --corpus "$CORPUS" --vocab-size 4096 --out "$WORK/tok4096"
}

for stage in "${STAGES[@]}"; do
  case $stage in
    tiny) bash scripts/train_ts_tiny.sh "$OUT/ts-tiny" ;;
    tiny-head) bash scripts/train_ts_tiny_head.sh "$OUT/ts-tiny-eagle-head" ;;
    target)
      # 17.8M parameters (71 MB in fp32: above the 32 MB L3, so a decoding step is memory-bound), 16 layers.
      # Three phases, as it was trained: 420 steps with a cosine to 1e-4 (the first, budget-limited session); the
      # same run resumed with --steps 1100 (the cosine re-enters at its step-420 value, 7.4e-4, and ends at 1e-4);
      # then on at the constant floor, 1e-4, until the validation loss stops improving (--patience 3 validations,
      # 40 steps apart). model.safetensors = the best validation checkpoint (--keep-best).
      tokenizer_4096
      lm=(train-lm --corpus "$CORPUS" --tokenizer "$WORK/tok4096/tokenizer.json" --out "$WORK/ts-target"
          --dim 256 --layers 16 --heads 4 --hidden 1024 --context 512 --batch 8 --warmup 30
          --log-every 10 --seed 0 --threads "$THREADS" --save-dtype float16)
      if [ ! -f "$WORK/ts-target/.phase1-done" ]; then
        $DL "${lm[@]}" --lr 1e-3 --steps 420 --eval-every 60 --save-every 60 $RESUME_FLAG
        touch "$WORK/ts-target/.phase1-done"
      fi
      if [ ! -f "$WORK/ts-target/.phase2-done" ]; then
        $DL "${lm[@]}" --lr 1e-3 --steps 1100 --eval-every 40 --save-every 40 --keep-best --patience 3 --resume
        touch "$WORK/ts-target/.phase2-done"
      fi
      # The same run, its learning rate held at 1e-4 (min-lr-ratio 1: no decay); early stopping ends it (at step
      # 1840, best 1720). It ran as a probe to step 1700 first, whose closing validation counts toward the
      # patience, hence two invocations.
      lm+=(--lr 1e-4 --min-lr-ratio 1 --eval-every 40 --save-every 40 --keep-best --patience 3 --resume)
      if [ ! -f "$WORK/ts-target/.phase3-done" ]; then
        $DL "${lm[@]}" --steps 1700
        touch "$WORK/ts-target/.phase3-done"
      fi
      $DL "${lm[@]}" --steps 4000  # a resumed run that already stopped early does nothing
      publish "$WORK/ts-target" "$OUT/ts-target" ;;
    target-head)
      # The recipe data/recipes/eagle-head.ini; features from the published ts-target.
      $DL train-head --options-file data/recipes/eagle-head.ini --model "$OUT/ts-target" --corpus "$CORPUS" \
        --out "$WORK/ts-target-eagle-head" --threads "$THREADS" $RESUME_FLAG
      publish "$WORK/ts-target-eagle-head" "$OUT/ts-target-eagle-head" ;;
    target-eagle3)
      # EAGLE-3 (issue 22, data/recipes/eagle3.ini) on target-head's data and schedule, but 504-token windows (4 a step:
      # the same tokens) so that it sees positions up to the target's context (issue 41).
      $DL train-head --options-file data/recipes/eagle-head.ini --options-file data/recipes/eagle3.ini --context 504 \
        --batch 4 --model "$OUT/ts-target" --corpus "$CORPUS" --out "$WORK/ts-target-eagle3-head" --threads "$THREADS" \
        $RESUME_FLAG
      publish "$WORK/ts-target-eagle3-head" "$OUT/ts-target-eagle3-head" ;;
    draft)
      # The classic chain strategy's separate draft LM: same tokenizer as ts-target, about 8% of its step.
      tokenizer_4096
      $DL train-lm --corpus "$CORPUS" --tokenizer "$WORK/tok4096/tokenizer.json" --out "$WORK/ts-draft" \
        --dim 128 --layers 5 --heads 4 --hidden 352 --context 512 --batch 16 --steps 300 --lr 2e-3 --warmup 30 \
        --eval-every 50 --log-every 20 --seed 0 --threads "$THREADS" --save-dtype float16 $RESUME_FLAG
      publish "$WORK/ts-draft" "$OUT/ts-draft" ;;
    draft-pard)
      # PARD (issue 41): ts-draft fine-tuned to draft 8 tokens in one forward (train-lm --parallel; 7 appended copies
      # of the mask id, COD r 0.7 / r_min 0.2 as PARD's example config; the mask id: the highest id absent from
      # the corpus, recorded as config.json pard_token). The same draft serves ts-target and ts-moe.
      $DL train-lm --init "$OUT/ts-draft" --corpus "$CORPUS" --tokenizer "$OUT/ts-draft/tokenizer.json" \
        --out "$WORK/ts-draft-pard" --parallel 8 --cod 0.7,0.2 --context 256 --batch 8 --steps 300 --lr 5e-4 \
        --warmup 20 --eval-every 50 --save-every 25 --log-every 10 --seed 0 --threads "$THREADS" \
        --save-dtype float16 $RESUME_FLAG
      publish "$WORK/ts-draft-pard" "$OUT/ts-draft-pard"
      cp "$OUT/ts-draft/tokenizer_config.json" "$OUT/ts-draft-pard/" ;;
    target-peagle)
      # P-EAGLE (issue 41, data/recipes/peagle.ini on eagle-head.ini's schedule, 500 steps: one epoch).
      $DL train-head --options-file data/recipes/eagle-head.ini --options-file data/recipes/peagle.ini --steps 500 \
        --model "$OUT/ts-target" --corpus "$CORPUS" --out "$WORK/ts-target-peagle-head" --threads "$THREADS" $RESUME_FLAG
      publish "$WORK/ts-target-peagle-head" "$OUT/ts-target-peagle-head" ;;
    target-dflash)
      # DFlash (issue 41, data/recipes/dflash.ini): 600 steps, then the same run resumed to 1,500 (as it was trained).
      if [ ! -f "$WORK/ts-target-dflash-head/.phase1-done" ]; then
        $DL train-head --options-file data/recipes/dflash.ini --model "$OUT/ts-target" --corpus "$CORPUS" \
          --out "$WORK/ts-target-dflash-head" --threads "$THREADS" $RESUME_FLAG
        touch "$WORK/ts-target-dflash-head/.phase1-done"
      fi
      $DL train-head --options-file data/recipes/dflash.ini --steps 1500 --model "$OUT/ts-target" --corpus "$CORPUS" \
        --out "$WORK/ts-target-dflash-head" --threads "$THREADS" --resume
      publish "$WORK/ts-target-dflash-head" "$OUT/ts-target-dflash-head" ;;
    target-medusa | target-hydra)
      # The parallel heads of issue 15 (data/recipes/parallel-heads.ini + medusa.ini / hydra.ini). Both read the
      # same windows, so the second stage replays the first one's feature cache instead of running the target again.
      kind=${stage#target-}
      $DL train-head --options-file data/recipes/parallel-heads.ini --options-file "data/recipes/$kind.ini" \
        --model "$OUT/ts-target" --corpus "$CORPUS" --out "$WORK/ts-target-$kind" --threads "$THREADS" \
        --feature-cache "$WORK/ts-target-parallel-features.h5" $RESUME_FLAG
      publish "$WORK/ts-target-$kind" "$OUT/ts-target-$kind" ;;
    moe)
      # EAGLE Table 3's mixture-of-experts target (issue 21): Mixtral's architecture at ts-target's width and
      # vocabulary - 8 layers, 8 experts of intermediate 128 per layer, top-2 (9.5M parameters; 3.7M of the 8.4M
      # outside the embedding active per token), load-balancing loss 0.01. Two phases as ts-target's first two:
      # 600 steps of 8 x 512-token windows with a cosine to 1e-4, then the same run resumed with --steps 1200
      # (the cosine re-enters at its step-600 value). model.safetensors = the best validation checkpoint.
      tokenizer_4096
      lm=(train-lm --corpus "$CORPUS" --tokenizer "$WORK/tok4096/tokenizer.json" --out "$WORK/ts-moe"
          --dim 256 --layers 8 --heads 4 --hidden 128 --experts 8 --experts-per-token 2 --router-aux-loss-coef 0.01
          --context 512 --batch 8 --lr 1e-3 --warmup 30 --eval-every 50 --save-every 50 --keep-best
          --log-every 10 --seed 0 --threads "$THREADS" --save-dtype float16)
      if [ ! -f "$WORK/ts-moe/.phase1-done" ]; then
        $DL "${lm[@]}" --steps 600 $RESUME_FLAG
        touch "$WORK/ts-moe/.phase1-done"
      fi
      $DL "${lm[@]}" --steps 1200 --resume
      publish "$WORK/ts-moe" "$OUT/ts-moe" ;;
    moe-head)
      # ts-target-head's recipe on ts-moe.
      $DL train-head --options-file data/recipes/eagle-head.ini --model "$OUT/ts-moe" --corpus "$CORPUS" \
        --out "$WORK/ts-moe-eagle-head" --threads "$THREADS" $RESUME_FLAG
      publish "$WORK/ts-moe-eagle-head" "$OUT/ts-moe-eagle-head" ;;
    ablation)
      # Four input-variant heads and a target-generated-data head for ts-target, kept in $WORK/ablation-heads only
      # (reproduce.sh ablate-inputs train-data read them there). ~40 min on 2 threads on an idle machine.
      MODEL="$OUT/ts-target" OUT="$WORK/ablation-heads" THREADS=2 DRAFTLAB="$DL" bash scripts/train_ablation_heads.sh ;;
    *) echo "unknown stage '$stage' (tiny tiny-head target target-head draft target-medusa target-hydra moe moe-head ablation)" >&2; exit 2 ;;
  esac
done
