#!/usr/bin/env python3
"""A budget chosen each cycle (total_tokens=auto, k=auto) against the best fixed budget, cell by cell: issue 43's
target "auto >= 0.97x the best fixed budget in every cell of Table 4, >= 0.97x vanilla where none pays".

    python3 bench/auto_budget_grid.py                          # eagle2 on ts-target, Table 4's six weight storages,
                                                               # this CPU's ISA and AVX2, 4 rounds
    python3 bench/auto_budget_grid.py --weights f16 --isas native --rounds 6
    python3 bench/auto_budget_grid.py --family peagle --isas avx2 --weights f16
    python3 bench/auto_budget_grid.py --baseline /tmp/old/draftlab  # a second build in the same rounds: before / after

Each round runs `draftlab compare` once per cell (vanilla, auto and the fixed budgets interleaved inside it, README's
three prompts, --repeats medians), cells in turn, so a drift of the machine falls on every cell alike.

The best fixed budget is chosen on the other rounds and its ratio taken on this one (leave one round out). Taking the
best of several noisy fixed budgets on the same runs that auto is compared with biases "auto / best" down: the winner
of five measurements is lucky by construction (performance.md measured 0.84-1.09x that way). The in-sample ratio is
printed beside, for comparison. Not a test: nothing here asserts on time.
"""
import argparse
import json
import os
import platform
import statistics
import subprocess
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from vs_llama_cpp import DRAFTLAB_WEIGHTS, PROMPTS, gguf_type, quant_dot  # noqa: E402 (README's prompts, the storages)

WEIGHTS = ["f32", "f16", "q8_0", "q8_0+int8", "q4_0", "q4_0+int8"]  # Table 4's storages
# Per family: the draft's option, the automatic budget, and the fixed budgets it is judged against (Table 4's grid for
# eagle2: chains of 1-4 and 6 / 4 / 2; the parallel drafters: k = 1-4).
FAMILIES = {
    "eagle2": ("head=data/models/ts-target-eagle-head", "total_tokens=auto",
               [f"total_tokens={n},depth={n},top_k=1" for n in range(1, 5)] + ["total_tokens=6,depth=4,top_k=2"]),
    "eagle3": ("head=data/models/ts-target-eagle3-head", "total_tokens=auto",
               [f"total_tokens={n},depth={n},top_k=1" for n in range(1, 5)] + ["total_tokens=6,depth=4,top_k=2"]),
    "pard": ("draft=data/models/ts-draft-pard", "k=auto", [f"k={k}" for k in range(1, 5)]),
    "peagle": ("head=data/models/ts-target-peagle-head", "k=auto", [f"k={k}" for k in range(1, 5)]),
}


def compare(draftlab, a, isa, weights, strategies):
    """tokens/s of vanilla and each strategy, one compare run (the methods interleaved inside it)."""
    name, dot = DRAFTLAB_WEIGHTS[gguf_type(weights)], quant_dot(weights)
    env = dict(os.environ)
    if isa == "avx2":
        env["DRAFTLAB_ISA"] = "avx2"
    with tempfile.NamedTemporaryFile(suffix=".json") as f:
        cmd = [draftlab, "compare", "--model", a.model, "--weights", name, "--quant-dot", dot, "--threads",
               str(a.threads), "-n", str(a.n), "--repeats", str(a.repeats), "--json", f.name]
        for p in PROMPTS:
            cmd += ["--prompt", p]
        for s in strategies:
            cmd += ["--strategy", s]
        r = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env, cwd=ROOT)
        if r.returncode != 0:
            sys.exit(f"auto_budget_grid: compare failed ({r.returncode}): {' '.join(cmd)}\n{r.stderr[-2000:]}")
        data = json.load(open(f.name))
    methods = data["methods"]
    if any(m["compared"] and not m["identical_to_baseline"] for m in methods):
        sys.exit(f"auto_budget_grid: a method's output differs from vanilla's: {' '.join(cmd)}")
    return [m["tokens_per_second"] for m in methods], [m["tau"] for m in methods], data.get("cpu")


def cell_summary(rs, taus, labels, fixed):
    """One cell's rounds (tokens/s per label): medians, and auto over the best fixed budget chosen on the other
    rounds, the ratio taken on the round left out (median over rounds), beside the in-sample ratio."""
    med = statistics.median
    per_label = {l: [x[l] for x in rs] for l in labels}
    held_out, picks = [], []
    for k in range(len(rs)):
        others = [x for j, x in enumerate(rs) if j != k]
        best = max(fixed, key=lambda l: med([x[l] for x in others]))
        picks.append(best)
        held_out.append(rs[k]["auto"] / rs[k][best])
    best_in = max(fixed, key=lambda l: med(per_label[l]))
    v = med(per_label["vanilla"])
    return {"vanilla": v, "auto_over_vanilla": med(per_label["auto"]) / v,
            "best_fixed_over_vanilla": med(per_label[best_in]) / v, "auto_over_best_held_out": med(held_out),
            "auto_over_best_in_sample": med(per_label["auto"]) / med(per_label[best_in]), "picks": picks,
            "auto_tau": med([t["auto"] for t in taus])}


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--draftlab", default=os.path.join(ROOT, "build/draftlab"))
    ap.add_argument("--model", default="data/models/ts-target")
    ap.add_argument("--family", choices=sorted(FAMILIES), default="eagle2")
    ap.add_argument("--weights", default=",".join(WEIGHTS), help="comma-separated: " + ", ".join(WEIGHTS))
    ap.add_argument("--isas", default="native,avx2", help="native (this CPU's best) and/or avx2 (DRAFTLAB_ISA=avx2)")
    ap.add_argument("--rounds", type=int, default=4, help="compare runs per cell (>= 2: one is left out in turn)")
    ap.add_argument("--repeats", type=int, default=3, help="compare's --repeats (its median) inside each round")
    ap.add_argument("-n", type=int, default=128, help="new tokens per prompt")
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--baseline", help="another draftlab build, run on every cell in the same rounds (before / after)")
    ap.add_argument("--out", help="write every round's numbers and the environment as JSON here")
    a = ap.parse_args()
    if a.rounds < 2:
        sys.exit("auto_budget_grid: --rounds must be at least 2 (the best fixed budget is chosen on the other rounds)")
    weights = a.weights.split(",")
    for w in weights:
        if w not in WEIGHTS:
            sys.exit(f"auto_budget_grid: --weights: unknown storage '{w}' (expected one of {', '.join(WEIGHTS)})")
    isas = a.isas.split(",")
    for isa in isas:
        if isa not in ("native", "avx2"):
            sys.exit(f"auto_budget_grid: --isas: unknown ISA '{isa}' (expected native or avx2)")
    draft, auto, fixed = FAMILIES[a.family]
    strategies = [f"{a.family}:{draft},{auto}"] + [f"{a.family}:{draft},{b}" for b in fixed]
    labels = ["vanilla", "auto"] + fixed
    cells = [(isa, w) for isa in isas for w in weights]
    builds = {"draftlab": a.draftlab}
    if a.baseline:
        builds["baseline"] = a.baseline
    rounds = {b: {c: [] for c in cells} for b in builds}  # per build and cell: per round, tokens/s per label
    taus = {b: {c: [] for c in cells} for b in builds}
    progress = sys.stderr.isatty()
    cpu = None
    for r in range(a.rounds):
        for i, (isa, w) in enumerate(cells):
            # The builds alternate, and which goes first alternates with the rounds.
            for b in (list(builds) if r % 2 == 0 else list(builds)[::-1]):
                if progress:
                    print(f"\rround {r + 1}/{a.rounds}, cell {i + 1}/{len(cells)} ({isa} {w}), {b}   ", end="",
                          file=sys.stderr)
                tok_s, tau, cpu = compare(builds[b], a, isa, w, strategies)
                rounds[b][(isa, w)].append(dict(zip(labels, tok_s)))
                taus[b][(isa, w)].append(dict(zip(labels, tau)))
    if progress:
        print(file=sys.stderr)

    print(f"{a.family} on {a.model}, {a.threads} thread(s), {a.rounds} rounds x compare --repeats {a.repeats}, "
          f"{a.n} tokens x {len(PROMPTS)} prompts; cpu {cpu}, "
          f"OPENBLAS_CORETYPE={os.environ.get('OPENBLAS_CORETYPE', '(unset)')}\n")
    print("auto / best fixed: the best fixed budget chosen on the other rounds, the ratio on the round left out, "
          "median over rounds (in-sample: the best of the same rounds' medians).\n")
    summary = {}
    for b in builds:
        print(f"**{b}** ({builds[b]})\n")
        print("| ISA | weights | vanilla tok/s | auto / vanilla (tau) | best fixed / vanilla | auto / best fixed, "
              "held out | in-sample | held-out best |")
        print("|---|---|---|---|---|---|---|---|")
        summary[b] = {}
        for c in cells:
            row = cell_summary(rounds[b][c], taus[b][c], labels, fixed)
            summary[b][f"{c[0]} {c[1]}"] = row
            print(f"| {c[0]} | {c[1]} | {row['vanilla']:.0f} | "
                  f"{row['auto_over_vanilla']:.2f}x ({row['auto_tau']:.2f}) | "
                  f"{row['best_fixed_over_vanilla']:.2f}x | **{row['auto_over_best_held_out']:.2f}x** | "
                  f"{row['auto_over_best_in_sample']:.2f}x | {statistics.mode(row['picks'])} |")
        print()
    if a.baseline:
        ours, theirs = summary["draftlab"], summary["baseline"]
        print("auto / vanilla of this build over the baseline's, per cell (each build's own vanilla in the same "
              "rounds): " + ", ".join(f"{k} {ours[k]['auto_over_vanilla'] / theirs[k]['auto_over_vanilla']:.2f}x"
                                      for k in ours) + "\n")
    if a.out:
        env = {"host": platform.node(), "cpu": cpu, "openblas_coretype": os.environ.get("OPENBLAS_CORETYPE"),
               "model": a.model, "family": a.family, "threads": a.threads, "rounds": a.rounds, "repeats": a.repeats,
               "n": a.n, "prompts": PROMPTS, "strategies": strategies}
        with open(a.out + ".tmp", "w") as f:
            json.dump({"environment": env, "builds": builds,
                       "rounds": {b: {f"{k[0]} {k[1]}": v for k, v in rounds[b].items()} for b in builds},
                       "summary": summary}, f, indent=1)
        os.replace(a.out + ".tmp", a.out)
        print(f"\nwrote {a.out}")


if __name__ == "__main__":
    main()
