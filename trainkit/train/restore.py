"""Restoring from a checkpoint of either format: the dispatch that sits above both.

New runs write torch.distributed.checkpoint folders (sharded.py); runs before them wrote one
`state.pt` per step (checkpoint.py). Neither format module knows the other: this one asks which a
folder is and calls that format's checks and loader.

- `verify(folder)`: CheckpointError unless the folder is a complete checkpoint of its format;
- `load(path)`: one dict of plain tensors (sharded ones consolidated), after `verify`;
- `newest_valid(root)`: the newest step folder under `root` that verifies, warning about each skipped;
- `checkpoint_folder(path)`: what a user's path names (a step folder, a file in one, a root of them,
  a run folder); InputError otherwise.
"""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any

from trainkit.errors import InputError
from trainkit.train import checkpoint as single
from trainkit.train import sharded
from trainkit.train.checkpoint import MARKER, CheckpointError, step_of

log = logging.getLogger("trainkit.train")


def is_checkpoint(folder: Path) -> bool:
    """Whether `folder` looks like a checkpoint of either format (complete or not)."""
    return sharded.is_sharded(folder) or (folder / MARKER).exists()


def verify(folder: Path) -> None:
    """Raise CheckpointError unless `folder` is a complete checkpoint (marker, files, checksums)."""
    if sharded.is_sharded(folder):
        sharded.verify(folder)
    else:
        single.load_single(folder)  # the single-file format: loading is its check


def load(path: Path | str) -> dict[str, Any]:
    """A checkpoint folder (or its state.pt) of either format as one dict of plain tensors.
    Raises CheckpointError if partial or corrupt. weights_only=False (RNG states are Python
    objects): load only checkpoints you wrote."""
    folder = Path(path)
    folder = folder.parent if folder.is_file() else folder
    if not sharded.is_sharded(folder):
        return single.load_single(folder)
    sharded.verify(folder)
    try:
        return sharded.consolidate(folder)
    except Exception as err:  # DCP's errors have no common base: any failure means "does not load"
        raise CheckpointError(f"does not load: {err}") from None


def newest_valid(root: Path) -> Path | None:
    """The newest `step-*` folder under `root` that verifies (either format); warns about each
    one skipped; None when none does."""
    for folder in sorted(root.glob("step-*"), key=step_of, reverse=True):
        try:
            verify(folder)
            return folder
        except CheckpointError as err:
            log.warning("skipping checkpoint %s: %s", folder, err)
    return None


def checkpoint_folder(path: Path) -> Path:
    """The checkpoint folder `path` names: a step-N folder (or a file in one), a folder of them
    (the newest complete), or a run folder (its checkpoints/). InputError otherwise."""
    fix = "give a step-N folder, a folder of them (checkpoint.dir) or a run folder with checkpoints/"
    if path.is_file():
        if not is_checkpoint(path.parent):
            raise InputError(f"{path} is a file, not a checkpoint", fix=fix)
        return path.parent
    if is_checkpoint(path):
        return path
    if not any(path.glob("step-*")) and (path / "checkpoints").is_dir():
        path = path / "checkpoints"  # a run folder
    found = newest_valid(path)
    if found is None:
        raise InputError(f"no complete checkpoint under {path}", fix=fix)
    return found
