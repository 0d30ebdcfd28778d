"""What a finished run leaves for the engineer who inspects it (rank 0 writes, every rank tracks).

    <run_dir>/weights/best.pt   model.state_dict() at the epoch with the best val_acc
    <run_dir>/weights/last.pt   model.state_dict() at the end (or at preemption)
    <run_dir>/hparams.yaml      the resolved config plus what was derived from the machine
    <run_dir>/curves.png        loss / accuracy / LR panels, titled with the run id

Weights files hold tensors only: `model.load_state_dict(torch.load(path, weights_only=True))`.
The full resumable checkpoint (optimizer, RNG, sampler position) stays in `checkpoint.dir`, which
summary.json names as `checkpoint_dir` / `checkpoint`.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import torch
import yaml

from trainkit.errors import InputError
from trainkit.train import parallel
from trainkit.train.monitor import finite

BEST_METRIC = "val_acc"  # higher is better; ties keep the earlier epoch


def make_dir(path: Path, key: str) -> None:
    """Create folder `path` (and parents). Raises InputError naming config key `key` when it cannot
    be made or written: a file is in the way, no permission, a read-only filesystem."""
    try:
        path.mkdir(parents=True, exist_ok=True)
    except OSError as err:
        raise InputError(f"{key}: cannot create the folder {path} ({err.strerror or err})",
                         fix=f"point {key} at a folder this user can write (not at a file)") from None
    if not os.access(path, os.W_OK | os.X_OK):  # a read-only mount, no permission: fail before step 1
        raise InputError(f"{key}: the folder {path} is not writable (read-only filesystem or no "
                         "permission)", fix=f"point {key} at a folder this user can write")


def run_id(run_dir: str | Path) -> str:
    """The run's id: its folder's name (runs/<run-id>/)."""
    return Path(run_dir).resolve().name


def save_weights(weights: dict[str, torch.Tensor], path: Path) -> Path:
    """Atomically write full `weights` (on CPU) to `path` (temp + fsync + rename)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(".pt.tmp")
    state = {k: v.detach().to("cpu") for k, v in weights.items()}
    with open(tmp, "wb") as f:
        torch.save(state, f)
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, path)
    return path


def on_epoch(run, val: dict[str, float]) -> None:
    """After an epoch's validation (every rank): keep weights/best.pt at the best val_acc."""
    best = run.extra.get("best")
    if best is not None and val["acc"] <= best["value"]:
        return
    run.extra["best"] = {"epoch": run.epoch, "step": run.step, "metric": BEST_METRIC,
                         "value": val["acc"], "val_loss": val["loss"]}
    weights = parallel.full_state_dict(run.model)  # collective under FSDP: every rank takes part
    if run.info.is_main:
        save_weights(weights, Path(run.cfg.run_dir) / "weights" / "best.pt")


def finish(run, derived: dict[str, Any], write_last: bool = True) -> dict[str, Any]:
    """At the end (every rank): write last.pt (unless `write_last` is false: weights gone NaN)
    and hparams.yaml (rank 0); return summary fields."""
    out = Path(run.cfg.run_dir)
    if write_last:
        weights = parallel.full_state_dict(run.model)  # collective under FSDP: every rank takes part
        if run.info.is_main:
            save_weights(weights, out / "weights" / "last.pt")
    if run.info.is_main:
        hp = {"run_id": run_id(out), "config": run.cfg.to_dict(), "derived": derived}
        (out / "hparams.yaml").write_text(yaml.safe_dump(hp, sort_keys=False))
    best = run.extra.get("best") or {}
    weights = {"last": "weights/last.pt"} if write_last else {}  # relative to the run folder
    if best and (not run.info.is_main or (out / "weights" / "best.pt").exists()):
        weights["best"] = "weights/best.pt"  # absent: the best epoch was before a resume elsewhere
    return {"run_id": run_id(out), "best_epoch": best.get("epoch"), "best_metric": best.get("metric"),
            "best_val_acc": best.get("value"), "best_val_loss": best.get("val_loss"),
            "weights": weights, "checkpoint_dir": str(run.cfg.checkpoint_dir.resolve())}


def write_json(path: Path, obj: Any) -> None:
    """Atomically write `obj` as strict JSON (NaN/inf as null): a reader never sees half a file."""
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(json.dumps(finite(obj), indent=2, allow_nan=False) + "\n")
    os.replace(tmp, path)


def class_names(ds) -> list[str] | None:
    """`classes` of the dataset (torchvision's attribute), looking through Subset wrappers."""
    while ds is not None:
        names = getattr(ds, "classes", None)
        if names is not None:
            return [str(c) for c in names]
        ds = getattr(ds, "dataset", None)
    return None


def onnx_metadata(run) -> dict[str, str]:
    """What model.onnx carries beyond names/shape/versions: run id and class names (when known)."""
    meta = {"run_id": run_id(run.cfg.run_dir), "model": run.cfg.model, "config_hash": run.cfg.hash()}
    names = class_names(run.splits.get("train"))
    if names:
        meta["class_names"] = json.dumps(names)
    return meta


def _records(run_dir: Path) -> list[dict[str, Any]]:
    path = run_dir / "metrics.jsonl"
    if not path.exists():
        return []
    records = []
    for line in path.read_text(errors="replace").splitlines():
        try:
            rec = json.loads(line)
        except ValueError:
            continue  # a line damaged outside trainkit: the curves are drawn from the rest
        if isinstance(rec, dict) and "kind" in rec:
            records.append(rec)
    return records


def current_records(records: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """metrics.jsonl as the run stands: an attempt that starts from step s (its `run` record's
    resumed_from_step, 0 when fresh) replaces what earlier attempts logged after s. A kill -9
    loses the steps since the newest checkpoint; they are trained and logged again, and the curves
    must not draw both."""
    out: list[dict[str, Any]] = []
    for rec in records:
        if rec["kind"] == "run":
            start = rec.get("resumed_from_step") or 0
            out = [r for r in out if r["kind"] == "run" or (r.get("step") or 0) <= start]
        out.append(rec)
    return out


def plot_curves(run_dir: Path, summary: dict[str, Any] | None = None) -> Path | None:
    """<run_dir>/curves.png, 1200x450 px: loss (train per window, val per epoch, test at the end),
    accuracy (val per epoch, best epoch marked, test at the end) and learning rate, titled with the
    run id. None when matplotlib is missing or there are no records."""
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return None
    recs = current_records(_records(run_dir))
    steps = [r for r in recs if r["kind"] == "step"]
    epochs = [r for r in recs if r["kind"] == "epoch"]
    if not steps and not epochs:
        return None
    summary = summary or {}
    fig, (ax_loss, ax_acc, ax_lr) = plt.subplots(1, 3, figsize=(12, 4.5), dpi=100)
    _loss_panel(ax_loss, steps, epochs, summary)
    _acc_panel(ax_acc, epochs, summary)
    ax_lr.plot([r["step"] for r in steps], [r["lr"] for r in steps], color="tab:purple")
    ax_lr.set(title="learning rate", xlabel="step", ylabel="lr")
    ax_lr.ticklabel_format(axis="y", style="sci", scilimits=(-2, 2))
    for ax in (ax_loss, ax_acc, ax_lr):
        ax.grid(alpha=0.3)
    fig.suptitle(f"run {summary.get('run_id') or run_id(run_dir)}", fontsize=14)
    fig.tight_layout()
    out = run_dir / "curves.png"
    fig.savefig(out)
    plt.close(fig)
    return out


def _loss_panel(ax, steps, epochs, summary) -> None:
    steps = [r for r in steps if r.get("loss") is not None]  # null: a NaN/inf loss (diverged)
    epochs = [r for r in epochs if r.get("val_loss") is not None]
    ax.plot([r["step"] for r in steps], [r["loss"] for r in steps], label="train (window mean)")
    ax.plot([r["step"] for r in epochs], [r["val_loss"] for r in epochs], "o-", label="val")
    if summary.get("test_loss") is not None:
        ax.plot([summary.get("steps")], [summary["test_loss"]], "s", color="tab:red", label="test (end)")
    ax.set(title="loss", xlabel="step", ylabel="cross-entropy")
    if all(r["loss"] > 0 for r in steps) and steps:
        ax.set_yscale("log")
    ax.legend()


def _acc_panel(ax, epochs, summary) -> None:
    epochs = [r for r in epochs if r.get("val_acc") is not None]
    ax.plot([r["epoch"] for r in epochs], [r["val_acc"] for r in epochs], "o-", label="val")
    if summary.get("best_epoch") is not None:
        ax.plot([summary["best_epoch"]], [summary["best_val_acc"]], "*", markersize=14, color="gold",
                markeredgecolor="black", label=f"best (epoch {summary['best_epoch']})")
    if summary.get("test_acc") is not None:
        last = epochs[-1]["epoch"] if epochs else 0
        ax.plot([last], [summary["test_acc"]], "s", color="tab:red", label="test (end)")
    ax.set(title="accuracy", xlabel="epoch", ylabel="top-1")
    ax.legend(loc="lower right")
