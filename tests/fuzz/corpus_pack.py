#!/usr/bin/python3
"""A fuzz target's corpus as one file (tests/fuzz/corpus/<target>.pack): its inputs in name order, each a 4-byte
little-endian length and the bytes. One small file per target keeps the repository free of thousands of tiny ones;
tests/fuzz/replay_main.cpp reads it in ctest, scripts/fuzz.sh unpacks it before fuzzing and (--keep) packs the
minimised corpus back.

    /usr/bin/python3 tests/fuzz/corpus_pack.py pack DIR OUT.pack
    /usr/bin/python3 tests/fuzz/corpus_pack.py unpack IN.pack DIR
"""
import hashlib
import os
import struct
import sys


def pack(folder, out):
    names = sorted(n for n in os.listdir(folder) if os.path.isfile(os.path.join(folder, n)))
    tmp = f"{out}.tmp.{os.getpid()}"
    with open(tmp, "wb") as f:
        for n in names:
            data = open(os.path.join(folder, n), "rb").read()
            f.write(struct.pack("<I", len(data)) + data)
    os.replace(tmp, out)
    return len(names)


def unpack(path, folder):
    os.makedirs(folder, exist_ok=True)
    data, at, n = open(path, "rb").read(), 0, 0
    while at < len(data):
        if at + 4 > len(data):
            sys.exit(f"{path}: truncated length at byte {at}")
        (size,) = struct.unpack_from("<I", data, at)
        if at + 4 + size > len(data):
            sys.exit(f"{path}: input at byte {at} claims {size} bytes, {len(data) - at - 4} left")
        item = data[at + 4:at + 4 + size]
        # libFuzzer's naming: the SHA-1 of the contents (the same input never lands twice).
        with open(os.path.join(folder, hashlib.sha1(item).hexdigest()), "wb") as f:
            f.write(item)
        at += 4 + size
        n += 1
    return n


if __name__ == "__main__":
    if len(sys.argv) != 4 or sys.argv[1] not in ("pack", "unpack"):
        sys.exit(__doc__)
    count = (pack if sys.argv[1] == "pack" else unpack)(sys.argv[2], sys.argv[3])
    print(f"{sys.argv[1]}ed {count} inputs")
