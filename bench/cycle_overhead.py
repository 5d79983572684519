#!/usr/bin/env python3
"""What a speculative cycle costs beyond its forwards, on a model whose forwards are tiny (aidreams260K: ~45 us).

    python3 bench/cycle_overhead.py                     # 5 rounds, 100 tokens, one thread
    python3 bench/cycle_overhead.py --rounds 9 --isa avx2
    python3 bench/cycle_overhead.py --baseline /tmp/old/draftlab   # a second build, interleaved: before / after

Each method runs `draftlab generate` on the same prompt; generate reports the time inside model forwards
(ForwardClock: target, draft LM and heads) and "the rest": drafting's top-k, scores and masks, the draft tree,
the verifier's mask, positions, acceptance and cache compaction, the loop itself. Rounds alternate the methods;
the table shows medians. Issue 20's targets: the rest <= 20 us per cycle, and `chain` with the target drafting for
itself (every draft accepted, each drafted token one extra forward) >= 0.9x vanilla.
Not a test: nothing here asserts on time.
"""
import argparse
import os
import re
import statistics
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SHARED = os.environ.get("DRAFTLAB_SHARED", os.path.join(os.path.dirname(ROOT), "shared"))
MODEL = os.path.join(SHARED, "models/aidreams260K/aidreams260K.bin")
TOKENIZER = os.path.join(SHARED, "models/aidreams260K/tok512.bin")

METHODS = [  # label, generate arguments (none: generate's own vanilla loop, no speculative decoder)
    ("vanilla (plain loop)", []),
    ("vanilla (speculative loop)", ["-s", "vanilla"]),
    ("chain, target drafts itself, 4", ["-s", "chain", "-o", "draft=" + MODEL, "-o", "gamma=4"]),
    ("pld", ["-s", "pld"]),
    ("lookahead", ["-s", "lookahead"]),
    ("eagle2 4/4/1 (random head)", ["-s", "eagle2", "-o", "total_tokens=4", "-o", "depth=4", "-o", "top_k=1"]),
    ("eagle2 default (random head)", ["-s", "eagle2"]),
]

RATE = re.compile(r"decode [0-9.]+ ms: ([0-9.]+) tokens/s")
CYCLE = re.compile(r"(\d+) cycles, tau ([0-9.]+) .*of which forwards ([0-9.]+) ms; the rest ([0-9.]+) us per cycle")


def once(draftlab, args, a, env):
    cmd = [draftlab, "generate", "-m", MODEL, "--tokenizer", TOKENIZER, "-p", a.prompt, "-n", str(a.n),
           "--threads", "1"] + args
    r = subprocess.run(cmd, capture_output=True, text=True, env=env)
    if r.returncode != 0:
        sys.exit(f"cycle_overhead: failed ({r.returncode}): {' '.join(cmd)}\n{r.stderr[-2000:]}")
    row = {"tokens_per_s": float(RATE.search(r.stderr).group(1))}
    m = CYCLE.search(r.stderr)
    if m:
        cycles = int(m.group(1))
        row.update(tau=float(m.group(2)), forward_us=1e3 * float(m.group(3)) / max(cycles, 1),
                   rest_us=float(m.group(4)))
    return row


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--draftlab", default=os.path.join(ROOT, "build/draftlab"))
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("-n", type=int, default=100, help="tokens per run (the model's context is 128)")
    ap.add_argument("--prompt", default="Once upon a time")
    ap.add_argument("--isa", default="", help="DRAFTLAB_ISA for draftlab (avx2, portable); default: the best")
    ap.add_argument("--baseline", default="",
                    help="another draftlab binary (an earlier build), run interleaved with --draftlab in every round; "
                         "the table then shows both and after / before")
    a = ap.parse_args()
    if not os.path.exists(MODEL):
        sys.exit(f"cycle_overhead: {MODEL} not found (set DRAFTLAB_SHARED)")
    env = dict(os.environ)
    if a.isa:
        env["DRAFTLAB_ISA"] = a.isa
    binaries = [a.draftlab] + ([a.baseline] if a.baseline else [])
    for binary in binaries:  # warm-up: page cache, CPU frequency
        for label, args in METHODS:
            once(binary, args, a, env)
    rows = {(binary, label): [] for binary in binaries for label, _ in METHODS}
    for _ in range(a.rounds):
        for label, args in METHODS:
            for binary in binaries:
                rows[(binary, label)].append(once(binary, args, a, env))

    def med(binary, label, key):
        values = [r[key] for r in rows[(binary, label)] if key in r]
        return statistics.median(values) if values else None

    print(f"aidreams260K, {a.n} tokens, 1 thread, ISA {a.isa or 'best'}, medians of {a.rounds} rounds\n")
    for binary in binaries:
        base = med(binary, "vanilla (plain loop)", "tokens_per_s")
        print(f"{binary}\n")
        print("| method | tokens/s | x vanilla | tau | forwards per cycle, us | the rest per cycle, us |")
        print("|---|---|---|---|---|---|")
        for label, _ in METHODS:
            tps, tau, fwd, rest = (med(binary, label, k) for k in ("tokens_per_s", "tau", "forward_us", "rest_us"))
            cells = [f"{tps:.0f}", f"{tps / base:.2f}x"] + [
                "-" if v is None else f"{v:.{p}f}" for v, p in ((tau, 2), (fwd, 1), (rest, 1))]
            print(f"| {label} | " + " | ".join(cells) + " |")
        print()
    if a.baseline:
        print("after / before (tokens/s, medians; --draftlab over --baseline)\n")
        print("| method | after / before | the rest per cycle, us: before -> after |")
        print("|---|---|---|")
        for label, _ in METHODS:
            after, before = med(a.draftlab, label, "tokens_per_s"), med(a.baseline, label, "tokens_per_s")
            r0, r1 = med(a.baseline, label, "rest_us"), med(a.draftlab, label, "rest_us")
            rest = "-" if r0 is None or r1 is None else f"{r0:.1f} -> {r1:.1f}"
            print(f"| {label} | {after / before:.3f} | {rest} |")


if __name__ == "__main__":
    main()
