#!/usr/bin/python3
"""Writes a tiny EAGLE head checkpoint exactly as torch.save() lays one out, without torch (stdlib only), so that
draftlab's pytorch_model.bin reader can be tested on a file whose every byte we chose.

usage: /usr/bin/python3 scripts/make_torch_checkpoint.py OUT_DIR [--hidden 64 --heads 4 --kv-heads 2
       --head-dim 16 --intermediate 96 --vocab 97 --seed 0]

OUT_DIR gets:
  pytorch_model.bin   a zip archive (stored, not deflated, like torch.save): archive/data.pkl, archive/data/0..N-1,
                      archive/version ("3"). data.pkl is a protocol-2 pickle of a collections.OrderedDict of
                      name -> tensor; each tensor is a REDUCE of GLOBAL torch._utils._rebuild_tensor_v2 with
                      (storage, storage_offset, size, stride, requires_grad, OrderedDict()) and each storage a
                      persistent id ('storage', GLOBAL torch.<Type>Storage, key, 'cpu', numel), as torch.save
                      writes them.
  config.json         the head's Hugging Face config (num_hidden_layers 1).
  expected.json       every tensor as written: {name: {"dtype", "shape", "values" (row-major)}}.
The tensors are the published cnets1 layout (fc.weight, fc.bias, layers.0.*) plus embed_tokens.weight, which
published heads carry. To exercise the reader, fc.weight is stored transposed (a column-major view: stride
(1, d)), k_proj and v_proj share one storage at different offsets, and post_attention_layernorm.weight is
float16.
"""
import argparse
import collections
import json
import os
import pickle
import random
import struct
import sys
import types
import zipfile

# Stand-ins for the torch names the pickle must reference: pickle stores a global by module and name and checks
# that importing it gives the same object back, so register fake modules holding these objects.
_torch = types.ModuleType("torch")
_torch_utils = types.ModuleType("torch._utils")


def _rebuild_tensor_v2(*args):  # never called here: only its name goes into the pickle
    raise RuntimeError("placeholder")


_rebuild_tensor_v2.__module__ = "torch._utils"
_torch_utils._rebuild_tensor_v2 = _rebuild_tensor_v2
_torch._utils = _torch_utils


def _storage_class(name):
    cls = type(name, (), {})
    cls.__module__ = "torch"
    setattr(_torch, name, cls)
    return cls


FloatStorage = _storage_class("FloatStorage")
HalfStorage = _storage_class("HalfStorage")
sys.modules["torch"] = _torch
sys.modules["torch._utils"] = _torch_utils


class Storage:
    def __init__(self, key, cls, fmt, values):
        self.key, self.cls, self.fmt, self.values = key, cls, fmt, values

    def data(self):
        return struct.pack("<%d%s" % (len(self.values), self.fmt), *self.values)


class Tensor:
    def __init__(self, storage, offset, size, stride):
        self.storage, self.offset, self.size, self.stride = storage, offset, tuple(size), tuple(stride)

    def __reduce__(self):
        return (_rebuild_tensor_v2,
                (self.storage, self.offset, self.size, self.stride, False, collections.OrderedDict()))

    def row_major_values(self):
        """The tensor's elements in row-major order, read through offset and strides."""
        out = []

        def walk(dim, base):
            if dim == len(self.size):
                out.append(self.storage.values[base])
                return
            for i in range(self.size[dim]):
                walk(dim + 1, base + i * self.stride[dim])

        walk(0, self.offset)
        return out


class TorchPickler(pickle.Pickler):
    def persistent_id(self, obj):
        if isinstance(obj, Storage):
            return ("storage", obj.cls, obj.key, "cpu", len(obj.values))
        return None


def f32(x):
    return struct.unpack("<f", struct.pack("<f", x))[0]


def f16(x):
    return struct.unpack("<e", struct.pack("<e", x))[0]


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("out_dir")
    p.add_argument("--hidden", type=int, default=64)
    p.add_argument("--heads", type=int, default=4)
    p.add_argument("--kv-heads", type=int, default=2)
    p.add_argument("--head-dim", type=int, default=16)
    p.add_argument("--intermediate", type=int, default=96)
    p.add_argument("--vocab", type=int, default=97)
    p.add_argument("--seed", type=int, default=0)
    a = p.parse_args()
    d, hd, H, KVH, I, V = a.hidden, a.head_dim, a.heads, a.kv_heads, a.intermediate, a.vocab
    rng = random.Random(a.seed)
    storages = []

    def storage(n, cls=FloatStorage, fmt="f", values=None):
        if values is None:
            values = [f32(rng.gauss(0.0, 0.05)) for _ in range(n)]
        s = Storage(str(len(storages)), cls, fmt, values)
        storages.append(s)
        return s

    def dense(shape, **kw):
        n = 1
        for x in shape:
            n *= x
        stride = [1] * len(shape)
        for i in range(len(shape) - 2, -1, -1):
            stride[i] = stride[i + 1] * shape[i + 1]
        return Tensor(storage(n, **kw), 0, shape, stride)

    state = collections.OrderedDict()
    # fc.weight [d, 2d] stored as the transpose of a row-major [2d, d] storage: element (r, c) at c * d + r.
    state["fc.weight"] = Tensor(storage(2 * d * d), 0, (d, 2 * d), (1, d))
    state["fc.bias"] = dense((d,))
    state["layers.0.self_attn.q_proj.weight"] = dense((H * hd, d))
    kv = storage(2 * KVH * hd * d)  # k then v in one storage, as a fused projection's views would be
    state["layers.0.self_attn.k_proj.weight"] = Tensor(kv, 0, (KVH * hd, d), (d, 1))
    state["layers.0.self_attn.v_proj.weight"] = Tensor(kv, KVH * hd * d, (KVH * hd, d), (d, 1))
    state["layers.0.self_attn.o_proj.weight"] = dense((d, H * hd))
    state["layers.0.post_attention_layernorm.weight"] = dense(
        (d,), cls=HalfStorage, fmt="e", values=[f16(1.0 + (i % 16) / 64.0) for i in range(d)])
    state["layers.0.mlp.gate_proj.weight"] = dense((I, d))
    state["layers.0.mlp.up_proj.weight"] = dense((I, d))
    state["layers.0.mlp.down_proj.weight"] = dense((d, I))
    state["embed_tokens.weight"] = dense((V, d))

    os.makedirs(a.out_dir, exist_ok=True)
    path = os.path.join(a.out_dir, "pytorch_model.bin")
    with zipfile.ZipFile(path + ".tmp", "w", compression=zipfile.ZIP_STORED) as z:
        import io
        buf = io.BytesIO()
        TorchPickler(buf, protocol=2).dump(state)
        z.writestr("archive/data.pkl", buf.getvalue())
        for s in storages:
            z.writestr("archive/data/" + s.key, s.data())
        z.writestr("archive/version", "3\n")
    os.replace(path + ".tmp", path)

    config = {"architectures": ["LlamaForCausalLM"], "model_type": "llama", "hidden_size": d,
              "intermediate_size": I, "num_attention_heads": H, "num_key_value_heads": KVH, "head_dim": hd,
              "num_hidden_layers": 1, "vocab_size": V, "rms_norm_eps": 1e-5, "rope_theta": 10000.0,
              "max_position_embeddings": 128, "hidden_act": "silu", "tie_word_embeddings": False,
              "torch_dtype": "float32", "bias": True}
    with open(os.path.join(a.out_dir, "config.json"), "w") as f:
        json.dump(config, f, indent=2)
    expected = {name: {"dtype": "float16" if t.storage.fmt == "e" else "float32", "shape": list(t.size),
                       "values": t.row_major_values()} for name, t in state.items()}
    with open(os.path.join(a.out_dir, "expected.json"), "w") as f:
        json.dump(expected, f)


if __name__ == "__main__":
    main()
