#!/usr/bin/env bash
# Fuzzes every input parser with libFuzzer + AddressSanitizer + UBSan (tests/fuzz; docs/testing.md, "Fuzzing").
#   bash scripts/fuzz.sh                       # every target, 60 s each
#   bash scripts/fuzz.sh 20                    # 20 s each (CI)
#   bash scripts/fuzz.sh 600 gguf safetensors  # some targets (names: tests/fuzz/<name>_fuzz.cpp)
#   KEEP=1 bash scripts/fuzz.sh 600            # long mode: 10 min per target, then the corpus kept in the repository
# The kept corpus is tests/fuzz/corpus/<target>.pack (tests/fuzz/corpus_pack.py; ctest's fuzz.replay replays it
# through every target on every change). Each run starts from it; KEEP=1 minimises what the run found to the inputs
# covering its edges, at most 2 KB each, and writes the pack back. KEEP=1 seeds from the repository alone
# (no $DRAFTLAB_SHARED files), so no fragment of ../shared's data lands in git.
# Builds build-fuzz (clang, -DDRAFTLAB_FUZZ=ON: the torch-free parsers only), writes seed corpora made from the
# repository's and $DRAFTLAB_SHARED's files to build-fuzz/corpus/<target> (kept between runs: the corpus grows),
# replays the regression inputs of tests/fuzz/regressions/<target> with DRAFTLAB_FUZZ_STRICT=1, runs each target with
# them in its corpus, and prints per target the executions, exec/s and findings. A finding (crash, sanitizer report,
# leak, timeout, out-of-memory) is saved in build-fuzz/findings/<target>/ with its log, and the script exits 1.
#   JOBS=N         build jobs (default 2)        FUZZ_JOBS=N   targets fuzzed at once (default 1)
#   FUZZ_ARGS=...  more libFuzzer options
set -euo pipefail
cd "$(dirname "$0")/.."
SECONDS_PER_TARGET=${1:-60}
shift || true
BUILD=build-fuzz
export DRAFTLAB_SHARED=${DRAFTLAB_SHARED:-$(cd .. && pwd)/shared}

CC=clang CXX=clang++ cmake -S . -B "$BUILD" -G Ninja -DDRAFTLAB_FUZZ=ON >/dev/null
cmake --build "$BUILD" -j "${JOBS:-2}"

# By default every target but results_file: HDF5 1.10.8's own parser crashes, hangs and leaks on corrupt files
# within minutes (docs/testing.md, "Fuzzing"), which would fail every run for bugs outside draftlab. Name it to run it.
targets=("$@")
if [ ${#targets[@]} = 0 ]; then
  for src in tests/fuzz/*_fuzz.cpp; do
    t=$(basename "$src" _fuzz.cpp)
    [ "$t" = results_file ] || targets+=("$t")
  done
fi
for t in "${targets[@]}"; do
  [ -x "$BUILD/fuzz_$t" ] || { echo "fuzz.sh: no target '$t' (tests/fuzz/${t}_fuzz.cpp)" >&2; exit 2; }
done
if [ "${KEEP:-0}" = 1 ]; then
  for t in "${targets[@]}"; do rm -rf "$BUILD/corpus/$t"; done  # this run's corpus: the kept one, grown
  mkdir -p "$BUILD/no-shared"
  DRAFTLAB_SHARED=$PWD/$BUILD/no-shared /usr/bin/python3 tests/fuzz/make_seeds.py "$BUILD/corpus"
else
  /usr/bin/python3 tests/fuzz/make_seeds.py "$BUILD/corpus"
fi
for t in "${targets[@]}"; do
  [ -f "tests/fuzz/corpus/$t.pack" ] &&
    /usr/bin/python3 tests/fuzz/corpus_pack.py unpack "tests/fuzz/corpus/$t.pack" "$BUILD/corpus/$t" >/dev/null
done

# Largest input per target: a little above its largest seed (bigger inputs only run slower); the dictionary.
max_len() {
  case $1 in
    model_config) echo 2048 ;;
    strategy_options) echo 512 ;;
    safetensors | tree_spec | bench_questions | spec_bench_answers | chat_jsonl) echo 4096 ;;
    gguf) echo 16384 ;;
    results_file) echo 32768 ;;
    results_schema | tree_proposal | feature_cache) echo 1024 ;;
    *) echo 8192 ;;
  esac
}
dict() {
  case $1 in
    safetensors | model_config | tokenizer_json | tree_spec | bench_questions | spec_bench_answers | chat_jsonl)
      echo tests/fuzz/dicts/json.dict ;;
    gguf) echo tests/fuzz/dicts/gguf.dict ;;
    torch_archive) echo tests/fuzz/dicts/torch_archive.dict ;;
  esac
}

# The harness writes each input to a file under here; removed even when a crash skips its own clean-up.
DRAFTLAB_FUZZ_SCRATCH=$(mktemp -d /dev/shm/draftlab-fuzz.XXXXXX 2>/dev/null || mktemp -d)
export DRAFTLAB_FUZZ_SCRATCH
trap 'rm -rf "$DRAFTLAB_FUZZ_SCRATCH"' EXIT

# A leak inside HDF5 itself, not draftlab's (tests/fuzz/lsan.supp says which).
export LSAN_OPTIONS=suppressions=$PWD/tests/fuzz/lsan.supp${LSAN_OPTIONS:+:$LSAN_OPTIONS}

run_target() {
  local t=$1 findings=$BUILD/findings/$1 d
  rm -rf "$findings"
  mkdir -p "$findings" "$BUILD/corpus/$t"
  d=$(dict "$t")
  local regressions=()
  [ -d "tests/fuzz/regressions/$t" ] && regressions=("tests/fuzz/regressions/$t")
  : >"$findings/log"
  # The regression inputs first, strictly: each must end in draftlab::Error, no other exception (fuzz_input.h).
  [ ${#regressions[@]} = 0 ] || DRAFTLAB_FUZZ_STRICT=1 "$BUILD/fuzz_$t" -runs=0 -timeout=10 -rss_limit_mb=2048 \
    -artifact_prefix="$findings/" "${regressions[0]}"/* >>"$findings/log" 2>&1 || true
  # -timeout: one input running 10 s is a finding (a hang); -rss_limit_mb also caps single allocations.
  "$BUILD/fuzz_$t" -max_total_time="$SECONDS_PER_TARGET" -timeout=10 -rss_limit_mb=2048 -max_len="$(max_len "$t")" \
    ${d:+-dict=$d} -print_final_stats=1 -artifact_prefix="$findings/" ${FUZZ_ARGS:-} \
    "$BUILD/corpus/$t" "${regressions[@]}" >>"$findings/log" 2>&1 || true
}

start=$(date +%s)
running=0
for t in "${targets[@]}"; do
  run_target "$t" &
  running=$((running + 1))
  if [ "$running" -ge "${FUZZ_JOBS:-1}" ]; then wait -n || true; running=$((running - 1)); fi
done
wait

status=0
printf '%-20s %12s %9s %8s %8s %s\n' target executions exec/s seconds findings corpus
for t in "${targets[@]}"; do
  log=$BUILD/findings/$t/log
  runs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$log" | tail -1)
  rate=$(sed -n 's/^stat::average_exec_per_sec: *//p' "$log" | tail -1)
  secs=$(sed -n 's/^Done [0-9]* runs in \([0-9]*\) second.*/\1/p' "$log" | tail -1)
  found=$(find "$BUILD/findings/$t" -name 'crash-*' -o -name 'leak-*' -o -name 'timeout-*' -o -name 'oom-*' | wc -l)
  # A report with no saved input (a sanitizer error at start-up, a regression input crashing) counts too.
  if [ "$found" = 0 ] && grep -qE '^==[0-9]+==ERROR|runtime error:|^SUMMARY: libFuzzer|deadly signal' "$log"; then found=1; fi
  if [ -z "$runs" ]; then found=$((found + (found == 0))); fi  # no final stats: it never ran properly
  printf '%-20s %12s %9s %8s %8s %s\n' "$t" "${runs:-?}" "${rate:-?}" "${secs:-?}" "$found" "$(ls "$BUILD/corpus/$t" | wc -l) inputs"
  if [ "$found" != 0 ]; then
    status=1
    echo "  $BUILD/findings/$t/log:"
    grep -m1 -A12 -E '^==[0-9]+==ERROR|runtime error:|^SUMMARY|deadly signal|not a draftlab::Error' "$log" | sed 's/^/    /' || tail -5 "$log"
  fi
done
if [ "${KEEP:-0}" = 1 ] && [ $status = 0 ]; then
  for t in "${targets[@]}"; do
    kept=$(mktemp -d)
    "$BUILD/fuzz_$t" -merge=1 -use_counters=0 -max_len=2048 -rss_limit_mb=2048 "$kept" "$BUILD/corpus/$t" \
      >"$BUILD/findings/$t/merge.log" 2>&1 && /usr/bin/python3 tests/fuzz/corpus_pack.py pack "$kept" "tests/fuzz/corpus/$t.pack"
    rm -rf "$kept"
  done
  echo "fuzz.sh: kept tests/fuzz/corpus/*.pack ($(du -ch tests/fuzz/corpus/*.pack | tail -1 | cut -f1))"
fi
echo "fuzz.sh: ${#targets[@]} targets, $(( $(date +%s) - start )) s"
exit $status
