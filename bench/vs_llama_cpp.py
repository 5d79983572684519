#!/usr/bin/env python3
"""draftlab beside llama.cpp on the very same weights, in one run, interleaved.

    python3 bench/vs_llama_cpp.py                      # ts-target, float32 and float16 weights, 1 and 2 threads
    python3 bench/vs_llama_cpp.py --threads 1 --dtypes f16 --rounds 5 --out /tmp/vs.json
    python3 bench/vs_llama_cpp.py --isas native,avx2   # also AVX2 on an AVX-512 machine: DRAFTLAB_ISA=avx2 beside
                                                        # llama.cpp built for AVX2 only (LLAMA_ISA=avx2)
    python3 bench/vs_llama_cpp.py --dtypes q8_0,q8_0+int8  # draftlab's q8_0 with float and with int8 dot products
                                                           # (--quant-dot int8), llama.cpp on the same Q8_0 file
    python3 bench/vs_llama_cpp.py --bench mt_bench,gsm8k --num-prompts 5 --methods drafters
                                                        # the first turns of bench sets instead of README's prompts;
                                                        # only the 2026-drafters table's methods (or table1's)

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
                             dflash at the same block (--draft-max B - 1: the same drafts, tested in cli.export_gguf),
                             the ngram types, each tuned (below), vs pld, lookahead and suffix;
       the same text         draftlab's plain decoding must print exactly llama.cpp 2026's (generate vs spec-peer
                             none, each prompt, once per cell), and llama.cpp's texts with drafts must equal its plain
                             decoding's (checked, not assumed; draftlab's compare checks its own methods);
       peak memory           RSS of draftlab generate (vanilla) vs llama-simple, the same prompt and length;
  4. prints medians over the rounds and the ratios, one table per ISA x dtype x threads and two summary tables of
     the issues' targets (issue 20: against plain decoding; issue 42: draftlab's best against llama.cpp's best of
     every configuration, either peer, with what each engine's multi-row forward costs beside), and writes them with
     the environment and llama.cpp's builds and flags as JSON (--out).
Tuning llama.cpp's ngram types: their defaults (ngram-simple / map-k: 12-token keys, ngram-mod: 24) never match in
answers of a hundred tokens, so each cell first runs every type over a small grid of its key length and draft
length (NGRAM_GRID, once over the prompts, untimed for the tables) and keeps each type's fastest setting.
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


def bench_prompts(sets, count):
    """The first turn of the first `count` questions of each bench set (the files compare --bench reads)."""
    prompts = []
    for name in sets:
        path = name if name.endswith(".jsonl") else os.path.join(SHARED, "data", "bench", name, "question.jsonl")
        if not os.path.exists(path):
            sys.exit(f"vs_llama_cpp: --bench: {path} not found (expected a set of $DRAFTLAB_SHARED/data/bench or a .jsonl)")
        with open(path) as f:
            lines = [l for l in f if l.strip()][:count]
        prompts += [json.loads(l)["turns"][0] for l in lines]
    return prompts


def prompt_tokens(draftlab, model, prompt):
    """How many tokens draftlab's tokenizer makes of the prompt (BOS included), from generate --print-ids."""
    r = subprocess.run([draftlab, "generate", "-m", model, "-p", prompt, "-n", "1", "--print-ids"],
                       stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=ENV)
    m = re.search(r"^prompt_ids (.*)$", r.stdout, re.M) if r.returncode == 0 else None
    if m:
        return len(m.group(1).split())
    m = re.search(r"prompt has (\d+) tokens, the context holds", r.stderr)  # generate refuses a prompt too long
    if not m:
        sys.exit(f"vs_llama_cpp: draftlab generate failed on a prompt: {r.stderr[-500:]}")
    return int(m.group(1))


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


def llama_spec_tool(tool, args, threads, n, ignore_eos=False):
    """tokens/s of llama-speculative or llama-lookup over the prompts: total decoded tokens / total decode time."""
    tokens = seconds = 0.0
    for p in PROMPTS:
        r = run(tool + ["-p", p, "-n", str(n), "-t", str(threads), "--temp", "0", "-s", "1"] + args +
                (["--ignore-eos"] if ignore_eos else []))
        m = re.search(r"decoded\s+(\d+) tokens in\s+([\d.]+) seconds", r.stderr + r.stdout)
        if not m:
            sys.exit(f"vs_llama_cpp: no 'decoded ... tokens in ... seconds' line from {tool[0]}")
        tokens += float(m.group(1))
        seconds += float(m.group(2))
    return tokens / seconds


def spec_peer(bin_dir, target, threads, n, spec_type="none", draft=None, draft_max=4, extra=(), ignore_eos=False):
    """llama.cpp 2026's speculative loop over the prompts: decoding tokens/s (total tokens / total decode time),
    tau (tokens per target step over all prompts), draft ms per decoded token, and the texts."""
    tokens = seconds = steps = draft_ms = 0.0
    texts = []
    for p in PROMPTS:
        cmd = [f"{bin_dir}/spec-peer", "-m", target, "--spec-type", spec_type, "--draft-max", str(draft_max),
               "-n", str(n), "-t", str(threads), "--temp", "0", "--prefill-first"] + (["-md", draft] if draft else [])
        out = run(cmd + list(extra) + (["--ignore-eos"] if ignore_eos else []) + [p]).stdout
        m = re.search(r"^RESULT (.*)$", out, re.M)
        t = re.search(r"time: target [\d.]+ ms, draft ([\d.]+) ms", out)
        if not m or not t:
            sys.exit(f"vs_llama_cpp: no RESULT or time line from spec-peer --spec-type {spec_type}")
        fields = dict(kv.split("=", 1) for kv in m.group(1).split())
        # The text from the prompt on: spec-peer prints the BOS piece first (whatever the vocabulary calls it).
        text = "\n".join(l for l in out.splitlines() if not l.startswith(("[spec-peer]", "RESULT")))
        texts.append(text[text.find(p):] if p in text else text)
        decoded = float(re.search(r"decode: (\d+) tokens", out).group(1))
        if decoded == 0:  # the answer ended at its first token
            continue
        tokens += decoded
        seconds += decoded / float(fields["tok_s"])  # decode_s has four decimals: too few for a short answer
        steps += decoded / float(fields["tau"])
        draft_ms += float(t.group(1))
    if tokens == 0:  # every answer ended at once (text checks)
        return {"tok_s": float("nan"), "tau": float("nan"), "draft_ms_per_token": float("nan")}, texts
    return {"tok_s": tokens / seconds, "tau": tokens / steps, "draft_ms_per_token": draft_ms / tokens}, texts


# llama.cpp's ngram types, each over a grid of (key length, draft length); the fastest setting per type and cell
# is kept. Key lengths 1-4 are what prompt lookup (pld: 1-3) matches in short answers.
NGRAM_GRID = {
    "ngram-simple": [(["--ngram-n", str(k), "--ngram-m", str(m)], m) for k in (1, 2, 3) for m in (4, 8)],
    "ngram-map-k": [(["--ngram-n", str(k), "--ngram-m", str(m)], m) for k in (1, 2, 3) for m in (4, 8)],
    "ngram-mod": [(["--ngram-mod-match", str(k), "--ngram-mod-min", "1", "--ngram-mod-max", str(m)], m)
                  for k in (2, 3, 4) for m in (4, 8)],
    "ngram-cache": [([], m) for m in (2, 4, 8)],
}


def tuned(setting):
    """An ngram type's tuned setting as spec-peer's flags."""
    return " ".join(setting["args"] + ["--draft-max", str(setting["draft_max"])])


def draftlab_texts(draftlab, model, weights, dot, threads, n):
    """draftlab's plain decoding of each prompt (generate): prompt and answer."""
    return [run([draftlab, "generate", "-m", model, "--weights", weights, "--quant-dot", dot, "--threads",
                         str(threads), "-p", p, "-n", str(n)]).stdout for p in PROMPTS]


# A --dtypes entry: the GGUF type both engines read, and draftlab's --quant-dot ("q4_0+int8": Q4_0, int8).
def gguf_type(dt):
    return dt.split("+")[0]


# draftlab's --weights for a GGUF type.
DRAFTLAB_WEIGHTS = {"f32": "float32", "f16": "float16", "q8_0": "q8_0", "q4_0": "q4_0"}


def quant_dot(dt):
    return dt.split("+")[1] if "+" in dt else "float"


def draftlab_compare(draftlab, model, weights, dot, threads, n, strategies, ignore_eos=False):
    with tempfile.NamedTemporaryFile(suffix=".json") as f:
        cmd = [draftlab, "compare", "--model", model, "--weights", weights, "--quant-dot", dot, "--threads", str(threads),
               "-n", str(n), "--repeats", "1", "--warmup", "1", "--bounds", "--json", f.name] + \
              (["--ignore-eos"] if ignore_eos else [])
        for p in PROMPTS:
            cmd += ["--prompt", p]
        for spec in strategies.values():
            cmd += ["--strategy", spec]
        run(cmd)
        data = json.load(open(f.name))
    # compare prints vanilla first, then the strategies in the order given. Draft cost per token: the method's
    # drafting share of its time over the tokens it decoded. Bounds (--bounds, under the cost model compare measures
    # in process): the decode speedup, Sequoia's bound for the method's acceptance and the perfect-drafter ceiling.
    names = ["vanilla"] + list(strategies)
    return {name: method_figures(m) for name, m in zip(names, data["methods"])}, data


def method_figures(m):
    """One method of compare's JSON: tokens/s, tau, draft ms per decoded token and, from its bounds (NaN for
    vanilla), the decode speedup, Sequoia's bound and tree size and the ceiling."""
    b = m.get("bounds") or {}
    nan = float("nan")
    return {"tok_s": m["tokens_per_second"], "tau": m["tau"],
            "draft_ms_per_token": 1000.0 * m.get("draft_share", 0.0) / m["tokens_per_second"],
            "decode_speedup": b.get("decode_speedup", nan), "bound": b.get("sequoia_bound_speedup", nan),
            "bound_nodes": b.get("sequoia_bound_nodes", nan), "ceiling": b.get("ceiling_speedup", nan)}


def draftlab_forward_cost(forward_cost, model, weights, dot, threads, max_n):
    with tempfile.NamedTemporaryFile(suffix=".json") as f:
        run([forward_cost, "--model", model, "--weights", weights, "--quant-dot", dot, "--threads", str(threads),
             "--cache", "0",
             "--max-n", str(max_n), "--warmup", "5", "--repeats", "21", "--out", f.name])
        data = json.load(open(f.name))
    return {r["n"]: r["median_ms"] for r in data["curves"][0]["results"]}, data


# draftlab's methods: label, strategy, and the method sets (--methods) that run it besides "all": "t" Table 1
# (scripts/reproduce.sh speed), "d" the 2026-drafters table (reproduce.sh drafters).
def draftlab_methods(a):
    e2, e3 = f"head={a.head}", f"head={a.eagle3_head}"
    m = [("eagle2 (4/4/1)", f"eagle2:{e2},total_tokens=4,depth=4,top_k=1", "td"),
         ("eagle2 (6/4/2)", f"eagle2:{e2},total_tokens=6,depth=4,top_k=2", ""),
         ("eagle2 (10/4/2)", f"eagle2:{e2},total_tokens=10,depth=4,top_k=2", ""),
         ("eagle2 (auto)", f"eagle2:{e2},total_tokens=auto", ""),
         ("eagle2 (60/6/10)", f"eagle2:{e2}", "t"),
         ("static-tree", f"static-tree:{e2}", "t"),
         ("eagle-chain", f"eagle-chain:{e2}", "t"),
         ("eagle3 (4/4/1)", f"eagle3:{e3},total_tokens=4,depth=4,top_k=1", "td"),
         ("eagle3 chain (4)", f"eagle3:{e3},top_k=1,depth=4", "td"),
         ("eagle3 chain (8)", f"eagle3:{e3},top_k=1,depth=8", "td"),
         ("chain (ts-draft)", f"chain:draft={a.draft},gamma=4", "td"),
         ("pard k=2", f"pard:draft={a.pard_draft},k=2", "d"),
         ("peagle k=3", f"peagle:head={a.peagle_head},k=3", "d"),
         ("dflash (B 4)", f"dflash:head={a.dflash_head},block_size=4", "d"),
         ("dflash (B 8)", f"dflash:head={a.dflash_head},block_size=8", "d"),
         ("dflash (B 16)", f"dflash:head={a.dflash_head},block_size=16", "d"),
         ("dflash+ddtree (B 8, 8 nodes)", f"dflash:head={a.dflash_head},block_size=8,ddtree_nodes=8", "d"),
         ("pld", "pld", "td"),
         ("lookahead", "lookahead", "td"),
         ("suffix", "suffix", "d")]
    if os.path.isdir(a.medusa):
        m.append(("medusa", f"medusa:head={a.medusa}", "t"))
    if os.path.isdir(a.hydra):
        m.append(("hydra", f"hydra:head={a.hydra}", "t"))
    return {label: spec for label, spec, sets in m if a.methods == "all" or a.methods[0] in sets}


# llama.cpp 2026's model-drafted types: label, --spec-type, the exported GGUF it drafts with, --draft-max, sets.
PEER_TYPES = [("draft-simple 4", "draft-simple", "draft", 4, "td"),
              ("draft-eagle3 4", "draft-eagle3", "eagle3", 4, "td"),
              ("draft-eagle3 8", "draft-eagle3", "eagle3", 8, "td"),
              ("draft-dflash 3", "draft-dflash", "dflash", 3, "d"),
              ("draft-dflash 7", "draft-dflash", "dflash", 7, "d"),
              ("draft-dflash 15", "draft-dflash", "dflash", 15, "d")]

# Speculative against speculative: draftlab's method beside llama.cpp's type drafting the same way ("best tree":
# draftlab's better EAGLE tree of 4 / 4 / 1; "best ngram": llama.cpp's fastest tuned ngram type).
PAIRS = [("chain (ts-draft)", "draft-simple 4"), ("eagle3 chain (4)", "draft-eagle3 4"),
         ("eagle3 chain (8)", "draft-eagle3 8"), ("best tree", "draft-eagle3 4"), ("dflash (B 4)", "draft-dflash 3"),
         ("dflash (B 8)", "draft-dflash 7"), ("dflash (B 16)", "draft-dflash 15"), ("pld", "best ngram"),
         ("lookahead", "best ngram"), ("suffix", "best ngram")]


def first_difference(a, b):
    """'' when the texts are equal, else where they part: 'prompt i, character c'."""
    for i, (x, y) in enumerate(zip(a, b)):
        x, y = x.rstrip("\n"), y.rstrip("\n")
        if x != y:
            c = next((k for k, (u, v) in enumerate(zip(x, y)) if u != v), min(len(x), len(y)))
            return f"prompt {i + 1}, character {c}"
    return ""


def main():
    global PROMPTS
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--model", default=os.path.join(ROOT, "data/models/ts-target"))
    ap.add_argument("--draft", default=os.path.join(ROOT, "data/models/ts-draft"))
    ap.add_argument("--head", default=os.path.join(ROOT, "data/models/ts-target-eagle-head"))
    ap.add_argument("--medusa", default=os.path.join(ROOT, "data/models/ts-target-medusa"))
    ap.add_argument("--hydra", default=os.path.join(ROOT, "data/models/ts-target-hydra"))
    ap.add_argument("--eagle3-head", default=os.path.join(ROOT, "data/models/ts-target-eagle3-head"))
    ap.add_argument("--dflash-head", default=os.path.join(ROOT, "data/models/ts-target-dflash-head"))
    ap.add_argument("--peagle-head", default=os.path.join(ROOT, "data/models/ts-target-peagle-head"))
    ap.add_argument("--pard-draft", default=os.path.join(ROOT, "data/models/ts-draft-pard"))
    ap.add_argument("--spec-peer", default="/tmp/llama2026",
                    help="where ../shared/peers/build_llama_cpp_2026.sh builds llama.cpp 2026 (reused when built)")
    ap.add_argument("--isas", default="native",
                    help="native (the CPU's best) and/or avx2 (DRAFTLAB_ISA=avx2 beside llama.cpp built for AVX2 only)")
    ap.add_argument("--build", default=os.path.join(ROOT, "build"))
    ap.add_argument("--threads", default="1,2")
    ap.add_argument("--dtypes", default="f32,f16",
                    help="f32, f16, q8_0, q4_0; q8_0+int8 / q4_0+int8: the same files, draftlab with --quant-dot int8")
    ap.add_argument("--methods", default="all", choices=["all", "table1", "drafters"],
                    help="every method, or those of Table 1 (reproduce.sh speed) or of the 2026-drafters table")
    ap.add_argument("--bench", help="comma-separated bench sets (mt_bench, gsm8k, ...) or .jsonl files: the first turn "
                                    "of --num-prompts questions each, instead of README's three prompts")
    ap.add_argument("--num-prompts", type=int, default=3)
    ap.add_argument("--ignore-eos", action="store_true",
                    help="time -n tokens per prompt past end of sequence (a story model ends chat questions at once); "
                         "the engines differ there: draftlab decodes through EOS, llama.cpp bans it, so the texts are "
                         "checked equal up to the first EOS (plain decoding without the flag) and the timed texts differ "
                         "after it")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("-n", type=int, default=128, help="tokens to generate per prompt / llama-bench tg")
    ap.add_argument("--max-n", type=int, default=64, help="largest forward batch (powers of two from 1)")
    ap.add_argument("--out", help="write the results and environment as JSON here")
    a = ap.parse_args()
    if a.bench:
        PROMPTS = bench_prompts(a.bench.split(","), a.num_prompts)

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

    if a.bench:
        # Both engines must read the same prompt: one that does not leave -n tokens of the context is left out, not
        # cut (compare would cut it from the left; llama.cpp would refuse it).
        context = json.load(open(os.path.join(a.model, "config.json")))["max_position_embeddings"]
        fitting = [p for p in PROMPTS if prompt_tokens(draftlab, a.model, p) + a.n <= context]
        if len(fitting) < len(PROMPTS):
            print(f"vs_llama_cpp: {len(PROMPTS) - len(fitting)} of {len(PROMPTS)} prompts left out: longer than the "
                  f"context ({context}) less -n {a.n}", file=sys.stderr)
        if not fitting:
            sys.exit("vs_llama_cpp: no prompt of --bench fits the context less -n")
        PROMPTS = fitting
    strategies = draftlab_methods(a)
    peer_types = [t for t in PEER_TYPES if a.methods == "all" or a.methods[0] in t[4]]
    work = tempfile.mkdtemp(prefix="vs-llama-")
    # q8_0: draftlab quantizes the checkpoint's values at load exactly as the exported Q8_0 GGUF holds them.
    weights_name = DRAFTLAB_WEIGHTS
    gguf = {}
    for dt in sorted({gguf_type(dt) for dt in a.dtypes.split(",")}):
        if dt not in weights_name:
            sys.exit(f"vs_llama_cpp: --dtypes: expected f32, f16, q8_0, q4_0 (q8_0 / q4_0 with +int8), got '{dt}'")
        for role, path in (("target", a.model), ("draft", a.draft)):
            out = os.path.join(work, f"{role}-{dt}.gguf")
            run([draftlab, "export-gguf", "-m", path, "-o", out, "--type", dt])
            gguf[(role, dt)] = out
        for role, head in (("eagle3", a.eagle3_head), ("dflash", a.dflash_head)):
            out = os.path.join(work, f"{role}-{dt}.gguf")
            run([draftlab, "export-gguf", "-m", a.model, "--head", head, "-o", out, "--type", dt])
            gguf[(role, dt)] = out

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
        sd, target = spec_dirs[isa], gguf[("target", gt)]
        cell = {"isa": isa, "dtype": dt, "threads": threads, "rounds": []}
        # Once per cell: the texts of both engines' plain decoding, and the ngram types' tuning.
        print(f"{isa} {dt} {threads} thread(s): texts and ngram tuning", file=sys.stderr, flush=True)
        _, eos_texts = spec_peer(sd, target, threads, a.n)
        cell["texts_differ"] = first_difference(draftlab_texts(draftlab, a.model, weights_name[gt], dot, threads, a.n),
                                                eos_texts)
        plain_texts = spec_peer(sd, target, threads, a.n, ignore_eos=True)[1] if a.ignore_eos else eos_texts
        if cell["texts_differ"]:
            print(f"vs_llama_cpp: draftlab's plain text differs from llama.cpp's ({isa} {dt}): "
                  f"{cell['texts_differ']}", file=sys.stderr)
        cell["ngram_tuned"] = {}
        for kind, grid in NGRAM_GRID.items():
            tried = [(spec_peer(sd, target, threads, a.n, kind, None, k, extra, a.ignore_eos)[0]["tok_s"], extra, k)
                     for extra, k in grid]
            rate, extra, k = max(tried, key=lambda x: x[0])
            cell["ngram_tuned"][kind] = {"args": extra, "draft_max": k, "tuning_tok_s": rate}
        for r in range(a.rounds):
            print(f"{isa} {dt} {threads} thread(s): round {r + 1}/{a.rounds}", file=sys.stderr, flush=True)
            rd = {}
            # Alternate the engines within each measurement.
            rd["llama_tg"] = llama_bench(bin_dir, target, threads, gen=a.n)
            rd["draftlab"], _ = draftlab_compare(draftlab, a.model, weights_name[gt], dot, threads, a.n, strategies,
                                                 a.ignore_eos)
            rd["llama_pp_ms"] = {}
            for n in ns:
                rd["llama_pp_ms"][n] = 1000.0 * n / llama_bench(bin_dir, target, threads, prompt=n)
            rd["draftlab_forward_ms"], fc_json = draftlab_forward_cost(forward_cost, a.model, weights_name[gt], dot,
                                                                       threads, a.max_n)
            rd["llama_speculative"] = llama_spec_tool(
                [f"{bin_dir}/llama-speculative", "-m", target, "-md", gguf[("draft", gt)]],
                ["--draft-max", "4", "--draft-min", "0"], threads, a.n, a.ignore_eos)
            rd["llama_lookup"] = llama_spec_tool([f"{bin_dir}/llama-lookup", "-m", target],
                                                 ["--draft-max", "4"], threads, a.n, a.ignore_eos)
            rd["spec_peer"] = {}
            rd["spec_peer"]["plain"], _ = spec_peer(sd, target, threads, a.n, ignore_eos=a.ignore_eos)
            runs = [(label, kind, gguf[(role, gt)], k, []) for label, kind, role, k, _ in peer_types]
            runs += [(kind, kind, None, t["draft_max"], t["args"]) for kind, t in cell["ngram_tuned"].items()]
            for label, kind, draft, k, extra in runs:
                rd["spec_peer"][label], texts = spec_peer(sd, target, threads, a.n, kind, draft, k, extra, a.ignore_eos)
                if texts != plain_texts:
                    sys.exit(f"vs_llama_cpp: llama.cpp's {label} text differs from its plain decoding ({dt})")
            rd["draftlab_rss_mb"] = peak_rss_mb(
                [draftlab, "generate", "-m", a.model, "--weights", weights_name[gt], "--quant-dot", dot,
                 "--threads", str(threads),
                 "-p", PROMPTS[0], "-n", str(a.n)])
            # What the process costs before any model: libtorch and its ~290 shared libraries.
            rd["draftlab_libraries_rss_mb"] = peak_rss_mb([draftlab, "generate", "--help"])
            rd["llama_rss_mb"] = peak_rss_mb(
                [f"{bin_dir}/llama-simple", "-m", target, "-n", str(a.n), PROMPTS[0]])
            cell["rounds"].append(rd)
        cell["environment"] = {"forward": fc_json.get("forward"), "isa": fc_json.get("isa"),
                               "parameters": fc_json.get("parameters"),
                               "fma_peak_gflops": fc_json.get("fma_peak_gflops"), "blas": fc_json.get("blas"),
                               "cpu": fc_json.get("cpu")}
        results.append(cell)

    med = statistics.median
    print()
    print(f"cpu: {results[0]['environment']['cpu']}; OPENBLAS_CORETYPE={os.environ.get('OPENBLAS_CORETYPE', '(unset)')}")
    print(f"llama.cpp c392e509: {', '.join(f'{k}: {v}' for k, v in bin_dirs.items())}; llama.cpp 2026 (b10256, "
          f"spec-peer --prefill-first --temp 0): {', '.join(f'{k}: {v}' for k, v in spec_dirs.items())}")
    print(f"{a.rounds} rounds, medians; prompts: {a.bench + f' (first turns, {a.num_prompts} each)' if a.bench else 'README main job'}"
          f" ({len(PROMPTS)}), -n {a.n}{' --ignore-eos (texts checked up to the first EOS)' if a.ignore_eos else ''}; "
          f"methods: {a.methods}\n")
    summary, targets = [], []
    for cell in results:
        rounds = cell["rounds"]
        llama_tg = med([r["llama_tg"] for r in rounds])
        dl = {k: {f: med([r["draftlab"][k][f] for r in rounds]) for f in rounds[0]["draftlab"][k]}
              for k in rounds[0]["draftlab"]}
        env = cell["environment"]
        print(f"## {cell['isa']} ({env['forward']}), {cell['dtype']} weights, {cell['threads']} thread(s)\n")
        print(f"FMA peak of one core with {env['isa']} vectors: {env['fma_peak_gflops']:.0f} GFLOP/s. Plain decoding's "
              f"text, draftlab against llama.cpp 2026: "
              f"{'identical on every prompt' if not cell['texts_differ'] else 'DIFFERENT at ' + cell['texts_differ']}\n")
        print("| figure | draftlab | llama.cpp | draftlab / llama.cpp |")
        print("|---|---|---|---|")
        v = dl["vanilla"]["tok_s"]
        print(f"| plain decoding, tokens/s | {v:.0f} | {llama_tg:.0f} | {v / llama_tg:.2f}x |")
        fwd = {}
        for n in ns:
            d = med([r["draftlab_forward_ms"][n] for r in rounds])
            l = med([r["llama_pp_ms"][n] for r in rounds])
            fwd[n] = (d, l)
            print(f"| forward of n = {n} new tokens, ms (x n = 1) | {d:.2f} ({d / fwd[1][0]:.1f}x) | "
                  f"{l:.2f} ({l / fwd[1][1]:.1f}x) | {l / d:.2f}x faster |")
        sp = med([r["llama_speculative"] for r in rounds])
        lk = med([r["llama_lookup"] for r in rounds])
        if "chain (ts-draft)" in dl:
            print(f"| draft-model speculation (ts-draft, 4 drafted), tokens/s | {dl['chain (ts-draft)']['tok_s']:.0f} | "
                  f"{sp:.0f} | {dl['chain (ts-draft)']['tok_s'] / sp:.2f}x |")
        print(f"| prompt lookup, tokens/s | {dl['pld']['tok_s']:.0f} | {lk:.0f} | {dl['pld']['tok_s'] / lk:.2f}x |")
        rss_d = med([r["draftlab_rss_mb"] for r in rounds])
        rss_l = med([r["llama_rss_mb"] for r in rounds])
        rss_base = med([r["draftlab_libraries_rss_mb"] for r in rounds])
        # The weights as the run stores them: parameters x bytes of the dtype (the GGUF file holds more).
        stored_mb = env["parameters"] * {"f32": 4, "f16": 2, "q8_0": 34 / 32, "q4_0": 18 / 32}[gguf_type(cell["dtype"])] / 2**20
        print(f"| peak RSS of plain decoding, MB | {rss_d:.0f} | {rss_l:.0f} | {rss_d / rss_l:.2f}x |")
        print(f"| ... less draftlab's libraries ({rss_base:.0f} MB with no model), MB; x weights as stored "
              f"({stored_mb:.0f} MB) | {rss_d - rss_base:.0f} ({(rss_d - rss_base) / stored_mb:.2f}x) | "
              f"{rss_l:.0f} ({rss_l / stored_mb:.2f}x) | {(rss_d - rss_base) / rss_l:.2f}x |")
        sp26 = {k: {f: med([r["spec_peer"][k][f] for r in rounds]) for f in rounds[0]["spec_peer"][k]}
                for k in rounds[0]["spec_peer"]}
        plain26 = sp26["plain"]["tok_s"]
        best_ngram = max(NGRAM_GRID, key=lambda k: sp26[k]["tok_s"])
        sp26["best ngram"] = sp26[best_ngram]
        trees = [k for k in ("eagle2 (4/4/1)", "eagle3 (4/4/1)") if k in dl]
        if trees:
            dl["best tree"] = dl[max(trees, key=lambda k: dl[k]["tok_s"])]
        print(f"\nSpeculative against speculative (llama.cpp 2026 spec-peer, plain {plain26:.0f} tokens/s; draft ms "
              f"per decoded token in brackets; best ngram: {best_ngram} "
              f"{tuned(cell['ngram_tuned'][best_ngram])}):\n")
        print("| draftlab | tokens/s | tau | over llama.cpp 2026 plain | llama.cpp 2026 | tokens/s | tau | "
              "over its plain | draftlab / llama.cpp |")
        print("|---|---|---|---|---|---|---|---|---|")
        for ours, theirs in PAIRS:
            if ours not in dl or theirs not in sp26:
                continue
            o, t = dl[ours], sp26[theirs]
            print(f"| {ours} | {o['tok_s']:.0f} ({o['draft_ms_per_token']:.3f}) | {o['tau']:.2f} | "
                  f"{o['tok_s'] / plain26:.2f}x | {theirs} | {t['tok_s']:.0f} ({t['draft_ms_per_token']:.3f}) | "
                  f"{t['tau']:.2f} | {t['tok_s'] / plain26:.2f}x | {o['tok_s'] / t['tok_s']:.2f}x |")
        print("\nllama.cpp's ngram types, each at its tuned setting (" +
              "; ".join(f"{k}: {tuned(t)}" for k, t in cell["ngram_tuned"].items()) + "): " +
              ", ".join(f"{k} {sp26[k]['tok_s']:.0f} tokens/s (tau {sp26[k]['tau']:.2f})" for k in NGRAM_GRID))
        print("\nBounds (compare --bounds, the cost model measured in that process): decode speedup = over the time in "
              "cycles; Sequoia's bound = the best tree size n* for the method's per-rank acceptance under the cost "
              "model (n* = 0: no tree pays, 1.00x); ceiling = every token accepted, drafting free, the best K.\n")
        print("| draftlab method | tokens/s | tau | over draftlab vanilla | over llama.cpp plain decoding | "
              "decode speedup | bound (n*) | decode / bound | ceiling |")
        print("|---|---|---|---|---|---|---|---|---|")
        for k, m in dl.items():
            if k != "best tree":
                bound = "" if k == "vanilla" else (f"{m['decode_speedup']:.2f}x | {m['bound']:.2f}x ({m['bound_nodes']:.0f}) | "
                                                   f"{m['decode_speedup'] / m['bound']:.2f} | {m['ceiling']:.2f}x")
                print(f"| {k} | {m['tok_s']:.0f} | {m['tau']:.2f} | {m['tok_s'] / v:.2f}x | {m['tok_s'] / llama_tg:.2f}x | "
                      f"{bound or ' | | | '} |")
        print()
        eagle2 = [k for k in dl if k.startswith("eagle2")]
        best = max(eagle2, key=lambda k: dl[k]["tok_s"]) if eagle2 else "vanilla"
        big = max(ns)
        summary.append((cell, v / llama_tg, best, dl[best]["tok_s"] / llama_tg, dl[best]["tok_s"] / v,
                        fwd[min(8, big)][0] / fwd[1][0], fwd[big][0] / fwd[1][0], big,
                        all(fwd[n][0] <= fwd[n][1] for n in ns), rss_d / rss_l))
        # Issue 42: draftlab's best method against llama.cpp's best configuration of either peer.
        ours = max((k for k in dl if k != "best tree"), key=lambda k: dl[k]["tok_s"])
        theirs = {"c392e509 plain": llama_tg, "c392e509 llama-speculative 4": sp, "c392e509 llama-lookup 4": lk}
        theirs.update({f"2026 {k}": t["tok_s"] for k, t in sp26.items() if k != "best ngram"})
        top = max(theirs, key=theirs.get)
        e3 = (dl["eagle3 chain (4)"]["tok_s"] / sp26["draft-eagle3 4"]["tok_s"]
              if "eagle3 chain (4)" in dl and "draft-eagle3 4" in sp26 else float("nan"))
        n4 = min(4, big)
        targets.append((cell, ours, dl[ours]["tok_s"], dl[ours]["tau"], top, theirs[top], e3,
                        fwd[n4][0] / fwd[1][0], fwd[n4][1] / fwd[1][1], n4))
    print("## Summary (issue 20's targets: plain >= 1.2x llama.cpp; best EAGLE-2 >= 2.0x llama.cpp and >= 1.5x "
          "vanilla; forward n = 8 <= 2.0x n = 1)\n")
    print("| ISA | weights | threads | plain / llama.cpp | best EAGLE-2 | over llama.cpp | over vanilla | "
          "fwd n=8 / n=1 | fwd n=max / n=1 | forward <= llama.cpp at every n | RSS / llama.cpp |")
    print("|---|---|---|---|---|---|---|---|---|---|---|")
    for cell, plain, best, best_l, best_v, r8, rmax, big, cheaper, rss in summary:
        print(f"| {cell['isa']} | {cell['dtype']} | {cell['threads']} | {plain:.2f}x | {best} | {best_l:.2f}x | "
              f"{best_v:.2f}x | {r8:.2f}x | {rmax:.1f}x (n={big}) | {'yes' if cheaper else 'no'} | {rss:.2f}x |")
    print("\n## Summary (issue 42's targets: draftlab's best >= 2x llama.cpp's best configuration, either peer, plain "
          "or any speculative type; eagle3 chain 4 >= 3x draft-eagle3 4; texts identical). The measured reason beside: "
          "what a forward of 4 rows costs over one row in each engine, which a speculative cycle pays to verify\n")
    print("| ISA | weights | threads | draftlab's best (tau) | tokens/s | llama.cpp's best | tokens/s | ratio | "
          "eagle3 chain 4 / draft-eagle3 4 | fwd n=4 / n=1 draftlab | llama.cpp | texts |")
    print("|---|---|---|---|---|---|---|---|---|---|---|---|")
    for cell, ours, rate, tau, top, top_rate, e3, f_d, f_l, n4 in targets:
        print(f"| {cell['isa']} | {cell['dtype']} | {cell['threads']} | {ours} ({tau:.2f}) | {rate:.0f} | {top} | "
              f"{top_rate:.0f} | {rate / top_rate:.2f}x | {e3:.2f}x | {f_d:.2f}x | {f_l:.2f}x | "
              f"{'identical' if not cell['texts_differ'] else 'differ: ' + cell['texts_differ']} |")
    if any(cell["texts_differ"] for cell in results):
        print("\nWhere plain texts differ: with quantized weights the engines round differently outside the integer dot "
              "products; tests/cli/int8_vs_llama_cpp.py (cli.export_gguf) checks that each point where they part is a "
              "near-tie of draftlab's logits. Any other difference is a bug.")
    print()
    if a.out:
        env = {"host": platform.node(), "openblas_coretype": os.environ.get("OPENBLAS_CORETYPE"),
               "llama_cpp_bin": bin_dirs, "llama_cpp_2026_bin": spec_dirs,
               "llama_cpp_flags": {"llama-bench": "-p 0 -n N / -p n -n 0, -r 3", "llama-speculative": "--draft-max 4 "
                                   "--draft-min 0 --temp 0 -s 1", "llama-lookup": "--draft-max 4 --temp 0 -s 1",
                                   "spec-peer": "--prefill-first --temp 0 (ngram types: ngram_tuned per cell)"},
               "prompts": PROMPTS, "methods": strategies}
        with open(a.out + ".tmp", "w") as f:
            json.dump({"environment": env, "results": results}, f, indent=1)
        os.replace(a.out + ".tmp", a.out)
        print(f"wrote {a.out}")


if __name__ == "__main__":
    main()
