#!/usr/bin/python3
"""--quant-dot int8 against llama.cpp on the same quantized GGUF: greedy token ids, step by step.

Both engines quantize activations to Q8_0 exactly as ggml does and take integer dot products with the same weight
blocks; what can still differ is float rounding elsewhere (the order blocks are summed in, llama.cpp's float16 KV
cache and its own softmax, norm and SiLU). So the ids must be equal, except where the two engines' choices are a
near-tie: at the first step where they part, draftlab's own logits (the Python module, --quant-dot int8, the prompt
and the ids before that step) must rank llama.cpp's token within EPS of its top logit. The comparison stops at the
first such tie (the two continuations then differ by design); at most a third of the runs may end in one.

usage: int8_vs_llama_cpp.py DRAFTLAB_BIN SPEC_PEER PYTHON_PACKAGE_DIR TOKENS GGUF... -- PROMPT...
Prints one line per (model, prompt) and a summary; exits 1 on a difference that is not a near-tie.
"""
import os
import re
import subprocess
import sys

EPS = 0.02  # logits (ts-target's top logits are about 5-10): about twice the largest gap seen, 0.0105 (docs/fidelity.md)

args = sys.argv[1:]
cut = args.index("--")
bin_, spec_peer, package, tokens = args[0], args[1], args[2], int(args[3])
ggufs, prompts = args[4:cut], args[cut + 1:]
sys.path.insert(0, package)
import numpy as np  # noqa: E402
import draftlab  # noqa: E402


def peer_ids(gguf, prompt):
    """llama.cpp's prompt ids and greedy ids, from spec-peer's trace with no drafts (plain decoding)."""
    run = subprocess.run([spec_peer, "-m", gguf, "--spec-type", "none", "--prefill-first", "--ignore-eos", "-t", "1",
                          "-n", str(tokens), prompt], capture_output=True, text=True,
                         env=dict(os.environ, SPEC_PEER_TRACE="1"))
    if run.returncode != 0:
        sys.exit(f"spec-peer failed on {gguf}: {run.stderr[-500:]}")
    prompt_ids = [int(x) for x in re.search(r"^\[trace\] prompt (.*)$", run.stderr, re.M).group(1).split()]
    # --prefill-first: the first generated token comes from the prompt's forward (stdout's text holds it); the
    # steps' ids follow. The first token is taken from the trace's first step's id_last.
    first = re.search(r"^\[trace\] step 0 n_past \d+ id_last (\d+)", run.stderr, re.M)
    ids = [int(first.group(1))] if first else []
    for m in re.finditer(r"^\[trace\] step \d+ .*\| ids ([\d ]+)\|", run.stderr, re.M):
        ids += [int(x) for x in m.group(1).split()]
    return prompt_ids, ids[:tokens]


def our_ids(gguf, prompt):
    run = subprocess.run([bin_, "generate", "--model", gguf, "--quant-dot", "int8", "--prompt", prompt,
                          "--max-new-tokens", str(tokens), "--print-ids", "--threads", "1"],
                         capture_output=True, text=True)
    if run.returncode != 0:
        sys.exit(f"draftlab generate failed on {gguf}: {run.stderr[-500:]}")
    field = lambda name: [int(x) for x in re.search(rf"^{name} (.*)$", run.stdout, re.M).group(1).split()]
    return field("prompt_ids"), field("generated_ids")


failures, ties, runs = 0, 0, 0
for gguf in ggufs:
    model = draftlab.Model(gguf, quant_dot="int8", threads=1)
    for prompt in prompts:
        runs += 1
        name = f"{os.path.basename(gguf)} '{prompt[:30]}'"
        theirs_prompt, theirs = peer_ids(gguf, prompt)
        ours_prompt, ours = our_ids(gguf, prompt)
        if theirs_prompt != ours_prompt:
            print(f"DIFFERENT PROMPT IDS {name}: llama.cpp {theirs_prompt} draftlab {ours_prompt}")
            failures += 1
            continue
        n = min(len(theirs), len(ours))
        step = next((i for i in range(n) if theirs[i] != ours[i]), None)
        if step is None:
            print(f"same {n} ids: {name}")
            continue
        logits = np.asarray(model.forward(ours_prompt + ours[:step])[0], dtype=np.float64)[-1]
        gap = logits.max() - logits[theirs[step]]
        if ours[step] == int(logits.argmax()) and gap <= EPS:
            ties += 1
            print(f"near-tie at step {step} of {n}: {name}: draftlab {ours[step]} ({logits[ours[step]]:.5f}), "
                  f"llama.cpp {theirs[step]} ({logits[theirs[step]]:.5f}), gap {gap:.5f}")
        else:
            failures += 1
            print(f"DIFFERENT at step {step} of {n}: {name}: draftlab {ours[step]}, llama.cpp {theirs[step]}, "
                  f"gap {gap:.5f} in draftlab's logits (top {int(logits.argmax())})")
print(f"{runs} runs, {runs - ties - failures} identical, {ties} near-ties (<= {EPS}), {failures} differences")
if failures or ties * 3 > runs:
    sys.exit(1)
