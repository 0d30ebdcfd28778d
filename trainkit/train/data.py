"""Datasets and loaders: the built-in digits set, user datasets by import path, resumable sharding.

Dataset contract (built-in or `data: pkg.module:builder`): `builder(seed=..., **data_args)` returns
either one map-style Dataset (split here train/val/test by `cfg.split`, deterministic by seed) or a
tuple/dict of three (train, val, test). Items are `(input_tensor, int_label)`.
"""

from __future__ import annotations

import importlib
import importlib.util
import os
import signal
import time
import traceback
from pathlib import Path
from typing import Any, Callable

import numpy as np
import torch
from torch.utils.data import DataLoader, Dataset, Sampler, Subset, TensorDataset

from trainkit.errors import InputError
from trainkit.train.config import TrainConfig
from trainkit.train.dist import DistInfo, broadcast_object
from trainkit.train.schedule import suggested_workers
from trainkit.train.workers import choose as choose_workers


def digits_arrays() -> tuple[np.ndarray, np.ndarray]:
    """(images (1797, 8, 8) in 0..16, labels (1797,)): what sklearn.datasets.load_digits returns.

    Read straight from scikit-learn's bundled datasets/data/digits.csv.gz (no download) without
    importing scikit-learn (seconds per process on a busy node); falls back to load_digits.
    """
    spec = importlib.util.find_spec("sklearn")
    path = os.path.join((spec.submodule_search_locations or [""])[0] if spec else "",
                        "datasets", "data", "digits.csv.gz")
    if os.path.exists(path):
        raw = np.loadtxt(path, delimiter=",", dtype=np.float64)
        return raw[:, :-1].reshape(-1, 8, 8), raw[:, -1].astype(np.int64)
    from sklearn.datasets import load_digits

    bunch = load_digits()
    return bunch.images, bunch.target


def digits_dataset(seed: int = 0) -> Dataset:
    """scikit-learn's 8x8 digits (1797 images, 10 classes, bundled: no download), scaled to [0, 1]."""
    images, labels = digits_arrays()
    x = torch.tensor(images, dtype=torch.float32).unsqueeze(1) / 16.0
    ds = TensorDataset(x, torch.tensor(labels, dtype=torch.long))
    ds.classes = [str(d) for d in range(10)]  # torchvision's attribute; lands in model.onnx metadata
    return ds


class FolderDataset(Dataset):
    """A staged dataset folder: <path>/<class>/<item>.npy, one array per item, classes sorted by
    name (as torchvision's ImageFolder). Read from disk per item, so `workers: auto` measures."""

    def __init__(self, path: str) -> None:
        root = Path(path)
        self.classes = sorted(p.name for p in root.iterdir() if p.is_dir()) if root.is_dir() else []
        self.items = [(f, i) for i, c in enumerate(self.classes) for f in sorted((root / c).glob("*.npy"))]
        if not self.items:
            raise InputError(f"data_args.path: no <class>/<item>.npy files under {path}",
                             fix="stage the data first (trainkit stage) or point path at it")

    def __len__(self) -> int:
        return len(self.items)

    def __getitem__(self, i: int):
        path, label = self.items[i]
        try:
            return torch.from_numpy(np.load(path).astype(np.float32)), label
        except (OSError, ValueError, EOFError) as err:  # truncated or not .npy (np.save's format)
            raise InputError(f"data_args.path: {path} is not a readable .npy array ({err})",
                             fix="re-stage the data (trainkit stage) or remove the file") from None


def folder_dataset(seed: int = 0, *, path: str) -> Dataset:
    """`data: folder` with `data_args: {path: DIR}`: the folder is split train/val/test by `split`.
    A relative DIR is a staged dataset's name: it is found under $TRAINKIT_DATA_ROOT, which
    `trainkit train` sets on every node (docs/data.md), else under the current folder."""
    return FolderDataset(str(Path(os.environ.get("TRAINKIT_DATA_ROOT", ".")) / path))


def _pydoc_text(**kwargs: Any) -> Dataset:
    from trainkit.train.gpt import pydoc_text

    return pydoc_text(**kwargs)


BUILTIN_DATA: dict[str, Callable[..., Any]] = {"digits": digits_dataset, "folder": folder_dataset,
                                              "pydoc_text": _pydoc_text}


def resolve_import(spec: str, builtins: dict[str, Callable[..., Any]], key: str) -> Callable[..., Any]:
    """A built-in name or 'pkg.module:attr' -> the callable. Raises InputError naming `key`."""
    if spec in builtins:
        return builtins[spec]
    module_name, sep, attr = spec.partition(":")
    if not sep:
        raise InputError(f"{key}: {spec!r} is neither built in ({', '.join(builtins)}) "
                         "nor an import path 'pkg.module:function'")
    try:
        return getattr(importlib.import_module(module_name), attr)
    except (ImportError, AttributeError) as err:
        raise InputError(f"{key}: cannot import {spec!r}: {err}",
                         fix="check the module is importable (PYTHONPATH) and defines it") from None


def call_builder(builder: Callable[..., Any], key: str, name: str, **kwargs: Any) -> Any:
    """`builder(**kwargs)`; anything it raises becomes an InputError naming `key` (model/data), its
    `<key>_args` and where in the user's code it was raised."""
    try:
        return builder(**kwargs)
    except InputError:
        raise
    except Exception as err:  # noqa: BLE001 - the user's builder may raise anything
        frame = traceback.extract_tb(err.__traceback__)[-1]
        raise InputError(f"{key}: building {name!r} raised {type(err).__name__}: {err} "
                         f"(at {frame.filename}:{frame.lineno})",
                         fix=f"check {key}_args against the builder (`trainkit docs training`)") from None


def build_splits(cfg: TrainConfig) -> dict[str, Dataset]:
    """train/val/test datasets for `cfg` (user builder or built-in), split by `split_seed` (not the
    training seed, so the test set is the same for every seed) if the builder returns one set.
    Raises InputError naming `data` or `split` for output that is not three non-empty Datasets."""
    builder = resolve_import(cfg.data, BUILTIN_DATA, "data")
    out = call_builder(builder, "data", cfg.data, seed=cfg.seed, **cfg.data_args)
    shape = "one Dataset, a tuple (train, val, test) or a dict with keys train, val, test"
    if isinstance(out, dict):
        missing = [n for n in ("train", "val", "test") if n not in out]
        if missing:
            raise InputError(f"data: {cfg.data} returned a dict without {', '.join(missing)} "
                             f"(its keys: {', '.join(map(str, out)) or 'none'})", fix=f"return {shape}")
        parts = {name: out[name] for name in ("train", "val", "test")}
    elif isinstance(out, (tuple, list)):
        if len(out) != 3:
            raise InputError(f"data: {cfg.data} returned {len(out)} datasets, not 3", fix=f"return {shape}")
        parts = dict(zip(("train", "val", "test"), out))
    elif _is_dataset(out):
        parts = split_dataset(out, cfg.split, cfg.split_seed)
    else:
        raise InputError(f"data: {cfg.data} returned {type(out).__name__}, not a Dataset",
                         fix=f"return {shape}")
    for name, ds in parts.items():
        if not _is_dataset(ds):
            raise InputError(f"data: {cfg.data}'s {name} set is {type(ds).__name__}, not a map-style "
                             "Dataset (__len__ and __getitem__)", fix=f"return {shape}")
        if len(ds) == 0 and not isinstance(out, (dict, tuple, list)):
            raise InputError(f"split: {cfg.split} leaves the {name} set empty ({len(out)} item(s) "
                             f"from {cfg.data})", fix="raise that fraction or use more data")
        if len(ds) == 0:
            raise InputError(f"data: {cfg.data} returned an empty {name} set",
                             fix="give every set at least one item")
    return parts


def _is_dataset(obj: Any) -> bool:
    return hasattr(obj, "__len__") and hasattr(obj, "__getitem__") and not isinstance(obj, (str, bytes, dict))


def split_dataset(ds: Dataset, fractions: list[float], seed: int) -> dict[str, Dataset]:
    """Random disjoint train/val/test subsets; the same seed gives the same split on every rank."""
    n = len(ds)
    perm = torch.randperm(n, generator=torch.Generator().manual_seed(seed)).tolist()
    n_train, n_val = int(round(fractions[0] * n)), int(round(fractions[1] * n))
    cuts = {"train": perm[:n_train], "val": perm[n_train:n_train + n_val],
            "test": perm[n_train + n_val:]}
    return {name: Subset(ds, idx) for name, idx in cuts.items()}


class GlobalBatchSampler(Sampler[int]):
    """This rank's share of epoch e's global order, the same rule for every world size.

    The order is a permutation of the train set seeded by (seed, e), cut to a whole number of
    global batches (`len // global_batch * global_batch`: the remainder, at most global_batch - 1
    items of this epoch's order, is dropped -- a different set each epoch -- so no sample is
    padded or served twice, and 1, 2 or 4 processes run the same steps). Rank r takes positions
    r, r + W, r + 2W, ...: the union of all ranks' k-th micro-batches is one slice of the order.
    `set_epoch(e, start=k)` skips this rank's first k items (mid-epoch resume).
    """

    def __init__(self, n: int, global_batch: int, rank: int, world: int, seed: int) -> None:
        self.n, self.global_batch, self.rank, self.world, self.seed = n, global_batch, rank, world, seed
        self.usable = n // global_batch * global_batch
        self.epoch = self.start = 0

    def set_epoch(self, epoch: int, start: int = 0) -> None:
        self.epoch, self.start = epoch, start

    def order(self) -> list[int]:
        gen = torch.Generator().manual_seed(self.seed + self.epoch)
        return torch.randperm(self.n, generator=gen)[:self.usable].tolist()

    def __iter__(self):
        return iter(self.order()[self.rank::self.world][self.start:])

    def __len__(self) -> int:
        return self.usable // self.world - self.start

    @property
    def num_samples(self) -> int:
        return self.usable // self.world


def ignore_sigterm(worker_id: int) -> None:
    """DataLoader worker_init_fn: the main process handles SIGTERM (olmoearth_pretrain PR #604)."""
    signal.signal(signal.SIGTERM, signal.SIG_IGN)


def loader_options(cfg: TrainConfig, info: DistInfo, workers: int | None = None) -> dict[str, Any]:
    """workers / pin_memory / persistent_workers / prefetch_factor from the machine and config.
    `workers` is the resolved count for `workers: auto` (trainkit.train.workers.choose); without it
    auto means the machine bound (Lightning's suggested_max_num_workers)."""
    if workers is None:
        workers = worker_bound(info) if cfg.workers == "auto" else cfg.workers
    opts: dict[str, Any] = {"num_workers": workers, "pin_memory": info.device.type == "cuda"}
    if workers > 0:
        # prefetch_factor 2 is PyTorch's default; persistent workers avoid a re-fork per epoch.
        opts.update(persistent_workers=True, prefetch_factor=2, worker_init_fn=ignore_sigterm)
    return opts


def worker_bound(info: DistInfo) -> int:
    return suggested_workers(os.cpu_count() or 1, info.local_world_size)


def train_loader(ds: Dataset, micro: int, global_batch: int, cfg: TrainConfig, info: DistInfo
                 ) -> tuple[DataLoader, GlobalBatchSampler]:
    """Shuffled, sharded loader of per-rank micro-batches (see GlobalBatchSampler): global-batch
    results do not depend on the world size."""
    sampler = GlobalBatchSampler(len(ds), global_batch, info.rank, info.world_size, cfg.seed)
    # a private generator: creating the iterator must not draw from the global torch RNG,
    # or a resumed run's dropout masks would differ from the uninterrupted run's.
    gen = torch.Generator().manual_seed(cfg.seed)
    workers = cfg.workers if cfg.workers != "auto" else choose_workers(
        ds, micro, worker_bound(info), info.is_main, lambda x: broadcast_object(info, x))
    loader = DataLoader(ds, batch_size=micro, sampler=sampler, drop_last=True, generator=gen,
                        **loader_options(cfg, info, workers))
    return loader, sampler


def close_loader(loader: DataLoader) -> None:
    """Stop persistent workers now. Needed because workers ignore SIGTERM: multiprocessing's exit
    handler would SIGTERM them and join forever. (Uses DataLoader's private `_iterator`.)"""
    it = getattr(loader, "_iterator", None)
    if it is not None and hasattr(it, "_shutdown_workers"):
        it._shutdown_workers()
    loader._iterator = None
    for w in getattr(it, "_workers", []):  # belt and braces: SIGKILL any survivor
        if w.is_alive():
            w.kill()


def eval_loader(ds: Dataset, batch: int, cfg: TrainConfig, info: DistInfo) -> DataLoader:
    """Unshuffled loader of this rank's r::world slice (no padding, so metrics count each item once).
    Ranks may get one batch fewer than rank 0: see `eval_batches`."""
    indices = list(range(info.rank, len(ds), info.world_size))
    opts = loader_options(cfg, info)
    opts.update(num_workers=0, persistent_workers=False)
    opts.pop("prefetch_factor", None), opts.pop("worker_init_fn", None)
    return DataLoader(Subset(ds, indices), batch_size=batch, shuffle=False, **opts)


def eval_batches(n: int, batch: int, world: int) -> int:
    """Batches the rank with the most items (rank 0) gets from `eval_loader`: every rank runs this
    many forwards under FSDP (its collectives need all ranks), padding with empty ones."""
    per_rank = -(-n // world)         # ceil(n / world): rank 0 gets the remainder
    return -(-per_rank // batch)      # ceil(per_rank / batch)


def load_seconds(ds: Dataset, items: int, rounds: int = 3) -> float:
    """Median seconds this process takes to load and collate `items` items itself (no workers):
    the loading cost a worker hides, against which the monitor compares the data wait."""
    from torch.utils.data import default_collate

    times = []
    for r in range(rounds):
        t0 = time.perf_counter()
        default_collate([ds[(r * items + i) % len(ds)] for i in range(items)])
        times.append(time.perf_counter() - t0)
    return sorted(times)[len(times) // 2]
