#!/usr/bin/python3
"""Writes the fuzz targets' seed corpora: small valid files of every format, so mutations start deep inside the
parsers instead of at their first check. Made at run time (scripts/fuzz.sh), never committed:

  * from the real files, cut down: the repository's models (data/models: safetensors headers with small shapes,
    config.json, tokenizer.json with its first tokens and the merges among them), data/trees, and
    $DRAFTLAB_SHARED (GGUF vocabularies and tokenizer.model with their first pieces, llama2.c tokenizer.bin up to a
    token boundary, question.jsonl first lines, and made from them Spec-Bench answer lines and chat conversations,
    a training_log.h5 and results file);
  * hand-made where no small real file exists: tiny safetensors, GGUF with every metadata type and tensor type,
    llama2.c checkpoints (tied and untied), a torch.save() archive (scripts/make_torch_checkpoint.py), Spec-Bench
    answers and chat JSONL with their edge cases.

usage: /usr/bin/python3 tests/fuzz/make_seeds.py OUT_DIR     (writes OUT_DIR/<target>/<seed>)
"""
import glob
import json
import os
import struct
import subprocess
import sys
import tempfile

REPO = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
SHARED = os.environ.get("DRAFTLAB_SHARED") or os.path.join(REPO, "..", "shared")
OUT = sys.argv[1]
KEEP_TOKENS = 300  # vocabulary entries kept from a real tokenizer


def put(target, name, data):
    os.makedirs(os.path.join(OUT, target), exist_ok=True)
    with open(os.path.join(OUT, target, name), "wb") as f:
        f.write(data if isinstance(data, bytes) else data.encode())


def read(path):
    with open(path, "rb") as f:
        return f.read()


# ---- safetensors -------------------------------------------------------------------------------------------------

def safetensors(tensors, metadata=None):
    """tensors: [(name, dtype, shape, element size)] -> a valid file (zero data)."""
    header, offset = {}, 0
    if metadata:
        header["__metadata__"] = metadata
    for name, dtype, shape, size in tensors:
        n = size
        for d in shape:
            n *= d
        header[name] = {"dtype": dtype, "shape": shape, "data_offsets": [offset, offset + n]}
        offset += n
    text = json.dumps(header).encode()
    text += b" " * (-len(text) % 8)
    return struct.pack("<Q", len(text)) + text + bytes(offset)


SIZES = {"F32": 4, "F16": 2, "BF16": 2, "F64": 8, "I64": 8, "I32": 4, "I16": 2, "I8": 1, "U8": 1, "BOOL": 1}
put("safetensors", "tiny", safetensors([("a", "F32", [2, 3], 4), ("b", "F16", [4], 2), ("c", "I64", [], 8),
                                        ("d", "BF16", [0], 2), ("e", "BOOL", [3], 1)], {"format": "pt"}))
for path in sorted(glob.glob(os.path.join(REPO, "data/models/*/model.safetensors"))):
    data = read(path)
    header = json.loads(data[8:8 + struct.unpack("<Q", data[:8])[0]])
    tensors = [(k, v["dtype"], [2] * len(v["shape"]), SIZES[v["dtype"]]) for k, v in header.items()
               if k != "__metadata__"][:12]  # the real names and ranks, small shapes
    put("safetensors", os.path.basename(os.path.dirname(path)), safetensors(tensors, header.get("__metadata__")))

# ---- GGUF ----------------------------------------------------------------------------------------------------------

U8, I8, U16, I16, U32, I32, F32, BOOL, STRING, ARRAY, U64, I64, F64 = range(13)
SCALAR = {U8: "B", I8: "b", U16: "H", I16: "h", U32: "I", I32: "i", F32: "f", BOOL: "?", U64: "Q", I64: "q", F64: "d"}


def gguf_string(s):
    s = s if isinstance(s, bytes) else s.encode()
    return struct.pack("<Q", len(s)) + s


def gguf_value(t, v):
    if t == STRING:
        return gguf_string(v)
    if t == ARRAY:
        et, items = v
        return struct.pack("<IQ", et, len(items)) + b"".join(gguf_value(et, x) for x in items)
    return struct.pack("<" + SCALAR[t], v)


def gguf(kvs, tensors=(), alignment=32):
    """kvs: [(key, type, value)]; tensors: [(name, dims, ggml type, data bytes)] -> a GGUF v3 file."""
    out = b"GGUF" + struct.pack("<IQQ", 3, len(tensors), len(kvs))
    for key, t, v in kvs:
        out += gguf_string(key) + struct.pack("<I", t) + gguf_value(t, v)
    offset, data = 0, b""
    for name, dims, ggml_type, payload in tensors:
        out += gguf_string(name) + struct.pack("<I", len(dims)) + b"".join(struct.pack("<Q", d) for d in dims)
        out += struct.pack("<IQ", ggml_type, offset)
        padded = payload + bytes(-len(payload) % alignment)
        data += padded
        offset += len(padded)
    return out + bytes(-len(out) % alignment) + data


def read_gguf(data):
    """The metadata of a GGUF v2/v3 file as [(key, type, value)] (tensors are not needed here)."""
    pos = 4 + 4

    def take(fmt):
        nonlocal pos
        v = struct.unpack_from("<" + fmt, data, pos)
        pos += struct.calcsize("<" + fmt)
        return v[0]

    def value(t):
        nonlocal pos
        if t == STRING:
            n = take("Q")
            pos += n
            return data[pos - n:pos]
        if t == ARRAY:
            et, n = take("I"), take("Q")
            return (et, [value(et) for _ in range(n)])
        return take(SCALAR[t])

    take("Q")
    kvs = []
    for _ in range(take("Q")):
        n = take("Q")
        key = data[pos:pos + n].decode()
        pos += n
        t = take("I")
        kvs.append((key, t, value(t)))
    return kvs


byte_tokens = ["<0x%02X>" % b for b in range(256)]
spm_words = ["\u2581", "H", "e", "l", "o", "w", "r", "d", "\u2581H", "el", "lo", "ello", "\u2581w", "or", "ld"]
spm_tokens = ["<unk>", "<s>", "</s>"] + byte_tokens + spm_words
spm_types = [2, 3, 3] + [6] * 256 + [1] * len(spm_words)
put("gguf", "llama-vocab", gguf([
    ("general.architecture", STRING, "llama"), ("general.alignment", U32, 32),
    ("tokenizer.ggml.model", STRING, "llama"), ("tokenizer.ggml.tokens", ARRAY, (STRING, spm_tokens)),
    ("tokenizer.ggml.scores", ARRAY, (F32, [0.0] * 259 + [-1.0 * i for i in range(len(spm_words))])),
    ("tokenizer.ggml.token_type", ARRAY, (I32, spm_types)), ("tokenizer.ggml.bos_token_id", U32, 1),
    ("tokenizer.ggml.eos_token_id", U32, 2), ("tokenizer.ggml.unknown_token_id", U32, 0),
    ("tokenizer.ggml.add_space_prefix", BOOL, True)]))


def byte_level_alphabet():
    """GPT-2's byte -> printable symbol table (bytes_to_unicode)."""
    keep = list(range(33, 127)) + list(range(161, 173)) + list(range(174, 256))
    extra = [b for b in range(256) if b not in keep]
    return [chr(b) if b in keep else chr(256 + extra.index(b)) for b in range(256)]


gpt2_tokens = byte_level_alphabet() + ["\u0120w", "He", "ll", "llo", "<|endoftext|>"]
put("gguf", "gpt2-vocab", gguf([
    ("tokenizer.ggml.model", STRING, "gpt2"), ("tokenizer.ggml.pre", STRING, "gpt-2"),
    ("tokenizer.ggml.tokens", ARRAY, (STRING, gpt2_tokens)),
    ("tokenizer.ggml.token_type", ARRAY, (I32, [1] * (len(gpt2_tokens) - 1) + [3])),
    ("tokenizer.ggml.merges", ARRAY, (STRING, ["\u0120 w", "H e", "l l", "ll o"])),
    ("tokenizer.ggml.bos_token_id", U32, len(gpt2_tokens) - 1), ("tokenizer.ggml.eos_token_id", U32, len(gpt2_tokens) - 1)]))
q8_block = struct.pack("<e", 0.5) + bytes(range(32))  # Q8_0: float16 scale + 32 int8
q4_block = struct.pack("<e", 0.25) + bytes(range(16))  # Q4_0: float16 scale + 16 bytes of nibbles
put("gguf", "tensors-every-type", gguf(
    [("general.architecture", STRING, "llama"), ("u8", U8, 1), ("i8", I8, -1), ("u16", U16, 2), ("i16", I16, -2),
     ("u64", U64, 3), ("i64", I64, -3), ("f32", F32, 0.5), ("f64", F64, 0.25), ("bool", BOOL, False),
     ("nested", ARRAY, (ARRAY, [(U8, [1, 2]), (STRING, ["x"])])), ("llama.block_count", U32, 1)],
    [("f32", [2, 3], 0, struct.pack("<6f", *range(6))), ("f16", [4], 1, struct.pack("<4e", 1, 2, 3, 4)),
     ("q8", [32], 8, q8_block), ("q4", [32], 2, q4_block), ("bf16", [2], 30, b"\x80\x3f\x00\x40"),
     ("unreadable", [32], 12, bytes(144))]))
for path in sorted(glob.glob(os.path.join(SHARED, "tokenizer-tests/*.gguf"))):
    kvs, out = read_gguf(read(path)), []
    tokens = None
    for key, t, v in kvs:
        if t == ARRAY and key.startswith("tokenizer.ggml.") and key != "tokenizer.ggml.merges":
            v = (v[0], v[1][:KEEP_TOKENS])
            if key == "tokenizer.ggml.tokens":
                tokens = set(v[1])
        out.append((key, t, v))
    out = [(k, t, v) for k, t, v in out if not (k.endswith("_token_id") and v >= KEEP_TOKENS)]
    if tokens is not None:  # merges among the kept tokens only
        out = [(k, t, (v[0], [m for m in v[1] if all(p in tokens for p in m.split(b" ", 1) + [m.replace(b" ", b"", 1)])]))
               if k == "tokenizer.ggml.merges" else (k, t, v) for k, t, v in out]
    put("gguf", os.path.basename(path), gguf(out))

# ---- config.json, tokenizer.json, tree JSON -----------------------------------------------------------------------

for path in sorted(glob.glob(os.path.join(REPO, "data/models/*/config.json"))):
    put("model_config", os.path.basename(os.path.dirname(path)), read(path))
    # The committed heads' configs (Medusa, Hydra, P-EAGLE, DFlash, EAGLE): what head_config reads.
    if "head" in path or "medusa" in path or "hydra" in path:
        put("head_config", os.path.basename(os.path.dirname(path)), read(path))
put("token_lines", "prompt_and_continuation", "1 5 9 | 12 40 2\n\n3 4\n| 7\n")
put("token_lines", "bad_id", "1 2 97\n")
put("head_config", "hand_medusa", json.dumps({"medusa_num_heads": 3, "medusa_num_layers": 1, "hidden_size": 64,
                                              "vocab_size": 97}))
put("head_config", "hand_nulls", '{"hydra_num_heads": null, "block_size": 1, "vocab_size": 96, "hidden_size": 64.0}')
for path in sorted(glob.glob(os.path.join(REPO, "data/models/*/tokenizer.json"))):
    tok = json.loads(read(path))
    model = tok["model"]
    model["vocab"] = {k: v for k, v in model["vocab"].items() if v < KEEP_TOKENS}
    tok["added_tokens"] = [t for t in tok.get("added_tokens", []) if t["id"] < KEEP_TOKENS]

    def kept(m):
        left, right = m.split(" ", 1) if isinstance(m, str) else m
        return left in model["vocab"] and right in model["vocab"] and left + right in model["vocab"]

    model["merges"] = [m for m in model.get("merges", []) if kept(m)]
    put("tokenizer_json", os.path.basename(os.path.dirname(path)), json.dumps(tok))
metaspace = "\u2581"
put("tokenizer_json", "metaspace-byte-fallback", json.dumps({
    "added_tokens": [{"id": i, "content": c, "special": True} for i, c in enumerate(["<unk>", "<s>", "</s>"])],
    "normalizer": {"type": "Sequence", "normalizers": [
        {"type": "Prepend", "prepend": metaspace}, {"type": "Replace", "pattern": {"String": " "}, "content": metaspace}]},
    "pre_tokenizer": None,
    "decoder": {"type": "Sequence", "decoders": [
        {"type": "Replace", "pattern": {"String": metaspace}, "content": " "}, {"type": "ByteFallback"},
        {"type": "Fuse"}, {"type": "Strip", "content": " ", "start": 1, "stop": 0}]},
    "model": {"type": "BPE", "byte_fallback": True, "fuse_unk": True, "unk_token": "<unk>",
              "vocab": {t: i for i, t in enumerate(spm_tokens)},
              "merges": ["\u2581 H", "e l", "l o", "el lo", "\u2581 w", "o r", "l d"]}}))
for path in sorted(glob.glob(os.path.join(REPO, "data/trees/*.json"))):
    put("tree_spec", os.path.basename(path), read(path))

# ---- llama2.c checkpoint and tokenizer.bin ------------------------------------------------------------------------


def llama2c(dim, hidden, layers, heads, kv_heads, vocab, seq_len, shared=True):
    head = dim // heads
    kv_dim = head * kv_heads
    floats = (vocab * dim + layers * (dim + dim * dim + 2 * kv_dim * dim + dim * dim + dim + 3 * hidden * dim)
              + dim + seq_len * head + (0 if shared else vocab * dim))
    header = struct.pack("<7i", dim, hidden, layers, heads, kv_heads, vocab if shared else -vocab, seq_len)
    return header + struct.pack("<%df" % floats, *[(i % 7) * 0.125 for i in range(floats)])


put("llama2c_checkpoint", "tied", llama2c(8, 16, 1, 2, 1, 16, 4))
put("llama2c_checkpoint", "untied-gqa", llama2c(8, 12, 2, 4, 2, 10, 2, shared=False))
for path in sorted(glob.glob(os.path.join(SHARED, "models/*/*.bin"))):
    data = read(path)
    if os.path.basename(path).startswith("tok"):  # a tokenizer.bin: max_token_length, then {score, length, bytes}
        pos, n = 4, 0
        while pos < len(data) and n < KEEP_TOKENS:
            pos += 8 + struct.unpack_from("<i", data, pos + 4)[0]
            n += 1
        put("llama2c_tokenizer", os.path.basename(path), data[:pos])
    else:  # a checkpoint: the real header (its size check fails, but the fields are real)
        put("llama2c_checkpoint", os.path.basename(path), data[:256])

# ---- tokenizer.model: the first pieces and every other field ----------------------------------------------------


def varint(data, pos):
    v, shift = 0, 0
    while True:
        b = data[pos]
        pos += 1
        v |= (b & 0x7F) << shift
        shift += 7
        if b < 0x80:
            return v, pos


for path in sorted(glob.glob(os.path.join(SHARED, "models/*/tokenizer.model"))):
    data, pos, out, pieces = read(path), 0, b"", 0
    while pos < len(data):
        start = pos
        key, pos = varint(data, pos)
        wire = key & 7
        if wire == 0:
            _, pos = varint(data, pos)
        elif wire == 2:
            n, pos = varint(data, pos)
            pos += n
        else:
            pos += 8 if wire == 1 else 4
        if key >> 3 != 1 or pieces < KEEP_TOKENS:
            out += data[start:pos]
        pieces += key >> 3 == 1
    put("sentencepiece_model", os.path.basename(path), out)

# ---- torch.save() archive, question JSONL, HDF5 ------------------------------------------------------------------

def zip64(data):
    """The same archive in zip64 form (as torch.save writes files over 4 GiB): every local header offset and the
    central directory's offset moved to zip64 fields, a zip64 end record and its locator."""
    eocd = data.rindex(b"PK\x05\x06")
    count, cd_size, cd = struct.unpack_from("<HII", data, eocd + 10)
    entries, p = b"", cd
    for _ in range(count):
        name_len, extra_len, comment_len = struct.unpack_from("<HHH", data, p + 28)
        entry = bytearray(data[p:p + 46 + name_len])
        local = struct.unpack_from("<I", entry, 42)[0]
        struct.pack_into("<HI", entry, 30, 12, 0)  # extra length; the comment length stays 0
        struct.pack_into("<I", entry, 42, 0xFFFFFFFF)
        entries += bytes(entry) + struct.pack("<HHQ", 1, 8, local)
        p += 46 + name_len + extra_len + comment_len
    record_at = cd + len(entries)
    record = b"PK\x06\x06" + struct.pack("<QHHIIQQQQ", 44, 45, 45, 0, 0, count, count, len(entries), cd)
    locator = b"PK\x06\x07" + struct.pack("<IQI", 0, record_at, 1)
    end = b"PK\x05\x06" + struct.pack("<HHHHIIH", 0, 0, count, count, len(entries), 0xFFFFFFFF, 0)
    return data[:cd] + entries + record + locator + end


with tempfile.TemporaryDirectory() as tmp:
    subprocess.run([sys.executable, os.path.join(REPO, "scripts/make_torch_checkpoint.py"), tmp, "--hidden", "8",
                    "--heads", "2", "--kv-heads", "1", "--head-dim", "4", "--intermediate", "8", "--vocab", "5"],
                   check=True, stdout=subprocess.DEVNULL)
    put("torch_archive", "eagle-head", read(os.path.join(tmp, "pytorch_model.bin")))
    put("torch_archive", "eagle-head-zip64", zip64(read(os.path.join(tmp, "pytorch_model.bin"))))

for path in sorted(glob.glob(os.path.join(SHARED, "data/bench/*/question.jsonl"))):
    put("bench_questions", os.path.basename(os.path.dirname(path)), b"".join(read(path).splitlines(True)[:3]))

# ---- Spec-Bench answer JSONL, chat JSONL -------------------------------------------------------------------------


def answer_line(qid, category, turns, accepts, method="eagle2"):
    """One model_answer line as `exp --jsonl` writes it (experiments/results/spec_bench_jsonl.cpp)."""
    steps = [len(a) for a in accepts]
    choice = {"index": 0, "turns": turns, "decoding_steps": steps, "new_tokens": [sum(a) for a in accepts],
              "wall_time": [0.001 + 0.002 * n for n in steps], "accept_lengths": [x for a in accepts for x in a]}
    line = {"question_id": qid, "answer_id": "%s-%s" % (method, qid), "model_id": method, "choices": [choice],
            "tstamp": 1.0}
    if category is not None:
        line["category"] = category
    return json.dumps(line) + "\n"


# The first questions of each real question file, answered with short made-up text and accept lengths.
for path in sorted(glob.glob(os.path.join(SHARED, "data/bench/*/question.jsonl"))):
    lines = [json.loads(x) for x in read(path).splitlines()[:3]]
    put("spec_bench_answers", os.path.basename(os.path.dirname(path)), "".join(
        answer_line(q["question_id"], q.get("category"), [t[:40] for t in q["turns"]],
                    [[(i + k) % 4 + 1 for k in range(3)] for i in range(len(q["turns"]))]) for q in lines))
put("spec_bench_answers", "mixed-categories", "".join([  # MT-bench categories and others: every grouping differs
    answer_line(81, "writing", ["a", "b"], [[1, 2], [3]]), answer_line(111, "math", ["c"], [[4, 1, 1]]),
    answer_line(5, "translation", ["d"], [[2]]), answer_line(6, None, ["e"], [[1]])]))
put("spec_bench_answers", "edge-values", "".join([  # no accepts, no time, an empty turn, a blank line
    answer_line(1, "qa", [""], [[]]), "\n",
    json.dumps({"question_id": 2, "choices": [{"turns": ["x"], "new_tokens": [0], "wall_time": [0]}]}) + "\n",
    answer_line(3, "qa", ["\u00e9\u2581", "y"], [[1], [5, 5]])]))

# Chat JSONL (core/text/chat_jsonl.h): conversations made from the real questions (user turns) and their
# references where the file has them, and hand-made ones in both shapes with every role and template edge.
for path in sorted(glob.glob(os.path.join(SHARED, "data/bench/*/question.jsonl"))):
    out = ""
    for i, q in enumerate(json.loads(x) for x in read(path).splitlines()[:3]):
        answers = [r[:120] for r in q.get("reference") or []] or ["Sure."] * len(q["turns"])
        turns = []
        for k, t in enumerate(q["turns"]):
            turns.append((t[:160], answers[k % len(answers)]))
        if i % 2 == 0:
            conv = [{"from": f, "value": v} for u, a in turns for f, v in (("human", u), ("gpt", a))]
            out += json.dumps({"id": str(q["question_id"]), "conversations": conv}, ensure_ascii=False) + "\n"
        else:
            msgs = [{"role": "system", "content": "Answer briefly."}]
            msgs += [{"role": r, "content": c} for u, a in turns for r, c in (("user", u), ("assistant", a))]
            out += json.dumps({"messages": msgs}, ensure_ascii=False) + "\n"
    put("chat_jsonl", os.path.basename(os.path.dirname(path)), out)
put("chat_jsonl", "sharegpt", "".join(json.dumps(x, ensure_ascii=False) + "\n" for x in [
    {"conversations": [{"from": "gpt", "value": "stray"}, {"from": "human", "value": "Hello"},
                       {"from": "gpt", "value": "Hi there</s>"}, {"from": "user", "value": "  again  "},
                       {"from": "chatgpt", "value": "<|eot_id|> \u2581x"}]},
    {"conversations": [{"from": "system", "value": ""}, {"from": "human", "value": "q"}]}]))
put("chat_jsonl", "openai", "\n".join([
    json.dumps({"messages": [{"role": "system", "content": "s"}, {"role": "user", "content": "c"},
                             {"role": "assistant", "content": "d"}]}), "",
    json.dumps({"messages": [{"role": "user", "content": "\u00e9t\u00e9 \ud83d\ude00"},
                             {"role": "assistant", "content": ""}, {"role": "user", "content": "[INST] <s>"}]})]) + "\n")
put("chat_jsonl", "unknown-role", json.dumps({"messages": [{"role": "user", "content": "x"},
                                                           {"role": "tool", "content": "y"}]}) + "\n")

# results_schema: the bytes are choices (tests/fuzz/results_schema_fuzz.cpp); runs of one byte make whole files.
for b in (0, 1, 2, 3, 0x55, 0x9f):
    put("results_schema", "bytes-%02x" % b, bytes([b]) * 600)
# tree_proposal and feature_cache: the bytes are choices too (tests/fuzz/tree_proposal_fuzz.cpp, feature_cache_fuzz.cpp).
for b in (0, 0x41, 0x7f, 0xc8, 0xff):
    put("tree_proposal", "bytes-%02x" % b, bytes([b]) * 300)
    put("feature_cache", "bytes-%02x" % b, bytes([b]) * 600)

training_logs = sorted(glob.glob(os.path.join(REPO, "data/models/*/training_log.h5")), key=os.path.getsize)
if training_logs:
    put("results_file", "training_log", read(training_logs[0]))
try:
    import h5py  # noqa: E402  (python3-h5py: the results file as the tests' fixture writer makes it)
    with tempfile.TemporaryDirectory() as tmp:
        subprocess.run([sys.executable, os.path.join(REPO, "tests/analysis/make_fixture.py"), tmp + "/f.h5"],
                       check=True, stdout=subprocess.DEVNULL)
        with h5py.File(tmp + "/f.h5", "r") as src:
            for name, runs in (("results-one-run", ["0000"]), ("results-no-runs", [])):
                with h5py.File(tmp + "/" + name, "w", libver="latest") as dst:  # compact: small seeds run fast
                    for k, v in src.attrs.items():
                        dst.attrs[k] = v
                    dst.create_group("runs")
                    for r in runs:
                        src.copy("runs/" + r, dst["runs"], name=r)
                put("results_file", name, read(tmp + "/" + name))
except ImportError:
    print("make_seeds.py: no h5py, results_file seeds from training logs only", file=sys.stderr)
