#!/usr/bin/env python3
"""Independent PyTorch evaluation of a `shardwise train --save` checkpoint on a token file.

Rebuilds the reference GPT (src/model) in PyTorch from the checkpoint's manifest and
model.safetensors, scores the same validation windows the trainer scores (window i starts at
(i * seq_len) mod (tokens - seq_len), data.eval_samples windows), and prints the mean
cross-entropy, bits per byte and perplexity, to compare with the trainer's val_bits_per_byte.

  /usr/bin/python3 scripts/eval_checkpoint_torch.py --checkpoint out/text_ckpt \\
      [--data data/fortunes/val.bin] [--samples N]
Needs numpy and torch (Debian: python3-numpy, python3-torch).
"""

import argparse
import json
import math
import os
import struct

import numpy as np
import torch
import torch.nn.functional as F


def step_directory(path):
    if os.path.exists(os.path.join(path, "checkpoint.json")):
        return path
    with open(os.path.join(path, "latest")) as f:
        return os.path.join(path, f.read().strip())


def read_safetensors(path):
    with open(path, "rb") as f:
        raw = f.read()
    n = struct.unpack("<Q", raw[:8])[0]
    header = json.loads(raw[8:8 + n])
    header.pop("__metadata__", None)
    data = raw[8 + n:]
    out = {}
    for name, info in header.items():
        assert info["dtype"] == "F32", (name, info["dtype"])
        begin, end = info["data_offsets"]
        out[name] = torch.from_numpy(
            np.frombuffer(data[begin:end], dtype="<f4").reshape(info["shape"]).copy())
    return out


def read_bin_tokens(path):
    with open(path, "rb") as f:
        raw = f.read()
    magic, version, count = struct.unpack("<3i", raw[:12])
    assert (magic, version) == (20240520, 1), f"{path}: not an llm.c token file"
    return np.frombuffer(raw[1024:1024 + 2 * count], dtype="<u2").astype(np.int64)


def rope(x, seq, heads, head_dim):
    """Rotates dimension pairs (2i, 2i+1) of each head by pos * 1e4^(-2i/d)."""
    b = x.shape[0]
    x = x.view(b, seq, heads, head_dim // 2, 2)
    pos = torch.arange(seq, dtype=torch.float64)[:, None]
    inv = 10000.0 ** (-2.0 * torch.arange(head_dim // 2, dtype=torch.float64) / head_dim)
    cos = torch.cos(pos * inv).float()[None, :, None, :]
    sin = torch.sin(pos * inv).float()[None, :, None, :]
    x0, x1 = x[..., 0], x[..., 1]
    return torch.stack([x0 * cos - x1 * sin, x0 * sin + x1 * cos], dim=-1).view(b, seq, -1)


def forward(w, cfg, tokens):
    """Logits of the reference GPT: pre-LN blocks, fused QKV, tanh GELU, tied head."""
    b, seq = tokens.shape
    h, heads = cfg["hidden"], cfg["heads"]
    hd = h // heads
    x = w["embedding.word_embeddings.weight"][tokens]
    if cfg["position"] != "rope":
        x = x + w["embedding.position_embeddings.weight"][:seq]
    for l in range(cfg["layers"]):
        p = f"layers.{l}."
        y = F.layer_norm(x, (h,), w[p + "input_layernorm.weight"], w[p + "input_layernorm.bias"],
                         1e-5)
        qkv = F.linear(y, w[p + "attention.qkv.weight"], w[p + "attention.qkv.bias"])
        q, k, v = qkv[..., :h], qkv[..., h:2 * h], qkv[..., 2 * h:]
        if cfg["position"] == "rope":
            q, k = rope(q, seq, heads, hd), rope(k, seq, heads, hd)
        q, k, v = (t.reshape(b, seq, heads, hd).transpose(1, 2) for t in (q, k, v))
        scores = (q @ k.transpose(-1, -2)) / math.sqrt(hd)
        causal = torch.ones(seq, seq, dtype=torch.bool).tril()
        a = torch.softmax(scores.masked_fill(~causal, float("-inf")), dim=-1) @ v
        a = a.transpose(1, 2).reshape(b, seq, h)
        x = x + F.linear(a, w[p + "attention.proj.weight"], w[p + "attention.proj.bias"])
        y = F.layer_norm(x, (h,), w[p + "post_attention_layernorm.weight"],
                         w[p + "post_attention_layernorm.bias"], 1e-5)
        y = F.gelu(F.linear(y, w[p + "mlp.fc1.weight"], w[p + "mlp.fc1.bias"]),
                   approximate="tanh")
        x = x + F.linear(y, w[p + "mlp.fc2.weight"], w[p + "mlp.fc2.bias"])
    x = F.layer_norm(x, (h,), w["final_layernorm.weight"], w["final_layernorm.bias"], 1e-5)
    head = w.get("output_layer.weight", w["embedding.word_embeddings.weight"])
    return F.linear(x, head)


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--checkpoint", required=True)
    parser.add_argument("--data", help="token file (default: the run's data.val_path)")
    parser.add_argument("--samples", type=int, help="windows (default: data.eval_samples)")
    args = parser.parse_args()
    directory = step_directory(args.checkpoint)
    with open(os.path.join(directory, "checkpoint.json")) as f:
        config = json.load(f)["config"]
    cfg = config["model"]
    weights = read_safetensors(os.path.join(directory, "model.safetensors"))
    tokens = read_bin_tokens(args.data or config["data"]["val_path"])
    seq, samples = cfg["seq_len"], args.samples or config["data"]["eval_samples"]
    windows = len(tokens) - seq
    starts = [(i * seq) % windows for i in range(samples)]
    total, count = 0.0, 0
    with torch.no_grad():
        for first in range(0, samples, 64):
            batch = np.stack([tokens[s:s + seq + 1] for s in starts[first:first + 64]])
            x = torch.from_numpy(batch)
            logits = forward(weights, cfg, x[:, :-1])
            loss = F.cross_entropy(logits.reshape(-1, logits.shape[-1]).double(),
                                   x[:, 1:].reshape(-1), reduction="sum")
            total += loss.item()
            count += x[:, 1:].numel()
    nats = total / count
    print(f"{directory}: {samples} windows x {seq} tokens: loss {nats:.6f} nats/token, "
          f"{nats / math.log(2):.6f} bits/byte, perplexity {math.exp(nats):.4f}")


if __name__ == "__main__":
    main()
