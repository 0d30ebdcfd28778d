"""The single-file checkpoint format (runs before sharded checkpoints; still read) and the
helpers both formats share. Runs write torch.distributed.checkpoint folders through the one
`Checkpointer` (sharded.py); restore.py reads either format.

Layout: <root>/step-00000042/state.pt and <root>/step-00000042/COMPLETE (JSON: step, bytes, sha256),
the marker written last. A write (`save_single`, blocking, one process) is: serialize -> state.pt.tmp
-> fsync -> os.replace -> fsync dir -> marker (same dance). A folder without a marker, or whose
state.pt does not match the marker's size and sha256, or does not unpickle, is skipped with a warning
(torchtitan's "find the newest complete step"; Ultralytics' in-place write is the failure mode
avoided).
"""

from __future__ import annotations

import hashlib
import io
import json
import logging
import os
import random
import shutil
import signal
import time
from pathlib import Path
from typing import Any

import numpy as np
import torch

log = logging.getLogger("trainkit.train")
MARKER = "COMPLETE"
STATE = "state.pt"
CHUNK = 1 << 20


def rng_state() -> dict[str, Any]:
    """Every RNG the run draws from: python, numpy, torch CPU and (if present) CUDA."""
    state = {"python": random.getstate(), "numpy": np.random.get_state(), "torch": torch.get_rng_state()}
    if torch.cuda.is_available():
        state["cuda"] = torch.cuda.get_rng_state_all()
    return state


def set_rng_state(state: dict[str, Any]) -> None:
    random.setstate(state["python"])
    np.random.set_state(state["numpy"])
    torch.set_rng_state(state["torch"])
    if "cuda" in state and torch.cuda.is_available():
        torch.cuda.set_rng_state_all(state["cuda"])


def step_dir(root: Path, step: int) -> Path:
    return root / f"step-{step:08d}"


def save_single(root: Path, state: dict[str, Any], step: int, keep: int = 2) -> Path:
    """Write `state` as step `step` under `root` in the single-file format (module doc), then keep
    the newest `keep` (>= 2) complete checkpoints. Returns the step folder. Runs write sharded
    checkpoints (sharded.Checkpointer); this writer makes the older format, which restore.py
    still reads (tests, `trainkit export` of an old run's folder)."""
    buf = io.BytesIO()
    torch.save(state, buf)
    folder = step_dir(Path(root), step)
    folder.mkdir(parents=True, exist_ok=True)
    digest = atomic_write(folder / STATE, buf.getbuffer())
    marker = {"step": step, "bytes": buf.getbuffer().nbytes, "sha256": digest, "time": time.time()}
    atomic_write(folder / MARKER, json.dumps(marker).encode())
    prune(Path(root), max(2, keep))
    return folder


class CheckpointError(Exception):
    """A checkpoint that is partial, corrupt or unreadable."""


def load_single(path: Path | str) -> dict[str, Any]:
    """Load a single-file checkpoint folder (or its state.pt) after checking it against its marker.
    Raises CheckpointError if partial or corrupt. Either format: trainkit.train.restore.load.

    Uses weights_only=False (RNG states are Python objects): load only checkpoints you wrote.
    """
    folder = Path(path)
    folder = folder.parent if folder.is_file() else folder
    if not (folder / MARKER).exists():
        raise CheckpointError("no completion marker (partial write)")
    try:
        marker = json.loads((folder / MARKER).read_text())
        data = (folder / STATE).read_bytes()
    except (OSError, ValueError) as err:
        raise CheckpointError(f"unreadable: {err}") from None
    if len(data) != marker.get("bytes") or hashlib.sha256(data).hexdigest() != marker.get("sha256"):
        raise CheckpointError("size or sha256 does not match the completion marker (corrupt)")
    try:
        return torch.load(io.BytesIO(data), map_location="cpu", weights_only=False)
    except Exception as err:  # a pickle/zip error of any kind means: not loadable
        raise CheckpointError(f"does not load: {err}") from None


def step_of(folder: Path) -> int:
    """The step a `step-N` folder holds; -1 for a name that is not one."""
    try:
        return int(folder.name.split("-", 1)[1])
    except (IndexError, ValueError):
        return -1


def atomic_write(path: Path, data: memoryview | bytes) -> str:
    """temp file -> fsync -> os.replace -> fsync the folder. Returns the sha256 of `data`."""
    tmp = path.with_name(path.name + ".tmp")
    digest = hashlib.sha256()
    with open(tmp, "wb") as f:
        for i in range(0, len(data), CHUNK):
            chunk = data[i:i + CHUNK]
            f.write(chunk)
            digest.update(chunk)
            _fault_point(path)
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, path)
    dir_fd = os.open(path.parent, os.O_RDONLY)
    try:
        os.fsync(dir_fd)
    finally:
        os.close(dir_fd)
    return digest.hexdigest()


# Test hook, read ONCE when the module loads (process start-up), never in the write loop:
# TRAINKIT_FAULT_KILL_IN_SAVE=<step> SIGKILLs this process mid-write of that step.
_KILL_IN_SAVE = (os.environ.get("TRAINKIT_FAULT_KILL_IN_SAVE") or "").partition(":")[0]


def _fault_point(path: Path) -> None:
    """SIGKILL mid-write when the start-up hook above names this checkpoint's step."""
    target = _KILL_IN_SAVE
    if target and path.name == STATE and path.parent.name == f"step-{int(target):08d}":
        os.kill(os.getpid(), signal.SIGKILL)


def complete_steps(root: Path) -> list[int]:
    """Steps under `root` with a completion marker, oldest first (content not yet verified)."""
    return sorted(step_of(p.parent) for p in root.glob(f"step-*/{MARKER}"))


def prune(root: Path, keep: int) -> None:
    """Keep the newest `keep` complete checkpoints under `root`; drop partial folders older than
    the newest complete one (a save killed part way). Shared by the single-file and sharded writers."""
    complete = complete_steps(root)
    for step in complete[:-keep]:
        shutil.rmtree(step_dir(root, step), ignore_errors=True)
    newest = complete[-1] if complete else -1
    for folder in root.glob("step-*"):
        if not (folder / MARKER).exists() and step_of(folder) < newest:
            shutil.rmtree(folder, ignore_errors=True)

