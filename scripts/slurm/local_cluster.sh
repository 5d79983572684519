#!/usr/bin/env bash
# A throwaway one-node Slurm on localhost, to test the scripts beside it for real: installs slurm-wlm and munge if
# missing, starts munged, slurmctld and slurmd in a temporary folder (no systemd, no cgroups, no accounting, no
# change under /etc), runs a 2-shard sweep array + merge (submit_sweep.sh) and checks the merged records equal an
# unsharded run's, runs 2-task training jobs (train.sbatch: train-lm, train-head) and checks each equals one
# process's run (tests/distributed/compare_training.py), then tears everything down, also on failure.
#   usage (root, Debian 12, from anywhere): scripts/slurm/local_cluster.sh
#   env: DRAFTLAB (binary; build/draftlab), DRAFTLAB_SHARED (../shared), REFERENCE_DIR (another train-lm run of the
#        same options to compare the 2-task one with), KEEP=1 (keep the temp folder)
# shellcheck disable=SC2016,SC2054  # single-quoted job scripts expand in the job; commas are option values
set -euo pipefail
HERE=$(cd "$(dirname "$0")" && pwd)
REPO=$(cd "$HERE/../.." && pwd)
DRAFTLAB=${DRAFTLAB:-$REPO/build/draftlab}
export DRAFTLAB_SHARED=${DRAFTLAB_SHARED:-$REPO/../shared}
PY=/usr/bin/python3  # Debian's, with python3-h5py (a pyenv or venv python may lack it)
START=$SECONDS
phase() { echo "== [$((SECONDS - START))s] $*"; }
fail() { echo "local_cluster: FAILED: $*" >&2; exit 1; }
[ "$(id -u)" = 0 ] || fail "run as root (slurmd starts jobs as any user; SlurmUser=root here)"
[ -x "$DRAFTLAB" ] || fail "$DRAFTLAB missing: build first (scripts/setup.sh) or set DRAFTLAB"

phase "a. packages"
missing=()
command -v slurmctld >/dev/null || missing+=(slurm-wlm)
command -v munged >/dev/null || missing+=(munge)
$PY -c 'import h5py' 2>/dev/null || missing+=(python3-h5py)
if [ ${#missing[@]} -gt 0 ]; then
  echo "installing ${missing[*]}"
  apt-get update -qq
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi

phase "b. cluster up"
T=$(mktemp -d /tmp/draftlab-slurm.XXXXXX)  # 0700: munged refuses key/socket folders others can write
mkdir -p "$T/munge" "$T/state" "$T/spool" "$T/logs" "$T/run"
chmod 700 "$T/munge"
pids=()
cleanup() {
  rc=$?
  set +e
  if kill -0 "${CTLD_PID:-none}" 2>/dev/null && [ -n "$(squeue -h -o %A)" ]; then
    squeue -h -o %A | xargs scancel
    for _ in $(seq 20); do [ -z "$(squeue -h -o %A 2>/dev/null)" ] && break; sleep 0.5; done
  fi
  if [ $rc -ne 0 ]; then
    # The daemons' logs (their stderr only if no log: a bad slurm.conf), then every job's output.
    for f in "$T"/munge/munged.out "$T"/logs/slurm{ctld,d}.log "$T"/logs/*.out "$T"/sweep/logs/*.out; do
      [ -f "$f" ] && [ ! -f "${f%.out}.log" ] && { echo "---- $f (last 20 lines)"; tail -n 20 "$f"; }
    done
  fi
  # Only the daemons this script started, newest first; then their children (slurmstepd) are gone too.
  for ((i = ${#pids[@]} - 1; i >= 0; i--)); do kill "${pids[i]}" 2>/dev/null; wait "${pids[i]}" 2>/dev/null; done
  if [ "${KEEP:-0}" = 1 ]; then echo "kept $T"; else rm -rf "$T"; fi
  phase "e. torn down ($([ $rc = 0 ] && echo passed || echo "FAILED, exit $rc"))"
  exit $rc
}
trap cleanup EXIT
trap 'exit 130' INT TERM

# A private munged: its own key and socket, so it neither needs nor disturbs a system munge.
dd if=/dev/urandom of="$T/munge/munge.key" bs=1024 count=1 status=none
chmod 400 "$T/munge/munge.key"
SOCK=$T/munge/munge.sock
munged -F --force --key-file="$T/munge/munge.key" --socket="$SOCK" --pid-file="$T/munge/munged.pid" \
  --log-file="$T/munge/munged.log" --seed-file="$T/munge/munged.seed" >"$T/munge/munged.out" 2>&1 &
pids+=($!)
for _ in $(seq 50); do munge -n -S "$SOCK" 2>/dev/null | unmunge -S "$SOCK" >/dev/null 2>&1 && break; sleep 0.1; done
munge -n -S "$SOCK" | unmunge -S "$SOCK" >/dev/null || fail "munged does not answer on $SOCK"

# Two free TCP ports (the defaults 6817/6818 may belong to a real Slurm on this machine).
read -r CTLD_PORT SLURMD_PORT < <($PY -c '
import socket
s = [socket.socket() for _ in range(2)]
for x in s: x.bind(("127.0.0.1", 0))
print(*(x.getsockname()[1] for x in s))')
NODE=$(hostname -s)
cat >"$T/slurm.conf" <<CONF
ClusterName=draftlab-local
SlurmctldHost=$NODE(127.0.0.1)
SlurmctldPort=$CTLD_PORT
SlurmdPort=$SLURMD_PORT
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
AuthInfo=socket=$SOCK
CredType=cred/munge
# No cgroups: containers and CI VMs often lack a writable cgroup tree.
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
JobCompType=jobcomp/none
MpiDefault=none
# CR_CPU: each CPU is schedulable, so two 1-CPU array tasks run side by side on the 2-CPU node.
SelectType=select/cons_tres
SelectTypeParameters=CR_CPU
SchedulerParameters=sched_interval=1
ReturnToService=2
# Trust the node line below whatever the VM's CPUs and memory (else a 1-CPU CI VM would leave the node invalid).
SlurmdParameters=config_overrides
StateSaveLocation=$T/state
SlurmdSpoolDir=$T/spool
SlurmctldPidFile=$T/run/slurmctld.pid
SlurmdPidFile=$T/run/slurmd.pid
SlurmctldLogFile=$T/logs/slurmctld.log
SlurmdLogFile=$T/logs/slurmd.log
PlugStackConfig=$T/plugstack.conf
NodeName=$NODE NodeAddr=127.0.0.1 CPUs=2 RealMemory=1024 State=UNKNOWN
PartitionName=local Nodes=$NODE Default=YES MaxTime=INFINITE State=UP
CONF
: >"$T/plugstack.conf"  # none of the system's SPANK plugins
export SLURM_CONF=$T/slurm.conf  # every Slurm command below (and in the jobs) reads this one
slurmctld -D -c -f "$SLURM_CONF" >"$T/logs/slurmctld.out" 2>&1 &
CTLD_PID=$!
pids+=($!)
slurmd -D -N "$NODE" -f "$SLURM_CONF" >"$T/logs/slurmd.out" 2>&1 &
pids+=($!)
for _ in $(seq 60); do
  [ "$(sinfo -h -n "$NODE" -o %t 2>/dev/null)" = idle ] && break
  for p in "${pids[@]}"; do kill -0 "$p" 2>/dev/null || fail "a daemon exited at start (pid $p)"; done
  sleep 0.5
done
[ "$(sinfo -h -n "$NODE" -o %t 2>/dev/null)" = idle ] || fail "node $NODE not idle after 30 s: $(sinfo 2>&1)"
sinfo

# wait_job ID SECONDS: until the job leaves the queue; fails unless it COMPLETED (exit 0).
wait_job() {
  local state
  for _ in $(seq $((2 * $2))); do
    state=$(scontrol show job "$1" 2>/dev/null | grep -o 'JobState=[A-Z_]*' | cut -d= -f2)
    case $state in COMPLETED) return 0 ;; FAILED | CANCELLED | TIMEOUT | NODE_FAIL | OUT_OF_MEMORY) break ;; esac
    sleep 0.5
  done
  fail "job $1 ended $state (or not within $2 s): $(scontrol show job "$1" 2>&1 | grep -E 'JobState|Reason|ExitCode')"
}

phase "c. sweep array + merge"
# The sweep of tests/cli/test_exp_cli.sh, with --ignore-eos (ts-tiny ends chat questions at once: 0 tokens compare
# nothing) and --threads 1 on both sides (float sums, so tree confidences, may differ with the thread count).
EXP=(--model "$REPO/data/models/ts-tiny" --head "$REPO/data/models/ts-tiny-eagle-head" --questions 1 -n 8
  --repeats 1 --warmup 0 --total-tokens 6,10 --depth 2 --top-k 2 --ignore-eos --threads 1 --quiet)
read -r _ MERGE < <("$HERE/submit_sweep.sh" -n 2 -o "$T/sweep" -a --cpus-per-task=1 -a --time=00:05:00 -- "${EXP[@]}")
[ -n "${MERGE:-}" ] || fail "submit_sweep.sh queued nothing"
"$DRAFTLAB" exp sweep "${EXP[@]}" --out "$T/unsharded.h5" >/dev/null  # meanwhile, the same grid in one process
wait_job "$MERGE" 120
cat "$T/sweep/logs/merge-$MERGE.out"
# Same records, timings aside: each grid point equals its unsharded run; each shard's baseline the unsharded one.
$PY - "$T/unsharded.h5" "$T/sweep/sweep.h5" <<'PY'
import json, sys, h5py, numpy as np
SKIP = {"tokens_per_second", "wall_seconds", "draft_seconds", "verify_seconds", "shard"}  # timings; the shard's name
def val(v):
    v = v.tolist() if isinstance(v, np.ndarray) else v.item() if isinstance(v, np.generic) else v
    if isinstance(v, list): return [val(x) for x in v]
    return v.decode() if isinstance(v, bytes) else v
def runs(path):
    out = {}
    with h5py.File(path, "r") as f:
        for name, g in f["runs"].items():
            rec = {k: val(v) for k, v in g.attrs.items() if k not in SKIP}
            for table in ("questions", "cycles", "nodes"):
                rec.update({f"{table}/{k}": val(d[()]) for k, d in g[table].items() if k not in SKIP})
            key = (rec.get("grid") and json.loads(rec["grid"])["index"], rec["dataset"], rec["temperature"])
            out.setdefault(key, []).append(json.dumps(rec, sort_keys=True))  # NaN -> "NaN": equal to itself
    return out
ref, merged = runs(sys.argv[1]), runs(sys.argv[2])
assert ref.keys() == merged.keys(), f"runs differ: {sorted(ref)} vs {sorted(merged)}"
for key, recs in merged.items():
    for rec in recs:
        assert rec == ref[key][0], f"run {key} differs:\n{rec}\n{ref[key][0]}"
n = sum(map(len, merged.values()))
print(f"merged sweep: {n} runs ({len(ref)} distinct) equal the unsharded run's records, timings aside")
PY

phase "d. 2-task training (sbatch + srun)"
# The launch contract draftlab reads: srun tasks get SLURM_PROCID 0..n-1 and SLURM_STEP_ID; the batch shell itself
# also has SLURM_PROCID=0 and SLURM_NTASKS=2, but no SLURM_STEP_ID: draftlab run there must not wait for a rank 1.
job=$(sbatch --parsable --ntasks=2 --cpus-per-task=1 --output="$T/logs/contract.out" --wrap 'echo "batch ${SLURM_STEP_ID-none}"
  srun --ntasks=2 --cpus-per-task=1 bash -c "echo task \$SLURM_PROCID/\$SLURM_NTASKS local \$SLURM_LOCALID step \$SLURM_STEP_ID"')
wait_job "$job" 60  # polls every 0.5 s; sbatch --wait polls every 2, 4, 8.. s
got=$(sort "$T/logs/contract.out" | tr '\n' ';')
[ "$got" = "batch none;task 0/2 local 0 step 0;task 1/2 local 1 step 0;" ] || fail "srun tasks see: $got"
head -c 200000 "$DRAFTLAB_SHARED/data/tinystories/tinystories.txt" >"$T/small.txt"
# The runs of tests/distributed/test_data_parallel.sh (train-lm, and train-head's EAGLE head on whole sequences):
# each as a 2-task job, and in one process here; compare_training.py holds them to the same tolerances.
LM=(train-lm --corpus "$T/small.txt" --tokenizer "$REPO/data/models/ts-tiny/tokenizer.json" --dim 64 --layers 2
  --context 64 --eval-windows 8 --steps 20 --batch 4 --eval-every 10 -q)
HEAD=(train-head -m "$REPO/data/models/ts-tiny" --corpus "$T/small.txt" --batch 4 --context 32 --eval-windows 8
  --steps 20 --eval-every 10 -q)
jobs=()
for name in lm head; do
  declare -n cmd=${name^^}
  jobs+=("$(sbatch --parsable --ntasks=2 --cpus-per-task=1 --time=00:10:00 --output="$T/logs/train-$name-%j.out" \
    "$HERE/train.sbatch" "${cmd[@]}" --out "$T/train-$name")")
  "$DRAFTLAB" "${cmd[@]}" --threads 1 --out "$T/one-$name" 2>/dev/null  # meanwhile, one process
done
for i in 0 1; do
  name=$([ $i = 0 ] && echo lm || echo head)
  wait_job "${jobs[i]}" 300
  cat "$T"/logs/train-$name-*.out
  n=$(find "$T/train-$name" -name 'model.safetensors*' | wc -l)
  if [ "$n" != 1 ] || [ ! -f "$T/train-$name/model.safetensors" ]; then fail "want one model.safetensors: $(ls "$T/train-$name")"; fi
  $PY "$REPO/tests/distributed/compare_training.py" "$T/train-$name" "$T/one-$name" \
    || fail "$name: the 2-task Slurm job differs from one process"
done
if [ -n "${REFERENCE_DIR:-}" ]; then  # e.g. the train-lm run of another machine or of the Gloo test
  $PY "$REPO/tests/distributed/compare_training.py" "$T/train-lm" "$REFERENCE_DIR" || fail "differs from $REFERENCE_DIR"
fi
