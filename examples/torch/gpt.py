"""A GPT in plain PyTorch that computes the same function as shardwise's reference C++ GPT
(src/model/gpt_model.cpp) and names its params the same way, so checkpoints move between this
model trained from Python and `shardwise train`:

  embedding.word_embeddings.weight [vocab, hidden]   (tied output head when tied_embeddings)
  embedding.position_embeddings.weight [seq, hidden] (learned positions)
  layers.{i}.input_layernorm / attention.qkv / attention.proj / post_attention_layernorm /
  layers.{i}.mlp.fc1 / mlp.fc2, final_layernorm; output_layer.weight when untied.

Pre-LayerNorm blocks (eps 1e-5), fused QKV [q | k | v] with heads side by side, causal softmax
attention, tanh-GELU MLP, cross-entropy averaged over the scored targets (targets < 0 are not
scored).
"""

import math

import torch
import torch.nn.functional as F


class Attention(torch.nn.Module):
    def __init__(self, hidden, heads, device):
        super().__init__()
        self.heads = heads
        self.qkv = torch.nn.Linear(hidden, 3 * hidden, device=device)
        self.proj = torch.nn.Linear(hidden, hidden, device=device)
        # Muon orthogonalises Q, K and V as separate matrices.
        self.qkv.weight.qkv_split = (hidden, hidden, hidden)

    def forward(self, x):
        b, t, h = x.shape
        q, k, v = self.qkv(x).split(h, dim=-1)
        q, k, v = (z.reshape(b, t, self.heads, h // self.heads).transpose(1, 2) for z in (q, k, v))
        scores = q @ k.transpose(-1, -2) / math.sqrt(h // self.heads)
        causal = torch.ones(t, t, dtype=torch.bool).triu(1)
        probs = scores.masked_fill(causal, float("-inf")).softmax(dim=-1)
        return self.proj((probs @ v).transpose(1, 2).reshape(b, t, h))


class Mlp(torch.nn.Module):
    def __init__(self, hidden, ffn, device):
        super().__init__()
        self.fc1 = torch.nn.Linear(hidden, ffn, device=device)
        self.fc2 = torch.nn.Linear(ffn, hidden, device=device)

    def forward(self, x):
        return self.fc2(F.gelu(self.fc1(x), approximate="tanh"))


class Block(torch.nn.Module):
    def __init__(self, hidden, heads, ffn, device):
        super().__init__()
        self.input_layernorm = torch.nn.LayerNorm(hidden, eps=1e-5, device=device)
        self.attention = Attention(hidden, heads, device)
        self.post_attention_layernorm = torch.nn.LayerNorm(hidden, eps=1e-5, device=device)
        self.mlp = Mlp(hidden, ffn, device)

    def forward(self, x):
        x = x + self.attention(self.input_layernorm(x))
        return x + self.mlp(self.post_attention_layernorm(x))


class Embedding(torch.nn.Module):
    def __init__(self, vocab, hidden, seq_len, device):
        super().__init__()
        self.word_embeddings = torch.nn.Embedding(vocab, hidden, device=device)
        self.position_embeddings = torch.nn.Embedding(seq_len, hidden, device=device)
        self.position_embeddings.weight.use_muon = False

    def forward(self, tokens):
        positions = torch.arange(tokens.shape[1])
        return self.word_embeddings(tokens) + self.position_embeddings(positions)


class GPT(torch.nn.Module):
    def __init__(self, vocab, seq_len, layers=2, hidden=64, heads=4, ffn=256,
                 tied_embeddings=True, init_std=0.02, seed=1234, device=None):
        """device="meta" builds the model without storage: initialise it with
        init_parameters() once shardwise has placed the params in its buffer."""
        super().__init__()
        self.embedding = Embedding(vocab, hidden, seq_len, device)
        self.embedding.word_embeddings.weight.shared_embedding = tied_embeddings
        self.layers = torch.nn.ModuleList(Block(hidden, heads, ffn, device)
                                          for _ in range(layers))
        self.final_layernorm = torch.nn.LayerNorm(hidden, eps=1e-5, device=device)
        self.output_layer = None
        if not tied_embeddings:
            self.output_layer = torch.nn.Linear(hidden, vocab, bias=False, device=device)
            self.output_layer.weight.is_embedding_or_output_parameter = True
        self.init_std, self.num_layers = init_std, layers
        if device != "meta":
            self.init_parameters(seed)

    def init_parameters(self, seed):
        # GPT-2 style: N(0, std) weights, residual projections scaled by 1/sqrt(2 layers), zero
        # biases, unit norms. Deterministic in `seed`, so every rank draws the same values.
        std, layers = self.init_std, self.num_layers
        g = torch.Generator().manual_seed(seed)
        with torch.no_grad():
            for name, p in self.named_parameters():
                if name.endswith(".bias"):
                    p.zero_()
                elif "layernorm" in name:
                    p.fill_(1.0)
                else:
                    scale = std / math.sqrt(2 * layers) if name.endswith(
                        ("proj.weight", "fc2.weight")) else std
                    p.copy_(torch.randn(p.shape, generator=g) * scale)

    def logits(self, tokens):
        x = self.embedding(tokens)
        for block in self.layers:
            x = block(x)
        x = self.final_layernorm(x)
        head = self.output_layer.weight if self.output_layer is not None \
            else self.embedding.word_embeddings.weight
        return x @ head.T

    def forward(self, tokens, targets):
        """Mean cross-entropy over the scored targets (targets >= 0)."""
        logits = self.logits(tokens)
        return F.cross_entropy(logits.reshape(-1, logits.shape[-1]), targets.reshape(-1).long(),
                               ignore_index=-1)

    @torch.no_grad()
    def exact_match(self, tokens, targets):
        """Per sample: every scored target predicted correctly (greedy, teacher forced)."""
        predicted = self.logits(tokens).argmax(dim=-1)
        scored = targets >= 0
        return ((predicted == targets) | ~scored).all(dim=1)
