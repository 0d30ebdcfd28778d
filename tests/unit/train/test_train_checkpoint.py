"""The single-file format's atomics: marker last, partial/corrupt skipped with a warning (the newest
that verifies is what a resume takes: restore.newest_valid), keep N."""

from __future__ import annotations

import json
import logging

import pytest
import torch

from trainkit.train import checkpoint as ckpt
from trainkit.train import restore


def _state(value: float) -> dict:
    return {"step": int(value), "model": {"w": torch.full((64, 64), value)}, "rng": ckpt.rng_state()}


def test_save_then_load_round_trips_and_writes_the_marker_last(tmp_path):
    folder = ckpt.save_single(tmp_path, _state(1.0), step=1, keep=3)
    assert folder == tmp_path / "step-00000001"
    assert sorted(p.name for p in folder.iterdir()) == ["COMPLETE", "state.pt"]
    marker = json.loads((folder / "COMPLETE").read_text())
    assert marker["step"] == 1 and marker["bytes"] == (folder / "state.pt").stat().st_size
    assert torch.equal(restore.load(folder)["model"]["w"], torch.full((64, 64), 1.0))
    assert torch.equal(restore.load(folder / "state.pt")["model"]["w"], torch.full((64, 64), 1.0))


def test_keeps_only_the_newest_n_complete_checkpoints(tmp_path):
    for step in (1, 2, 3, 4):
        ckpt.save_single(tmp_path, _state(step), step=step, keep=2)
    assert ckpt.complete_steps(tmp_path) == [3, 4]


def test_keep_is_never_below_two(tmp_path):
    for step in (1, 2, 3):
        ckpt.save_single(tmp_path, _state(step), step=step, keep=1)
    assert ckpt.complete_steps(tmp_path) == [2, 3]


def test_partial_checkpoint_without_marker_is_skipped_with_a_warning(tmp_path, caplog):
    ckpt.save_single(tmp_path, _state(1.0), step=1, keep=3)
    partial = tmp_path / "step-00000002"
    partial.mkdir()
    (partial / "state.pt.tmp").write_bytes(b"half a checkpoint")
    with caplog.at_level(logging.WARNING, logger="trainkit.train"):
        path = restore.newest_valid(tmp_path)
    assert path.name == "step-00000001" and restore.load(path)["step"] == 1
    assert "skipping checkpoint" in caplog.text and "partial" in caplog.text


@pytest.mark.parametrize("damage", ["truncate", "flip"])
def test_corrupt_checkpoint_is_skipped_with_a_warning(tmp_path, caplog, damage):
    ckpt.save_single(tmp_path, _state(1.0), step=1, keep=3)
    ckpt.save_single(tmp_path, _state(2.0), step=2, keep=3)
    target = tmp_path / "step-00000002" / "state.pt"
    data = bytearray(target.read_bytes())
    if damage == "truncate":
        data = data[: len(data) // 2]
    else:
        data[len(data) // 2] ^= 0xFF
    target.write_bytes(bytes(data))
    with caplog.at_level(logging.WARNING, logger="trainkit.train"):
        path = restore.newest_valid(tmp_path)
    assert restore.load(path)["step"] == 1 and "corrupt" in caplog.text
    with pytest.raises(ckpt.CheckpointError):
        restore.load(tmp_path / "step-00000002")


def test_stale_partial_folders_older_than_the_newest_complete_are_pruned(tmp_path):
    (tmp_path / "step-00000001").mkdir(parents=True)
    (tmp_path / "step-00000001" / "state.pt.tmp").write_bytes(b"x")
    ckpt.save_single(tmp_path, _state(2.0), step=2, keep=2)
    assert not (tmp_path / "step-00000001").exists()


def test_rng_state_round_trips():
    import random

    import numpy as np

    state = ckpt.rng_state()
    a = (random.random(), np.random.rand(), torch.rand(1).item())
    ckpt.set_rng_state(state)
    assert (random.random(), np.random.rand(), torch.rand(1).item()) == a


def test_no_checkpoint_means_none(tmp_path):
    assert restore.newest_valid(tmp_path / "missing") is None
