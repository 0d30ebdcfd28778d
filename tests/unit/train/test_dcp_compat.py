"""The sharded writer against torch's own staging: a stager that fails (torch 2.11.0+cu130 on an
H200 failed every save with KeyError: <class 'type'>) turns the saves synchronous instead of
failing the run, and a failed save says whether room, permissions or torch are to blame."""

from __future__ import annotations

import errno
import logging

import pytest
import torch
from torch import nn
from torch.distributed.checkpoint.staging import DefaultStager, StagingOptions

from trainkit.errors import TrainkitError
from trainkit.train import restore, sharded
from trainkit.train.dcp_compat import stager_works

pytestmark = pytest.mark.unit


def host_stager() -> DefaultStager:
    return DefaultStager(StagingOptions(use_pinned_memory=False, use_shared_memory=False,
                                        use_async_staging=True, use_non_blocking_copy=False))


def trained():
    torch.manual_seed(0)
    model = nn.Linear(4, 3)
    opt = torch.optim.AdamW(model.parameters())
    model(torch.randn(2, 4)).sum().backward()
    opt.step()
    return model, opt


def test_this_torchs_host_stager_passes_the_probe():
    stager = host_stager()
    try:
        assert stager_works(stager, "cpu")
    finally:
        stager.close()


def test_a_stager_whose_copier_table_was_cleared_fails_the_probe():
    """What torch 2.11's DefaultStager does to itself after a stage (StateDictStager.close empties
    the dispatch table): the probe's class-bearing value then raises KeyError inside torch."""
    stager = host_stager()
    stager._state_dict_stager.close()
    try:
        assert not stager_works(stager, "cpu")
    finally:
        stager.close()


@pytest.mark.parametrize("how", ["no stager works", "async_save off"])
def test_saves_without_a_stager_are_synchronous_complete_and_load(tmp_path, monkeypatch, caplog, how):
    model, opt = trained()
    if how == "no stager works":
        monkeypatch.setattr(sharded, "stager_works", lambda stager, device: False)
    # a run in this process before (setup_logging) stops its logger propagating to caplog's
    monkeypatch.setattr(logging.getLogger("trainkit.train"), "propagate", True)
    saver = sharded.Checkpointer(tmp_path, keep=2, staged=how != "async_save off")
    with caplog.at_level(logging.WARNING, logger="trainkit.train"):
        for step in (1, 2, 3):
            saver.save(model, opt, {"step": step}, step, block=False)
            assert not saver.writing and saver.in_flight_step is None  # committed before it returned
    saver.close()
    assert saver.complete_steps() == [2, 3]
    sharded.verify(saver.root / "step-00000003")
    assert torch.equal(restore.load(restore.newest_valid(saver.root))["model"]["weight"], model.weight)
    said = [r.getMessage() for r in caplog.records if r.name == "trainkit.train"]
    if how == "no stager works":
        assert said and "checkpoints are written synchronously" in said[-1]
    else:
        assert not said


@pytest.mark.parametrize("err, says, fix", [
    (OSError(errno.ENOSPC, "No space left on device"), "MiB free there", "free space there"),
    (OSError(errno.EROFS, "Read-only file system"), "failed (OSError", "writable"),
    (KeyError(type), "not for want of room", "checkpoint.async_save: false"),
])
def test_a_failed_save_names_its_real_cause_and_the_fix_that_cures_it(tmp_path, err, says, fix):
    saver = sharded.Checkpointer(tmp_path / "ckpt", keep=2)
    wrapped = RuntimeError("staging failed")
    wrapped.__cause__ = err
    failed = saver._failed(wrapped if isinstance(err, OSError) else err, tmp_path / "ckpt" / "step-7")
    assert isinstance(failed, TrainkitError) and failed.exit_code == 6
    assert says in str(failed) and fix in failed.fix
    assert ("free space" in failed.fix) == (err.args[0] == errno.ENOSPC)
