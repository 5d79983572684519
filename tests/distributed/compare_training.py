#!/usr/bin/env python3
"""Two training output folders (train-lm or train-head) hold the same run, within a tolerance.

    compare_training.py DIR_A DIR_B [--loss-rtol R] [--tensor-rtol T]

Compares training_log.h5's training and validation losses (relative tolerance per point; the training curve must
be in both logs, the validation curve in both or neither) and every tensor of every *.safetensors file the folders
share, training_state.safetensors included: each tensor's largest difference relative to its own largest magnitude
(so Adam's second moments, around 1e-8, are held to their own scale, not to an absolute 1e-5 they always meet).
Prints the largest differences; exits 1 when one is over its tolerance or a file, curve or tensor is missing.
Used by the data-parallel tests (2 ranks against 1) and scripts/slurm/local_cluster.sh.
"""
import argparse
import json
import os
import struct
import sys

import h5py
import numpy as np

DTYPES = {"F32": np.float32, "F16": np.float16, "F64": np.float64, "I64": np.int64, "I32": np.int32, "I16": np.int16,
          "I8": np.int8, "U8": np.uint8, "BOOL": np.bool_}


def read_safetensors(path):
    with open(path, "rb") as f:
        n = struct.unpack("<Q", f.read(8))[0]
        header = json.loads(f.read(n))
        data = f.read()
    out = {}
    for name, e in header.items():
        if name == "__metadata__":
            continue
        if e["dtype"] == "BF16":  # widen to float32 through the upper half of the bits
            raw = np.frombuffer(data[e["data_offsets"][0]:e["data_offsets"][1]], np.uint16)
            out[name] = (raw.astype(np.uint32) << 16).view(np.float32).reshape(e["shape"])
        else:
            a, b = e["data_offsets"]
            out[name] = np.frombuffer(data[a:b], DTYPES[e["dtype"]]).reshape(e["shape"])
    return out


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("a")
    p.add_argument("b")
    p.add_argument("--loss-rtol", type=float, default=1e-5)
    p.add_argument("--tensor-rtol", type=float, default=1e-4)
    args = p.parse_args()
    failures = []

    with h5py.File(os.path.join(args.a, "training_log.h5")) as fa, h5py.File(os.path.join(args.b, "training_log.h5")) as fb:
        for name in ("train/loss", "eval/loss"):
            if name not in fa and name not in fb and name == "eval/loss":
                continue  # no validation in either run
            if name not in fa or name not in fb:
                failures.append(f"{name}: missing from {args.a if name not in fa else args.b}/training_log.h5")
                continue
            x, y = fa[name][()], fb[name][()]
            if x.shape != y.shape:
                failures.append(f"{name}: {x.shape} points against {y.shape}")
                continue
            rel = float(np.max(np.abs(x - y) / np.maximum(np.abs(x), 1e-12))) if x.size else 0.0
            print(f"{name}: {x.size} points, largest relative difference {rel:.3g}")
            if rel > args.loss_rtol:
                failures.append(f"{name}: relative difference {rel:.3g} > {args.loss_rtol}")

    files = sorted(f for f in os.listdir(args.a) if f.endswith(".safetensors"))
    if not files:
        failures.append(f"{args.a}: no .safetensors file")
    for f in files:
        if not os.path.exists(os.path.join(args.b, f)):
            failures.append(f"{args.b}/{f}: missing")
            continue
        ta, tb = read_safetensors(os.path.join(args.a, f)), read_safetensors(os.path.join(args.b, f))
        if set(ta) != set(tb):
            failures.append(f"{f}: tensors differ: {sorted(set(ta) ^ set(tb))[:5]}")
            continue
        worst, where = 0.0, ""
        for name in ta:
            if ta[name].shape != tb[name].shape:
                failures.append(f"{f}: {name}: shape {ta[name].shape} against {tb[name].shape}")
                continue
            x, y = ta[name].astype(np.float64), tb[name].astype(np.float64)
            if not x.size:
                continue
            scale = float(np.max(np.abs(x)))
            d = float(np.max(np.abs(x - y)))
            rel = d / scale if scale > 0 else (0.0 if d == 0 else float("inf"))
            if rel > worst:
                worst, where = rel, f"{name}, scale {scale:.3g}"
        print(f"{f}: {len(ta)} tensors, largest relative difference {worst:.3g}" + (f" ({where})" if where else ""))
        if worst > args.tensor_rtol:
            failures.append(f"{f}: relative difference {worst:.3g} in {where} > {args.tensor_rtol}")

    for line in failures:
        print("DIFFERENT: " + line, file=sys.stderr)
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
