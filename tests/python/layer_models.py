"""Models built from torch's own layers, and ones that read params without calling the module that
owns them, for the overlapped param-gather tests (test_torch_param_gather.py and its multi-rank
worker). nn.MultiheadAttention reads out_proj.weight without calling out_proj."""

import torch
import torch.nn.functional as F

VOCAB, HIDDEN, STEPS = 17, 32, 6
# Some grads are zero up to rounding (a key bias cannot change softmax): with a tiny eps AdamW
# turns that rounding noise into full-size steps and the runs part for no fault of either.
EPS = 1e-4


class EncoderNet(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.embed = torch.nn.Embedding(VOCAB, HIDDEN)
        self.layers = torch.nn.ModuleList(
            torch.nn.TransformerEncoderLayer(HIDDEN, 4, dim_feedforward=48, dropout=0.0,
                                             batch_first=True) for _ in range(2))
        self.head = torch.nn.Linear(HIDDEN, VOCAB)

    def forward(self, tokens, targets):
        h = self.embed(tokens)
        for layer in self.layers:
            h = layer(h)
        return F.cross_entropy(self.head(h).reshape(-1, VOCAB), targets.reshape(-1))


class AttentionNet(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.embed = torch.nn.Embedding(VOCAB, HIDDEN)
        self.attn = torch.nn.MultiheadAttention(HIDDEN, 4, batch_first=True)
        self.attn2 = torch.nn.MultiheadAttention(HIDDEN, 2, batch_first=True)
        self.head = torch.nn.Linear(HIDDEN, VOCAB)

    def forward(self, tokens, targets):
        h = self.embed(tokens)
        h = h + self.attn(h, h, h, need_weights=False)[0]
        h = h + self.attn2(h, h, h, need_weights=False)[0]
        return F.cross_entropy(self.head(h).reshape(-1, VOCAB), targets.reshape(-1))


class TransformerNet(torch.nn.Module):
    """nn.Transformer: encoder and decoder stacks (self- and cross-attention)."""

    def __init__(self):
        super().__init__()
        self.embed = torch.nn.Embedding(VOCAB, HIDDEN)
        self.transformer = torch.nn.Transformer(HIDDEN, 4, num_encoder_layers=1,
                                                num_decoder_layers=2, dim_feedforward=40,
                                                dropout=0.0, batch_first=True)
        self.head = torch.nn.Linear(HIDDEN, VOCAB)

    def forward(self, tokens, targets):
        h = self.embed(tokens)
        out = self.transformer(h, h.flip(1))
        return F.cross_entropy(self.head(out).reshape(-1, VOCAB), targets.reshape(-1))


class TiedNet(torch.nn.Module):
    """The output head is the embedding matrix, read by the root's own forward."""

    def __init__(self):
        super().__init__()
        self.embed = torch.nn.Embedding(VOCAB, HIDDEN)
        self.mlp = torch.nn.Sequential(torch.nn.Linear(HIDDEN, 2 * HIDDEN), torch.nn.GELU(),
                                       torch.nn.Linear(2 * HIDDEN, HIDDEN))
        self.norm = torch.nn.LayerNorm(HIDDEN)

    def forward(self, tokens, targets):
        h = self.embed(tokens)
        h = self.norm(h + self.mlp(h))
        logits = F.linear(h, self.embed.weight)
        return F.cross_entropy(logits.reshape(-1, VOCAB), targets.reshape(-1))


class FunctionalNet(torch.nn.Module):
    """Children own the params but are never called: the root reads them functionally."""

    def __init__(self):
        super().__init__()
        self.embed = torch.nn.Embedding(VOCAB, HIDDEN)
        self.up = torch.nn.Linear(HIDDEN, 2 * HIDDEN)
        self.down = torch.nn.Linear(2 * HIDDEN, HIDDEN)
        self.head = torch.nn.Linear(HIDDEN, VOCAB)
        self.scale = torch.nn.Parameter(torch.ones(HIDDEN))

    def forward(self, tokens, targets):
        h = F.embedding(tokens, self.embed.weight)
        h = h + F.linear(torch.tanh(F.linear(h, self.up.weight, self.up.bias)), self.down.weight,
                         self.down.bias)
        logits = F.linear(h * self.scale, self.head.weight, self.head.bias)
        return F.cross_entropy(logits.reshape(-1, VOCAB), targets.reshape(-1))


MODELS = [EncoderNet, AttentionNet, TransformerNet, TiedNet, FunctionalNet]


def fresh(model_class, seed=0):
    torch.manual_seed(seed)
    return model_class()
