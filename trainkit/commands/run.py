"""`trainkit run` and `trainkit export`: glue between click and trainkit.train (torch imported lazily)."""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

import click

from trainkit.commands.options import dump_json, format_option, out_file, say
from trainkit.errors import TRAIN, InputError, TrainkitError
from trainkit.spec.train_config import builder_problems
from trainkit.train.config import config_from_dict, load_config


@click.command("run", context_settings={"ignore_unknown_options": False})
@click.argument("config", type=click.Path(dir_okay=False), required=False)
@click.argument("overrides", nargs=-1)
@click.option("--json", "as_json", is_flag=True, help="Print summary.json to stdout at the end.")
def run(config: str | None, overrides: tuple[str, ...], as_json: bool) -> None:
    """Train from a YAML CONFIG with optional key=value OVERRIDES (dotted keys reach sections).

    Works alone (one process) and as a torchrun entry point. Exit 0 when done, 2 for a bad
    config, 75 when SIGTERM stopped it after writing a checkpoint (run the same command to resume).

    \b
    Example:
      trainkit run examples/train/digits.yaml epochs=5 run_dir=runs/d1
      torchrun --standalone --nproc-per-node 2 -m trainkit run examples/train/digits.yaml \\
          run_dir=runs/d2 checkpoint.dir=/nas/ckpt/d2 checkpoint.keep=3
    """

    if config and "=" in config:  # `trainkit run epochs=3` with no file: all defaults
        overrides, config = (config, *overrides), None
    cfg = load_config(config, overrides)
    _check_builders(cfg)
    from trainkit.train.engine import train  # the engine imports torch: kept off the CLI's start-up path

    result = train(cfg)
    if as_json and result.summary and _is_rank0() and result.exit_code != TRAIN:  # a failure: the error JSON
        from trainkit.train.monitor import finite  # the engine imports torch: kept off the CLI's start-up path

        click.echo(json.dumps(finite(result.summary), indent=2))
    if result.exit_code == TRAIN:
        raise _failure(result.summary, cfg)
    if result.exit_code:
        where = result.summary.get("checkpoint") or "a checkpoint (written by rank 0)"
        click.echo(f"stopped by SIGTERM or Ctrl-C at step {result.summary['steps']} after writing {where}; "
                   "run the same command to resume", err=True)
        sys.exit(result.exit_code)


def _failure(summary: dict, cfg) -> TrainkitError:
    """The error for a run that ended with exit 6: the loss went NaN/inf, or the ONNX export at
    the end failed (training itself completed)."""
    if summary.get("onnx_error"):
        return TrainkitError(f"training completed, but the ONNX export failed: {summary['onnx_error']}",
                             fix=f"weights and summary are in {cfg.run_dir}; after fixing the model or "
                             f"export.opset run: trainkit export {cfg.checkpoint_dir} --onnx OUT --verify",
                             exit_code=TRAIN)
    return TrainkitError(f"the training loss became NaN or inf at step {summary['steps']}; nothing "
                         "was saved after that step (any checkpoint, weights/*.pt or model.onnx is "
                         f"from before it; summary: {cfg.run_dir}/summary.json)",
                         fix="lower lr0 (or set grad_clip) or look for NaN/inf in the data, then run "
                         "again (it resumes from the newest checkpoint, written before the NaN) or "
                         "start fresh in a new run_dir", exit_code=TRAIN)


def _check_builders(cfg) -> None:
    """model/data and their *_args against the builders' signatures (exit 2, not a TypeError)."""

    problems = [p for key in ("model", "data")
                for p in builder_problems(key, getattr(cfg, key), getattr(cfg, f"{key}_args"))[0]]
    if problems:
        raise InputError(f"{len(problems)} problem(s)\n  " + "\n  ".join(problems),
                         fix="see `trainkit docs training` for model/data and their *_args")


@click.command("export")
@click.argument("checkpoint", type=click.Path(exists=True))
@click.option("--onnx", "onnx_out", type=click.Path(dir_okay=False), callback=out_file,
              help="Where to write the ONNX model.")
@click.option("--weights", "weights_out", type=click.Path(dir_okay=False), callback=out_file,
              help="Where to write the plain model weights (torch.save of a state dict: "
              "torch.load + load_state_dict).")
@click.option("--opset", type=int, default=None, help="ONNX opset (default: the run's export.opset).")
@click.option("--verify/--no-verify", default=False, help="Check onnxruntime against PyTorch "
              "(rtol 1e-3, atol 1e-5, two batch sizes).")
@format_option()
def export(checkpoint: str, onnx_out: str | None, weights_out: str | None, opset: int | None,
           verify: bool, fmt: str) -> None:
    """Export CHECKPOINT (a step-N folder, a checkpoint root: the newest complete one, or a run
    folder: its checkpoints/) to ONNX with a dynamic batch axis and/or to plain weights. Sharded
    checkpoints (any world size, ddp or fsdp) are consolidated into one state dict first, in this
    one process.

    \b
    Example:
      trainkit export runs/d1/checkpoints --onnx model.onnx --verify
      trainkit export runs/gpt/checkpoints --weights gpt.pt
    """

    import torch  # torch: kept off the CLI's start-up path

    from trainkit.train import restore  # the engine imports torch: kept off the CLI's start-up path
    from trainkit.train.checkpoint import CheckpointError
    from trainkit.train.model import build_model

    if not onnx_out and not weights_out:
        raise InputError("nothing to export", fix="give --onnx PATH and/or --weights PATH")
    from trainkit.train.artifacts import make_dir  # the engine imports torch: kept off the CLI's start-up path

    for option, out in (("--onnx", onnx_out), ("--weights", weights_out)):
        if out:
            make_dir(Path(out).absolute().parent, option)  # a file in the way: exit 2, not a crash
    path = restore.checkpoint_folder(Path(checkpoint))
    try:
        state = restore.load(path)
    except CheckpointError as err:
        raise InputError(f"{path}: {err}") from None
    cfg = config_from_dict(state["config"], source=f"{path} (stored config)")
    model = build_model(cfg)
    model.load_state_dict(state["model"])
    done = {"checkpoint": str(path), "step": state["step"], "weights": None, "onnx": None, "verify": None}
    if weights_out:
        torch.save(model.state_dict(), weights_out)
        done["weights"] = weights_out
        say(fmt, f"wrote {weights_out} from {path} (step {state['step']}, "
                 f"{sum(p.numel() for p in model.parameters())} parameters)")
    if onnx_out:
        out, done["verify"] = _export_onnx(model, cfg, tuple(state["input_shape"]), Path(onnx_out), opset, verify, fmt)
        done["onnx"] = str(out)
        say(fmt, f"wrote {out} from {path} (step {state['step']})")
    if fmt == "json":
        click.echo(dump_json(done))


def _export_onnx(model, cfg, shape, out, opset, verify: bool, fmt: str) -> tuple[Path, dict | None]:
    from trainkit.train.export import (  # the engine imports torch: kept off the CLI's start-up path
        export_onnx,
        verify_onnx,
    )

    out = export_onnx(model, shape, out, opset or cfg.export.opset,
                      {"run_id": Path(cfg.run_dir).name, "model": cfg.model})
    check = None
    if verify:
        check = verify_onnx(model, out, shape, cfg.export.rtol, cfg.export.atol)
        say(fmt, f"onnxruntime matches PyTorch on batches {check['batches']} "
                 f"(max abs diff {check['max_abs_diff']:.2e}, rtol {cfg.export.rtol}, "
                 f"atol {cfg.export.atol})")
    return out, check


def _is_rank0() -> bool:
    return os.environ.get("RANK", "0") == "0"


__all__ = ["run", "export", "TrainkitError", "TRAIN"]
