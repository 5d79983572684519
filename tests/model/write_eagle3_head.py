#!/usr/bin/env python3
"""An independent writer of an EAGLE-3 head, for tests/decoding/test_eagle3_head.cpp, in one of two layouts.

layout "official" (default): written from ../shared/papers/eagle3-spec.md (sections 1 and 2), not from draftlab's
code: it draws a random head, saves it as the official repository does (torch.save of the 15-key state dict in
float16, config.json a Llama config with draft_vocab_size and no rope_theta).

layout "specforge31": an EAGLE-3.1 head as SpecForge exports one (specforge export --to sglang: model.safetensors in
bfloat16 with the official names, no embed_tokens; config.json architectures ["LlamaForCausalLMEagle3"], rope_theta,
eagle_config.eagle_aux_hidden_state_layer_ids = the target layers whose outputs it reads, "fc_norm": true,
"norm_output": true), with EAGLE-3.1 computed as vLLM defines it (model_executor/models/llama_eagle3.py; SpecForge
after its PR 879): an RMSNorm per target feature before fc, and the final norm's output both read by lm_head and fed
back as the next step's hidden state. Also writes SpecForge's vocabulary-mapping file (torch.save of {"d2t", "t2d"}).
The safetensors bytes are written here by hand from the format's definition (8-byte header length, JSON header,
raw little-endian data).

Either way it computes the head's draft logits with plain PyTorch for the inputs the C++ test gives.

usage: write_eagle3_head.py DIR     (DIR/inputs.json from the test; writes DIR/head/, DIR/expected.json)
"""
import json
import math
import os
import sys

import torch


def rms_norm(x, weight, eps):
    return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + eps) * weight


def rotate_half(x):
    half = x.shape[-1] // 2
    return torch.cat((-x[..., half:], x[..., :half]), dim=-1)


def rope(x, positions, head_dim, theta):
    # x [n, heads, hd]; the half-split ("rotate_half") layout, base 10000 (the official head config has no rope_theta)
    inv_freq = 1.0 / (theta ** (torch.arange(0, head_dim, 2, dtype=torch.float64) / head_dim))
    angles = positions.to(torch.float64)[:, None] * inv_freq[None, :]
    emb = torch.cat((angles, angles), dim=-1)
    cos, sin = emb.cos().float()[:, None, :], emb.sin().float()[:, None, :]
    return x * cos + rotate_half(x) * sin


def head_step(w, cfg, embed, tokens, hidden, positions, visible, cache):
    """One call of the head on rows (token, hidden); cache holds earlier rows' (k, v). Returns raw outputs."""
    d, H, KVH = cfg["hidden_size"], cfg["num_attention_heads"], cfg["num_key_value_heads"]
    hd, eps = d // H, cfg["rms_norm_eps"]
    if hidden.shape[1] == d:
        u = hidden
    else:  # fc only on target features; EAGLE-3.1 norms each of the three first
        if "fc_norm.0.weight" in w:
            hidden = torch.cat([rms_norm(hidden[:, k * d:(k + 1) * d], w[f"fc_norm.{k}.weight"], eps) for k in range(3)],
                               dim=-1)
        u = hidden @ w["fc.weight"].T
    e = embed[tokens]
    c = torch.cat((rms_norm(e, w["midlayer.input_layernorm.weight"], eps),
                   rms_norm(u, w["midlayer.hidden_norm.weight"], eps)), dim=-1)
    n = tokens.shape[0]
    q = (c @ w["midlayer.self_attn.q_proj.weight"].T).view(n, H, hd)
    k = (c @ w["midlayer.self_attn.k_proj.weight"].T).view(n, KVH, hd)
    v = (c @ w["midlayer.self_attn.v_proj.weight"].T).view(n, KVH, hd)
    q, k = rope(q, positions, hd, cfg["rope_theta"]), rope(k, positions, hd, cfg["rope_theta"])
    cache["k"] = torch.cat((cache["k"], k)) if "k" in cache else k
    cache["v"] = torch.cat((cache["v"], v)) if "v" in cache else v
    keys = cache["k"].repeat_interleave(H // KVH, dim=1)  # GQA
    values = cache["v"].repeat_interleave(H // KVH, dim=1)
    scores = torch.einsum("nhd,thd->hnt", q, keys) / math.sqrt(hd)
    scores = scores.masked_fill(~visible[None, :, :], float("-inf"))
    attn = torch.einsum("hnt,thd->nhd", torch.softmax(scores, dim=-1), values).reshape(n, H * hd)
    y = u + attn @ w["midlayer.self_attn.o_proj.weight"].T  # the residual is the raw u
    y2 = rms_norm(y, w["midlayer.post_attention_layernorm.weight"], eps)
    mlp = (torch.nn.functional.silu(y2 @ w["midlayer.mlp.gate_proj.weight"].T) *
           (y2 @ w["midlayer.mlp.up_proj.weight"].T)) @ w["midlayer.mlp.down_proj.weight"].T
    out = y + mlp
    # EAGLE-3.1's norm_output: the state handed on (and read by lm_head) is the normed one.
    return rms_norm(out, w["norm.weight"], eps) if cfg["norm_output"] else out


def write_safetensors(path, tensors):
    """The safetensors format by its definition: u64 header size, JSON header, the tensors' bytes in order."""
    names = {torch.float32: "F32", torch.float16: "F16", torch.bfloat16: "BF16", torch.int64: "I64",
             torch.bool: "BOOL"}
    header, blobs, offset = {"__metadata__": {"format": "pt"}}, [], 0
    for name, t in tensors.items():
        t = t.contiguous()
        raw = (t.view(torch.int16) if t.dtype == torch.bfloat16 else t).numpy().tobytes()
        header[name] = {"dtype": names[t.dtype], "shape": list(t.shape), "data_offsets": [offset, offset + len(raw)]}
        blobs.append(raw)
        offset += len(raw)
    text = json.dumps(header).encode()
    text += b" " * (-len(text) % 8)
    with open(path, "wb") as f:
        f.write(len(text).to_bytes(8, "little") + text + b"".join(blobs))


def main():
    out_dir = sys.argv[1]
    inputs = json.load(open(os.path.join(out_dir, "inputs.json")))
    d, I, V, Vd = inputs["hidden_size"], inputs["intermediate_size"], inputs["vocab_size"], inputs["draft_vocab_size"]
    H, KVH, eps = inputs["num_attention_heads"], inputs["num_key_value_heads"], inputs["rms_norm_eps"]
    hd = d // H
    specforge = inputs.get("layout", "official") == "specforge31"
    torch.manual_seed(inputs["seed"])
    dtype = torch.bfloat16 if specforge else torch.float16  # SpecForge exports bfloat16; the official files float16

    def normal(*shape, std):
        return (torch.randn(*shape) * std).to(dtype)

    def gain(n):
        return (1.0 + 0.3 * torch.randn(n)).to(dtype)

    # A draft vocabulary of Vd ids in ascending order: d2t offsets (target = i + d2t[i]) and the t2d mask.
    used = torch.sort(torch.randperm(V)[:Vd]).values
    weights = {
        "fc.weight": normal(d, 3 * d, std=0.1),
        "midlayer.hidden_norm.weight": gain(d),
        "midlayer.input_layernorm.weight": gain(d),
        "midlayer.post_attention_layernorm.weight": gain(d),
        "midlayer.self_attn.q_proj.weight": normal(H * hd, 2 * d, std=0.2),
        "midlayer.self_attn.k_proj.weight": normal(KVH * hd, 2 * d, std=0.2),
        "midlayer.self_attn.v_proj.weight": normal(KVH * hd, 2 * d, std=0.2),
        "midlayer.self_attn.o_proj.weight": normal(d, H * hd, std=0.2),
        "midlayer.mlp.gate_proj.weight": normal(I, d, std=0.2),
        "midlayer.mlp.up_proj.weight": normal(I, d, std=0.2),
        "midlayer.mlp.down_proj.weight": normal(d, I, std=0.2),
        "norm.weight": gain(d),
        "lm_head.weight": normal(Vd, d, std=0.3),
        "d2t": used - torch.arange(Vd),
        "t2d": torch.zeros(V, dtype=torch.bool).index_fill_(0, used, True),
    }
    if specforge:
        for k in range(3):
            weights[f"fc_norm.{k}.weight"] = gain(d)
    head_dir = os.path.join(out_dir, "head")
    os.makedirs(head_dir, exist_ok=True)
    theta = 10000.0  # the official head config has no rope_theta
    if specforge:
        theta = 500000.0
        write_safetensors(os.path.join(head_dir, "model.safetensors"), weights)
        torch.save({"d2t": weights["d2t"], "t2d": weights["t2d"]}, os.path.join(out_dir, "vocab_mapping.pt"))
        config = {"architectures": ["LlamaForCausalLMEagle3"], "bos_token_id": 1, "eos_token_id": 2,
                  "eagle_config": {"eagle_aux_hidden_state_layer_ids": inputs["aux_layer_ids"],
                                   "use_aux_hidden_state": True},
                  "fc_norm": True, "norm_output": True, "hidden_act": "silu", "hidden_size": d,
                  "intermediate_size": I, "max_position_embeddings": 2048, "model_type": "llama",
                  "num_attention_heads": H, "num_key_value_heads": KVH, "num_hidden_layers": 1,
                  "rms_norm_eps": eps, "rope_theta": theta, "rope_scaling": None, "tie_word_embeddings": False,
                  "torch_dtype": "bfloat16", "vocab_size": V, "draft_vocab_size": Vd, "target_hidden_size": d}
        json.dump(config, open(os.path.join(head_dir, "config.json"), "w"), indent=2)
    else:
        torch.save(weights, os.path.join(head_dir, "pytorch_model.bin"))
    config = {"architectures": ["LlamaForCausalLM"], "bos_token_id": 1, "eos_token_id": 2, "hidden_act": "silu",
              "hidden_size": d, "intermediate_size": I, "max_position_embeddings": 2048, "model_type": "llama",
              "num_attention_heads": H, "num_key_value_heads": KVH, "num_hidden_layers": 1, "pad_token_id": 0,
              "pretraining_tp": 1, "rms_norm_eps": eps, "rope_scaling": None, "tie_word_embeddings": False,
              "torch_dtype": "float16", "transformers_version": "4.28.1", "use_cache": True, "vocab_size": V,
              "draft_vocab_size": Vd}
    if not specforge:
        json.dump(config, open(os.path.join(head_dir, "config.json"), "w"), indent=2)

    # The forward, in float32 over the float16 values: n pairs (target features) causally at positions 0..n-1,
    # then one draft row reading the last pair's raw output at position n, seeing every pair and itself.
    w = {k: v.float() for k, v in weights.items() if k not in ("d2t", "t2d")}
    cfg = {"hidden_size": d, "num_attention_heads": H, "num_key_value_heads": KVH, "rms_norm_eps": eps,
           "rope_theta": theta, "norm_output": specforge}
    embed = torch.frombuffer(bytearray(open(os.path.join(out_dir, "embed.f32"), "rb").read()),
                             dtype=torch.float32).view(V, d)
    tokens = torch.tensor(inputs["tokens"], dtype=torch.long)
    n = tokens.shape[0]
    features = torch.tensor(inputs["features"], dtype=torch.float32).view(n, 3 * d)
    cache = {}
    out = head_step(w, cfg, embed, tokens, features, torch.arange(n), torch.ones(n, n, dtype=torch.bool).tril(),
                    cache)
    draft = head_step(w, cfg, embed, torch.tensor([inputs["draft_token"]]), out[-1:], torch.tensor([n]),
                      torch.ones(1, n + 1, dtype=torch.bool), cache)
    states = torch.cat((out, draft))
    logits = (states if specforge else rms_norm(states, w["norm.weight"], eps)) @ w["lm_head.weight"].T
    top = logits.argmax(-1)
    json.dump({"draft_logits": logits.flatten().tolist(), "rows": n + 1,
               "argmax_target_ids": (top + weights["d2t"][top]).tolist()},
              open(os.path.join(out_dir, "expected.json"), "w"))


if __name__ == "__main__":
    main()
