"""Small torch models shared by the shardwise.torch tests and the multi-rank worker."""

import torch
import torch.nn.functional as F


class TinyNet(torch.nn.Module):
    """Embedding -> two linear layers with a norm between -> tied-free output head: a mix of 2-D
    matrices (Muon), an embedding and 1-D params (AdamW)."""

    def __init__(self, vocab=17, hidden=24, seed=0):
        super().__init__()
        torch.manual_seed(seed)
        self.embed = torch.nn.Embedding(vocab, hidden)
        self.fc1 = torch.nn.Linear(hidden, 2 * hidden)
        self.norm = torch.nn.LayerNorm(2 * hidden)
        self.fc2 = torch.nn.Linear(2 * hidden, hidden, bias=False)
        self.head = torch.nn.Linear(hidden, vocab)
        self.head.weight.is_embedding_or_output_parameter = True

    def forward(self, tokens, targets):
        h = self.embed(tokens)
        h = h + self.fc2(F.gelu(self.norm(self.fc1(h))))
        logits = self.head(h)
        return F.cross_entropy(logits.reshape(-1, logits.shape[-1]), targets.reshape(-1))


def batch(step, global_size, rank=0, dp=1, vocab=17, seq=6):
    """This rank's 1/dp of the deterministic global batch of step `step`."""
    g = torch.Generator().manual_seed(1000 + step)
    tokens = torch.randint(0, vocab, (global_size, seq), generator=g)
    targets = (tokens * 3 + 1) % vocab
    local = global_size // dp
    return tokens[rank * local:(rank + 1) * local], targets[rank * local:(rank + 1) * local]
