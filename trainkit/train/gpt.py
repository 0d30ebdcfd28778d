"""A small GPT-style byte-level language model and its corpus (built-in `gpt` / `pydoc_text`).

Corpus: the Python reference documentation that ships with every CPython as
`pydoc_data.topics` (~466 KB of English text and grammar), so nothing is downloaded. Bytes are the
tokens (vocabulary 256). The model follows nanoGPT (github.com/karpathy/nanoGPT, model.py):
pre-LayerNorm blocks of causal self-attention and an MLP (4x, GELU), learned position embeddings.
Every dropout is an `nn.Dropout` module (none inside attention), so the engine's per-sample keyed
dropout reaches all of it. Cross-entropy per byte; perplexity = exp(loss).
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn
from torch.utils.data import TensorDataset


def pydoc_bytes(max_bytes: int | None = None) -> bytes:
    """The corpus: every pydoc topic, in sorted key order, UTF-8, cut to `max_bytes`."""
    from pydoc_data.topics import topics

    text = "".join(topics[k] for k in sorted(topics)).encode()
    return text[:max_bytes] if max_bytes else text


def pydoc_text(seed: int = 0, block_size: int = 64, max_bytes: int | None = 262144) -> TensorDataset:
    """Non-overlapping windows of block_size bytes as inputs; targets are the same windows shifted by
    one byte (the next byte at each position). One Dataset (the engine splits it by split_seed)."""
    data = torch.frombuffer(bytearray(pydoc_bytes(max_bytes)), dtype=torch.uint8).long()
    n = (len(data) - 1) // block_size
    x = data[:n * block_size].view(n, block_size)
    y = data[1:n * block_size + 1].view(n, block_size)
    return TensorDataset(x, y)


class CausalSelfAttention(nn.Module):
    def __init__(self, n_embd: int, n_head: int, dropout: float) -> None:
        super().__init__()
        self.n_head = n_head
        self.qkv = nn.Linear(n_embd, 3 * n_embd)
        self.proj = nn.Linear(n_embd, n_embd)
        self.drop = nn.Dropout(dropout)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        b, t, c = x.shape
        q, k, v = self.qkv(x).split(c, dim=2)
        q, k, v = (z.view(b, t, self.n_head, c // self.n_head).transpose(1, 2) for z in (q, k, v))
        y = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        return self.drop(self.proj(y.transpose(1, 2).reshape(b, t, c)))


class Block(nn.Module):
    """x + attn(ln(x)), then x + mlp(ln(x)): the unit FSDP shards and checkpoints (fsdp.blocks)."""

    def __init__(self, n_embd: int, n_head: int, dropout: float) -> None:
        super().__init__()
        self.ln1, self.ln2 = nn.LayerNorm(n_embd), nn.LayerNorm(n_embd)
        self.attn = CausalSelfAttention(n_embd, n_head, dropout)
        self.mlp = nn.Sequential(nn.Linear(n_embd, 4 * n_embd), nn.GELU(),
                                 nn.Linear(4 * n_embd, n_embd), nn.Dropout(dropout))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x + self.attn(self.ln1(x))
        return x + self.mlp(self.ln2(x))


class GPT(nn.Module):
    """Byte-level GPT: (N, T) byte ids (any numeric dtype; ONNX export feeds floats) -> (N, T, 256)
    logits. T <= block_size."""

    def __init__(self, block_size: int = 64, n_layer: int = 4, n_head: int = 4, n_embd: int = 128,
                 dropout: float = 0.1, vocab_size: int = 256) -> None:
        super().__init__()
        self.tok = nn.Embedding(vocab_size, n_embd)
        self.pos = nn.Embedding(block_size, n_embd)
        self.drop = nn.Dropout(dropout)
        self.blocks = nn.ModuleList(Block(n_embd, n_head, dropout) for _ in range(n_layer))
        self.ln_f = nn.LayerNorm(n_embd)
        self.head = nn.Linear(n_embd, vocab_size, bias=False)
        self.apply(self._init)

    @staticmethod
    def _init(m: nn.Module) -> None:  # nanoGPT: N(0, 0.02) for linear and embedding weights
        if isinstance(m, (nn.Linear, nn.Embedding)):
            nn.init.normal_(m.weight, mean=0.0, std=0.02)
            if getattr(m, "bias", None) is not None:
                nn.init.zeros_(m.bias)

    def forward(self, idx: torch.Tensor) -> torch.Tensor:
        idx = idx.long()
        pos = torch.arange(idx.shape[1], device=idx.device)
        x = self.drop(self.tok(idx) + self.pos(pos))
        for block in self.blocks:
            x = block(x)
        return self.head(self.ln_f(x))
