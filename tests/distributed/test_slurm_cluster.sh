#!/usr/bin/env bash
# The Slurm scripts for real: scripts/slurm/local_cluster.sh brings up a one-node Slurm (munged, slurmctld, slurmd)
# in a temporary folder, runs a 2-shard sweep array with its dependent merge (records equal an unsharded run's) and
# 2-task train-lm / train-head jobs through sbatch + srun (equal to one process's runs), then tears it down.
# About 15 s here. Skipped (77) unless root with slurm-wlm, munge and /usr/bin/python3 + h5py (scripts/setup.sh).
#   usage: test_slurm_cluster.sh DRAFTLAB_BINARY SHARED_DIR SOURCE_DIR
set -u
[ "$(id -u)" = 0 ] || { echo "skipped: needs root (the daemons run as root)"; exit 77; }
for tool in slurmctld slurmd munged sbatch; do
  command -v $tool >/dev/null || { echo "skipped: $tool not installed (slurm-wlm, munge)"; exit 77; }
done
/usr/bin/python3 -c 'import h5py' 2>/dev/null || { echo "skipped: needs /usr/bin/python3 with h5py"; exit 77; }
[ -f "${DRAFTLAB_SHARED:-$2}/data/tinystories/tinystories.txt" ] || { echo "skipped: ../shared missing"; exit 77; }
DRAFTLAB=$1 DRAFTLAB_SHARED=${DRAFTLAB_SHARED:-$2} exec bash "$3/scripts/slurm/local_cluster.sh"
