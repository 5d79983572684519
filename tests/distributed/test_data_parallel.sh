#!/usr/bin/env bash
# Data-parallel training on loopback (Gloo): N ranks equal one process with the same global batch.
#   - train-lm and train-head (EAGLE with whole-sequence masks and input noise, the official recipe, windows with a
#     feature cache, Medusa, Hydra, EAGLE-3): 2 ranks (`draftlab launch`) against 1, loss curves within a relative
#     1e-5 and every tensor (parameters, Adam moments) within 1e-4 of its own scale (compare_training.py; seen:
#     5e-6); 3 ranks on a
#     batch of 4 (uneven shards); 2 ranks with 1/64 MiB buckets (>= 3 per step, the embedding's gradient larger than
#     a bucket); resumed with another world size (2 then 1, 1 then 2); a feature cache built by 2
#     ranks equal to one process's, dataset for dataset; gen-head-data on 2 ranks byte for byte one process's file.
#   - gradient accumulation (--accumulate): micro-batches equal one pass, for train-lm and every train-head variant
#     above (one process), and 2 ranks x 2 micro-batches equal 1 rank.
#   - the comparison can fail: another seed is caught.
#   - launchers: `draftlab launch`, Open MPI's mpirun and torchrun (each when installed), Slurm's variables as
#     srun sets them; a Slurm batch shell outside srun runs as one process.
#   - failures (acting once rank 0 says the group stands, not after a fixed sleep): a lone rank 0 (rendezvous never
#     completes) and a stopped rank end with an error within
#     --dist-timeout (+ 3 s); a killed rank ends the other at once (within 5 s), with no checkpoint written; rank 0
#     failing to write its checkpoint ends rank 1; `draftlab launch` ends every rank when one is killed or when it
#     gets SIGTERM itself.
#   usage: test_data_parallel.sh DRAFTLAB_BINARY SHARED_DIR SOURCE_DIR
set -u
BIN=$1
export DRAFTLAB_SHARED=${DRAFTLAB_SHARED:-$2}
SRC=$3
PY=/usr/bin/python3
COMPARE=$SRC/tests/distributed/compare_training.py
source "$(dirname "$0")/../test_lib.sh"
MODEL=$SRC/data/models/ts-tiny
CORPUS=$DRAFTLAB_SHARED/data/tinystories/tinystories.txt
[ -f "$CORPUS" ] || skip_all "$CORPUS missing (set DRAFTLAB_SHARED)"
$PY -c 'import h5py, numpy' 2>/dev/null || skip_all "needs /usr/bin/python3 with h5py and numpy"
head -c 200000 "$CORPUS" >"$TMP/small.txt"
unset RANK WORLD_SIZE LOCAL_RANK MASTER_ADDR MASTER_PORT OMPI_COMM_WORLD_RANK SLURM_PROCID SLURM_STEP_ID

LM_ARGS=(train-lm --corpus "$TMP/small.txt" --tokenizer "$MODEL/tokenizer.json" --dim 64 --layers 2 --context 64
  --eval-windows 8 --threads 1 -q)
LM=("${LM_ARGS[@]}" --steps 20 --batch 4 --eval-every 10)
HEAD_ARGS=(train-head -m "$MODEL" --corpus "$TMP/small.txt" --batch 4 --context 32 --eval-windows 8 --threads 1 -q)
HEAD=("${HEAD_ARGS[@]}" --steps 20 --eval-every 10)

# same NAME DIR_A DIR_B: the two runs are one run (compare_training.py's tolerances).
same() {
  if $PY "$COMPARE" "$2" "$3" >"$TMP/cmp" 2>&1; then ok "$1: $(grep -o 'largest [a-z]* difference [0-9.e-]*' "$TMP/cmp" | sort -t' ' -k4 -g | tail -1)"
  else bad "$1: $(cat "$TMP/cmp")"; fi
}
# run NAME COMMAND...: the command must succeed.
run() {
  local name=$1
  shift
  "$@" >"$TMP/out" 2>"$TMP/err" || bad "$name: exit $?: $(grep -v '^[EWI][0-9]' "$TMP/err" | tail -3)"
}

# 1. train-lm: 2 ranks and 3 ranks (shards of 1, 1 and 2 rows) against 1.
run "train-lm, 1 rank" "$BIN" "${LM[@]}" --out "$TMP/lm1"
run "train-lm, 2 ranks" "$BIN" launch --nproc 2 "${LM[@]}" --out "$TMP/lm2"
same "train-lm: 2 ranks = 1 rank" "$TMP/lm1" "$TMP/lm2"
run "train-lm, 3 ranks" "$BIN" launch --nproc 3 "${LM[@]}" --out "$TMP/lm3"
same "train-lm: 3 ranks on a batch of 4 = 1 rank" "$TMP/lm1" "$TMP/lm3"
# Many buckets: 1/64 MiB buckets make the all-reduce split the gradients into several messages, one of them a
# gradient larger than a bucket (the token embedding, 1024 x 64 floats = 256 KiB), which travels alone.
run "train-lm, 2 ranks, 16 KiB buckets" "$BIN" launch --nproc 2 "${LM[@]}" --dist-bucket-mb 0.015625 --out "$TMP/lm2b"
buckets=$(grep -o 'in [0-9]* bucket(s)' "$TMP/err" | grep -o '[0-9]*' | head -1)
[ "${buckets:-0}" -ge 3 ] && ok "train-lm: the gradients went in $buckets buckets per step" \
  || bad "train-lm: expected >= 3 buckets per step, got '${buckets}': $(grep 'bucket' "$TMP/err")"
same "train-lm: 2 ranks in $buckets buckets = 1 rank" "$TMP/lm1" "$TMP/lm2b"
expect_error "train-lm: --dist-bucket-mb 0" "--dist-bucket-mb: expected a positive number of MiB" \
  "$BIN" "${LM[@]}" --dist-bucket-mb 0 --out "$TMP/never"
run "train-lm, seed 1" "$BIN" "${LM[@]}" --seed 1 --out "$TMP/lm_seed1"
$PY "$COMPARE" "$TMP/lm1" "$TMP/lm_seed1" >/dev/null 2>&1 && bad "the comparison passes another seed's run" \
  || ok "the comparison catches another seed's run"
[ "$(grep -c 'parameters;' "$TMP/err")" -le 1 ] && ok "train-lm: one summary (rank 0's)" || bad "summaries: $(cat "$TMP/err")"
run "train-lm, 4 micro-batches" "$BIN" "${LM[@]}" --accumulate 4 --out "$TMP/lm_acc4"
same "train-lm: 4 micro-batches = 1 pass" "$TMP/lm1" "$TMP/lm_acc4"

# 2. train-head, every family and the data paths.
for variant in "eagle" "eagle --recipe official" "eagle --samples windows --feature-cache FC" "medusa" "hydra" "eagle3"; do
  set -- $variant
  kind=$1
  shift
  name=$(echo "$variant" | tr -c 'a-z0-9\n' '_')
  run "train-head $variant, 1 rank" "$BIN" "${HEAD[@]}" --kind "$kind" "${@//FC/$TMP/$name.1.h5}" --out "$TMP/$name.1"
  run "train-head $variant, 2 ranks" "$BIN" launch --nproc 2 "${HEAD[@]}" --kind "$kind" "${@//FC/$TMP/$name.2.h5}" \
    --out "$TMP/$name.2"
  same "train-head $variant: 2 ranks = 1 rank" "$TMP/$name.1" "$TMP/$name.2"
  # Micro-batches (the feature cache variant reads the cache the 1-rank run built).
  run "train-head $variant, 2 micro-batches" "$BIN" "${HEAD[@]}" --kind "$kind" "${@//FC/$TMP/$name.1.h5}" \
    --accumulate 2 --out "$TMP/$name.acc2"
  same "train-head $variant: 2 micro-batches = 1 pass" "$TMP/$name.1" "$TMP/$name.acc2"
done
run "train-head, 2 ranks x 2 micro-batches" "$BIN" launch --nproc 2 "${HEAD[@]}" --accumulate 2 \
  --out "$TMP/eagle.2x2"
same "train-head eagle: 2 ranks x 2 micro-batches = 1 rank" "$TMP/eagle.1" "$TMP/eagle.2x2"
cache=$(echo "eagle --samples windows --feature-cache FC" | tr -c 'a-z0-9\n' '_')
$PY - "$TMP/$cache.1.h5" "$TMP/$cache.2.h5" <<'PY' >"$TMP/cmp" 2>&1 && ok "a feature cache built by 2 ranks = 1 rank's" || bad "feature caches: $(cat "$TMP/cmp")"
import sys, h5py, numpy as np
a, b = h5py.File(sys.argv[1]), h5py.File(sys.argv[2])
assert sorted(a) == sorted(b), (sorted(a), sorted(b))
for k in a: assert np.array_equal(a[k][()], b[k][()]), k
assert {k: a.attrs[k] for k in a.attrs if k != "date"} == {k: b.attrs[k] for k in b.attrs if k != "date"}
PY

# 3. Resumed with another world size.
run "resume: 2 ranks to step 10" "$BIN" launch --nproc 2 "${HEAD[@]}" --stop-at 10 --out "$TMP/r21"
run "resume: 1 rank to the end" "$BIN" "${HEAD[@]}" --resume --out "$TMP/r21"
same "train-head: 2 ranks then 1 = 1 rank" "$TMP/eagle.1" "$TMP/r21"
run "resume: 1 rank to step 10" "$BIN" "${LM[@]}" --stop-at 10 --out "$TMP/r12"
run "resume: 2 ranks to the end" "$BIN" launch --nproc 2 "${LM[@]}" --resume --out "$TMP/r12"
same "train-lm: 1 rank then 2 = 1 rank" "$TMP/lm1" "$TMP/r12"

# 4. gen-head-data: the same file.
GEN=(gen-head-data -m "$MODEL" --corpus "$TMP/small.txt" --max-prompts 7 -n 12 --temperature 0.8 --seed 3 --threads 1 --quiet)
run "gen-head-data, 1 rank" "$BIN" "${GEN[@]}" --out "$TMP/gen1.tok"
run "gen-head-data, 2 ranks" "$BIN" launch --nproc 2 "${GEN[@]}" --batch 2 --out "$TMP/gen2.tok"
cmp -s "$TMP/gen1.tok" "$TMP/gen2.tok" && ok "gen-head-data: 2 ranks write 1 rank's file" || bad "gen-head-data files differ"

# 5. Launchers. Slurm's srun as its tasks see it (a real srun: scripts/slurm/local_cluster.sh).
port() { $PY -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'; }
P=$(port)
for r in 0 1; do
  env SLURM_PROCID=$r SLURM_NTASKS=2 SLURM_LOCALID=$r SLURM_STEP_ID=0 SLURM_JOB_ID=7 SLURM_JOB_NODELIST=localhost \
    MASTER_PORT="$P" "$BIN" "${LM[@]}" --out "$TMP/slurm" >"$TMP/slurm$r.out" 2>&1 &
done
wait
grep -q "data parallel: 2 ranks (slurm" "$TMP/slurm0.out" && same "Slurm's variables: 2 ranks = 1 rank" "$TMP/lm1" "$TMP/slurm" \
  || bad "Slurm's variables: $(tail -3 "$TMP/slurm0.out")"
env SLURM_PROCID=0 SLURM_NTASKS=2 SLURM_JOB_NODELIST=localhost timeout 60 "$BIN" "${LM[@]}" --out "$TMP/batch_shell" \
  >/dev/null 2>"$TMP/err" && same "a Slurm batch shell without srun runs as one process" "$TMP/lm1" "$TMP/batch_shell" \
  || bad "Slurm batch shell: $(tail -3 "$TMP/err")"
if command -v mpirun >/dev/null; then
  run "mpirun -n 2" mpirun --allow-run-as-root --oversubscribe -n 2 -x MASTER_PORT="$(port)" "$BIN" "${LM[@]}" --out "$TMP/mpi"
  grep -q "data parallel: 2 ranks (openmpi" "$TMP/err" && same "mpirun: 2 ranks = 1 rank" "$TMP/lm1" "$TMP/mpi" \
    || bad "mpirun: $(tail -3 "$TMP/err")"
else
  skip_part "mpirun: not installed (openmpi-bin)"
fi
if command -v torchrun >/dev/null; then
  # Debian 12's torchrun (torch 1.13 on Python 3.11) fails on its own default --redirects/--tee 0: give a map.
  run "torchrun" torchrun --nproc_per_node 2 --master_port "$(port)" --redirects 0:2,1:2 --tee 0:2,1:2 --no_python \
    "$BIN" "${LM[@]}" --out "$TMP/torchrun"
  grep -q "data parallel: 2 ranks (torchrun" "$TMP/err" && same "torchrun: 2 ranks = 1 rank" "$TMP/lm1" "$TMP/torchrun" \
    || bad "torchrun: $(tail -3 "$TMP/err")"
else
  skip_part "torchrun: not installed (python3-torch)"
fi

# 6. Failures end every rank with an error, within the timeout.
LONG=("${HEAD_ARGS[@]}" --steps 100000 --eval-every 0 --dist-timeout 5)
elapsed() { $PY -c "import time; print(f'{time.time() - $1:.1f}')"; }
now() { $PY -c 'import time; print(time.time())'; }
t=$(now)
RANK=0 WORLD_SIZE=2 MASTER_ADDR=127.0.0.1 MASTER_PORT=$(port) "$BIN" "${LONG[@]}" --out "$TMP/alone" >/dev/null 2>"$TMP/err"
rc=$? s=$(elapsed "$t")
[ $rc = 1 ] && grep -q "not every rank arrived within 5 s" "$TMP/err" && $PY -c "assert $s < 8" \
  && ok "a rendezvous that never completes: exit 1 after $s s (timeout 5 s)" || bad "lone rank: exit $rc after $s s: $(tail -2 "$TMP/err")"
# wait_for_line FILE PATTERN: until FILE has a line matching PATTERN (60 s at most; returns 1 then). The failure
# tests act on what the ranks have done (their rendezvous line), not after a fixed sleep.
wait_for_line() {
  for _ in $(seq 600); do
    grep -q "$2" "$1" 2>/dev/null && return 0
    sleep 0.1
  done
  return 1
}
JOINED="data parallel: 2 ranks ("  # rank 0's line once the process group stands
# stop_or_kill SIGNAL LIMIT: two ranks; rank 1 gets SIGNAL once the group stands; rank 0 must exit 1 within LIMIT s.
stop_or_kill() {
  local p
  p=$(port)
  rm -rf "$TMP/failing"
  RANK=0 WORLD_SIZE=2 MASTER_ADDR=127.0.0.1 MASTER_PORT=$p "$BIN" "${LONG[@]}" --out "$TMP/failing" >/dev/null 2>"$TMP/err0" &
  local r0=$!
  RANK=1 WORLD_SIZE=2 MASTER_ADDR=127.0.0.1 MASTER_PORT=$p "$BIN" "${LONG[@]}" --out "$TMP/failing" >/dev/null 2>&1 &
  local r1=$!
  wait_for_line "$TMP/err0" "$JOINED" || bad "rank 1 $1: the ranks never joined: $(tail -2 "$TMP/err0")"
  kill -"$1" $r1
  t=$(now)
  ( sleep 30; kill -9 $r0 2>/dev/null ) &
  local watchdog=$!
  wait $r0 2>/dev/null
  rc=$? s=$(elapsed "$t")
  { kill $watchdog; wait $watchdog; } 2>/dev/null
  { kill -9 $r1; wait $r1; } 2>/dev/null
  [ $rc = 1 ] && grep -qE "data parallel: rank 0 of 2: (all-reduce|broadcast|gather|barrier).* failed" "$TMP/err0" && $PY -c "assert $s < $2" \
    && ok "rank 1 $1: rank 0 exits 1 after $s s (limit $2 s)" || bad "rank 1 $1: rank 0 exit $rc after $s s: $(tail -2 "$TMP/err0")"
  [ -z "$(ls "$TMP/failing" 2>/dev/null)" ] && ok "rank 1 $1: no checkpoint written" || bad "rank 1 $1: left $(ls "$TMP/failing")"
}
stop_or_kill KILL 5
stop_or_kill STOP 8
# Rank 0 cannot write its checkpoint (training_log.h5 is a folder): both ranks exit 1, rank 1 saying why.
P=$(port)
mkdir -p "$TMP/unwritable/training_log.h5"
for r in 0 1; do
  RANK=$r WORLD_SIZE=2 MASTER_ADDR=127.0.0.1 MASTER_PORT=$P "$BIN" "${LM_ARGS[@]}" --steps 2 --batch 4 --eval-every 0 \
    --dist-timeout 20 --out "$TMP/unwritable" >/dev/null 2>"$TMP/unwritable$r.err" &
  ranks[$r]=$!
done
# Each rank by its pid: a bare `wait -n` may report an earlier background job (a watchdog) instead.
wait "${ranks[0]}"; rc_a=$?; wait "${ranks[1]}"; rc_b=$?
[ $rc_a = 1 ] && [ $rc_b = 1 ] && grep -q "rank 0 failed to write the checkpoint at step 2" "$TMP/unwritable1.err" \
  && ok "rank 0's checkpoint write fails: both ranks exit 1" \
  || bad "unwritable checkpoint: exits $rc_a $rc_b: $(tail -1 "$TMP/unwritable1.err")"
# The launcher: a rank killed ends the others and the launcher (137); a SIGTERM to it reaches every rank.
# launched_ranks: the children of the last background launcher, once both have started.
launched_ranks() {
  for _ in $(seq 100); do
    mapfile -t kids < <(pgrep -P "$launcher")
    [ ${#kids[@]} = 2 ] && return
    sleep 0.1
  done
}
for how in "kill -9 rank 1" "SIGTERM the launcher"; do
  "$BIN" launch --nproc 2 --grace 3 "${LONG[@]}" --out "$TMP/launched" >/dev/null 2>"$TMP/launch.err" &
  launcher=$!
  launched_ranks
  wait_for_line "$TMP/launch.err" "$JOINED" || bad "launch, $how: the ranks never joined: $(tail -2 "$TMP/launch.err")"
  if [ "$how" = "kill -9 rank 1" ]; then kill -9 "${kids[1]}"; else kill -TERM $launcher; fi
  t=$(now)
  ( sleep 30; kill -9 $launcher "${kids[@]}" 2>/dev/null ) &
  watchdog=$!
  wait $launcher
  rc=$? s=$(elapsed "$t")
  { kill $watchdog; wait $watchdog; } 2>/dev/null
  left=$(for k in "${kids[@]}"; do kill -0 "$k" 2>/dev/null && echo "$k"; done)
  [ $rc != 0 ] && [ -z "$left" ] && $PY -c "assert $s < 8" && ok "launch, $how: every rank ended, exit $rc after $s s" \
    || bad "launch, $how: exit $rc after $s s, ranks left: $left: $(tail -2 "$TMP/launch.err")"
done
expect_error "a batch smaller than the world" \
  "--batch: expected at least one row per part of a step (2 ranks x 1 micro-batch = 2 rows), got 1" \
  "$BIN" launch --nproc 2 "${LM_ARGS[@]}" --steps 2 --batch 1 --out "$TMP/small_batch"
expect_error "more micro-batches than rows" "(1 rank x 5 micro-batches = 5 rows), got 4" \
  "$BIN" "${LM_ARGS[@]}" --steps 2 --batch 4 --accumulate 5 --out "$TMP/small_batch"
expect_error "no micro-batch" "--accumulate: expected a positive number of micro-batches, got 0" \
  "$BIN" "${LM_ARGS[@]}" --steps 2 --batch 4 --accumulate 0 --out "$TMP/no_part"
[ ! -e "$TMP/small_batch" ] && [ ! -e "$TMP/no_part" ] && ok "refused options leave no output folder" \
  || bad "an output folder was left: $(ls -d "$TMP/small_batch" "$TMP/no_part" 2>&1)"
finish
