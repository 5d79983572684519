#!/usr/bin/python3
"""Training throughput on 1 and 2 ranks of this machine, and what the ranks exchange per step. Not a test.

For train-lm (a ts-target-shaped model from scratch) and train-head (the EAGLE head of ts-target, windows), each
run three ways on the same global batch: 1 rank x 1 thread, 1 rank x 2 threads (intra-op parallelism, the
alternative), 2 ranks x 1 thread (`draftlab launch`, Gloo on loopback). Tokens/s over the steps after the first
--skip (warm-up), from the progress lines; medians of --repeats runs; scaling efficiency = 2-rank tokens/s over
twice 1-rank-1-thread tokens/s. The per-step traffic is the line rank 0 prints.

    /usr/bin/python3 bench/data_parallel_scaling.py [--repeats 3] [--steps 12] [--skip 2]
"""
import argparse
import os
import platform
import re
import statistics
import subprocess
import tempfile

SRC = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
BIN = os.path.join(SRC, "build", "draftlab")
SHARED = os.environ.get("DRAFTLAB_SHARED", os.path.join(SRC, "..", "shared"))
TARGET = os.path.join(SRC, "data", "models", "ts-target")


BATCH, CONTEXT = 16, 256  # the global batch of every run: BATCH rows of CONTEXT tokens


def workloads(corpus, steps):
    common = ["--steps", str(steps), "--eval-every", "0", "--log-every", "1", "--warmup", "1",
              "--batch", str(BATCH), "--context", str(CONTEXT)]
    return {
        f"train-lm (dim 256, 16 layers, ts-target's shape; batch {BATCH} x {CONTEXT})": [
            "train-lm", "--corpus", corpus, "--tokenizer", os.path.join(TARGET, "tokenizer.json"), "--dim", "256",
            "--layers", "16", "--heads", "4"] + common,
        f"train-head eagle on ts-target (batch {BATCH} x {CONTEXT}, windows)": [
            "train-head", "-m", TARGET, "--corpus", corpus, "--samples", "windows"] + common,
    }


def rate(stderr, skip, tokens_per_step):
    """Tokens/s over steps (skip, last], from the cumulative rates of the progress lines."""
    points = {int(s): float(r) for s, r in re.findall(r"step (\d+)/\d+ .*? (\d+) tokens/s", stderr)}
    last = max(points)
    t_last = last * tokens_per_step / points[last]
    t_skip = skip * tokens_per_step / points[skip]
    return (last - skip) * tokens_per_step / (t_last - t_skip)


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--steps", type=int, default=12)
    ap.add_argument("--skip", type=int, default=2)
    a = ap.parse_args()
    corpus = os.path.join(SHARED, "data", "tinystories", "tinystories.txt")
    cpu = next((l.split(":", 1)[1].strip() for l in open("/proc/cpuinfo") if l.startswith("model name")), "?")
    print(f"{platform.node()}: {cpu}, {os.cpu_count()} CPUs; OPENBLAS_CORETYPE={os.environ.get('OPENBLAS_CORETYPE', '(unset)')}"
          f", DRAFTLAB_ISA={os.environ.get('DRAFTLAB_ISA', '(native)')}; {a.steps} steps, rate over steps "
          f"{a.skip + 1}..{a.steps}, median of {a.repeats}")
    for name, cmd in workloads(corpus, a.steps).items():
        tokens = BATCH * CONTEXT
        ways = {"1 rank x 1 thread": ([BIN], "1"), "1 rank x 2 threads": ([BIN], "2"),
                "2 ranks x 1 thread": ([BIN, "launch", "--nproc", "2"], "1")}
        rates, traffic, params = {k: [] for k in ways}, "", ""
        for _ in range(a.repeats):
            for way, (prefix, threads) in ways.items():  # interleaved: drifts of the machine hit every way alike
                with tempfile.TemporaryDirectory() as out:
                    env = dict(os.environ, OMP_NUM_THREADS=threads)
                    p = subprocess.run(prefix + cmd + ["--threads", threads, "--out", out], env=env,
                                       capture_output=True, text=True, check=True)
                rates[way].append(rate(p.stderr, a.skip, tokens))
                traffic = next((l for l in p.stderr.splitlines() if l.startswith("data parallel: 2 ranks;")), traffic)
                params = next(iter(re.findall(r"(\d+) (?:head )?parameters;", p.stderr)), params)
        med = {k: statistics.median(v) for k, v in rates.items()}
        base = med["1 rank x 1 thread"]
        print(f"\n{name}: {int(params) / 1e6:.2f}M trained parameters")
        for way, r in med.items():
            print(f"  {way:20s} {r:9.0f} tokens/s  x{r / base:.2f}  (runs: {', '.join(f'{x:.0f}' for x in rates[way])})")
        print(f"  scaling efficiency of 2 ranks: {med['2 ranks x 1 thread'] / (2 * base):.2f}")
        print(f"  {traffic}")


if __name__ == "__main__":
    main()
