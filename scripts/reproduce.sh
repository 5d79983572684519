#!/usr/bin/env bash
# Reproduces the papers' tables and figures on the reference zoo (data/models/README.md): one experiment per
# argument, each writing RESULTS_DIR/NAME.h5 (docs/results-schema.md), NAME.md (draftlab table) and NAME/ (plots).
#   bash scripts/reproduce.sh [NAME ...]     names: the runs of the experiment catalog, in the papers' order
#                                             (./build/draftlab schema --experiments; default: all)
# Environment: RESULTS_DIR (default results), MODEL (default data/models/ts-target), HEAD, MEDUSA_HEADS,
# HYDRA_HEADS (default MODEL-eagle-head, -medusa, -hydra; speed runs those present), MOE_MODEL (default
# data/models/ts-moe, with MOE_MODEL-eagle-head), DRAFT, QUESTIONS
# (questions per dataset, default 10; batch: BATCH_QUESTIONS, default 24), NEW_TOKENS (default 64), THREADS (default 2; measure on an idle machine).
# EAGLE3_HEAD (default MODEL-eagle3-head), PEAGLE_HEAD (MODEL-peagle-head), DFLASH_HEAD (MODEL-dflash-head), PARD_DRAFT (data/models/ts-draft-pard). ablate-inputs, train-data and ablate-eagle3 need heads trained by
# scripts/train_ablation_heads.sh (VARIANT_HEADS_DIR), data-scaling those of scripts/train_scaling_heads.sh
# (SCALING_HEADS_DIR, default ../zoo/scaling-heads: every head folder in it).
# Then docs/results.md: bash scripts/results_doc.sh [RESULTS_DIR] (or: bash scripts/reproduce.sh && bash scripts/results_doc.sh).
set -euo pipefail
cd "$(dirname "$0")/.."
DL=${DRAFTLAB:-./build/draftlab}  # DRAFTLAB: another binary
OUT=${RESULTS_DIR:-results}
MODEL=${MODEL:-data/models/ts-target}
HEAD=${HEAD:-${MODEL}-eagle-head}
DRAFT=${DRAFT:-data/models/ts-draft}
MEDUSA=${MEDUSA_HEADS:-${MODEL}-medusa}
HYDRA=${HYDRA_HEADS:-${MODEL}-hydra}
Q=${QUESTIONS:-10}
N=${NEW_TOKENS:-64}
THREADS=${THREADS:-2}
HEADS=${VARIANT_HEADS_DIR:-../zoo/ablation-heads}
EAGLE3_HEAD=${EAGLE3_HEAD:-${MODEL}-eagle3-head}
PEAGLE_HEAD=${PEAGLE_HEAD:-${MODEL}-peagle-head}
DFLASH_HEAD=${DFLASH_HEAD:-${MODEL}-dflash-head}
PARD_DRAFT=${PARD_DRAFT:-data/models/ts-draft-pard}
MOE=${MOE_MODEL:-data/models/ts-moe}
# The runs, in order, from the experiment catalog (analysis/experiment_catalog.cpp); each has its branch below.
[ -x "$DL" ] || { echo "reproduce.sh: $DL not found (build first: bash scripts/setup.sh)" >&2; exit 1; }
RUNS=$($DL schema --experiments | cut -f1 | tr '\n' ' ')
NAMES=("$@"); [ ${#NAMES[@]} = 0 ] && read -r -a NAMES <<<"$RUNS"
for name in "${NAMES[@]}"; do
  [[ " $RUNS " == *" $name "* ]] || { echo "reproduce.sh: unknown run '$name' (expected one of: $RUNS)" >&2; exit 2; }
done
mkdir -p "$OUT"

# The reference targets are story models: on chat questions they often end at once, so every driver generates
# a fixed number of tokens (--ignore-eos), as serving benchmarks do.
SETTINGS=(--questions "$Q" -n "$N" --ignore-eos --threads "$THREADS")
COMMON=(-m "$MODEL" "${SETTINGS[@]}")
SETS=mt_bench,humaneval,gsm8k,alpaca,sum,qa
MODELS=(--model "$MODEL" --head "$HEAD" --eagle3-head "$EAGLE3_HEAD" --dflash-head "$DFLASH_HEAD" --peagle-head "$PEAGLE_HEAD"
        --pard-draft "$PARD_DRAFT" --draft "$DRAFT" --medusa "$MEDUSA" --hydra "$HYDRA")

# The table's methods beside llama.cpp's plain decoding and own speculative types (llama.cpp 2026 spec-peer, builds
# both peers when absent) on the same weights (float16 GGUF), the same first turns of the six sets and tokens, both
# ISAs, interleaved: bench/vs_llama_cpp.py --methods $2, written to OUT/$1-llama-cpp.{md,json}. N tokens per answer
# (--ignore-eos): past the first EOS the engines decode different texts (llama.cpp bans EOS, draftlab decodes
# through it), so the texts are checked equal up to the first EOS.
beside_llama_cpp() {
  python3 bench/vs_llama_cpp.py "${MODELS[@]}" --methods "$2" --bench "$SETS" --num-prompts "$Q" -n "$N" --ignore-eos \
    --isas native,avx2 --dtypes f16 --threads "$THREADS" --rounds 3 --out "$OUT/$1-llama-cpp.json" >"$OUT/$1-llama-cpp.md.tmp"
  mv "$OUT/$1-llama-cpp.md.tmp" "$OUT/$1-llama-cpp.md"
  echo "wrote $OUT/$1-llama-cpp.md, $OUT/$1-llama-cpp.json"
}

for name in "${NAMES[@]}"; do
  case $name in
    speed)  # EAGLE-2 Table 1's seven methods (chain = SpS, pld, medusa, lookahead, hydra, static-tree = EAGLE,
            # eagle2), eagle-chain, and the CPU-sized EAGLE-2 tree of the main job (4 / 4 / 1) beside the papers' one
      parallel=()
      for h in "$MEDUSA" "$HYDRA"; do [ -d "$h" ] && parallel+=(--head "$h"); done
      $DL exp speed "${COMMON[@]}" --head "$HEAD" "${parallel[@]}" --draft "$DRAFT" \
        -s "eagle2:label=eagle2 (tt=4 d=4 k=1),total_tokens=4,depth=4,top_k=1" \
        -o "$OUT/speed.h5" --jsonl "$OUT/spec-bench"
      beside_llama_cpp speed table1 ;;
    drafters)  # the 2026 drafters (issue 41): P-EAGLE, PARD, DFlash B 4 / 8 / 16, DDTree, suffix beside EAGLE-2 / EAGLE-3 4 / 4 / 1
      $DL exp drafters "${COMMON[@]}" --head "$HEAD" --head "$EAGLE3_HEAD" --head "$PEAGLE_HEAD" --head "$DFLASH_HEAD" \
        --draft "$DRAFT" --parallel-draft "$PARD_DRAFT" -o "$OUT/drafters.h5"
      beside_llama_cpp drafters drafters ;;
    eagle3)  # EAGLE-3 Table 1: eagle2 with the EAGLE head beside eagle3 with the EAGLE-3 head, same tree settings
      $DL exp eagle3 "${COMMON[@]}" --head "$HEAD" --head "$EAGLE3_HEAD" -o "$OUT/eagle3.h5" ;;
    eagle3-alpha)  # EAGLE-3 Figure 7: n-alpha of 8-token chains, EAGLE-2 head vs EAGLE-3 head
      $DL exp eagle3-alpha "${COMMON[@]}" --head "$HEAD" --head "$EAGLE3_HEAD" -o "$OUT/eagle3-alpha.h5" ;;
    ablate-eagle3)  # EAGLE-3 Table 2: the EAGLE-2 head, TTT with the top layer's feature only, TTT + fusion
      $DL exp ablate-eagle3 "${COMMON[@]}" --head "EAGLE-2 head=$HEAD" --head "TTT, top layer=$HEADS/eagle3-top" \
        --head "TTT + fusion (EAGLE-3)=$EAGLE3_HEAD" -o "$OUT/ablate-eagle3.h5" ;;
    data-scaling)  # EAGLE-3 Figure 1: every head of scripts/train_scaling_heads.sh, labelled by its folder
      args=()
      for dir in "${SCALING_HEADS_DIR:-../zoo/scaling-heads}"/*/; do
        [ -f "$dir/model.safetensors" ] && args+=(--head "$(basename "$dir")=$dir")
      done
      $DL exp data-scaling "${COMMON[@]}" "${args[@]}" -o "$OUT/data-scaling.h5" ;;
    alpha|calibration|positions|ablate-eagle2|tree-vs-chain)
      $DL exp "$name" "${COMMON[@]}" --head "$HEAD" -o "$OUT/$name.h5" ;;
    sweep) $DL exp sweep "${COMMON[@]}" --head "$HEAD" --total-tokens 4,6,10,20,60 --depth 3,4,6 --top-k 1,2,4 \
             --repeats 3 -o "$OUT/sweep.h5" ;;
    ablate-inputs)
      args=()
      for v in feature_shifted_token feature_unshifted_token feature_only token_only; do
        args+=(--head "$v=$HEADS/$v")
      done
      $DL exp ablate-inputs "${COMMON[@]}" "${args[@]}" -o "$OUT/ablate-inputs.h5" ;;
    train-data)
      $DL exp train-data "${COMMON[@]}" --head "fixed=$HEADS/feature_shifted_token" --head "generated=$HEADS/generated" \
        -o "$OUT/train-data.h5" ;;
    moe)    # EAGLE Table 3 on the mixture-of-experts ts-moe; moe-dense: the same drafts on the dense ts-target
      $DL exp moe -m "$MOE" "${SETTINGS[@]}" --head "$MOE-eagle-head" -o "$OUT/moe.h5" ;;
    moe-dense)
      $DL exp moe "${COMMON[@]}" --head "$HEAD" -o "$OUT/moe-dense.h5" ;;
    batch)  # EAGLE Table 7: batch sizes 1, 2, 3, 4 and 8, each beside batched vanilla of that size (24 questions:
            # three full batches of 8)
      $DL exp batch -m "$MODEL" --questions "${BATCH_QUESTIONS:-24}" -n "$N" --ignore-eos --threads "$THREADS" \
        --head "$HEAD" -o "$OUT/batch.h5" ;;
    quantized)  # EAGLE Table 4: every method on f32 / f16 / q8_0 / q4_0 weights (q8_0 / q4_0 also with int8 dot
                # products, --quant-dot int8) beside llama.cpp's plain decoding and own speculative types on the same
                # GGUF files (builds both peers), with AVX-512 where the CPU has it and AVX2; one and two threads
      python3 bench/vs_llama_cpp.py "${MODELS[@]}" --isas native,avx2 \
        --dtypes f32,f16,q8_0,q8_0+int8,q4_0,q4_0+int8 --threads 1,2 --rounds 3 --out "$OUT/quantized.json" >"$OUT/quantized.md.tmp"
      mv "$OUT/quantized.md.tmp" "$OUT/quantized.md"
      echo "wrote $OUT/quantized.json, $OUT/quantized.md (a benchmark: no HDF5 results file)"
      continue ;;
    *) echo "reproduce.sh: the catalog's run '$name' has no branch here" >&2; exit 2 ;;
  esac
  $DL table "$OUT/$name.h5" > "$OUT/$name.md"
  $DL plot "$OUT/$name.h5" --out "$OUT/$name"
  echo "wrote $OUT/$name.h5, $OUT/$name.md, $OUT/$name/"
done
echo "docs/results.md from these files: bash scripts/results_doc.sh $OUT"
