#!/usr/bin/env python3
"""Compares the tensors of two GGUF files: same names, types, shapes and bytes (metadata is not compared).
   usage: same_gguf_tensors.py A.gguf B.gguf     exit 0 when every tensor matches, 1 with the differences listed.
Used by test_export_gguf_cli.sh to hold draftlab's Q8_0 / Q4_0 export to llama-quantize's output byte for byte."""
import struct
import sys

SCALARS = {0: 1, 1: 1, 2: 2, 3: 2, 4: 4, 5: 4, 6: 4, 7: 1, 10: 8, 11: 8, 12: 8}  # GGUF metadata value types
BLOCKS = {0: (1, 4), 1: (1, 2), 30: (1, 2), 2: (32, 18), 8: (32, 34)}  # ggml type: (values per block, bytes)


def tensors(path):
    data = open(path, "rb").read()
    pos = 0

    def take(fmt):
        nonlocal pos
        values = struct.unpack_from("<" + fmt, data, pos)
        pos += struct.calcsize("<" + fmt)
        return values[0] if len(values) == 1 else values

    def string():
        nonlocal pos
        length = take("Q")
        pos += length
        return data[pos - length:pos].decode()

    def skip_value(kind):
        nonlocal pos
        if kind == 8:
            string()
        elif kind == 9:
            inner, count = take("I"), take("Q")
            for _ in range(count):
                skip_value(inner)
        else:
            pos += SCALARS[kind]

    magic, version, n_tensors, n_kv = take("4sIQQ")
    assert magic == b"GGUF" and version in (2, 3), f"{path}: not a GGUF v2/v3 file"
    alignment = 32
    for _ in range(n_kv):
        key = string()
        kind = take("I")
        if key == "general.alignment":
            alignment = struct.unpack_from("<I", data, pos)[0]
        skip_value(kind)
    infos = []
    for _ in range(n_tensors):
        name = string()
        dims = [take("Q") for _ in range(take("I"))]
        kind, offset = take("I"), take("Q")
        infos.append((name, dims, kind, offset))
    start = (pos + alignment - 1) // alignment * alignment
    out = {}
    for name, dims, kind, offset in infos:
        count = 1
        for d in dims:
            count *= d
        per_block, block_bytes = BLOCKS[kind]
        size = count // per_block * block_bytes
        out[name] = (kind, dims, data[start + offset:start + offset + size])
    return out


def main():
    a, b = tensors(sys.argv[1]), tensors(sys.argv[2])
    problems = []
    if set(a) != set(b):
        problems.append(f"names differ: only in A {sorted(set(a) - set(b))}, only in B {sorted(set(b) - set(a))}")
    for name in sorted(set(a) & set(b)):
        (ka, da, ba), (kb, db, bb) = a[name], b[name]
        if (ka, da) != (kb, db):
            problems.append(f"{name}: type/shape {ka} {da} vs {kb} {db}")
        elif ba != bb:
            diff = sum(x != y for x, y in zip(ba, bb))
            problems.append(f"{name}: {diff} of {len(ba)} bytes differ")
    for p in problems:
        print(p)
    print(f"{len(set(a) & set(b))} tensors compared, {len(problems)} differences")
    sys.exit(1 if problems else 0)


if __name__ == "__main__":
    main()
