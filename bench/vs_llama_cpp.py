#!/usr/bin/env python3
"""draftlab beside llama.cpp on the very same weights, in one run, interleaved.

    python3 bench/vs_llama_cpp.py                      # ts-target, float32 and float16 weights, 1 and 2 threads
    python3 bench/vs_llama_cpp.py --threads 1 --dtypes f16 --rounds 5 --out /tmp/vs.json
    python3 bench/vs_llama_cpp.py --isas native,avx2   # also AVX2 on an AVX-512 machine: DRAFTLAB_ISA=avx2 beside
                                                        # llama.cpp built for AVX2 only (LLAMA_ISA=avx2)
    python3 bench/vs_llama_cpp.py --dtypes q8_0,q8_0+int8  # draftlab's q8_0 with float and with int8 dot products
                                                           # (--quant-dot int8), llama.cpp on the same Q8_0 file

What it does:
  1. builds the peer (bash ../shared/peers/build_llama_cpp.sh; reused when built) and draftlab must be built;
  2. exports the target and the draft LM with `draftlab export-gguf` (f32, f16, q8_0, q4_0 as --dtypes asks), so
     both engines read the same weights (draftlab reads its own checkpoint folder with --weights float32 / float16 /
     q8_0 / q4_0: the same values; quantized at load as the export quantizes);
  3. per round, per weight dtype and thread count, alternating the two engines:
       plain decoding        draftlab compare (vanilla)           vs  llama-bench -p 0 -n 128 (tg128)
       forward cost, n new   bench/forward_cost --cache 0         vs  llama-bench -p n -n 0 (one batch of n)
       draft-model spec.     compare chain:draft=ts-draft,gamma=4  vs  llama-speculative --draft-max 4
       prompt lookup         compare pld                          vs  llama-lookup
       every strategy        compare (README's main job's methods, Medusa, Hydra, Lookahead), as a ratio over
                             llama.cpp's plain decoding;
       speculative against   llama.cpp 2026's own speculative decoding (spec-peer, ../shared/peers/
       speculative           build_llama_cpp_2026.sh; --prefill-first, draftlab's loop start): draft-simple (ts-draft)
                             vs chain, draft-eagle3 with the EAGLE-3 head draftlab exports vs eagle3 chains of 4 and 8
                             and draftlab's best EAGLE tree, draft-dflash with the DFlash draft draftlab exports vs
                             dflash at the same block (--draft-max 3 = block_size=4: the same drafts, tested in
                             cli.export_gguf), ngram-simple vs pld; llama.cpp's texts with drafts must
                             equal its plain decoding's (checked, not assumed; draftlab's compare checks its own);
       peak memory           RSS of draftlab generate (vanilla) vs llama-simple, the same prompt and length;
  4. prints medians over the rounds and the ratios, one table per ISA x dtype x threads and a summary table of the
     issue's targets, and writes them with the environment as JSON (--out).
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


# The ISA under test, set per cell: draftlab reads DRAFTLAB_ISA; llama.cpp is the build for that ISA.
ENV = dict(os.environ)


def run(cmd, **kw):
    r = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=ENV, **kw)
    if r.returncode != 0:
        sys.exit(f"vs_llama_cpp: command failed ({r.returncode}): {' '.join(cmd)}\n{r.stderr[-2000:]}")
    return r


def peak_rss_mb(cmd):
    """Runs cmd to completion and returns its peak resident set (MB), from the kernel's rusage of that child."""
    p = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, env=ENV)
    _, status, usage = os.wait4(p.pid, 0)
    err = p.stderr.read().decode(errors="replace")
    p.stderr.close()
    if os.waitstatus_to_exitcode(status) != 0:
        sys.exit(f"vs_llama_cpp: command failed: {' '.join(cmd)}\n{err[-2000:]}")
    return usage.ru_maxrss / 1024.0  # KB on Linux


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


def spec_peer(bin_dir, target, threads, n, spec_type="none", draft=None, draft_max=4):
    """llama.cpp 2026's speculative loop over the prompts: decoding tokens/s (total tokens / total decode time),
    mean tau, and the texts."""
    tokens = seconds = 0.0
    taus, texts = [], []
    for p in PROMPTS:
        cmd = [f"{bin_dir}/spec-peer", "-m", target, "--spec-type", spec_type, "--draft-max", str(draft_max),
               "-n", str(n), "-t", str(threads), "--temp", "0", "--prefill-first"] + (["-md", draft] if draft else [])
        out = run(cmd + [p]).stdout
        m = re.search(r"^RESULT (.*)$", out, re.M)
        if not m:
            sys.exit(f"vs_llama_cpp: no RESULT line from spec-peer --spec-type {spec_type}")
        fields = dict(kv.split("=", 1) for kv in m.group(1).split())
        tokens += float(fields["tok_s"]) * float(fields["decode_s"])
        seconds += float(fields["decode_s"])
        taus.append(float(fields["tau"]))
        texts.append("\n".join(l for l in out.splitlines() if not l.startswith(("[spec-peer]", "RESULT"))))
    return tokens / seconds, statistics.mean(taus), texts


# A --dtypes entry: the GGUF type both engines read, and draftlab's --quant-dot ("q4_0+int8": Q4_0, int8).
def gguf_type(dt):
    return dt.split("+")[0]


def quant_dot(dt):
    return dt.split("+")[1] if "+" in dt else "float"


def draftlab_compare(draftlab, model, weights, dot, threads, n, strategies):
    with tempfile.NamedTemporaryFile(suffix=".json") as f:
        cmd = [draftlab, "compare", "--model", model, "--weights", weights, "--quant-dot", dot, "--threads", str(threads),
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


def draftlab_forward_cost(forward_cost, model, weights, dot, threads, max_n):
    with tempfile.NamedTemporaryFile(suffix=".json") as f:
        run([forward_cost, "--model", model, "--weights", weights, "--quant-dot", dot, "--threads", str(threads),
             "--cache", "0",
             "--max-n", str(max_n), "--warmup", "5", "--repeats", "21", "--out", f.name])
        data = json.load(open(f.name))
    return {r["n"]: r["median_ms"] for r in data["curves"][0]["results"]}, data


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--model", default=os.path.join(ROOT, "data/models/ts-target"))
    ap.add_argument("--draft", default=os.path.join(ROOT, "data/models/ts-draft"))
    ap.add_argument("--head", default=os.path.join(ROOT, "data/models/ts-target-eagle-head"))
    ap.add_argument("--medusa", default=os.path.join(ROOT, "data/models/ts-target-medusa"))
    ap.add_argument("--hydra", default=os.path.join(ROOT, "data/models/ts-target-hydra"))
    ap.add_argument("--eagle3-head", default=os.path.join(ROOT, "data/models/ts-target-eagle3-head"))
    ap.add_argument("--dflash-head", default=os.path.join(ROOT, "data/models/ts-target-dflash-head"))
    ap.add_argument("--spec-peer", default="/tmp/llama2026",
                    help="where ../shared/peers/build_llama_cpp_2026.sh builds llama.cpp 2026 (reused when built)")
    ap.add_argument("--isas", default="native",
                    help="native (the CPU's best) and/or avx2 (DRAFTLAB_ISA=avx2 beside llama.cpp built for AVX2 only)")
    ap.add_argument("--build", default=os.path.join(ROOT, "build"))
    ap.add_argument("--threads", default="1,2")
    ap.add_argument("--dtypes", default="f32,f16",
                    help="f32, f16, q8_0, q4_0; q8_0+int8 / q4_0+int8: the same files, draftlab with --quant-dot int8")
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
    bin_dirs = {}
    for isa in a.isas.split(","):
        if isa not in ("native", "avx2"):
            sys.exit(f"vs_llama_cpp: --isas: expected native and/or avx2, got '{isa}'")
        print(f"building the llama.cpp peer for {isa} (reused when built) ...", file=sys.stderr, flush=True)
        ENV["LLAMA_ISA"] = isa
        bin_dirs[isa] = run(["bash", build_script]).stdout.strip().splitlines()[-1]
    spec_dirs = {}
    for isa in bin_dirs:
        print(f"building the llama.cpp 2026 peer for {isa} (reused when built) ...", file=sys.stderr, flush=True)
        ENV["LLAMA_ISA"] = isa
        spec_dirs[isa] = run(["bash", os.path.join(SHARED, "peers", "build_llama_cpp_2026.sh"),
                              a.spec_peer]).stdout.strip().splitlines()[-1]

    work = tempfile.mkdtemp(prefix="vs-llama-")
    # q8_0: draftlab quantizes the checkpoint's values at load exactly as the exported Q8_0 GGUF holds them.
    weights_name = {"f32": "float32", "f16": "float16", "q8_0": "q8_0", "q4_0": "q4_0"}
    gguf = {}
    for dt in sorted({gguf_type(dt) for dt in a.dtypes.split(",")}):
        if dt not in weights_name:
            sys.exit(f"vs_llama_cpp: --dtypes: expected f32, f16, q8_0, q4_0 (q8_0 / q4_0 with +int8), got '{dt}'")
        for role, path in (("target", a.model), ("draft", a.draft)):
            out = os.path.join(work, f"{role}-{dt}.gguf")
            run([draftlab, "export-gguf", "-m", path, "-o", out, "--type", dt])
            gguf[(role, dt)] = out
        out = os.path.join(work, f"eagle3-{dt}.gguf")
        run([draftlab, "export-gguf", "-m", a.model, "--head", a.eagle3_head, "-o", out, "--type", dt])
        gguf[("eagle3", dt)] = out
        out = os.path.join(work, f"dflash-{dt}.gguf")
        run([draftlab, "export-gguf", "-m", a.model, "--head", a.dflash_head, "-o", out, "--type", dt])
        gguf[("dflash", dt)] = out

    strategies = {
        "eagle2 (4/4/1)": f"eagle2:head={a.head},total_tokens=4,depth=4,top_k=1",
        "eagle2 (6/4/2)": f"eagle2:head={a.head},total_tokens=6,depth=4,top_k=2",
        "eagle2 (10/4/2)": f"eagle2:head={a.head},total_tokens=10,depth=4,top_k=2",
        "eagle2 (auto)": f"eagle2:head={a.head},total_tokens=auto",
        "eagle2 (60/6/10)": f"eagle2:head={a.head}",
        "eagle-chain": f"eagle-chain:head={a.head}",
        "eagle3 (4/4/1)": f"eagle3:head={a.eagle3_head},total_tokens=4,depth=4,top_k=1",
        "eagle3 chain (4)": f"eagle3:head={a.eagle3_head},top_k=1,depth=4",
        "eagle3 chain (8)": f"eagle3:head={a.eagle3_head},top_k=1,depth=8",
        "dflash (B 4)": f"dflash:head={a.dflash_head},block_size=4",
        "chain (ts-draft)": f"chain:draft={a.draft},gamma=4",
        "pld": "pld",
        "lookahead": "lookahead",
    }
    if os.path.isdir(a.medusa):
        strategies["medusa"] = f"medusa:head={a.medusa}"
    if os.path.isdir(a.hydra):
        strategies["hydra"] = f"hydra:head={a.hydra}"
    ns = [1 << i for i in range(a.max_n.bit_length()) if (1 << i) <= a.max_n]
    results = []
    cells = [(isa, dt, int(t)) for isa in a.isas.split(",") for dt in a.dtypes.split(",") for t in a.threads.split(",")]
    for isa, dt, threads in cells:
        bin_dir = bin_dirs[isa]
        gt, dot = gguf_type(dt), quant_dot(dt)
        if isa == "avx2":
            ENV["DRAFTLAB_ISA"] = "avx2"
        else:
            ENV.pop("DRAFTLAB_ISA", None)
        cell = {"isa": isa, "dtype": dt, "threads": threads, "rounds": []}
        for r in range(a.rounds):
            print(f"{isa} {dt} {threads} thread(s): round {r + 1}/{a.rounds}", file=sys.stderr, flush=True)
            rd = {}
            # Alternate the engines within each measurement.
            rd["llama_tg"] = llama_bench(bin_dir, gguf[("target", gt)], threads, gen=a.n)
            rd["draftlab"], _ = draftlab_compare(draftlab, a.model, weights_name[gt], dot, threads, a.n, strategies)
            rd["llama_pp_ms"] = {}
            for n in ns:
                rd["llama_pp_ms"][n] = 1000.0 * n / llama_bench(bin_dir, gguf[("target", gt)], threads, prompt=n)
            rd["draftlab_forward_ms"], fc_json = draftlab_forward_cost(forward_cost, a.model, weights_name[gt], dot,
                                                                       threads, a.max_n)
            rd["llama_speculative"] = llama_spec_tool(
                [f"{bin_dir}/llama-speculative", "-m", gguf[("target", gt)], "-md", gguf[("draft", gt)]],
                ["--draft-max", "4", "--draft-min", "0"], threads, a.n)
            rd["llama_lookup"] = llama_spec_tool([f"{bin_dir}/llama-lookup", "-m", gguf[("target", gt)]],
                                                 ["--draft-max", "4"], threads, a.n)
            sd, target = spec_dirs[isa], gguf[("target", gt)]
            plain_rate, _, plain_texts = spec_peer(sd, target, threads, a.n)
            rd["spec_peer"] = {"none": (plain_rate, 1.0)}
            for label, kind, draft, k in (("draft-simple 4", "draft-simple", gguf[("draft", gt)], 4),
                                          ("draft-eagle3 4", "draft-eagle3", gguf[("eagle3", gt)], 4),
                                          ("draft-eagle3 8", "draft-eagle3", gguf[("eagle3", gt)], 8),
                                          ("draft-dflash 3", "draft-dflash", gguf[("dflash", gt)], 3),
                                          ("ngram-simple", "ngram-simple", None, 4)):
                rate, tau, texts = spec_peer(sd, target, threads, a.n, kind, draft, k)
                if texts != plain_texts:
                    sys.exit(f"vs_llama_cpp: llama.cpp's {label} text differs from its plain decoding ({dt})")
                rd["spec_peer"][label] = (rate, tau)
            rd["draftlab_rss_mb"] = peak_rss_mb(
                [draftlab, "generate", "-m", a.model, "--weights", weights_name[gt], "--quant-dot", dot,
                 "--threads", str(threads),
                 "-p", PROMPTS[0], "-n", str(a.n)])
            # What the process costs before any model: libtorch and its ~290 shared libraries.
            rd["draftlab_libraries_rss_mb"] = peak_rss_mb([draftlab, "generate", "--help"])
            rd["llama_rss_mb"] = peak_rss_mb(
                [f"{bin_dir}/llama-simple", "-m", gguf[("target", gt)], "-n", str(a.n), PROMPTS[0]])
            cell["rounds"].append(rd)
        cell["environment"] = {"forward": fc_json.get("forward"), "isa": fc_json.get("isa"),
                               "parameters": fc_json.get("parameters"),
                               "fma_peak_gflops": fc_json.get("fma_peak_gflops"), "blas": fc_json.get("blas"),
                               "cpu": fc_json.get("cpu")}
        results.append(cell)

    med = statistics.median
    print()
    print(f"cpu: {results[0]['environment']['cpu']}")
    print(f"llama.cpp: {', '.join(f'{k}: {v}' for k, v in bin_dirs.items())}; {a.rounds} rounds, medians; "
          f"prompts: README's main job, -n {a.n}\n")
    summary = []
    for cell in results:
        rounds = cell["rounds"]
        llama_tg = med([r["llama_tg"] for r in rounds])
        dl = {k: med([r["draftlab"][k] for r in rounds]) for k in rounds[0]["draftlab"]}
        env = cell["environment"]
        print(f"## {cell['isa']} ({env['forward']}), {cell['dtype']} weights, {cell['threads']} thread(s)\n")
        print(f"FMA peak of one core with {env['isa']} vectors: {env['fma_peak_gflops']:.0f} GFLOP/s\n")
        print("| figure | draftlab | llama.cpp | draftlab / llama.cpp |")
        print("|---|---|---|---|")
        print(f"| plain decoding, tokens/s | {dl['vanilla']:.0f} | {llama_tg:.0f} | {dl['vanilla'] / llama_tg:.2f}x |")
        fwd = {}
        for n in ns:
            d = med([r["draftlab_forward_ms"][n] for r in rounds])
            l = med([r["llama_pp_ms"][n] for r in rounds])
            fwd[n] = (d, l)
            print(f"| forward of n = {n} new tokens, ms (x n = 1) | {d:.2f} ({d / fwd[1][0]:.1f}x) | "
                  f"{l:.2f} ({l / fwd[1][1]:.1f}x) | {l / d:.2f}x faster |")
        sp = med([r["llama_speculative"] for r in rounds])
        lk = med([r["llama_lookup"] for r in rounds])
        print(f"| draft-model speculation (ts-draft, 4 drafted), tokens/s | {dl['chain (ts-draft)']:.0f} | {sp:.0f} | "
              f"{dl['chain (ts-draft)'] / sp:.2f}x |")
        print(f"| prompt lookup, tokens/s | {dl['pld']:.0f} | {lk:.0f} | {dl['pld'] / lk:.2f}x |")
        rss_d = med([r["draftlab_rss_mb"] for r in rounds])
        rss_l = med([r["llama_rss_mb"] for r in rounds])
        rss_base = med([r["draftlab_libraries_rss_mb"] for r in rounds])
        # The weights as the run stores them: parameters x bytes of the dtype (the GGUF file holds more).
        stored_mb = cell["environment"]["parameters"] * {"f32": 4, "f16": 2, "q8_0": 34 / 32, "q4_0": 18 / 32}[gguf_type(cell["dtype"])] / 2**20
        print(f"| peak RSS of plain decoding, MB | {rss_d:.0f} | {rss_l:.0f} | {rss_d / rss_l:.2f}x |")
        print(f"| ... less draftlab's libraries ({rss_base:.0f} MB with no model), MB; x weights as stored "
              f"({stored_mb:.0f} MB) | {rss_d - rss_base:.0f} ({(rss_d - rss_base) / stored_mb:.2f}x) | "
              f"{rss_l:.0f} ({rss_l / stored_mb:.2f}x) | {(rss_d - rss_base) / rss_l:.2f}x |")
        sp26 = {k: (med([r["spec_peer"][k][0] for r in rounds]), med([r["spec_peer"][k][1] for r in rounds]))
                for k in rounds[0]["spec_peer"]}
        plain26 = sp26["none"][0]
        best_tree = max(("eagle2 (4/4/1)", "eagle3 (4/4/1)"), key=lambda k: dl[k])
        print(f"\nSpeculative against speculative (llama.cpp 2026 spec-peer, plain {plain26:.0f} tokens/s):\n")
        print("| draftlab | tokens/s | over llama.cpp 2026 plain | llama.cpp 2026 | tokens/s (tau) | over its plain | "
              "draftlab / llama.cpp |")
        print("|---|---|---|---|---|---|---|")
        for ours, theirs in (("chain (ts-draft)", "draft-simple 4"), ("eagle3 chain (4)", "draft-eagle3 4"),
                             ("eagle3 chain (8)", "draft-eagle3 8"), (best_tree, "draft-eagle3 4"),
                             ("dflash (B 4)", "draft-dflash 3"),
                             ("pld", "ngram-simple")):
            rate, tau = sp26[theirs]
            print(f"| {ours} | {dl[ours]:.0f} | {dl[ours] / plain26:.2f}x | {theirs} | {rate:.0f} ({tau:.2f}) | "
                  f"{rate / plain26:.2f}x | {dl[ours] / rate:.2f}x |")
        print("\n| draftlab method | tokens/s | over draftlab vanilla | over llama.cpp plain decoding |")
        print("|---|---|---|---|")
        for k, v in dl.items():
            print(f"| {k} | {v:.0f} | {v / dl['vanilla']:.2f}x | {v / llama_tg:.2f}x |")
        print()
        best = max((k for k in dl if k.startswith("eagle2")), key=lambda k: dl[k])
        big = max(ns)
        summary.append((cell, dl["vanilla"] / llama_tg, best, dl[best] / llama_tg, dl[best] / dl["vanilla"],
                        fwd[min(8, big)][0] / fwd[1][0], fwd[big][0] / fwd[1][0], big,
                        all(fwd[n][0] <= fwd[n][1] for n in ns), rss_d / rss_l))
    print("## Summary (issue 20's targets: plain >= 1.2x llama.cpp; best EAGLE-2 >= 2.0x llama.cpp and >= 1.5x "
          "vanilla; forward n = 8 <= 2.0x n = 1)\n")
    print("| ISA | weights | threads | plain / llama.cpp | best EAGLE-2 | over llama.cpp | over vanilla | "
          "fwd n=8 / n=1 | fwd n=max / n=1 | forward <= llama.cpp at every n | RSS / llama.cpp |")
    print("|---|---|---|---|---|---|---|---|---|---|---|")
    for cell, plain, best, best_l, best_v, r8, rmax, big, cheaper, rss in summary:
        print(f"| {cell['isa']} | {cell['dtype']} | {cell['threads']} | {plain:.2f}x | {best} | {best_l:.2f}x | "
              f"{best_v:.2f}x | {r8:.2f}x | {rmax:.1f}x (n={big}) | {'yes' if cheaper else 'no'} | {rss:.2f}x |")
    print()
    if a.out:
        env = {"host": platform.node(), "openblas_coretype": os.environ.get("OPENBLAS_CORETYPE"),
               "llama_cpp_bin": bin_dir, "llama_cpp_2026_bin": spec_dirs}
        with open(a.out + ".tmp", "w") as f:
            json.dump({"environment": env, "results": results}, f, indent=1)
        os.replace(a.out + ".tmp", a.out)
        print(f"wrote {a.out}")


if __name__ == "__main__":
    main()
