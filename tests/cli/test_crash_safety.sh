#!/usr/bin/env bash
# Crash safety of what `draftlab exp`, `train-lm` and `train-head` write. Each is killed with SIGKILL again and
# again: at fixed delays after the start, and the moment a given temporary file appears (so inside that write,
# when the kill is faster than the write). After every kill: each file under a final name is whole (safetensors
# sizes, JSON, every HDF5 dataset read: crash_safety.py check), a results file killed inside its overwrite is still
# the earlier file byte for byte, a training state never goes back to an earlier step, and anything else left is a
# temporary named after its file (NAME.tmp.PID). Then the same command (training: --resume when a
# training state is there) runs to the end: `draftlab table` reads the results file; the training log reaches the
# last step; the model is byte for byte that of an uninterrupted run and loads in `draftlab generate`; no
# temporary is left. A kill can land anywhere, before anything is written included: what is asserted holds at
# every kill point. Whether a kill lands inside a write depends on scheduling; the counts are printed.
#   usage: test_crash_safety.sh DRAFTLAB_BINARY SHARED_DIR SOURCE_DIR
set -u
BIN=$1
export DRAFTLAB_SHARED=${DRAFTLAB_SHARED:-$2}
SRC=$3
PY=/usr/bin/python3
HELPER=$SRC/tests/cli/crash_safety.py
source "$(dirname "$0")/../test_lib.sh"

MODEL=$SRC/data/models/ts-tiny
HEAD=$SRC/data/models/ts-tiny-eagle-head
CORPUS=$DRAFTLAB_SHARED/data/tinystories/tinystories.txt
[ -f "$DRAFTLAB_SHARED/data/bench/mt_bench/question.jsonl" ] || skip_all "$DRAFTLAB_SHARED/data/bench missing (set DRAFTLAB_SHARED)"
[ -f "$CORPUS" ] || skip_all "$CORPUS missing (set DRAFTLAB_SHARED)"
$PY -c 'import h5py' 2>/dev/null || skip_all "needs /usr/bin/python3 with h5py"
head -c 200000 "$CORPUS" >"$TMP/small.txt"

# launch TRIGGER OFFSET COMMAND...: runs COMMAND, SIGKILLed OFFSET seconds after TRIGGER: 'start', 'never', or the
# moment a file is created or opened (@PID@ in its name: the command's process id); see crash_safety.py. Sets pid
# and rc (137: killed; 0: the command had ended first).
launch() {
  rm -f "$TMP/pid"
  $PY "$HELPER" launch "$1" "$2" "$TMP/pid" -- "${@:3}" >"$TMP/run.out" 2>"$TMP/run.err"
  rc=$?
  pid=$(cat "$TMP/pid" 2>/dev/null)
}

# killed_ok NAME: the last launch was killed or ended well (any other exit is a failure of the command itself).
killed_ok() {
  case $rc in
    137) return 0 ;;
    0) echo "  ($1: ended before the kill)"; return 0 ;;
    *) bad "$1: exit $rc: $(tail -3 "$TMP/run.err")"; return 1 ;;
  esac
}

# check_folder NAME DIR FINAL_NAMES: every file under a final name is whole; anything else is a temporary of one
# of FINAL_NAMES (a space-separated list). Leaves the checker's output in $TMP/check.
check_folder() {
  local name=$1 dir=$2 finals=" $3 " f base
  $PY "$HELPER" check "$dir" >"$TMP/check" 2>&1 && ok "$name: every file whole" || bad "$name: $(grep -v '^tmp\|^step' "$TMP/check")"
  for f in "$dir"/*; do
    [ -e "$f" ] || continue
    base=$(basename "$f")
    case $finals in *" $base "*) continue ;; esac
    base=$(echo "$base" | sed -E 's/\.tmp(\.[0-9]+)?$//')
    case $finals in
      *" $base "*) ;;  # a temporary named after its file
      *) bad "$name: unexpected file $(basename "$f")" ;;
    esac
  done
}

# ---------------------------------------------------------------------------------------------------------------
# 1. exp: the results file appears whole or not at all, an existing one survives a killed overwrite.
D=$TMP/exp
mkdir -p "$D"
OUT=$D/speed.h5
EXP=("$BIN" exp speed --model "$MODEL" --head "$HEAD" --questions 1 -n 8 --repeats 1 --warmup 0 --threads 1 -q
  --out "$OUT")
inside=0
for delay in 0.5 1.5; do
  launch start $delay "${EXP[@]}"
  killed_ok "exp killed after ${delay}s" && check_folder "exp killed after ${delay}s" "$D" "speed.h5 speed.speculation_profile.json"
done
# The moment the temporary appears, then later and later until a kill comes after the rename (at last no kill).
# A loaded machine can miss the write with every kill: then the series again (3 rounds at most), so the checks
# below see a kill inside the write rather than skip.
for round in 1 2 3; do
  [ $inside -gt 0 ] && break
  rm -f "$OUT"
  for offset in 0 0.05 0.15 0.4 1 none; do
    [ -e "$OUT" ] && break
    label="exp killed ${offset}s into the write (round $round)"
    if [ $offset = none ]; then
      label="exp not killed (round $round)"
      launch never 0 "${EXP[@]}"
    else
      launch "$OUT.tmp.@PID@" $offset "${EXP[@]}"
    fi
    killed_ok "$label" || continue
    [ -e "$OUT.tmp.$pid" ] && [ ! -e "$OUT" ] && inside=$((inside + 1))
    check_folder "$label" "$D" "speed.h5 speed.speculation_profile.json"
  done
done
[ -e "$OUT" ] && ok "exp: a run got past the write" || bad "exp: no run got past the write"
# A killed overwrite: the file under the name is still the earlier one, byte for byte.
if [ -e "$OUT" ]; then
  cp "$OUT" "$TMP/before.h5"
  launch "$OUT.tmp.@PID@" 0 "${EXP[@]}"
  if killed_ok "exp killed overwriting"; then
    [ $rc = 137 ] && [ -e "$OUT.tmp.$pid" ] && inside=$((inside + 1))
    check_folder "exp killed overwriting" "$D" "speed.h5 speed.speculation_profile.json"
    if [ $rc = 137 ] && [ -e "$OUT.tmp.$pid" ]; then  # killed inside the write: the old file must be intact
      cmp -s "$OUT" "$TMP/before.h5" && ok "exp killed overwriting: the earlier file intact" \
        || bad "exp killed overwriting: $OUT changed"
    fi
  fi
fi
echo "  (exp: $inside kills landed inside the write; left by killed runs: $(ls "$D" | grep -c '\.tmp'))"
# Without a kill inside the write the atomicity checks above saw nothing: a skip, not a pass.
[ $inside -gt 0 ] || skip_part "exp: no kill landed inside the results file's write"
launch never 0 "${EXP[@]}"
[ $rc = 0 ] && ok "exp: the rerun completes" || bad "exp rerun: exit $rc: $(tail -3 "$TMP/run.err")"
"$BIN" table "$OUT" --format text >"$TMP/table" 2>&1 && grep -q eagle2 "$TMP/table" \
  && ok "exp: draftlab table reads the rerun's file" || bad "exp: table: $(head -c 600 "$TMP/table")"
[ -s "$D/speed.speculation_profile.json" ] && ok "exp: the speculation profile beside the rerun's file" \
  || bad "exp: no speculation profile beside $OUT"
left=$(ls "$D" | grep -v '^speed\.h5$' | grep -v '^speed\.speculation_profile\.json$')
[ -z "$left" ] && ok "exp: no temporary left after the rerun" || bad "exp: left after the rerun: $left"
echo "  (${SECONDS}s)"

# ---------------------------------------------------------------------------------------------------------------
# 2. Training: kill, check, resume (or start again when no state was written), ..., then run to the end.
#   train_with_kills NAME DIR FINALS -- TRIGGER:OFFSET... -- TRAIN_COMMAND...
#   FINALS: the folder's file names; TRIGGER:OFFSET as launch takes them, a file relative to DIR.
train_with_kills() {
  local name=$1 dir=$2 finals=$3
  shift 4
  local kills=()
  while [ "$1" != -- ]; do kills+=("$1"); shift; done
  shift
  local prev=0 step k resume trigger offset inside=0 round
  # A loaded machine can finish a small write before the kill lands: then the series again from scratch (3 rounds at
  # most), so a kill inside a write is seen rather than skipped.
  for round in 1 2 3; do
    [ $round = 1 ] || { echo "  ($name: no kill inside a write yet: round $round)"; rm -rf "$dir"; prev=0; }
    mkdir -p "$dir"
    for k in "${kills[@]}" final; do
      resume=()
      [ -e "$dir/training_state.safetensors" ] && resume=(--resume)
      if [ "$k" = final ]; then
        launch never 0 "$@" --out "$dir" "${resume[@]}"
        [ $rc = 0 ] && ok "$name: the last run (${resume[*]:-from scratch}) completes" \
          || bad "$name: the last run: exit $rc: $(tail -3 "$TMP/run.err")"
      else
        trigger=${k%:*}
        offset=${k##*:}
        [ "$trigger" = start ] || trigger="$dir/$trigger"
        launch "$trigger" "$offset" "$@" --out "$dir" "${resume[@]}"
        killed_ok "$name killed at $k ${resume[*]}" || continue
        [ -n "$(find "$dir" -name '*.tmp*' -newer "$TMP/pid")" ] && inside=$((inside + 1))
      fi
      check_folder "$name after $k" "$dir" "$finals"
      step=$(sed -n 's/^step training_state.safetensors //p' "$TMP/check")
      if [ -n "$step" ]; then
        [ "$step" -ge "$prev" ] && ok "$name after $k: training state at step $step (was $prev)" \
          || bad "$name after $k: training state went back from step $prev to $step"
        prev=$step
      fi
    done
    [ $inside -gt 0 ] && break
  done
  echo "  ($name: $inside kills left a temporary; ${SECONDS}s)"
  [ $inside -gt 0 ] || skip_part "$name: no kill landed inside a write"
}

# finished NAME DIR REFERENCE STEPS [LOAD...]: the folder of a run that ended: the log at the last step, the model
# (weights and config.json) equal to an uninterrupted run's, no temporary, the model loads with LOAD when given.
finished() {
  local name=$1 dir=$2 ref=$3 steps=$4
  shift 4
  $PY "$HELPER" log "$dir/training_log.h5" >"$TMP/log" 2>&1
  grep -qx "last_step $steps" "$TMP/log" && grep -qx "last_eval $steps" "$TMP/log" \
    && ok "$name: the training log reaches step $steps" || bad "$name: training log: $(cat "$TMP/log")"
  cmp -s "$dir/model.safetensors" "$ref/model.safetensors" && cmp -s "$dir/config.json" "$ref/config.json" \
    && ok "$name: the model equal to the uninterrupted run's" || bad "$name: the model differs from the uninterrupted run's"
  left=$(ls "$dir" | grep '\.tmp')
  [ -z "$left" ] && ok "$name: no temporary left" || bad "$name: left: $left"
  [ $# = 0 ] || { "$@" >"$TMP/gen" 2>&1 && ok "$name: the model loads and generates" || bad "$name: load: $(tail -3 "$TMP/gen")"; }
}

# 2a. train-lm, a checkpoint every step: killed at the start, in the first save, somewhere later, then in each file
# of a save after a complete checkpoint; then with one checkpoint at the end only, killed in its state and its log.
KILLS=(start:0.3 model.safetensors.tmp.@PID@:0 training_state.safetensors.tmp.@PID@:0.3 model.safetensors.tmp.@PID@:0
  config.json.tmp.@PID@:0 training_log.h5.tmp.@PID@:0 training_state.safetensors.tmp.@PID@:0)
LM=("$BIN" train-lm --corpus "$TMP/small.txt" --tokenizer "$MODEL/tokenizer.json" --dim 64 --layers 2 --steps 30
  --batch 4 --context 64 --eval-every 10 --eval-windows 8 --threads 1 -q)
LM_FILES="config.json model.safetensors tokenizer.json training_log.h5 training_state.safetensors"
"${LM[@]}" --save-every 1 --out "$TMP/lm_ref" >/dev/null 2>"$TMP/err" || bad "train-lm reference run: $(tail -3 "$TMP/err")"
GEN_LM=("$BIN" generate --threads 1 -p "once upon a time" -n 4 --model)
train_with_kills train-lm "$TMP/lm" "$LM_FILES" -- "${KILLS[@]}" -- "${LM[@]}" --save-every 1
finished train-lm "$TMP/lm" "$TMP/lm_ref" 30 "${GEN_LM[@]}" "$TMP/lm"
train_with_kills "train-lm --save-every 0" "$TMP/lm0" "$LM_FILES" -- \
  training_state.safetensors.tmp.@PID@:0 training_log.h5.tmp.@PID@:0 -- "${LM[@]}"
finished "train-lm --save-every 0" "$TMP/lm0" "$TMP/lm_ref" 30

# 2b. train-head (EAGLE head on ts-tiny), the same.
TH=("$BIN" train-head -m "$MODEL" --corpus "$TMP/small.txt" --steps 20 --batch 4 --context 32 --eval-windows 8
  --eval-every 10 --threads 1 -q)
TH_FILES="config.json model.safetensors training_log.h5 training_state.safetensors"
"${TH[@]}" --save-every 1 --out "$TMP/head_ref" >/dev/null 2>"$TMP/err" || bad "train-head reference run: $(tail -3 "$TMP/err")"
GEN_HEAD=("$BIN" generate --threads 1 -m "$MODEL" -p "once upon a time" -n 4 -s eagle-chain -o)
train_with_kills train-head "$TMP/head" "$TH_FILES" -- "${KILLS[@]}" -- "${TH[@]}" --save-every 1
finished train-head "$TMP/head" "$TMP/head_ref" 20 "${GEN_HEAD[@]}" "head=$TMP/head"
train_with_kills "train-head --save-every 0" "$TMP/head0" "$TH_FILES" -- \
  training_state.safetensors.tmp.@PID@:0 training_log.h5.tmp.@PID@:0 -- "${TH[@]}"
finished "train-head --save-every 0" "$TMP/head0" "$TMP/head_ref" 20

finish
