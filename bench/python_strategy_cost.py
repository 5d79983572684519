#!/usr/bin/python3
"""What a drafter written in Python costs per cycle, against the same drafter in C++: prompt lookup
(experiments/python/examples/prompt_lookup.py, `py_pld`) beside `pld` on the same prompts, T = 0 (the same
tokens and cycles, checked), after a warm-up; medians of the repeats. Not a test: it prints, nothing asserts.

    PYTHONPATH=build/python /usr/bin/python3 bench/python_strategy_cost.py [--model DIR] [--repeats 5] [--threads 1]
"""
import argparse
import os
import platform
import statistics
import sys

import draftlab
from draftlab._paths import SOURCE_DIR

sys.path.insert(0, os.path.join(SOURCE_DIR, "experiments", "python", "examples"))
import prompt_lookup  # noqa: E402

PROMPTS = ["once upon a time, there was a little dog named max",
           "lily and her mom went to the park. lily saw a big tree",
           "tom had a red ball. he liked to play with it every day"]


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--model", default=os.path.join(SOURCE_DIR, "data", "models", "ts-target"))
    ap.add_argument("--repeats", type=int, default=5)
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("-n", type=int, default=128)
    a = ap.parse_args()
    draftlab.register_strategy("py_pld", prompt_lookup.PromptLookup, prompt_lookup.OPTIONS)
    model = draftlab.Model(a.model, threads=a.threads)
    rows = {}
    for name in ("pld", "py_pld"):
        per_cycle, tps, runs = [], [], []
        for r in range(a.repeats + 1):  # the first pass warms up
            draft = cycles = tokens = seconds = 0.0
            for p in PROMPTS:
                out = model.generate(p, a.n, name, stop_at_eos=False)
                draft += float(out["draft_seconds"].sum())
                cycles += out["cycles"]
                tokens += len(out["tokens"])
                seconds += out["decode_seconds"]
                if r == 0:
                    runs.append(out["tokens"])
            if r > 0:
                per_cycle.append(draft / cycles)
                tps.append(tokens / seconds)
        rows[name] = (statistics.median(per_cycle), statistics.median(tps), runs, cycles)
    assert rows["pld"][2] == rows["py_pld"][2], "py_pld decoded other tokens than pld"
    print(f"{platform.node()}, {os.cpu_count()} CPUs, {a.threads} thread(s), {model._model.forward_path}, "
          f"{len(PROMPTS)} prompts x {a.n} tokens, median of {a.repeats}")
    for name, (cycle, tps, _, cycles) in rows.items():
        print(f"{name:7s} drafting {cycle * 1e6:8.1f} us per cycle ({cycles:.0f} cycles)  {tps:8.1f} tokens/s")
    print(f"Python drafting costs {rows['py_pld'][0] * 1e6 - rows['pld'][0] * 1e6:.1f} us more per cycle "
          f"({rows['py_pld'][0] / rows['pld'][0]:.1f}x); decoding speed ratio py_pld / pld "
          f"{rows['py_pld'][1] / rows['pld'][1]:.3f}")


if __name__ == "__main__":
    main()
