"""Checkpoint atomics: marker last, partial/corrupt skipped with a warning, keep N, async staging."""

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
    saver = ckpt.Checkpointer(tmp_path, keep=3)
    saver.save(_state(1.0), step=1)
    folder = tmp_path / "step-00000001"
    assert sorted(p.name for p in folder.iterdir()) == ["COMPLETE", "state.pt"]
    marker = json.loads((folder / "COMPLETE").read_text())
    assert marker["step"] == 1 and marker["bytes"] == (folder / "state.pt").stat().st_size
    assert torch.equal(restore.load(folder)["model"]["w"], torch.full((64, 64), 1.0))
    assert torch.equal(restore.load(folder / "state.pt")["model"]["w"], torch.full((64, 64), 1.0))


def test_keeps_only_the_newest_n_complete_checkpoints(tmp_path):
    saver = ckpt.Checkpointer(tmp_path, keep=2)
    for step in (1, 2, 3, 4):
        saver.save(_state(step), step=step)
    assert saver.complete_steps() == [3, 4]


def test_keep_is_never_below_two(tmp_path):
    saver = ckpt.Checkpointer(tmp_path, keep=1)
    for step in (1, 2, 3):
        saver.save(_state(step), step=step)
    assert saver.complete_steps() == [2, 3]


def test_partial_checkpoint_without_marker_is_skipped_with_a_warning(tmp_path, caplog):
    saver = ckpt.Checkpointer(tmp_path, keep=3)
    saver.save(_state(1.0), step=1)
    partial = tmp_path / "step-00000002"
    partial.mkdir()
    (partial / "state.pt.tmp").write_bytes(b"half a checkpoint")
    with caplog.at_level(logging.WARNING, logger="trainkit.train"):
        path, state = saver.load_latest()
    assert path.name == "step-00000001" and state["step"] == 1
    assert "skipping checkpoint" in caplog.text and "partial" in caplog.text


@pytest.mark.parametrize("damage", ["truncate", "flip"])
def test_corrupt_checkpoint_is_skipped_with_a_warning(tmp_path, caplog, damage):
    saver = ckpt.Checkpointer(tmp_path, keep=3)
    saver.save(_state(1.0), step=1)
    saver.save(_state(2.0), step=2)
    target = tmp_path / "step-00000002" / "state.pt"
    data = bytearray(target.read_bytes())
    if damage == "truncate":
        data = data[: len(data) // 2]
    else:
        data[len(data) // 2] ^= 0xFF
    target.write_bytes(bytes(data))
    with caplog.at_level(logging.WARNING, logger="trainkit.train"):
        path, state = saver.load_latest()
    assert state["step"] == 1 and "corrupt" in caplog.text
    with pytest.raises(ckpt.CheckpointError):
        restore.load(tmp_path / "step-00000002")


def test_async_save_stages_a_copy_so_later_updates_do_not_leak_in(tmp_path):
    saver = ckpt.Checkpointer(tmp_path, keep=3)
    state = _state(1.0)
    saver.save(state, step=1, block=False)
    state["model"]["w"].add_(100.0)  # training goes on while the thread writes
    saver.wait()
    assert torch.equal(restore.load(tmp_path / "step-00000001")["model"]["w"], torch.full((64, 64), 1.0))


def test_stale_partial_folders_older_than_the_newest_complete_are_pruned(tmp_path):
    (tmp_path / "step-00000001").mkdir(parents=True)
    (tmp_path / "step-00000001" / "state.pt.tmp").write_bytes(b"x")
    saver = ckpt.Checkpointer(tmp_path, keep=2)
    saver.save(_state(2.0), step=2)
    assert not (tmp_path / "step-00000001").exists()


def test_rng_state_round_trips():
    import random

    import numpy as np

    state = ckpt.rng_state()
    a = (random.random(), np.random.rand(), torch.rand(1).item())
    ckpt.set_rng_state(state)
    assert (random.random(), np.random.rand(), torch.rand(1).item()) == a


def test_no_checkpoint_means_none(tmp_path):
    assert ckpt.Checkpointer(tmp_path / "missing", keep=2).load_latest() is None
