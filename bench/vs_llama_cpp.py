#!/usr/bin/env python3
"""draftlab beside llama.cpp on the very same weights, in one run, interleaved.

    python3 bench/vs_llama_cpp.py                      # ts-target, float32 and float16 weights, 1 and 2 threads
    python3 bench/vs_llama_cpp.py --threads 1 --dtypes f16 --rounds 5 --out /tmp/vs.json

What it does:
  1. builds the peer (bash ../shared/peers/build_llama_cpp.sh; reused when built) and draftlab must be built;
  2. exports the target and the draft LM with `draftlab export-gguf` (f32 and f16), so both engines read the same
     weights (draftlab reads its own checkpoint folder with --weights float32 / float16: the same values);
  3. per round, per weight dtype and thread count, alternating the two engines:
       plain decoding        draftlab compare (vanilla)           vs  llama-bench -p 0 -n 128 (tg128)
       forward cost, n new   bench/forward_cost --cache 0         vs  llama-bench -p n -n 0 (one batch of n)
       draft-model spec.     compare chain:draft=ts-draft,gamma=4  vs  llama-speculative --draft-max 4
       prompt lookup         compare pld                          vs  llama-lookup
       every strategy        compare (README's main job's methods), as a ratio over llama.cpp's plain decoding;
  4. prints medians over the rounds and the ratios, and writes them with the environment as JSON (--out).
Not a test: nothing here asserts on time.
"""
import argparse
import json
import os
import platform
import re
import statistics
import subprocess
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SHARED = os.environ.get("DRAFTLAB_SHARED", os.path.join(os.path.dirname(ROOT), "shared"))
PROMPTS = [
    "once upon a time, there was a little dog named max",
    "lily and her mom went to the park. lily saw a big tree",
    "tom had a red ball. he liked to play with it every day",
]


def run(cmd, **kw):
    r = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, **kw)
    if r.returncode != 0:
        sys.exit(f"vs_llama_cpp: command failed ({r.returncode}): {' '.join(cmd)}\n{r.stderr[-2000:]}")
    return r


def llama_bench(bin_dir, gguf, threads, prompt=0, gen=0, reps=3):
    out = run([f"{bin_dir}/llama-bench", "-m", gguf, "-p", str(prompt), "-n", str(gen), "-t", str(threads),
               "-r", str(reps), "-o", "json"]).stdout
    rows = json.loads(out)
    return rows[0]["avg_ts"]


def llama_spec_tool(tool, args, threads, n):
    """tokens/s of llama-speculative or llama-lookup over the prompts: total decoded tokens / total decode time."""
    tokens = seconds = 0.0
    for p in PROMPTS:
        r = run(tool + ["-p", p, "-n", str(n), "-t", str(threads), "--temp", "0", "-s", "1"] + args)
        m = re.search(r"decoded\s+(\d+) tokens in\s+([\d.]+) seconds", r.stderr + r.stdout)
        if not m:
            sys.exit(f"vs_llama_cpp: no 'decoded ... tokens in ... seconds' line from {tool[0]}")
        tokens += float(m.group(1))
        seconds += float(m.group(2))
    return tokens / seconds


def draftlab_compare(draftlab, model, weights, threads, n, strategies):
    with tempfile.NamedTemporaryFile(suffix=".json") as f:
        cmd = [draftlab, "compare", "--model", model, "--weights", weights, "--threads", str(threads),
               "-n", str(n), "--repeats", "1", "--warmup", "1", "--json", f.name]
        for p in PROMPTS:
            cmd += ["--prompt", p]
        for spec in strategies.values():
            cmd += ["--strategy", spec]
        run(cmd)
        data = json.load(open(f.name))
    # compare prints vanilla first, then the strategies in the order given.
    names = ["vanilla"] + list(strategies)
    return {name: m["tokens_per_second"] for name, m in zip(names, data["methods"])}, data


def draftlab_forward_cost(forward_cost, model, weights, threads, max_n):
    with tempfile.NamedTemporaryFile(suffix=".json") as f:
        run([forward_cost, "--model", model, "--weights", weights, "--threads", str(threads), "--cache", "0",
             "--max-n", str(max_n), "--warmup", "5", "--repeats", "21", "--out", f.name])
        data = json.load(open(f.name))
    return {r["n"]: r["median_ms"] for r in data["results"]}, data


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--model", default=os.path.join(ROOT, "data/models/ts-target"))
    ap.add_argument("--draft", default=os.path.join(ROOT, "data/models/ts-draft"))
    ap.add_argument("--head", default=os.path.join(ROOT, "data/models/ts-target-eagle-head"))
    ap.add_argument("--build", default=os.path.join(ROOT, "build"))
    ap.add_argument("--threads", default="1,2")
    ap.add_argument("--dtypes", default="f32,f16")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("-n", type=int, default=128, help="tokens to generate per prompt / llama-bench tg")
    ap.add_argument("--max-n", type=int, default=64, help="largest forward batch (powers of two from 1)")
    ap.add_argument("--out", help="write the results and environment as JSON here")
    a = ap.parse_args()

    draftlab = os.path.join(a.build, "draftlab")
    forward_cost = os.path.join(a.build, "bench", "forward_cost")
    for p in (draftlab, forward_cost):
        if not os.path.exists(p):
            sys.exit(f"vs_llama_cpp: {p} not found: build draftlab first (bash scripts/setup.sh)")
    build_script = os.path.join(SHARED, "peers", "build_llama_cpp.sh")
    if not os.path.exists(build_script):
        sys.exit(f"vs_llama_cpp: {build_script} not found (set DRAFTLAB_SHARED)")
    print("building the llama.cpp peer (reused when built) ...", file=sys.stderr, flush=True)
    bin_dir = run(["bash", build_script]).stdout.strip().splitlines()[-1]

    work = tempfile.mkdtemp(prefix="vs-llama-")
    weights_name = {"f32": "float32", "f16": "float16"}
    gguf = {}
    for dt in a.dtypes.split(","):
        for role, path in (("target", a.model), ("draft", a.draft)):
            out = os.path.join(work, f"{role}-{dt}.gguf")
            run([draftlab, "export-gguf", "-m", path, "-o", out, "--type", dt])
            gguf[(role, dt)] = out

    strategies = {
        "eagle2 (4/4/1)": f"eagle2:head={a.head},total_tokens=4,depth=4,top_k=1",
        "eagle2 (6/4/2)": f"eagle2:head={a.head},total_tokens=6,depth=4,top_k=2",
        "eagle2 (10/4/2)": f"eagle2:head={a.head},total_tokens=10,depth=4,top_k=2",
        "eagle2 (auto)": f"eagle2:head={a.head},total_tokens=auto",
        "eagle2 (60/6/10)": f"eagle2:head={a.head}",
        "eagle-chain": f"eagle-chain:head={a.head}",
        "chain (ts-draft)": f"chain:draft={a.draft},gamma=4",
        "pld": "pld",
    }
    ns = [1 << i for i in range(a.max_n.bit_length()) if (1 << i) <= a.max_n]
    results = []
    for dt in a.dtypes.split(","):
        for threads in [int(t) for t in a.threads.split(",")]:
            cell = {"dtype": dt, "threads": threads, "rounds": []}
            for r in range(a.rounds):
                print(f"{dt} {threads} thread(s): round {r + 1}/{a.rounds}", file=sys.stderr, flush=True)
                rd = {}
                # Alternate the engines within each measurement.
                rd["llama_tg"] = llama_bench(bin_dir, gguf[("target", dt)], threads, gen=a.n)
                rd["draftlab"], compare_json = draftlab_compare(draftlab, a.model, weights_name[dt], threads, a.n,
                                                                strategies)
                rd["llama_pp_ms"] = {}
                for n in ns:
                    rd["llama_pp_ms"][n] = 1000.0 * n / llama_bench(bin_dir, gguf[("target", dt)], threads, prompt=n)
                rd["draftlab_forward_ms"], fc_json = draftlab_forward_cost(forward_cost, a.model, weights_name[dt],
                                                                           threads, a.max_n)
                rd["llama_speculative"] = llama_spec_tool(
                    [f"{bin_dir}/llama-speculative", "-m", gguf[("target", dt)], "-md", gguf[("draft", dt)]],
                    ["--draft-max", "4", "--draft-min", "0"], threads, a.n)
                rd["llama_lookup"] = llama_spec_tool([f"{bin_dir}/llama-lookup", "-m", gguf[("target", dt)]],
                                                     ["--draft-max", "4"], threads, a.n)
                cell["rounds"].append(rd)
            cell["environment"] = {"forward": compare_json.get("forward"), "blas": compare_json.get("blas"),
                                   "cpu": compare_json.get("cpu")}
            results.append(cell)

    med = statistics.median
    print()
    print(f"cpu: {results[0]['environment']['cpu']}")
    print(f"draftlab forward: {results[0]['environment']['forward']} (weights as named per table)")
    print(f"llama.cpp: {bin_dir}; {a.rounds} rounds, medians; prompts: README's main job, -n {a.n}\n")
    for cell in results:
        rounds = cell["rounds"]
        llama_tg = med([r["llama_tg"] for r in rounds])
        dl = {k: med([r["draftlab"][k] for r in rounds]) for k in rounds[0]["draftlab"]}
        print(f"## {cell['dtype']} weights, {cell['threads']} thread(s)\n")
        print("| figure | draftlab | llama.cpp | draftlab / llama.cpp |")
        print("|---|---|---|---|")
        print(f"| plain decoding, tokens/s | {dl['vanilla']:.0f} | {llama_tg:.0f} | {dl['vanilla'] / llama_tg:.2f}x |")
        for n in ns:
            d = med([r["draftlab_forward_ms"][n] for r in rounds])
            l = med([r["llama_pp_ms"][n] for r in rounds])
            print(f"| forward of n = {n} new tokens, ms | {d:.2f} | {l:.2f} | {l / d:.2f}x faster |")
        sp = med([r["llama_speculative"] for r in rounds])
        lk = med([r["llama_lookup"] for r in rounds])
        print(f"| draft-model speculation (ts-draft, 4 drafted), tokens/s | {dl['chain (ts-draft)']:.0f} | {sp:.0f} | "
              f"{dl['chain (ts-draft)'] / sp:.2f}x |")
        print(f"| prompt lookup, tokens/s | {dl['pld']:.0f} | {lk:.0f} | {dl['pld'] / lk:.2f}x |")
        print("\n| draftlab method | tokens/s | over draftlab vanilla | over llama.cpp plain decoding |")
        print("|---|---|---|---|")
        for k, v in dl.items():
            print(f"| {k} | {v:.0f} | {v / dl['vanilla']:.2f}x | {v / llama_tg:.2f}x |")
        print()
    if a.out:
        env = {"host": platform.node(), "openblas_coretype": os.environ.get("OPENBLAS_CORETYPE"),
               "llama_cpp_bin": bin_dir}
        with open(a.out + ".tmp", "w") as f:
            json.dump({"environment": env, "results": results}, f, indent=1)
        os.replace(a.out + ".tmp", a.out)
        print(f"wrote {a.out}")


if __name__ == "__main__":
    main()
