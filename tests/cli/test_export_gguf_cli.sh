#!/usr/bin/env bash
# End-to-end checks of `draftlab export-gguf`: export a model, generate from the .gguf (its vocabulary inside),
# same text and ids as from the original; bad input is a clear error, a non-zero exit and no file left behind.
#   usage: test_export_gguf_cli.sh DRAFTLAB_BINARY SHARED_DIR SOURCE_DIR
set -u
BIN=$1
SHARED=${DRAFTLAB_SHARED:-$2}
SRC=$3
source "$(dirname "$0")/../test_lib.sh"

# generate NAME ARGS...: the text and ids of a greedy run, into $TMP/NAME.
generate() {
  local name=$1
  shift
  "$BIN" generate "$@" --max-new-tokens 40 --print-ids >"$TMP/$name" 2>"$TMP/$name.err" &&
    grep -q '^generated_ids [0-9]' "$TMP/$name" || {
    bad "generate $name failed: $(tail -3 "$TMP/$name.err")"
    return 1
  }
}
# same A B WHAT: the two runs printed the same text and ids.
same() {
  cmp -s "$TMP/$1" "$TMP/$2" && ok "$3: same text and ids" || bad "$3 differs: $(diff "$TMP/$1" "$TMP/$2" | head -5)"
}

# 1. ts-tiny (Hugging Face folder, fp16): default type f16, then f32; the same output as the folder.
TINY=$SRC/data/models/ts-tiny
PROMPT="once upon a time"
generate folder --model "$TINY" --prompt "$PROMPT"
for type in default f32; do
  args=()
  [ $type != default ] && args=(--type "$type")
  if "$BIN" export-gguf --model "$TINY" --out "$TMP/tiny-$type.gguf" "${args[@]}" 2>"$TMP/export.err"; then
    ok "export-gguf ts-tiny ($type) exits 0"
  else
    bad "export-gguf ts-tiny ($type): $(cat "$TMP/export.err")"
    continue
  fi
  generate "gguf-$type" --model "$TMP/tiny-$type.gguf" --prompt "$PROMPT" &&
    same folder "gguf-$type" "ts-tiny .gguf ($type) vs the folder"
done
"$BIN" export-gguf --model "$TINY" --out "$TMP/check-default.gguf" 2>&1 | grep -q "F16" &&
  ok "default type of an fp16 checkpoint is F16" || bad "default type of ts-tiny is not F16"
# Quantized: the file decodes, and a re-export keeps its type by default (the values are already on the grid).
for type in q8_0 q4_0; do
  if "$BIN" export-gguf --model "$TINY" --out "$TMP/tiny-$type.gguf" --type $type 2>"$TMP/export.err"; then
    generate "gguf-$type" --model "$TMP/tiny-$type.gguf" --prompt "$PROMPT" && ok "ts-tiny .gguf ($type) decodes"
    "$BIN" export-gguf --model "$TMP/tiny-$type.gguf" --out "$TMP/tiny-$type-again.gguf" 2>&1 | grep -qi "$type" &&
      ok "default type of a $type file is $type" || bad "re-export of the $type file changed its type"
  else
    bad "export-gguf ts-tiny ($type): $(cat "$TMP/export.err")"
  fi
done

# 2. llama2.c checkpoint + tokenizer.bin (../shared), when present.
MODEL=$SHARED/models/aidreams260K/aidreams260K.bin
TOK=$SHARED/models/aidreams260K/tok512.bin
if [ -f "$MODEL" ]; then
  if "$BIN" export-gguf --model "$MODEL" --tokenizer "$TOK" --out "$TMP/aidreams.gguf" 2>"$TMP/export.err"; then
    ok "export-gguf aidreams260K exits 0"
    generate bin --model "$MODEL" --tokenizer "$TOK" --prompt "$PROMPT" &&
      generate bin-gguf --model "$TMP/aidreams.gguf" --prompt "$PROMPT" &&
      same bin bin-gguf "aidreams260K .gguf vs the .bin"
  else
    bad "export-gguf aidreams260K: $(cat "$TMP/export.err")"
  fi
else
  skip_part "$MODEL missing (set DRAFTLAB_SHARED)"
fi

# 3. llama.cpp runs the very same weights: its greedy text equals draftlab's, on ts-target (f32 and f16) and on
#    a llama2.c model, when the peer is built ($LLAMA_CPP_BIN, default where ../shared/peers/build_llama_cpp.sh
#    puts it). llama-simple prints the prompt's pieces and then the greedy continuation, ending at an end token.
PEER=${LLAMA_CPP_BIN:-/tmp/llama.cpp-peer/llama.cpp/build/bin}
if [ -x "$PEER/llama-simple" ]; then
  TARGET=$SRC/data/models/ts-target
  peer_check() {  # name, gguf, draftlab model args...
    local name=$1 gguf=$2
    shift 2
    "$PEER/llama-simple" -m "$gguf" -n 48 "$PROMPT" >"$TMP/peer-$name.txt" 2>"$TMP/peer-$name.err" || {
      bad "llama-simple on $name failed: $(tail -3 "$TMP/peer-$name.err")"
      return
    }
    "$BIN" generate "$@" --prompt "$PROMPT" --max-new-tokens 47 --threads 1 >"$TMP/ours-$name.txt" 2>/dev/null
    # Ours: the prompt, the continuation, then a bracketed summary line; theirs: <s> and a leading space for
    # SentencePiece vocabularies. Token budgets can differ by the prompt's length in tokens, so the shorter text
    # must be a prefix of the longer one (and hold most of it).
    local theirs ours
    theirs=$(sed -e 's/<s>//g' "$TMP/peer-$name.txt" | tr -s ' \n' ' ' | sed -e 's/^ //; s/ $//')
    ours=$(sed -e 's/\[[0-9]* prompt tokens.*//' "$TMP/ours-$name.txt" | tr -s ' \n' ' ' | sed -e 's/^ //; s/ $//')
    local shorter=$ours
    [ ${#theirs} -lt ${#ours} ] && shorter=$theirs
    if [ ${#shorter} -gt 60 ] && [ "${theirs:0:${#shorter}}" = "$shorter" ] && [ "${ours:0:${#shorter}}" = "$shorter" ]; then
      ok "llama.cpp's greedy text equals draftlab's ($name)"
    else
      bad "llama.cpp and draftlab differ on $name: llama.cpp '$theirs' / draftlab '$ours'"
    fi
  }
  for type in f32 f16; do
    "$BIN" export-gguf --model "$TARGET" --out "$TMP/target-$type.gguf" --type $type 2>/dev/null &&
      peer_check "ts-target-$type" "$TMP/target-$type.gguf" --model "$TARGET" --weights ${type/f/float}
  done
  # Q8_0: both engines read the same blocks (llama.cpp also rounds the activations to 8 bits: a greedy tie could
  # part them, none does on this prompt).
  "$BIN" export-gguf --model "$TARGET" --out "$TMP/target-q8_0.gguf" --type q8_0 2>/dev/null &&
    peer_check ts-target-q8_0 "$TMP/target-q8_0.gguf" --model "$TMP/target-q8_0.gguf"
  # llama-quantize --pure writes the very blocks draftlab's export writes, from the same float32 values.
  if [ -x "$PEER/llama-quantize" ] && [ -f "$TMP/target-f32.gguf" ]; then
    for type in q8_0 q4_0; do
      [ -f "$TMP/target-$type.gguf" ] ||
        "$BIN" export-gguf --model "$TARGET" --out "$TMP/target-$type.gguf" --type $type 2>/dev/null
      if "$PEER/llama-quantize" --pure "$TMP/target-f32.gguf" "$TMP/peer-$type.gguf" ${type^^} >"$TMP/quantize.log" 2>&1; then
        python3 "$(dirname "$0")/same_gguf_tensors.py" "$TMP/target-$type.gguf" "$TMP/peer-$type.gguf" >"$TMP/same.txt" &&
          ok "export-gguf --type $type writes llama-quantize's bytes ($(tail -1 "$TMP/same.txt"))" ||
          bad "export-gguf --type $type differs from llama-quantize: $(head -5 "$TMP/same.txt")"
      else
        bad "llama-quantize $type failed: $(tail -3 "$TMP/quantize.log")"
      fi
    done
  fi
  [ -f "$TMP/aidreams.gguf" ] && peer_check aidreams260K "$TMP/aidreams.gguf" --model "$MODEL" --tokenizer "$TOK"
  # A mixture of experts (ts-moe, Mixtral's layout): experts merged into blk.N.ffn_*_exps, the router F32; llama.cpp
  # routes and decodes to the same greedy text, and llama-quantize --pure writes the blocks draftlab's export writes.
  MOE=$SRC/data/models/ts-moe
  if [ -d "$MOE" ]; then
    for type in f32 f16 q8_0; do
      "$BIN" export-gguf --model "$MOE" --out "$TMP/moe-$type.gguf" --type $type 2>/dev/null &&
        peer_check "ts-moe-$type" "$TMP/moe-$type.gguf" --model "$TMP/moe-$type.gguf"
    done
    if [ -x "$PEER/llama-quantize" ] && [ -f "$TMP/moe-f32.gguf" ]; then
      "$BIN" export-gguf --model "$MOE" --out "$TMP/moe-q4_0.gguf" --type q4_0 2>/dev/null
      for type in q8_0 q4_0; do
        "$PEER/llama-quantize" --pure "$TMP/moe-f32.gguf" "$TMP/peer-moe-$type.gguf" ${type^^} >"$TMP/quantize.log" 2>&1 &&
          python3 "$(dirname "$0")/same_gguf_tensors.py" "$TMP/moe-$type.gguf" "$TMP/peer-moe-$type.gguf" >"$TMP/same.txt" &&
          ok "ts-moe: export-gguf --type $type writes llama-quantize's bytes ($(tail -1 "$TMP/same.txt"))" ||
          bad "ts-moe: export-gguf --type $type differs from llama-quantize: $(head -5 "$TMP/same.txt" "$TMP/quantize.log")"
      done
    fi
  fi
else
  # CI builds the peer and sets DRAFTLAB_REQUIRE_PEER=1: there a missing peer is a failure, not a skip.
  msg="llama.cpp peer not built ($PEER/llama-simple; bash \$DRAFTLAB_SHARED/peers/build_llama_cpp.sh)"
  if [ "${DRAFTLAB_REQUIRE_PEER:-0}" = 1 ]; then bad "$msg, but DRAFTLAB_REQUIRE_PEER=1"; else skip_part "$msg"; fi
fi

# 4. Heads as llama.cpp's draft GGUFs (issue 42), run by llama.cpp 2026's speculative decoding (spec-peer,
#    $LLAMA_CPP_2026_BIN, default where ../shared/peers/build_llama_cpp_2026.sh /tmp/llama2026 puts it), on README's
#    three prompts from the same loop start (--prefill-first): with the float16 export, llama.cpp's drafts equal
#    draftlab's step by step and both print the same text; with the q8_0 export (target and head), llama.cpp's
#    output equals its plain decoding (lossless there) and it accepts drafts.
#    - EAGLE-3 (architecture eagle3, --spec-type draft-eagle3): draftlab's eagle3 chain (top_k 1, depth 8);
#    - DFlash (architecture dflash, --spec-type draft-dflash): draftlab's dflash chain; llama.cpp's block is
#      [last, mask x min(--draft-max, B - 1)], so --draft-max 15 is the head's B 16 and 7 is block_size=8.
SPEC=${LLAMA_CPP_2026_BIN:-/tmp/llama2026/build/bin}/spec-peer
# peer_drafts NAME HEAD SPEC_TYPE DRAFT_MAX STRATEGY OPTION...: the checks above for one head and draft length.
peer_drafts() {
  local name=$1 head=$2 spec_type=$3 draft_max=$4 strategy=$5
  shift 5
  local opts=() o
  for o in "$@"; do opts+=(-o "$o"); done
  for type in f16 q8_0; do
    [ -f "$TMP/peer-target-$type.gguf" ] ||
      "$BIN" export-gguf --model "$TARGET" --out "$TMP/peer-target-$type.gguf" --type $type 2>/dev/null
    "$BIN" export-gguf --model "$TARGET" --head "$head" --out "$TMP/$name-head-$type.gguf" --type $type \
      2>"$TMP/$name.err" || { bad "export-gguf --head $head ($type): $(tail -3 "$TMP/$name.err")"; continue; }
    for i in 1 2 3; do
      local prompt peer=$TMP/$name-peer-$type-$i
      prompt=$(sed -n "s/^    --prompt \"\(.*\)\" \\\\$/\1/p" "$SRC/README.md" | sed -n "${i}p")
      SPEC_PEER_TRACE=1 "$SPEC" -m "$TMP/peer-target-$type.gguf" -md "$TMP/$name-head-$type.gguf" \
        --spec-type $spec_type --draft-max $draft_max --prefill-first -n 48 -t 1 "$prompt" >"$peer.txt" 2>"$peer.err" ||
        { bad "spec-peer $spec_type ($name, $type, prompt $i): $(tail -3 "$peer.err")"; continue; }
      if [ $type = f16 ]; then
        "$BIN" generate --model "$TARGET" --weights float16 --threads 1 -n 48 -p "$prompt" --trace-drafts \
          -s $strategy -o head="$head" "${opts[@]}" >"$TMP/$name-ours-$i.txt" 2>"$TMP/$name-ours-$i.err" ||
          { bad "draftlab $strategy (prompt $i): $(tail -3 "$TMP/$name-ours-$i.err")"; continue; }
        python3 "$(dirname "$0")/same_drafts.py" "$peer.err" "$TMP/$name-ours-$i.err" "$peer.txt" \
          "$TMP/$name-ours-$i.txt" >"$TMP/same.txt" &&
          ok "llama.cpp $spec_type (f16 export) drafts as draftlab's $name, prompt $i ($(tail -1 "$TMP/same.txt"))" ||
          bad "llama.cpp $spec_type and draftlab's $name differ, prompt $i: $(tail -4 "$TMP/same.txt")"
      else
        "$SPEC" -m "$TMP/peer-target-$type.gguf" --spec-type none --prefill-first -n 48 -t 1 "$prompt" \
          >"$TMP/peer-plain-$i.txt" 2>/dev/null
        accepted=$(sed -n 's/^RESULT .* accepted=\([0-9]*\).*/\1/p' "$peer.txt")
        if [ "$(grep -v '^\[spec-peer\]\|^RESULT' "$peer.txt")" = \
             "$(grep -v '^\[spec-peer\]\|^RESULT' "$TMP/peer-plain-$i.txt")" ] && [ "${accepted:-0}" -gt 0 ]; then
          ok "llama.cpp $spec_type with the q8_0 export ($name): its plain text, $accepted drafts accepted (prompt $i)"
        else
          bad "llama.cpp $spec_type (q8_0 export, $name, prompt $i): text differs from its plain decoding or nothing accepted"
        fi
      fi
    done
  done
}
if [ -x "$SPEC" ]; then
  TARGET=$SRC/data/models/ts-target
  peer_drafts eagle3 "$SRC/data/models/ts-target-eagle3-head" draft-eagle3 8 eagle3 top_k=1 depth=8
  peer_drafts dflash "$SRC/data/models/ts-target-dflash-head" draft-dflash 15 dflash
  peer_drafts dflash8 "$SRC/data/models/ts-target-dflash-head" draft-dflash 7 dflash block_size=8
  # --quant-dot int8 against llama.cpp's own q8_0 / q4_0 arithmetic (ggml quantizes the activations to Q8_0 as
  # draftlab does): the same greedy ids on ts-target and ts-moe, but for near-ties in draftlab's own logits
  # (int8_vs_llama_cpp.py; the Python module computes them).
  MOE=$SRC/data/models/ts-moe
  PACKAGE=$(dirname "$BIN")/python
  if [ -d "$PACKAGE/draftlab" ] && [ -n "${DRAFTLAB_PYTHON:-}" ]; then
    ggufs=()
    for model in "$TARGET" "$MOE"; do
      for type in q8_0 q4_0; do
        out="$TMP/int8-$(basename "$model")-$type.gguf"
        "$BIN" export-gguf --model "$model" --out "$out" --type $type 2>/dev/null && ggufs+=("$out")
      done
    done
    mapfile -t prompts < <(sed -n "s/^    --prompt \"\(.*\)\" \\\\$/\1/p" "$SRC/README.md")
    "$DRAFTLAB_PYTHON" "$(dirname "$0")/int8_vs_llama_cpp.py" "$BIN" "$SPEC" "$PACKAGE" 48 "${ggufs[@]}" -- "${prompts[@]}" \
      "once upon a time" "the little dog" "tom and his sister went to the park" >"$TMP/int8.txt" 2>&1 &&
      ok "--quant-dot int8 gives llama.cpp's greedy ids on q8_0 / q4_0 ts-target and ts-moe ($(tail -1 "$TMP/int8.txt"))" ||
      bad "--quant-dot int8 and llama.cpp differ: $(grep -v '^same' "$TMP/int8.txt" | tail -6)"
  else
    skip_part "the Python module is not built ($PACKAGE): no int8 comparison with llama.cpp"
  fi
else
  msg="llama.cpp 2026 peer not built ($SPEC; bash \$DRAFTLAB_SHARED/peers/build_llama_cpp_2026.sh /tmp/llama2026)"
  if [ "${DRAFTLAB_REQUIRE_PEER:-0}" = 1 ]; then bad "$msg, but DRAFTLAB_REQUIRE_PEER=1"; else skip_part "$msg"; fi
fi

# 5. Bad input: exit 1 with a message naming the problem, and no output (nor temporary) file.
expect_error() {  # name, expected-substring, output-file, command...
  local name=$1 want=$2 out=$3
  shift 3
  "$@" >"$TMP/o" 2>"$TMP/e"
  local code=$?
  if [ $code != 1 ] && [ $code != 2 ]; then
    bad "$name: exit code $code (want 1 or 2): $(tail -3 "$TMP/e")"
  elif ! grep -qF -- "$want" "$TMP/e"; then
    bad "$name: message lacks '$want': $(cat "$TMP/e")"
  elif ls "$out"* >/dev/null 2>&1; then
    bad "$name: left $(ls "$out"*) behind"
  else
    ok "$name"
  fi
}
expect_error "bad --type" "--type" "$TMP/bad-type.gguf" \
  "$BIN" export-gguf --model "$TINY" --out "$TMP/bad-type.gguf" --type q5_1
expect_error "llama2.c model needs --tokenizer" "--tokenizer" "$TMP/no-tok.gguf" \
  "$BIN" export-gguf --model "$TMP/model.bin" --out "$TMP/no-tok.gguf"
expect_error "missing model" "no/such/model" "$TMP/missing.gguf" \
  "$BIN" export-gguf --model "$TMP/no/such/model" --tokenizer "$TINY/tokenizer.json" --out "$TMP/missing.gguf"
expect_error "unwritable output" "$TMP/no/dir/out.gguf" "$TMP/no/dir/out.gguf" \
  "$BIN" export-gguf --model "$TINY" --out "$TMP/no/dir/out.gguf"
expect_error "an EAGLE-1/2 head has no llama.cpp architecture" "llama.cpp has no GGUF architecture for this family (EAGLE head" "$TMP/eagle2.gguf" \
  "$BIN" export-gguf --model "$SRC/data/models/ts-target" --head "$SRC/data/models/ts-target-eagle-head" \
  --out "$TMP/eagle2.gguf"
# An EAGLE-3.1 head (here the committed EAGLE-3 head with "norm_output": true): llama.cpp's eagle3 cannot run it.
cp -r "$SRC/data/models/ts-target-eagle3-head" "$TMP/eagle31-head"
python3 -c "import json, sys; p = sys.argv[1]; c = json.load(open(p)); c['norm_output'] = True; json.dump(c, open(p, 'w'))" \
  "$TMP/eagle31-head/config.json"
expect_error "an EAGLE-3.1 head has no llama.cpp architecture" "an EAGLE-3.1 head (fc_norm / norm_output)" "$TMP/eagle31.gguf" \
  "$BIN" export-gguf --model "$SRC/data/models/ts-target" --head "$TMP/eagle31-head" --out "$TMP/eagle31.gguf"
if [ -f "$TMP/tiny-default.gguf" ]; then
  head -c 30000 "$TMP/tiny-default.gguf" >"$TMP/cut.gguf"
  expect_error "truncated .gguf" "cut.gguf" "$TMP/cut.gguf.none" \
    "$BIN" generate --model "$TMP/cut.gguf" --prompt hi
fi

finish
