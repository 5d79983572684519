#!/usr/bin/env bash
# End-to-end checks of `draftlab generate`: the whole path (run.c's tokenizer encode, llama2.c checkpoint,
# greedy decode, streaming detokenizer) against llama2.c's own output, and bad input giving a clear error,
# a non-zero exit and no crash.
#   usage: test_generate_cli.sh DRAFTLAB_BINARY SHARED_DIR
set -u
BIN=$1
SRC=$(cd "$(dirname "$0")/../.." && pwd)
SHARED=${DRAFTLAB_SHARED:-$2}
source "$(dirname "$0")/../test_lib.sh"

MODEL=$SHARED/models/aidreams260K/aidreams260K.bin
TOK=$SHARED/models/aidreams260K/tok512.bin
GOLD=$SHARED/golden/llama2c
[ -f "$MODEL" ] || skip_all "$MODEL missing (set DRAFTLAB_SHARED)"

# 1. Same ids and text as run.c for a prompt (run.c -n 128 = our --context 128).
"$BIN" generate --model "$MODEL" --tokenizer "$TOK" --prompt "once upon a time" --context 128 \
  --max-new-tokens 1000 --print-ids >"$TMP/out" 2>"$TMP/err"
rc=$?
want_prompt=$(sed -n 1p "$GOLD/aidreams260K.once-upon-a-time.ids.txt" | cut -d' ' -f2-)
want_gen=$(sed -n 2p "$GOLD/aidreams260K.once-upon-a-time.ids.txt" | cut -d' ' -f2-)
got_prompt=$(grep '^prompt_ids' "$TMP/out" | cut -d' ' -f2-)
got_gen=$(grep '^generated_ids' "$TMP/out" | cut -d' ' -f2-)
[ $rc = 0 ] && ok "generate exits 0" || { bad "generate exit $rc"; cat "$TMP/err"; }
[ "$got_prompt" = "$want_prompt" ] && ok "prompt ids equal run.c's encoding" || bad "prompt ids: got '$got_prompt' want '$want_prompt'"
[ "$got_gen" = "$want_gen" ] && ok "generated ids equal run.c's" || bad "generated ids differ from run.c"
# run.c printed the prompt and the continuation; our first line is the same text.
head -c "$(wc -c <"$GOLD/aidreams260K.once-upon-a-time.text.txt")" "$TMP/out" >"$TMP/text"
cmp -s "$TMP/text" "$GOLD/aidreams260K.once-upon-a-time.text.txt" && ok "text equals run.c's" || bad "text differs from run.c's"
grep -q "tokens/s" "$TMP/err" && ok "reports tokens/s" || bad "no tokens/s line"

# 2. Bad input: non-zero exit, message naming the problem, no crash (exit code 1, not a signal).
expect_error() {  # name, expected-substring, command...
  local name=$1 want=$2
  shift 2
  "$@" >"$TMP/o" 2>"$TMP/e"
  local code=$?
  if [ $code = 1 ] || [ $code = 2 ]; then
    if grep -qF -- "$want" "$TMP/e"; then ok "$name"; else bad "$name: message lacks '$want': $(cat "$TMP/e")"; fi
  else
    bad "$name: exit code $code (want 1 or 2): $(tail -3 "$TMP/e")"
  fi
}
expect_error "missing model" "no/such/model" "$BIN" generate --model "$TMP/no/such/model" --prompt hi
expect_error "llama2.c model needs --tokenizer" "--tokenizer" "$BIN" generate --model "$MODEL" --prompt hi
expect_error "prompt longer than context" "the context holds 8" \
  "$BIN" generate --model "$MODEL" --tokenizer "$TOK" --context 8 --prompt "once upon a time there was a dreaming network"
expect_error "float16 on cpu" "float16" "$BIN" generate --model "$MODEL" --tokenizer "$TOK" --prompt hi --dtype float16
expect_error "unknown dtype" "--dtype" "$BIN" generate --model "$MODEL" --tokenizer "$TOK" --prompt hi --dtype int3
expect_error "bad top-p" "--top-p" "$BIN" generate --model "$MODEL" --tokenizer "$TOK" --prompt hi -t 1 --top-p 0
expect_error "missing --prompt" "prompt" "$BIN" generate --model "$MODEL" --tokenizer "$TOK"
expect_error "unknown command" "unknown command" "$BIN" frobnicate
head -c 5000 "$MODEL" >"$TMP/cut.bin"
expect_error "truncated checkpoint" "cut.bin" "$BIN" generate --model "$TMP/cut.bin" --tokenizer "$TOK" --prompt hi
head -c 100 "$TOK" >"$TMP/cut_tok.bin"
expect_error "truncated tokenizer" "cut_tok.bin" "$BIN" generate --model "$MODEL" --tokenizer "$TMP/cut_tok.bin" --prompt hi

# 3. Empty prompt starts from BOS alone, like run.c (golden case aidreams260K.bos).
"$BIN" generate --model "$MODEL" --tokenizer "$TOK" --prompt "" --context 128 --max-new-tokens 1000 --print-ids \
  >"$TMP/out" 2>"$TMP/err"
want_gen=$(sed -n 2p "$GOLD/aidreams260K.bos.ids.txt" | cut -d' ' -f2-)
got_gen=$(grep '^generated_ids' "$TMP/out" | cut -d' ' -f2-)
[ "$got_gen" = "$want_gen" ] && ok "empty prompt = BOS only, ids equal run.c's" || bad "empty prompt ids differ"

# 4. Sampling is reproducible for a seed and differs across seeds.
run_seed() { "$BIN" generate --model "$MODEL" --tokenizer "$TOK" --prompt "once" -t 1 --top-p 0.9 --seed "$1" -n 40 --print-ids 2>/dev/null | grep '^generated_ids'; }
a=$(run_seed 5); b=$(run_seed 5); c=$(run_seed 6)
[ -n "$a" ] && [ "$a" = "$b" ] && ok "same seed, same tokens" || bad "same seed gave different tokens"
[ "$a" != "$c" ] && ok "different seed, different tokens" || bad "seeds 5 and 6 gave the same tokens"

# 5. The training commands: bad input is a clear error, and a tiny end-to-end run works.
CORPUS=$SHARED/data/tinystories/tinystories.txt
expect_error "train-tokenizer: missing corpus" "no/corpus.txt" "$BIN" train-tokenizer --corpus "$TMP/no/corpus.txt" --vocab-size 300 --out "$TMP/tok"
expect_error "train-tokenizer: vocab too small" "vocab" "$BIN" train-tokenizer --corpus "$CORPUS" --vocab-size 100 --out "$TMP/tok"
expect_error "train-lm: missing tokenizer" "nope.json" "$BIN" train-lm --corpus "$CORPUS" --tokenizer "$TMP/nope.json" --out "$TMP/lm"
expect_error "perplexity: empty slice" "empty" "$BIN" perplexity --model "$MODEL" --tokenizer "$TOK" --corpus "$CORPUS" --offset 999999999
head -c 200000 "$CORPUS" > "$TMP/small.txt"
if "$BIN" train-tokenizer --corpus "$TMP/small.txt" --vocab-size 300 --out "$TMP/tok" >/dev/null 2>&1 &&
   "$BIN" train-lm --corpus "$TMP/small.txt" --tokenizer "$TMP/tok/tokenizer.json" --out "$TMP/lm" --dim 32 \
     --layers 2 --steps 20 --batch 4 --context 64 --eval-every 10 -q >/dev/null 2>&1 &&
   "$BIN" generate --model "$TMP/lm" -p "once" -n 5 >/dev/null 2>&1; then
  ok "train-tokenizer -> train-lm -> generate"
else
  bad "train-tokenizer -> train-lm -> generate failed"
fi
# Another run's state is refused by what differs (its config), before any tensor of it loads.
expect_error "train-lm: resume with another shape" "training_state.safetensors: metadata config: expected" "$BIN" train-lm --corpus "$TMP/small.txt" \
  --tokenizer "$TMP/tok/tokenizer.json" --out "$TMP/lm" --dim 48 --layers 2 --steps 30 --batch 4 --context 64 --resume -q

# PARD (train-lm --parallel): fine-tune that model to draft 3 tokens per forward; its config names the mask id (the
# highest id absent from the corpus), and pard with it decodes exactly what vanilla decodes.
if "$BIN" train-lm --init "$TMP/lm" --corpus "$TMP/small.txt" --tokenizer "$TMP/tok/tokenizer.json" \
     --out "$TMP/lm-pard" --parallel 3 --steps 4 --batch 2 --context 32 --eval-every 4 -q >/dev/null 2>&1 &&
   grep -q '"pard_token"' "$TMP/lm-pard/config.json"; then
  ok "train-lm --init --parallel writes a parallel draft naming its mask id"
else
  bad "train-lm --init --parallel failed or wrote no pard_token"
fi
ids() { "$BIN" generate --model "$TMP/lm" -p "once upon" -n 24 --print-ids "$@" 2>/dev/null | grep '^generated_ids'; }
plain_ids=$(ids); pard_ids=$(ids -s pard -o draft="$TMP/lm-pard" -o k=3)
[ -n "$plain_ids" ] && [ "$plain_ids" = "$pard_ids" ] && ok "pard decodes vanilla's ids" ||
  bad "pard's ids differ from vanilla's: '$pard_ids' vs '$plain_ids'"
expect_error "pard refuses a draft without pard_token" "pard_token" "$BIN" generate --model "$TMP/lm" -p once -n 4 \
  -s pard -o draft="$TMP/lm"
# PARD-2's loss (--teacher: the model the draft serves, here the one it starts from): the log names it.
if "$BIN" train-lm --init "$TMP/lm" --corpus "$TMP/small.txt" --tokenizer "$TMP/tok/tokenizer.json" \
     --out "$TMP/lm-pard2" --parallel 3 --teacher "$TMP/lm" --steps 2 --batch 2 --context 32 --eval-every 2 -q \
     >/dev/null 2>"$TMP/pard2.err" && grep -q "teacher $TMP/lm (PARD-2): 0.1 CE + 1 KL, CAT-weighted rows" "$TMP/pard2.err"; then
  ok "train-lm --parallel --teacher trains with PARD-2's loss"
else
  bad "train-lm --parallel --teacher: $(cat "$TMP/pard2.err")"
fi
for args in "--parallel 3 --cod 0.7|--cod" "--parallel 3 --cod 2,0.1|--cod" "--parallel 0|--parallel" \
            "--parallel 3 --mask-token 300|--mask-token" "--dim 48|--dim: the model's shape comes from --init" \
            "--teacher $TMP/lm|--teacher: only with --parallel" "--no-cat|--no-cat: only with --teacher" \
            "--parallel 3 --teacher $TMP/lm --loss-weights 0.1|--loss-weights: expected ce,kd" \
            "--parallel 3 --teacher $TMP/lm --loss-weights 0,0|--loss-weights: expected ce,kd >= 0, not both 0" \
            "--parallel 3 --teacher $SRC/data/models/ts-tiny|vocab_size 1024, expected the draft's 300"; do
  # shellcheck disable=SC2086
  expect_error "train-lm --init refuses ${args%%|*} before the corpus loads" "${args##*|}" "$BIN" train-lm \
    --init "$TMP/lm" --corpus "$TMP/does-not-exist" --tokenizer "$TMP/tok/tokenizer.json" --out "$TMP/lm-refused" \
    ${args%%|*}
done

# 3. Options refused before anything loads: the model, corpus and prompt file below do not exist, so an error about
#    the option (and not about the missing file) shows the option was checked first.
NOFILE=$TMP/does-not-exist
for args in "-t -1|temperature" "--top-p 2|--top-p" "-n -3|--max-new-tokens" "--context -5|--context" \
            "--chat-template bogus|bogus" "-s eagel2|eagel2" "-s pld -o bogus=1|bogus" \
            "-s eagle2 -o total_tokens=banana|total_tokens" "-o depth=3|--opt given without --strategy"; do
  # shellcheck disable=SC2086
  expect_error "generate refuses ${args%%|*} before loading" "${args##*|}" "$BIN" generate --model "$NOFILE" \
    --tokenizer "$TOK" -p hi ${args%%|*}
done
for args in "--batch 0|--batch" "-t -1|temperature" "-n -1|--max-new-tokens" "--chat-template bogus|bogus" \
            "--format csv|--format" "--max-prompts -1|--max-prompts"; do
  # shellcheck disable=SC2086
  expect_error "gen-head-data refuses ${args%%|*} before loading" "${args##*|}" "$BIN" gen-head-data \
    --model "$NOFILE" --tokenizer "$TOK" --prompts "$NOFILE" --out "$TMP/hd.tokens" ${args%%|*}
done
expect_error "gen-head-data refuses --prompt-tokens 0 before loading" "--prompt-tokens" "$BIN" gen-head-data \
  --model "$NOFILE" --tokenizer "$TOK" --corpus "$NOFILE" --out "$TMP/hd.tokens" --prompt-tokens 0
for args in "--batch 0|--batch" "--steps 0|--steps" "--keep-best --eval-every 0|--keep-best" "--heads 5|--heads" \
            "--save-dtype int8|--save-dtype" "--lr -1|--lr"; do
  # shellcheck disable=SC2086
  expect_error "train-lm refuses ${args%%|*} before the corpus loads" "${args##*|}" "$BIN" train-lm \
    --corpus "$NOFILE" --tokenizer "$TOK" --out "$TMP/lm-refused" --dim 32 ${args%%|*}
done
[ ! -e "$TMP/hd.tokens" ] && [ ! -e "$TMP/lm-refused" ] && ok "refused commands wrote nothing" ||
  bad "a refused command left output behind"

finish
