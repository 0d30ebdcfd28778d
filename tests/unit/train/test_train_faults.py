"""Configs and faults from outside: what an ML engineer gets wrong, and what goes wrong under a run.

Every case here crashed, hung or lost data before: each asserts the clear error (exit 2 naming the
key or file, or exit 6 for a failed run), or that no work is lost. One process, digits, a few steps.
"""

from __future__ import annotations

import json
import logging
import os
import resource
import signal
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from cli_run import run_cli
from user_package import installed

from trainkit.cli import main

REPO = Path(__file__).resolve().parents[3]
FAST = ["max_steps=4", "batch=64", "workers=0", "tensorboard=false", "plot=false",
        "checkpoint.interval=null"]


def strict_json(path: Path):
    """JSON as jq or a browser reads it: NaN / Infinity are errors."""
    def no_nan(word):
        raise ValueError(f"{path}: {word} is not JSON")
    return json.loads(path.read_text(), parse_constant=no_nan)


def test_a_diverging_loss_stops_the_run_and_saves_nothing_after_it(tmp_path, capsys):
    run = tmp_path / "run"
    code, err = run_cli(capsys, "run", *FAST, "max_steps=10", "lr0=1e30", "plot=true",
                        "checkpoint.every_n_steps=1", "log_every=1", f"run_dir={run}")
    assert code == 6 and "loss became NaN or inf at step 2" in err and "lr0" in err
    summary = strict_json(run / "summary.json")
    assert summary["status"] == "failed" and summary["exit_reason"] == "diverged"
    assert summary["steps"] == 2 and summary["train_loss"] is None
    # step 1's loss was finite: its checkpoint stays; nothing from the NaN weights is written
    assert sorted(p.name for p in (run / "checkpoints").iterdir()) == ["step-00000001"]
    assert not (run / "weights" / "last.pt").exists() and "last" not in summary["weights"]
    for line in (run / "metrics.jsonl").read_text().splitlines():
        json.loads(line, parse_constant=lambda w: pytest.fail(f"{w} in metrics.jsonl"))


@pytest.mark.parametrize("split, says", [
    ("[0.9,0.1]", "split: expected 3 fractions (train, val, test), not 2"),
    ("[0.5,0.5,0]", "split: expected every fraction > 0"),
    ("[0.5,0.3,0.1]", "split: expected fractions that sum to 1 (these sum to 0.9)")])
def test_a_bad_split_is_named_on_the_control_side_too(tmp_path, capsys, split, says):
    (tmp_path / "train.yaml").write_text("epochs: 1\n")
    code, err = run_cli(capsys, "validate", "--config", str(tmp_path / "train.yaml"), f"split={split}")
    assert code == 2 and says in err and "<top level>" not in err


USER_MODULE = textwrap.dedent('''
    import os
    import signal

    import torch
    from torch.utils.data import TensorDataset

    def digits_like(n, classes=10, float_labels=False):
        x = torch.rand(n, 1, 8, 8)
        y = torch.rand(n) if float_labels else torch.arange(n) % classes
        return TensorDataset(x, y)

    def model_raises(width=4):
        raise RuntimeError("boom in the builder")

    def two_sets(seed):
        return digits_like(100), digits_like(100)

    def dict_without_val(seed):
        return {"train": digits_like(100), "valid": digits_like(50), "test": digits_like(50)}

    def not_datasets(seed):
        return [1, 2, 3]

    def data_raises(seed, path="/nowhere"):
        raise FileNotFoundError(path)

    def tiny(seed):
        return digits_like(3)

    def val_of_another_shape(seed):
        return digits_like(200), TensorDataset(torch.rand(50, 1, 16, 16), torch.arange(50) % 10), \
            digits_like(50)

    def twenty_classes(seed):
        return digits_like(200, classes=20)

    def float_labels(seed):
        return digits_like(200, float_labels=True)

    class Branchy(torch.nn.Module):
        """Python control flow on a tensor value: export traces one branch (the zeros example's)."""

        def __init__(self):
            super().__init__()
            self.a = torch.nn.Sequential(torch.nn.Flatten(), torch.nn.Linear(64, 10))
            self.b = torch.nn.Sequential(torch.nn.Flatten(), torch.nn.Linear(64, 10))

        def forward(self, x):
            return self.a(x) if x.mean().item() > 0.3 else self.b(x)

    class CtrlCAtStep3(torch.nn.Module):
        """A user's model that presses Ctrl-C (SIGINT to its own process) in step 3's forward."""

        def __init__(self):
            super().__init__()
            self.net = torch.nn.Sequential(torch.nn.Flatten(), torch.nn.Linear(64, 10))
            self.calls = 0

        def forward(self, x):
            self.calls += self.training
            if self.training and self.calls == 3:
                os.kill(os.getpid(), signal.SIGINT)
            return self.net(x)
''')


@pytest.fixture
def user_mod(tmp_path, monkeypatch):
    yield from installed(tmp_path, monkeypatch, "faultpkg", "builders", USER_MODULE)


@pytest.mark.parametrize("override, says", [
    ("model={m}:model_raises", "model: building '{m}:model_raises' raised RuntimeError: boom in the "
                               "builder (at "),
    ("model_args.channels=abc", "model_args.channels: digits_cnn takes int (got 'abc')"),  # before any build
    ("data={m}:two_sets", "data: {m}:two_sets returned 2 datasets, not 3"),
    ("data={m}:dict_without_val", "data: {m}:dict_without_val returned a dict without val (its keys: "
                                  "train, valid, test)"),
    ("data={m}:not_datasets", "data: {m}:not_datasets's train set is int, not a map-style Dataset"),
    ("data={m}:data_raises", "data: building '{m}:data_raises' raised FileNotFoundError: /nowhere"),
    ("data={m}:tiny", "split: [0.7, 0.2, 0.1] leaves the test set empty (3 item(s) from {m}:tiny)"),
    ("model=gpt", "model: gpt does not fit data digits (train set): inputs (64, 1, 8, 8)"),
    ("model_args.num_classes=5", "model: digits_cnn does not fit data digits"),
    ("data={m}:twenty_classes", "labels 0..19 but 10 logits per item"),
    # before: an epoch of training, then 'internal error' in validation
    ("data={m}:val_of_another_shape", "model: digits_cnn does not fit data {m}:val_of_another_shape "
                                      "(val set): inputs (1, 1, 16, 16)"),
    ("data={m}:float_labels", "expected target dtype to be Long"),
])
def test_a_model_or_data_that_does_not_build_or_fit_is_exit_2_before_training(
        tmp_path, capsys, user_mod, override, says):
    """Before: 'internal error' (exit 1) at build time, or at the END of the run (a dict without
    'val' trained every epoch, then crashed without a summary)."""
    run = tmp_path / "run"
    code, err = run_cli(capsys, "run", *FAST, override.format(m=user_mod), f"run_dir={run}")
    assert code == 2 and says.format(m=user_mod) in err, err
    assert not list(run.glob("checkpoints/step-*"))


@pytest.mark.parametrize("key, target, says", [
    ("run_dir", "", "run_dir: expected a string with at least 1 character"),   # was: the current folder
    ("checkpoint.dir", "", "checkpoint.dir: expected a string with at least 1 character"),
    ("run_dir", "{f}", "run_dir: cannot create the folder {f} (File exists)"),
    ("run_dir", "{f}/sub", "run_dir: cannot create the folder {f}/sub (Not a directory)"),
    ("checkpoint.dir", "{f}", "checkpoint.dir: cannot create the folder {f} (File exists)")])
def test_a_run_or_checkpoint_folder_that_cannot_be_made_is_named(tmp_path, capsys, monkeypatch, key,
                                                                 target, says):
    monkeypatch.chdir(tmp_path)  # an empty run_dir used to mean the current folder
    a_file = tmp_path / "a-file"
    a_file.write_text("keep me\n")
    extra = [] if key == "run_dir" else [f"run_dir={tmp_path / 'run'}"]
    code, err = run_cli(capsys, "run", *FAST, *extra, f"{key}={target.format(f=a_file)}")
    assert code == 2 and says.format(f=a_file) in err
    assert a_file.read_text() == "keep me\n"


def test_resuming_another_model_or_optimizer_or_a_bad_path_is_named_and_keeps_the_checkpoints(
        tmp_path, capsys):
    """Before: a DCP traceback (its CheckpointException is a BaseException: not even 'internal
    error'), and resume=<checkpoint root> or a missing path said 'no completion marker'."""
    run = tmp_path / "run"
    assert run_cli(capsys, "run", *FAST, "checkpoint.every_n_steps=2", f"run_dir={run}")[0] == 0
    before = {p: p.stat().st_mtime_ns for p in (run / "checkpoints").rglob("*")}
    config = (run / "config.yaml").read_text()
    code, err = run_cli(capsys, "run", *FAST, "max_steps=8", "model_args.channels=16", f"run_dir={run}")
    assert code == 2 and "resume: " in err and "does not fit this run's model or optimizer" in err
    assert "Size mismatch" in err and "written with model_args={} (now {'channels': 16})" in err
    code, err = run_cli(capsys, "run", *FAST, "max_steps=8", "optimizer=SGD", f"run_dir={run}")
    assert code == 2 and "optimizer='AdamW' (now 'SGD')" in err
    assert {p: p.stat().st_mtime_ns for p in (run / "checkpoints").rglob("*")} == before
    assert (run / "config.yaml").read_text() == config  # before: the refused attempt's config
    code, err = run_cli(capsys, "run", *FAST, f"resume={tmp_path / 'nowhere'}", f"run_dir={tmp_path / 'b'}")
    assert code == 2 and f"resume: {tmp_path / 'nowhere'} is not a folder" in err
    # a checkpoint root: its newest complete checkpoint, as `trainkit export` takes it
    code, _ = run_cli(capsys, "run", *FAST, "max_steps=6", f"resume={run / 'checkpoints'}",
                      f"run_dir={tmp_path / 'c'}")
    assert code == 0 and strict_json(tmp_path / "c" / "summary.json")["resumed_from_step"] == 4


def test_a_checkpoint_write_that_fails_stops_the_run_and_keeps_the_complete_ones(tmp_path, capsys):
    """A full disk, as a file-size limit (RLIMIT_FSIZE: writes past it fail with EFBIG, no root or
    tmpfs needed). Before: 'internal error' (exit 1) or DCP's traceback, and the partial folder
    stayed, holding the space."""
    run = tmp_path / "run"
    assert run_cli(capsys, "run", *FAST, "checkpoint.every_n_steps=2", f"run_dir={run}")[0] == 0
    soft, hard = resource.getrlimit(resource.RLIMIT_FSIZE)
    old = signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
    resource.setrlimit(resource.RLIMIT_FSIZE, (100_000, hard))  # a digits shard is ~190 KB
    try:
        code, err = run_cli(capsys, "run", *FAST, "max_steps=8", "checkpoint.every_n_steps=2",
                            f"run_dir={run}")
    finally:
        resource.setrlimit(resource.RLIMIT_FSIZE, (soft, hard))
        signal.signal(signal.SIGXFSZ, old)
    assert code == 6 and f"checkpoint.dir: writing {run / 'checkpoints' / 'step-00000006'} failed" in err
    assert "free there" in err and "run the same command" in err
    assert sorted(p.name for p in (run / "checkpoints").iterdir()) == ["step-00000002", "step-00000004"]
    code, _ = run_cli(capsys, "run", *FAST, "max_steps=8", f"run_dir={run}")  # room again: resumes
    assert code == 0 and strict_json(run / "summary.json")["resumed_from_step"] == 4


def test_ctrl_c_finishes_the_step_saves_and_exits_75_like_sigterm(tmp_path, user_mod):
    """Before: KeyboardInterrupt anywhere in the step, exit 130, no checkpoint of the steps since
    the last one and no summary.json."""
    run = tmp_path / "run"
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(REPO), str(tmp_path)]), "OMP_NUM_THREADS": "1"}
    proc = subprocess.run([sys.executable, "-m", "trainkit", "run", *FAST, "max_steps=6",
                           f"model={user_mod}:CtrlCAtStep3", f"run_dir={run}"],
                          env=env, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 75, proc.stderr
    assert "Ctrl-C: finishing this step" in proc.stderr and "Traceback" not in proc.stderr
    summary = strict_json(run / "summary.json")
    assert summary["status"] == "preempted" and summary["steps"] == 3
    assert (run / "checkpoints" / "step-00000003" / "COMPLETE").exists()


def test_a_half_written_metrics_line_from_a_killed_attempt_is_cut_and_the_resume_finishes(
        tmp_path, capsys):
    """Before: the next record ran on into the half line and the resumed run crashed at the very
    end (curves.png: JSONDecodeError, 'internal error', no summary.json)."""
    run = tmp_path / "run"
    assert run_cli(capsys, "run", *FAST, "log_every=1", "checkpoint.every_n_steps=2", f"run_dir={run}")[0] == 0
    metrics = run / "metrics.jsonl"
    metrics.write_bytes(metrics.read_bytes()[:-30])  # kill -9 in the middle of a write
    code, _ = run_cli(capsys, "run", *FAST, "max_steps=8", "log_every=1", "plot=true", f"run_dir={run}")
    assert code == 0 and (run / "curves.png").stat().st_size > 0
    records = [json.loads(line) for line in metrics.read_text().splitlines()]
    assert [r["step"] for r in records if r["kind"] == "step"][-4:] == [5, 6, 7, 8]
    assert strict_json(run / "summary.json")["status"] == "completed"


def test_an_onnx_export_that_fails_at_the_end_still_leaves_the_weights_and_summary(
        tmp_path, capsys, user_mod):
    """Before: the verify error escaped finish(): no weights/last.pt, hparams.yaml or summary.json
    after the whole run, and the wrong model.onnx stayed."""
    names = ["", *logging.Logger.manager.loggerDict]
    for h in [h for n in names for h in getattr(logging.getLogger(n), "handlers", [])]:
        if isinstance(h, logging.StreamHandler) and getattr(h.stream, "closed", False):
            h.stream = sys.stderr  # torch's exporter logger was set up in an earlier test, on its capture
    run = tmp_path / "run"
    code, err = run_cli(capsys, "run", *FAST, f"model={user_mod}:Branchy", "export.onnx=true",
                        f"run_dir={run}")
    assert code == 6 and "training completed, but the ONNX export failed" in err
    assert "ONNX output differs from PyTorch" in err and "trainkit export" in err
    summary = strict_json(run / "summary.json")
    assert summary["status"] == "completed" and summary["onnx"] is None
    assert summary["onnx_error"].startswith("ONNX output differs from PyTorch at batch 1")
    assert (run / "weights" / "last.pt").exists() and not (run / "model.onnx").exists()


def test_an_opset_the_onnx_package_does_not_know_fails_before_training(tmp_path, capsys):
    code, err = run_cli(capsys, "run", *FAST, "export.onnx=true", "export.opset=99",
                        f"run_dir={tmp_path / 'run'}")
    assert code == 2 and "export.opset: 99 is outside 13.." in err
    assert not (tmp_path / "run").exists()


def test_export_takes_a_run_folder_and_names_what_is_not_a_checkpoint(tmp_path, capsys):
    """Before: the run folder itself was 'no complete checkpoint under RUN' and a file beside the
    checkpoints (config.yaml) was 'no completion marker (partial write)'."""
    run = tmp_path / "run"
    assert run_cli(capsys, "run", *FAST, f"run_dir={run}")[0] == 0
    with pytest.raises(SystemExit) as exc:
        main(["export", str(run), "--weights", str(tmp_path / "w.pt")])
    assert exc.value.code == 0 and (tmp_path / "w.pt").exists()
    code, err = run_cli(capsys, "export", str(run / "config.yaml"), "--weights", str(tmp_path / "x.pt"))
    assert code == 2 and f"{run / 'config.yaml'} is a file, not a checkpoint" in err
    code, err = run_cli(capsys, "export", str(run / "logs"), "--weights", str(tmp_path / "x.pt"))
    assert code == 2 and f"no complete checkpoint under {run / 'logs'}" in err and "run folder" in err
    code, err = run_cli(capsys, "export", str(run), "--onnx", str(run / "config.yaml" / "m.onnx"))
    assert code == 2 and "--onnx" in err and str(run / "config.yaml") in err  # was exit 1


def test_a_fresh_start_into_a_checkpoint_dir_of_a_longer_run_is_refused_and_keeps_it(tmp_path, capsys):
    """Before: resume=false replaced the old run's step-4 with its own, keep-N then pruned its own
    new checkpoints (older step numbers), and the next automatic resume took the OLD run's step 12."""
    run = tmp_path / "run"
    assert run_cli(capsys, "run", *FAST, "max_steps=12", "checkpoint.every_n_steps=4", f"run_dir={run}")[0] == 0
    ckpts = run / "checkpoints"
    before = {p: p.stat().st_mtime_ns for p in ckpts.rglob("*")}
    code, err = run_cli(capsys, "run", *FAST, "checkpoint.every_n_steps=2", "resume=false", f"run_dir={run}")
    assert code == 2 and f"checkpoint.dir {ckpts} already holds checkpoints up to step 12" in err
    assert "resume=false starts at step 0" in err and "its own checkpoint.dir" in err
    code, err = run_cli(capsys, "run", *FAST, f"resume={ckpts / 'step-00000004'}", f"run_dir={run}")
    assert code == 2 and "starts at step 4" in err
    code, err = run_cli(capsys, "run", *FAST, "resume=", f"run_dir={run}")
    assert code == 2 and "resume: " in err
    assert {p: p.stat().st_mtime_ns for p in ckpts.rglob("*")} == before


def test_folder_data_without_a_path_is_caught_on_the_control_side(tmp_path, capsys):
    """Before: `validate --config` said ok; the node then read the current folder (path '')."""
    (tmp_path / "train.yaml").write_text("data: folder\n")
    code, err = run_cli(capsys, "validate", "--config", str(tmp_path / "train.yaml"))
    assert code == 2 and "data_args: folder needs path" in err


def test_a_grad_accum_that_does_not_divide_says_which_do(tmp_path, capsys):
    code, err = run_cli(capsys, "run", *FAST, "grad_accum=3", f"run_dir={tmp_path / 'run'}")
    assert code == 2 and "fix: use one of 1, 2, 4, 8, 16, 32, 64 or grad_accum=auto" in err


@pytest.mark.parametrize("override, says", [
    ("workers=-1", "workers: expected greater than or equal to 0 or expected 'auto' (got -1)"),
    # before: accepted, and a checkpoint was written after EVERY step
    ("checkpoint.interval=0", "checkpoint.interval: expected greater than 0 or expected 'auto' (got 0)"),
    ("checkpoint.interval=-5", "checkpoint.interval: expected greater than 0"),
    ("model_args.channels=32 model_args.channels.x=1", "fix: set model_args.channels as a whole")])
def test_ranges_the_engine_needs_are_checked_on_the_control_side(tmp_path, capsys, override, says):
    """workers=-1 was an 'internal error' from DataLoader; an error in checkpoint.interval was
    reported at 'checkpoint' (a key starting with 'int' was taken for pydantic's type tag)."""
    (tmp_path / "train.yaml").write_text("epochs: 1\n")
    code, err = run_cli(capsys, "validate", "--config", str(tmp_path / "train.yaml"), *override.split())
    assert code == 2 and says in err


def test_fsdp_blocks_naming_a_class_the_model_lacks_is_exit_2(tmp_path, capsys):
    """Before: no block matched, so nothing was checkpointed (or, under fsdp, sharded) one by one,
    silently: the memory the user planned for was not saved."""
    code, err = run_cli(capsys, "run", *FAST, "fsdp.blocks=[Block]", "activation_checkpointing=true",
                        f"run_dir={tmp_path / 'run'}")
    assert code == 2 and "fsdp.blocks: model digits_cnn has no module of class Block" in err
    assert "Conv2d" in err  # what it does have


def test_a_damaged_file_in_folder_data_is_named(tmp_path, capsys):
    """Before: 'internal error: ValueError: we only support format version ...', no file named."""
    import numpy as np

    for c in ("cat", "dog"):
        (tmp_path / "data" / c).mkdir(parents=True)
        for i in range(30):
            np.save(tmp_path / "data" / c / f"{i}.npy", np.zeros((1, 8, 8), np.float32))
    bad = tmp_path / "data" / "dog" / "7.npy"
    bad.write_bytes(bad.read_bytes()[:20])  # a copy cut short
    code, err = run_cli(capsys, "run", *FAST, "data=folder", f"data_args.path={tmp_path / 'data'}",
                        "batch=16", "model_args.num_classes=2", "epochs=3", "max_steps=null",
                        f"run_dir={tmp_path / 'run'}")
    assert code == 2 and f"data_args.path: {bad} is not a readable .npy array" in err


def test_curves_after_a_kill_9_draw_each_step_once(tmp_path):
    """The killed attempt logged steps 10..30, its newest checkpoint was step 20; the resumed
    attempt logs 30 again. Before: curves.png drew 10, 20, 30, 30 (the line went back)."""
    from trainkit.train import artifacts

    def rec(kind, **f):
        return {"kind": kind, "time": 0, **f}

    recs = [rec("run", resumed_from_step=None), *(rec("step", step=s, loss=1 / s, lr=1e-3) for s in (10, 20, 30)),
            rec("epoch", step=25, epoch=0, val_loss=0.1, val_acc=0.9), rec("run", resumed_from_step=20),
            rec("step", step=30, loss=0.5, lr=1e-3)]
    (tmp_path / "metrics.jsonl").write_text("".join(json.dumps(r) + "\n" for r in recs))
    kept = artifacts.current_records(artifacts._records(tmp_path))
    assert [(r["kind"], r.get("step")) for r in kept if r["kind"] != "run"] == [
        ("step", 10), ("step", 20), ("step", 30)]
    assert kept[-1]["loss"] == 0.5 and artifacts.plot_curves(tmp_path).exists()


@pytest.fixture
def read_only_dir(tmp_path):
    """A folder this process cannot write: a read-only tmpfs as root (root ignores mode bits),
    mode 0555 otherwise."""
    path = tmp_path / "ro"
    path.mkdir()
    if os.geteuid() == 0:
        subprocess.run(["mount", "-t", "tmpfs", "-o", "ro,size=64k", "tmpfs", str(path)], check=True)
    else:
        path.chmod(0o555)
    yield path
    if os.geteuid() == 0:
        subprocess.run(["umount", str(path)], check=True)
    else:
        path.chmod(0o755)


@pytest.mark.parametrize("key", ["run_dir", "checkpoint.dir"])
def test_a_read_only_run_or_checkpoint_folder_fails_before_training(tmp_path, capsys, read_only_dir, key):
    """Before: run_dir was an 'internal error' (the log file), checkpoint.dir failed at the first
    save, after training up to it."""
    extra = [] if key == "run_dir" else [f"run_dir={tmp_path / 'run'}"]
    code, err = run_cli(capsys, "run", *FAST, *extra, f"{key}={read_only_dir}")
    assert code == 2 and f"{key}: the folder {read_only_dir} is not writable" in err
    assert not (tmp_path / "run" / "metrics.jsonl").exists()


def test_an_fp16_scaler_absorbs_overflow_steps_until_its_scale_collapses():
    """fp16 + GradScaler skips a step whose loss/grads overflowed (weights untouched): not a
    divergence until the scale falls below 1; with no scaler (fp32/bf16) it is one at once."""
    from types import SimpleNamespace

    import torch

    from trainkit.train.engine import scaler_absorbs

    scaler = torch.amp.GradScaler("cpu", enabled=True)  # init_scale 2**16, backoff 0.5
    run = SimpleNamespace(scaler=scaler)
    assert scaler_absorbs(run)
    scaler._lazy_init_scale_growth_tracker(torch.device("cpu"))
    scaler._scale.fill_(0.5)  # what 17 overflow skips in a row leave
    assert not scaler_absorbs(run)
    assert not scaler_absorbs(SimpleNamespace(scaler=torch.amp.GradScaler("cpu", enabled=False)))


def test_a_resume_with_another_batch_trains_at_the_new_configs_lr(tmp_path, capsys):
    """The checkpoint's scheduler state gives the position only: after `batch` 16 -> 64 (linear
    scaling: 4x the LR), the resumed steps log and use the new run's LR, as summary.json says."""
    from trainkit.train import schedule
    from trainkit.train.config import load_config

    common = [str(REPO / "examples/train/digits.yaml"), f"run_dir={tmp_path}", "workers=0",
              "tensorboard=false", "plot=false", "checkpoint.interval=null", "warmup_epochs=0",
              "log_every=1", "export.onnx=false"]
    assert run_cli(capsys, "run", *common, "batch=16", "checkpoint.every_n_steps=4", "max_steps=8")[0] == 0
    assert run_cli(capsys, "run", *common, "batch=64", "max_steps=12")[0] == 0
    steps = [json.loads(x) for x in (tmp_path / "metrics.jsonl").read_text().splitlines()]
    resumed = [r for r in steps if r["kind"] == "step" and r["step"] > 8]
    cfg = load_config(REPO / "examples/train/digits.yaml", ["batch=64", "max_steps=12", "warmup_epochs=0"])
    peak = schedule.scaled_lr(cfg.lr0, 64, cfg.nbs, cfg.lr_scaling)
    total = json.loads((tmp_path / "summary.json").read_text())["total_steps"]
    want = [peak * schedule.lr_factor(r["step"] - 1, warmup=0, total_steps=total, lrf=cfg.lrf,
                                      cosine=cfg.cos_lr) for r in resumed]
    assert len(resumed) == 4
    assert [r["lr"] for r in resumed] == pytest.approx(want, rel=1e-6)


def test_resume_over_checkpoints_of_which_none_verifies_is_exit_6_naming_them(tmp_path, capsys):
    """Before: resume=true skipped every corrupt folder, trained from step 0 and exited 0."""
    run = tmp_path / "run"
    assert run_cli(capsys, "run", *FAST, "max_steps=2", "checkpoint.every_n_steps=1", f"run_dir={run}")[0] == 0
    ckpts = run / "checkpoints"
    steps = sorted(p for p in ckpts.iterdir() if p.name.startswith("step-"))
    assert len(steps) == 2
    for step in steps:   # bit rot in every data file: the checksums no longer match
        for f in (p for p in step.rglob("*") if p.is_file() and p.stat().st_size > 64 and "marker" not in p.name):
            data = bytearray(f.read_bytes())
            data[len(data) // 2] ^= 0xFF
            f.write_bytes(bytes(data))
    before = {p: p.read_bytes() for p in ckpts.rglob("*") if p.is_file()}
    code, err = run_cli(capsys, "run", *FAST, "max_steps=4", f"run_dir={run}")
    assert code == 6 and "no checkpoint under" in err and all(s.name in err for s in steps), err
    assert "resume=false" in err and "new checkpoint.dir" in err
    assert {p: p.read_bytes() for p in ckpts.rglob("*") if p.is_file()} == before   # kept for repair
    # starting over on purpose: resume=false into a fresh checkpoint.dir
    code, err = run_cli(capsys, "run", *FAST, "resume=false", f"checkpoint.dir={tmp_path / 'fresh'}", f"run_dir={run}")
    assert code == 0, err
