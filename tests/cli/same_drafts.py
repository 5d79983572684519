#!/usr/bin/env python3
"""Compares two engines' speculative decoding step by step: llama.cpp spec-peer's SPEC_PEER_TRACE lines and draftlab
generate --trace-drafts lines ("[trace] step N n_past P id_last T draft ... | ids ... | accepted A"), then their
texts. Steps must start at the same position with the same last token and draft the same tokens over the shorter
draft (the engines cap the last drafts at the tokens still owed differently); the texts must agree over the shorter
one (llama.cpp stops at </s> only, draftlab also at <s>).
  usage: same_drafts.py PEER_TRACE OURS_TRACE PEER_STDOUT OURS_STDOUT
Prints the steps compared; exit 1 with the first difference."""
import re
import sys

STEP = re.compile(r"^\[trace\] step (\d+) n_past (\d+) id_last (\d+) draft([\d ]*)\| ids([\d ]*)\| accepted (\d+)$")


def steps(path):
    out = []
    for line in open(path, errors="replace"):
        m = STEP.match(line.strip())
        if m:
            out.append((int(m[2]), int(m[3]), [int(t) for t in m[4].split()], [int(t) for t in m[5].split()]))
    return out


def text(path):
    lines = [l for l in open(path, errors="replace") if not l.startswith(("[spec-peer]", "RESULT"))]
    return " ".join("".join(lines).replace("<s>", "").split())


peer, ours = steps(sys.argv[1]), steps(sys.argv[2])
if not peer or not ours:
    sys.exit(print(f"no trace lines: llama.cpp {len(peer)}, draftlab {len(ours)}") or 1)
drafted = 0
for k, (p, o) in enumerate(zip(peer, ours)):
    n = min(len(p[2]), len(o[2]))
    if p[:2] != o[:2] or p[2][:n] != o[2][:n]:
        sys.exit(print(f"step {k}: llama.cpp n_past {p[0]} last {p[1]} draft {p[2]}; "
                       f"draftlab n_past {o[0]} last {o[1]} draft {o[2]}") or 1)
    drafted += n
theirs, mine = text(sys.argv[3]), text(sys.argv[4])
shorter = min(len(theirs), len(mine))
if shorter < 60 or theirs[:shorter] != mine[:shorter]:
    sys.exit(print(f"texts differ: llama.cpp '{theirs}' / draftlab '{mine}'") or 1)
print(f"{min(len(peer), len(ours))} steps, {drafted} drafted tokens equal; texts equal over {shorter} characters")
