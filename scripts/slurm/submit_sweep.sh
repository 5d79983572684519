#!/usr/bin/env bash
# Queues a sharded sweep: an array of N sweep.sbatch tasks, then merge.sbatch once all of them succeeded.
#   usage: submit_sweep.sh [-n SHARDS] [-o OUT_DIR] [-a SBATCH_OPTION]... -- EXP_SWEEP_OPTIONS...
#   e.g.   scripts/slurm/submit_sweep.sh -n 4 -o results/sweep -a --partition=cpu -- \
#            --model data/models/ts-target --head data/models/ts-target-eagle-head --total-tokens 20,40,60
# -a passes an option to sbatch for both jobs (overrides the #SBATCH lines). Prints "ARRAY_JOB_ID MERGE_JOB_ID" on
# stdout; the merged file is OUT_DIR/sweep.h5, the logs OUT_DIR/logs/.
set -euo pipefail
HERE=$(cd "$(dirname "$0")" && pwd)

shards=4 out=results/sweep sbatch_opts=()
while getopts "n:o:a:h" opt; do
  case $opt in
    n) shards=$OPTARG ;;
    o) out=$OPTARG ;;
    a) sbatch_opts+=("$OPTARG") ;;
    *) sed -n '2,7p' "$0" >&2; exit 2 ;;
  esac
done
shift $((OPTIND - 1))
[ $# -gt 0 ] || { echo "submit_sweep.sh: give the exp sweep options after --" >&2; exit 2; }

# Absolute paths: the jobs may start in another folder; sbatch exports this environment (OUT_DIR, DRAFTLAB) to them.
mkdir -p "$out/logs"
OUT_DIR=$(cd "$out" && pwd)
DRAFTLAB=${DRAFTLAB:-$(cd "$HERE/../.." && pwd)/build/draftlab}
export OUT_DIR DRAFTLAB

array=$(sbatch --parsable --array="0-$((shards - 1))" --output="$OUT_DIR/logs/sweep-%A_%a.out" \
  "${sbatch_opts[@]}" "$HERE/sweep.sbatch" "$@")
array=${array%%;*}  # --parsable prints "id;cluster" on multi-cluster setups
# afterok on an array job: the merge starts only when every task exited 0 (and never if one failed).
merge=$(sbatch --parsable --dependency="afterok:$array" --kill-on-invalid-dep=yes \
  --output="$OUT_DIR/logs/merge-%j.out" "${sbatch_opts[@]}" "$HERE/merge.sbatch" "$OUT_DIR" "$shards")
merge=${merge%%;*}
echo "sweep: array job $array ($shards shards), merge job $merge -> $OUT_DIR/sweep.h5" >&2
echo "$array $merge"
