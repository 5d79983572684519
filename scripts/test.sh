#!/usr/bin/env bash
# Runs the whole test suite: builds what changed, then CTest (unit tests, golden tests, ASan parser tests, CLI).
#   bash scripts/test.sh                 # everything
#   bash scripts/test.sh -L model        # only a label: base, model, isa, asan, cli, experiments, analysis, python,
#                                        # distributed
set -euo pipefail
cd "$(dirname "$0")/.."
BUILD_DIR=${BUILD_DIR:-build}
cmake --build "$BUILD_DIR" -j "${JOBS:-2}"
ctest --test-dir "$BUILD_DIR" --output-on-failure -j "${JOBS:-2}" "$@"
