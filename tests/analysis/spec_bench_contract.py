#!/usr/bin/python3
"""Reads draftlab's Spec-Bench JSONL the way Spec-Bench's own scripts do, and checks it against the results file.

Spec-Bench's evaluation/speed.py, as documented in its repository: per question, tokens = sum(new_tokens) and
time = sum(wall_time), speed = tokens / time; accept_lengths of every question extended into one list and
averaged with np.mean; speedup = mean speed / the baseline file's mean speed (its baseline counts tokens with the
model's tokenizer; here new_tokens, which is what it counts for the method). evaluation/equal.py compares the
answers' turns question by question. Written here from that behaviour, not copied.

    spec_bench_contract.py RESULTS.h5 JSONL_DIR
Exit 0 when every run's file reads like that, its mean acceptance equals the run's tau, and the greedy runs'
answers equal the baseline's; otherwise a message naming the file.
"""
import json
import os
import sys

import h5py
import numpy as np


def load(path):
    with open(path, encoding="utf-8") as f:
        return [json.loads(line) for line in f]


def speed(data):
    speeds, accept_lengths = [], []
    for q in data:
        c = q["choices"][0]
        speeds.append(sum(c["new_tokens"]) / sum(c["wall_time"]))
        accept_lengths.extend(c["accept_lengths"])
    # np.mean of an inhomogeneous nested list raises: the failure Spec-Bench users saw with per-turn lists.
    return float(np.array(speeds).mean()), float(np.mean(np.array(accept_lengths, dtype=float)))


def equal(data, base):
    turns = {q["question_id"]: q["choices"][0]["turns"] for q in base}
    return all(turns.get(q["question_id"]) == q["choices"][0]["turns"] for q in data)


def name_of(attrs, run):
    text = lambda v: v.decode() if isinstance(v, bytes) else str(v)
    model = os.path.basename(json.loads(text(attrs["models"]))["target"]["path"].rstrip("/"))
    clean = lambda s: "".join(ch if ch.isascii() and (ch.isalnum() or ch in ".-_") else "_" for ch in s) or "_"
    t = float(run.attrs["temperature"])
    temp = f"{t:.1f}" if float(f"{t:.1f}") == t else f"{t:g}"
    return f"{clean(text(run.attrs['dataset']))}/{clean(model)}-{clean(text(run.attrs['method']))}-" \
           f"{clean(text(attrs['dtype']))}-temp-{temp}.jsonl"


def main(results_path, jsonl_dir):
    failures = []
    with h5py.File(results_path, "r") as f:
        runs = [f["runs"][k] for k in sorted(f["runs"])]
        baseline = {}
        for run in runs:
            if run.attrs["draft_shape"] in ("none", b"none"):
                baseline[(run.attrs["dataset"], float(run.attrs["temperature"]))] = name_of(f.attrs, run)
        for run in runs:
            name = name_of(f.attrs, run)
            path = os.path.join(jsonl_dir, name)
            try:
                data = load(path)
                mean_speed, mean_accept = speed(data)
                if not np.isfinite(mean_speed) or abs(mean_accept - float(run.attrs["tau"])) > 1e-9:
                    failures.append(f"{path}: mean accept length {mean_accept} != the run's tau {run.attrs['tau']}")
                base_name = baseline[(run.attrs["dataset"], float(run.attrs["temperature"]))]
                base = load(os.path.join(jsonl_dir, base_name))
                ratio = mean_speed / speed(base)[0]
                if not np.isfinite(ratio) or ratio <= 0:
                    failures.append(f"{path}: speedup over {base_name} is {ratio}")
                if float(run.attrs["temperature"]) == 0 and not equal(data, base):
                    failures.append(f"{path}: answers differ from {base_name} (equal.py)")
                print(f"ok: {name}: {len(data)} questions, mean accept length {mean_accept:.3f}, speedup {ratio:.2f}")
            except Exception as e:  # a file Spec-Bench's loop could not read is the failure this test exists for
                failures.append(f"{path}: {type(e).__name__}: {e}")
    for line in failures:
        print("FAIL:", line)
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main(*sys.argv[1:3]))
