#!/usr/bin/env bash
# Runs the test suite: builds what changed, runs one tier with CTest, then the skip gate (scripts/skip_gate.py: a
# skipped case not declared in tests/skips_allowed.txt fails the run). Tiers: docs/testing.md.
#   bash scripts/test.sh                  # fast tier: every test and lossless property, the costly few smaller
#   bash scripts/test.sh --full           # the full tier: the same at full size
#   bash scripts/test.sh --changed BASE   # CI: the fast tier, plus the full tier of each label whose folders changed
#                                         # since the git commit BASE (core/ops, core/model -> isa; core, strategies,
#                                         # tests -> model; the instrumented code and its tests -> asan); BASE
#                                         # unknown: the full tier alone
#   bash scripts/test.sh [TIER] -L LABEL  # more ctest arguments: a label (base, model, isa, asan, cli, experiments,
#                                         # analysis, python, distributed), -R REGEX, ...
# One test case: build/tests/NAME --gtest_filter=Suite.Case (GTEST_FILTER=... also reaches ctest's entries).
set -euo pipefail
cd "$(dirname "$0")/.."
BUILD_DIR=${BUILD_DIR:-build}
JOBS=${JOBS:-2}
tiers=(fast)
full_labels=.   # the full pass: entries with any label
case "${1:-}" in
  --full) tiers=(full); shift ;;
  --fast) shift ;;
  --changed)
    base=${2:-}; shift $(( $# >= 2 ? 2 : 1 ))
    if [ -z "$base" ] || ! git rev-parse -q --verify "$base^{commit}" >/dev/null; then
      echo "test.sh: base commit '${base}' unknown: running the full tier"
      tiers=(full)
    else
      changed=$(git diff --name-only "$base" HEAD)
      labels=()
      grep -qE '^core/(ops|model)/' <<<"$changed" && labels+=(isa)
      grep -qE '^(core|strategies|tests)/' <<<"$changed" && labels+=(model)
      grep -qE '^(core/(base|io|text|ops|model|decoding|results)/|tests/(io|text|ops|distributed)/|tests/decoding/test_oracle_drafts|tests/CMakeLists)' \
        <<<"$changed" && labels+=(asan)
      if [ ${#labels[@]} -gt 0 ]; then
        full_labels="^($(IFS='|'; echo "${labels[*]}"))$"
        tiers=(fast full)
      fi
      echo "test.sh: changed since $base: fast tier${labels:+, then the full tier of ${labels[*]}}"
    fi ;;
esac

cmake --build "$BUILD_DIR" -j "$JOBS"
# The sanitizer builds are not part of `all` (tests/CMakeLists.txt): built when their label runs.
if [[ " ${tiers[*]} " == *" full "* ]] && { [ "$full_labels" = . ] || [[ "$full_labels" == *asan* ]]; }; then
  cmake --build "$BUILD_DIR" -j "$JOBS" --target draftlab_asan
fi
reports="$BUILD_DIR/test-reports"
rm -rf "$reports" && mkdir -p "$reports"
status=0
for tier in "${tiers[@]}"; do
  # An entry in both tiers runs once: the full pass skips what the fast pass ran.
  only=(); [ "$tier" = full ] && [ "${#tiers[@]}" = 2 ] && only=(-LE "^fast$" -L "$full_labels")
  ctest --test-dir "$BUILD_DIR" --output-on-failure -j "$JOBS" -L "^$tier$" "${only[@]}" \
    --output-junit "$(pwd)/$reports/ctest-$tier.xml" "$@" || status=1
done
python3 scripts/skip_gate.py "$reports" || status=1
exit $status
