"""Sharded checkpoints in one process: save, verify, consolidate; partial and corrupt ones refused."""

from __future__ import annotations

import pytest
import torch
from torch import nn

from trainkit.train import checkpoint as ckpt
from trainkit.train import restore, sharded


def saved(tmp_path, steps=(1, 2)):
    torch.manual_seed(0)
    model = nn.Linear(4, 3)
    opt = torch.optim.AdamW(model.parameters())
    model(torch.randn(2, 4)).sum().backward()
    opt.step()
    saver = sharded.Checkpointer(tmp_path, keep=2)
    for step in steps:
        saver.save(model, opt, {"step": step}, step, block=False)
    saver.close()
    return model, saver


def test_async_save_commits_and_consolidates_to_plain_weights(tmp_path):
    model, saver = saved(tmp_path, steps=(1, 2, 3))
    assert saver.complete_steps() == [2, 3]                  # keep-N pruned step 1
    state = restore.load(restore.newest_valid(saver.root))
    assert state["step"] == 3
    fresh = nn.Linear(4, 3)
    fresh.load_state_dict(state["model"])
    assert all(torch.equal(a, b) for a, b in zip(fresh.state_dict().values(),
                                                 model.state_dict().values()))


@pytest.mark.parametrize("damage, words", [("marker", "partial"), ("flip", "corrupt"),
                                           ("truncate", "corrupt")])
def test_a_damaged_newest_checkpoint_is_skipped_for_the_older_one(tmp_path, damage, words):
    _, saver = saved(tmp_path)
    folder = tmp_path / "step-00000002"
    shard = folder / "__0_0.distcp"
    if damage == "marker":
        (folder / ckpt.MARKER).unlink()
    elif damage == "flip":
        data = bytearray(shard.read_bytes())
        data[len(data) // 2] ^= 0xFF
        shard.write_bytes(bytes(data))
    else:
        shard.write_bytes(shard.read_bytes()[:-7])
    with pytest.raises(ckpt.CheckpointError, match=words):
        restore.verify(folder)
    assert restore.newest_valid(saver.root) == tmp_path / "step-00000001"


def test_kill_fault_is_parsed_once_into_step_and_delay():
    fault = sharded.KillFault("12:0.25")
    assert (fault.step, fault.delay) == (12, 0.25)
    assert sharded.KillFault(None).step is None
