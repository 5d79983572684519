#!/usr/bin/env bash
# One command to set up and build draftlab on Debian 12:
#   bash scripts/setup.sh            # apt install (needs root or sudo) + configure + build
#   SKIP_APT=1 bash scripts/setup.sh # build only
set -euo pipefail
cd "$(dirname "$0")/.."

# Every dependency, in one apt command (README and .ci/run both come through here).
APT_PACKAGES=(
  build-essential cmake ninja-build ccache pkg-config
  libtorch-dev libopenblas0-openmp
  libeigen3-dev libboost-program-options-dev libhdf5-dev nlohmann-json3-dev
  libgtest-dev
  # scripts/fuzz.sh: clang with libFuzzer and the sanitizer runtimes (only Recommended by clang, so named here)
  clang libclang-rt-14-dev
  # draftlab plot / notebooks_export (analysis/plot.py, tests/analysis): Depends alone are enough, including for
  # `jupyter nbconvert --execute` (nbclient and jupyter-client come with them, the python3 kernel with ipykernel)
  python3-matplotlib python3-h5py python3-numpy jupyter-nbconvert python3-nbformat python3-ipykernel
  # the tests' independent writer of official EAGLE-3 checkpoints (torch.save; the same 1.13.1 as libtorch-dev)
  python3-torch
  # the Python module (experiments/python: pybind11, results as pandas) and its tests (pytest, scipy's chi-square)
  python3-dev python3-pybind11 python3-pandas python3-pytest python3-scipy
  # data-parallel training (core/distributed): Gloo's headers for c10d's ProcessGroupGloo (its code is in libtorch);
  # mpirun and a one-node Slurm with munge for the launcher tests (tests/distributed, scripts/slurm/local_cluster.sh)
  libgloo-dev openmpi-bin slurm-wlm munge
)

if [ "${SKIP_APT:-0}" != 1 ]; then
  SUDO=""; [ "$(id -u)" = 0 ] || SUDO="sudo"
  missing=$(dpkg-query -W -f='${Package} ${Status}\n' "${APT_PACKAGES[@]}" 2>/dev/null | grep -vc "install ok installed" || true)
  if [ "$missing" != 0 ] || ! dpkg-query -W "${APT_PACKAGES[@]}" >/dev/null 2>&1; then
    $SUDO apt-get update -q
    DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -q --no-install-recommends "${APT_PACKAGES[@]}"
  fi
fi

BUILD_DIR=${BUILD_DIR:-build}
BUILD_TYPE=${BUILD_TYPE:-Release}
cmake -S . -B "$BUILD_DIR" -G Ninja -DCMAKE_BUILD_TYPE="$BUILD_TYPE" ${CMAKE_ARGS:-}
# Two cores: more parallel torch compiles only thrash memory.
cmake --build "$BUILD_DIR" -j "${JOBS:-2}"
