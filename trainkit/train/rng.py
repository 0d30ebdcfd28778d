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

import numpy as np
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
    RNG is reseeded from keys[0] (see the module docstring), which the caller may pass as `seed`
    when it has it as an int already. A class, not a generator: it is entered once per
    micro-batch."""

    __slots__ = ("keys", "seed", "token")

    def __init__(self, keys: torch.Tensor, seed: int | None = None) -> None:
        self.keys, self.seed = keys, seed

    def __enter__(self) -> None:
        reseed(int(self.keys[0]) if self.seed is None else self.seed)
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
    row = mix(keys.to(torch.int64) ^ _salt_key(salt))
    return _mix_(row[:, None] ^ torch.arange(_per_row(shape), device=keys.device, dtype=torch.int64))


def _salt_key(salt: int) -> int:
    """What every row key of layer `salt` is xored with before it is hashed."""
    return mix(salt + 0x9E3779B9)


def _per_row(shape: torch.Size) -> int:
    """Elements per sample of an activation of `shape` (batch first)."""
    return math.prod(shape[1:])


def _hash32(keys: torch.Tensor, shape: torch.Size, salt: int) -> np.ndarray:
    """`keyed_bits(keys, shape, salt)` for CPU tensors, as a uint32 numpy array (batch, rest)
    holding the same 32 bits. A dropout layer pays this per element, every step; numpy's uint32
    lanes have what the hash needs natively (a wrapping 32-bit multiply, AVX2 has one; logical
    shifts), where torch's int64 form runs three times slower (no 64-bit vector multiply) and its
    int32 form needs a mask after every arithmetic shift and 3-4 us of dispatch per op: 75 us
    against 250 us for a 64 x 512 mask here, 2% of a digits step (benchmarks/bench_train.py).
    `mix`'s first round over the elements costs no pass: a logical shift distributes over xor,
    so for x = row ^ i, x ^ (x >> 16) = (row ^ (row >> 16)) ^ (i ^ (i >> 16)): one factor per
    row and one per column."""
    row = (keys.numpy() & M32).astype(np.uint32) ^ np.uint32(_salt_key(salt))
    _mix32_(row)
    row ^= row >> 16
    h = row[:, None] ^ _columns32(_per_row(shape))
    h *= np.uint32(0x21F0AAAD)
    tmp = h >> 15
    h ^= tmp
    h *= np.uint32(0x735A2D97)
    np.right_shift(h, 15, out=tmp)
    h ^= tmp
    return h


def _mix32_(x: np.ndarray) -> np.ndarray:
    """`mix` of a uint32 array, in place (uint32 multiplication wraps: the low 32 bits)."""
    x ^= x >> 16
    x *= np.uint32(0x21F0AAAD)
    x ^= x >> 15
    x *= np.uint32(0x735A2D97)
    x ^= x >> 15
    return x


@functools.lru_cache(maxsize=64)
def _columns32(n: int) -> np.ndarray:
    """i ^ (i >> 16) for the element indexes i = 0..n-1, uint32, read-only (`_hash32`)."""
    i = np.arange(n, dtype=np.uint32)
    i ^= i >> 16
    i.flags.writeable = False
    return i


def keep_mask(keys: torch.Tensor, shape: torch.Size, salt: int, p: float) -> torch.Tensor:
    """`keyed_bits(keys, shape, salt) >= keep_threshold(p)`: the same booleans (batch, rest), from
    `_hash32` on the CPU. tests/unit/train checks it element by element against the int64 form.
    Off the CPU it is the int64 form itself."""
    threshold = keep_threshold(p)
    if keys.device.type != "cpu" or threshold >= 1 << 32:
        return keyed_bits(keys, shape, salt) >= threshold
    return torch.from_numpy(_hash32(keys, shape, salt) >= np.uint32(threshold))


def keep_scale(keys: torch.Tensor, shape: torch.Size, salt: int, p: float) -> torch.Tensor:
    """float32 (batch, rest): 1 / (1 - p) (rounded to float32) where `keep_mask` keeps, 0 where it
    drops: the factor a dropout multiplies by. On the CPU without a boolean tensor (comparing into
    bool and converting bool to float took 30 + 58 us on a 64 x 512 mask here): with k the hash's
    top 24 bits and K the threshold's (`keep_threshold`'s low 8 bits are zero, so bits >= K << 8
    iff k >= K), d = K - 1 - k is negative exactly where the element is kept; as int32, d >> 31
    (arithmetic) is then all ones, elsewhere zero, and ANDed with the float32 bit pattern of the
    scale it IS the factor, viewed as float32. |d| < 2**24: no overflow. tests/unit/train checks
    it against the mask."""
    scale = np.float32(1.0 / (1.0 - p) if p < 1 else 0.0)
    if keys.device.type != "cpu" or keep_threshold(p) >= 1 << 32:
        return keep_mask(keys, shape, salt, p).to(torch.float32).mul_(float(scale))
    h = _hash32(keys, shape, salt)
    h >>= 8
    np.subtract(np.uint32((keep_threshold(p) >> 8) - 1), h, out=h)   # d = K - 1 - k, wrapping
    d = h.view(np.int32)
    d >>= 31
    d &= scale.view(np.int32)
    return torch.from_numpy(d.view(np.float32))


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
        scale = 1.0 / (1.0 - self.p) if self.p < 1 else 0.0
        if x.dtype == torch.float64:   # the scale in double, not rounded to float32
            return x * keep_mask(keys.to(x.device), x.shape, self.salt, self.p).reshape(x.shape).to(x.dtype).mul_(scale)
        factor = keep_scale(keys.to(x.device), x.shape, self.salt, self.p).reshape(x.shape)
        # the factor is 0 or the scale rounded to float32; in bf16/fp16 rounded once more, as
        # keep.to(dtype) * scale rounds it (a Python scalar is float32 in their op math)
        return x * (factor if x.dtype == torch.float32 else factor.to(x.dtype))


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
