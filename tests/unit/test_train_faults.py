"""Configs and faults from outside: what an ML engineer gets wrong, and what goes wrong under a run.

Every case here crashed, hung or lost data before: each asserts the clear error (exit 2 naming the
key or file, or exit 6 for a failed run), or that no work is lost. One process, digits, a few steps.
"""

from __future__ import annotations

import json
import sys
import textwrap
from pathlib import Path

import pytest

from trainkit.cli import main

FAST = ["max_steps=4", "batch=64", "workers=0", "tensorboard=false", "plot=false",
        "checkpoint.interval=null"]


def run_cli(capsys, *args: str) -> tuple[int, str]:
    """`trainkit ARGS` in this process: (exit code, stderr)."""
    with pytest.raises(SystemExit) as exc:
        main(list(args))
    err = capsys.readouterr().err
    assert "Traceback" not in err and "internal error" not in err, err
    return exc.value.code, err


def strict_json(path: Path):
    """JSON as jq or a browser reads it: NaN / Infinity are errors."""
    def no_nan(word):
        raise ValueError(f"{path}: {word} is not JSON")
    return json.loads(path.read_text(), parse_constant=no_nan)


def test_a_diverging_loss_stops_the_run_and_saves_nothing_after_it(tmp_path, capsys):
    run = tmp_path / "run"
    code, err = run_cli(capsys, "run", *FAST, "max_steps=10", "lr0=1e30",
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
