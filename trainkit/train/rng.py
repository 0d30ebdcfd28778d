"""Randomness that does not depend on the world size: per-SAMPLE keys and a keyed dropout.

Why: a per-rank RNG stream draws a different dropout mask for sample i when 1, 2 or 4 processes
share the global batch, so per-step losses change with the world size (and on resume to another
world size). Here every random draw in training is a pure function of (seed, epoch, the sample's
position in the epoch's global order, layer, element), computed with a counter-based hash, as
counter-based generators do (Salmon et al. 2011, "Parallel random numbers: as easy as 1, 2, 3").
So the mask of a sample is the same whichever rank, micro-batch or accumulation step carries it.

- `KeyedDropout` replaces every `nn.Dropout` of a model (`swap_dropout`); it draws its mask from the
  keys the engine sets around each forward (`keys_for`), and falls back to `F.dropout` without keys.
- The global torch RNG (user code calling `torch.rand` or `F.dropout` itself) is reseeded before
  each micro-batch from the key of its first sample: deterministic and resume-exact, but equal
  across world sizes only when the micro-batch split is (same `micro_batch`).
"""

from __future__ import annotations

import contextlib
import contextvars
import functools
import math
from typing import Iterator

import torch
import torch.nn.functional as F
from torch import nn

M32 = 0xFFFFFFFF
_KEYS: contextvars.ContextVar[torch.Tensor | None] = contextvars.ContextVar("trainkit_keys",
                                                                          default=None)


def mix(x):
    """A 32-bit integer hash (hash-prospector's 2-round `lowbias32` family, Chris Wellons,
    github.com/skeeto/hash-prospector; multipliers < 2**31 so int64 tensors never overflow).
    Works the same on Python ints and int64 tensors."""
    x = x & M32
    x = x ^ (x >> 16)
    x = (x * 0x21F0AAAD) & M32
    x = x ^ (x >> 15)
    x = (x * 0x735A2D97) & M32
    return x ^ (x >> 15)


def sample_keys(seed: int, epoch: int, positions: torch.Tensor) -> torch.Tensor:
    """int64 keys (< 2**32) for samples at `positions` of epoch `epoch`'s global order."""
    base = mix(mix(seed) ^ epoch)
    return _mix_(positions.to(torch.int64) ^ base)   # a new tensor: hashed in place


def reseed(seed: int) -> None:
    """What `torch.manual_seed(seed)` does for the generators a run draws from: the CPU's, and
    every GPU's once CUDA is up. Once per micro-batch, so not torch.manual_seed itself: before
    CUDA is initialised it queues the GPU seeding with a captured stack trace for each of CUDA,
    XPU and MTIA (torch/cuda/__init__.py `_lazy_call`), 0.6 ms a call on a CPU run, 15% of a
    digits step (benchmarks/bench_train.py)."""
    torch.default_generator.manual_seed(seed)
    if torch.cuda.is_initialized():
        torch.cuda.manual_seed_all(seed)


class keys_for:  # noqa: N801 - used as a function: `with keys_for(keys):`
    """Within this block, KeyedDropout layers draw sample b's mask from keys[b]; the global torch
    RNG is reseeded from keys[0] (see the module docstring). A class, not a generator: it is
    entered once per micro-batch."""

    __slots__ = ("keys", "token")

    def __init__(self, keys: torch.Tensor) -> None:
        self.keys = keys

    def __enter__(self) -> None:
        reseed(int(self.keys[0]))
        self.token = _KEYS.set(self.keys)

    def __exit__(self, *exc) -> None:
        _KEYS.reset(self.token)


def current_keys() -> torch.Tensor | None:
    return _KEYS.get()


@contextlib.contextmanager
def same_keys(keys: torch.Tensor | None) -> Iterator[None]:
    """Set `keys` again (no reseeding): activation checkpointing recomputes a block's forward in
    backward, outside `keys_for`; it must draw the masks the forward drew."""
    token = _KEYS.set(keys)
    try:
        yield
    finally:
        _KEYS.reset(token)


def _mix_(x: torch.Tensor) -> torch.Tensor:
    """`mix` of an int64 tensor, in place (the same values, fewer temporaries: the dropout masks
    hash every element of an activation)."""
    x.bitwise_and_(M32)
    x.bitwise_xor_(x >> 16)
    x.mul_(0x21F0AAAD).bitwise_and_(M32)
    x.bitwise_xor_(x >> 15)
    x.mul_(0x735A2D97).bitwise_and_(M32)
    return x.bitwise_xor_(x >> 15)


def keyed_bits(keys: torch.Tensor, shape: torch.Size, salt: int) -> torch.Tensor:
    """32-bit hashes (int64 < 2**32), one per element of `shape` (batch first), as a (batch, rest)
    tensor; row b depends only on keys[b] and salt."""
    row, n = _row_keys(keys, shape, salt)
    return _mix_(row[:, None] ^ torch.arange(n, device=keys.device, dtype=torch.int64))


def _row_keys(keys: torch.Tensor, shape: torch.Size, salt: int) -> tuple[torch.Tensor, int]:
    """(each row's hashed key for layer `salt`, int64 < 2**32; the elements per row of `shape`)."""
    n = 1
    for d in shape[1:]:
        n *= d
    return mix(keys.to(torch.int64) ^ mix(salt + 0x9E3779B9)), n


def keep_mask(keys: torch.Tensor, shape: torch.Size, salt: int, p: float) -> torch.Tensor:
    """`keyed_bits(keys, shape, salt) >= keep_threshold(p)`, the same booleans (batch, rest),
    computed on int32 lanes: a third of the int64 form's time on a CPU (AVX2 has a 32-bit
    multiply, not a 64-bit one), and a dropout layer pays it per element. The 32 hash bits are
    held as int32: a multiplication keeps the low 32 bits, as `mix` masks them (the lanes wrap;
    a uint32 view would too, but its kernels are not vectorised); right shifts are arithmetic on
    int32, so their sign-extended top bits are masked off; the unsigned comparison is done signed
    by flipping the top bit of both sides. tests/unit/train checks it element by element against
    the int64 form. Off the CPU it is the int64 form itself."""
    threshold = keep_threshold(p)
    if keys.device.type != "cpu" or threshold >= 1 << 32:
        return keyed_bits(keys, shape, salt) >= threshold
    row, n = _row_keys(keys, shape, salt)
    x = row.to(torch.int32)[:, None] ^ _arange32(n, keys.device)   # the same 32 bits, as int32
    x.bitwise_xor_((x >> 16).bitwise_and_(0xFFFF))
    x.mul_(0x21F0AAAD)
    x.bitwise_xor_((x >> 15).bitwise_and_(0x1FFFF))
    x.mul_(0x735A2D97)
    x.bitwise_xor_((x >> 15).bitwise_and_(0x1FFFF))
    return x.bitwise_xor_(-(1 << 31)) >= threshold - (1 << 31)


@functools.lru_cache(maxsize=64)
def _arange32(n: int, device: torch.device) -> torch.Tensor:
    """0..n-1 as int32 (read-only: the element index every mask row is hashed with)."""
    return torch.arange(n, device=device, dtype=torch.int32)


@functools.lru_cache(maxsize=None)
def keep_threshold(p: float) -> int:
    """The `keyed_bits` value from which an element is kept. The masks were defined as a uniform
    u = k / 2**24 (k the top 24 bits, exact in float32) kept when u >= p, p rounded to float32:
    k >= p32 * 2**24 (exact: a power-of-two scale), i.e. bits >= ceil(p32 * 2**24) * 256. The
    same masks in one integer comparison."""
    return math.ceil(float(torch.tensor(p, dtype=torch.float32)) * (1 << 24)) << 8


class KeyedDropout(nn.Dropout):
    """nn.Dropout whose mask is a function of the per-sample keys (see module docstring).
    `salt` tells the layers of one model apart."""

    def __init__(self, p: float = 0.5, salt: int = 0) -> None:
        super().__init__(p)
        self.salt = salt

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        keys = _KEYS.get()
        if not self.training or self.p == 0:
            return x
        if keys is None or keys.shape[0] != x.shape[0]:
            return F.dropout(x, self.p, True)
        keep = keep_mask(keys.to(x.device), x.shape, self.salt, self.p).reshape(x.shape)
        # keep is 0/1, so keep * scale is exactly 0 or scale: the same products as (x * keep) * scale
        return x * keep.to(x.dtype).mul_(1.0 / (1.0 - self.p) if self.p < 1 else 0.0)


def swap_dropout(model: nn.Module) -> int:
    """Replace every plain nn.Dropout in `model` by a KeyedDropout (same p; salt = its order).
    Returns how many were replaced. Functional dropout inside forward() is not reached."""
    count = 0
    for parent in list(model.modules()):
        for name, child in list(parent.named_children()):
            if type(child) is nn.Dropout:
                setattr(parent, name, KeyedDropout(child.p, salt=count))
                count += 1
    return count
