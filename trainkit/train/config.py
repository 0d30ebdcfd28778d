"""The training config: one YAML file (+ `key=value` overrides) -> a frozen, validated `TrainConfig`.

Flow, as Ultralytics' `get_cfg` does it: YAML -> dict; overrides merged in (dotted keys reach into
sections: `checkpoint.keep=3`); unknown keys rejected with a close-match suggestion; types checked
strictly (pydantic, strict mode); the result is built once and passed explicitly to every part of
the engine. `load_config` raises `InputError` (exit 2, one message, no traceback) and never returns a
half-valid config. This module does not import torch: the control side validates train configs too.
"""

from __future__ import annotations

import difflib
import hashlib
import json
import re
from pathlib import Path
from typing import Annotated, Any, Literal

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

from trainkit.errors import InputError, capped
from trainkit.util import yamlload


class _Section(BaseModel):
    # .inf/.nan are refused: `lr0: .inf` would train to NaN.
    model_config = ConfigDict(extra="forbid", frozen=True, strict=True, allow_inf_nan=False)


class CheckpointConfig(_Section):
    """When and where checkpoints are written. Exactly one schedule applies, in this order:
    `every_n_steps` if set, else `interval` (seconds, or "auto" = Young/Daly from the measured save
    time and `mtbf_hours`). A checkpoint is always written at the end and on SIGTERM."""

    dir: str | None = Field(None, min_length=1, description="Checkpoint root; default <run_dir>/checkpoints. "
                                              "Put it on shared storage (NAS) for multi-node resume.")
    every_n_steps: int | None = Field(None, ge=1, le=10**12, description="Save every N optimizer steps.")
    interval: Annotated[float, Field(gt=0)] | Literal["auto"] | None = Field(
        "auto", description="Seconds between saves, or 'auto' (Young/Daly), or null (only end/SIGTERM).")
    keep: int = Field(3, ge=2, le=1000, description="Keep the newest N complete checkpoints (>= 2, torchtitan).")
    mtbf_hours: float = Field(6.0, gt=0, le=1e6, description="Expected time between preemptions of ONE node, "
                                                     "for interval 'auto' (divided by the node count).")
    overlap_steps: int | None = Field(1, ge=1, description="Steps a background save may overlap before "
                                      "the loop waits for its commit: a fault loses at most every_n_steps + "
                                      "overlap_steps - 1 steps (1: one interval); null: until the next save.")
    async_save: bool = Field(True, description="Write in a background thread after copying state "
                                               "to host memory; SIGTERM and final saves always block. "
                                               "false: each save is a plain synchronous DCP save.")


class ExportConfig(_Section):
    """ONNX export at the end of a run (model in eval(), CPU, fp32, dynamic batch axis)."""

    onnx: bool = Field(False, description="Export <run_dir>/model.onnx and verify it with onnxruntime.")
    opset: int = Field(18, ge=13, description="ONNX opset version written exactly (13 .. the onnx "
                                              "package's newest); checked with onnxruntime.")
    rtol: float = Field(1e-3, gt=0, description="Parity tolerance vs PyTorch (PyTorch ORT tutorial).")
    atol: float = Field(1e-5, ge=0, description="Parity tolerance vs PyTorch (PyTorch ORT tutorial).")


class FsdpConfig(_Section):
    """FSDP2 (`torch.distributed.fsdp.fully_shard`) settings, used when `strategy` resolves to fsdp.
    Each block module is sharded on its own (its parameters are gathered just for its forward and
    backward), then the root holds what is left (embeddings, head)."""

    blocks: list[str] | Literal["auto"] = Field(
        "auto", description="Class names of the modules to shard one by one (e.g. [Block]), or "
                            "'auto': every module holding >= min_block_params parameters of its own.")
    min_block_params: int = Field(100_000_000, ge=1, le=10**13, description="'auto' block size threshold "
                                  "(100M: FSDP1 size_based_auto_wrap_policy's default).")
    reshard_after_forward: bool = Field(True, description="Free gathered block parameters after "
                                        "forward (ZeRO-3); false keeps them until backward (ZeRO-2).")


class TrainConfig(_Section):
    """Everything a training run needs. `batch` is the GLOBAL batch (samples per optimizer step over
    all ranks); per-rank micro-batch and accumulation are derived from the world size at start-up."""

    model: str = Field("digits_cnn", description="Built-in name, or 'pkg.module:builder' called as "
                                                 "builder(**model_args) -> torch.nn.Module.")
    model_args: dict[str, Any] = Field(default_factory=dict, description="Keyword args for the model.")
    data: str = Field("digits", description="Built-in name, or 'pkg.module:builder' called as "
                                            "builder(seed=..., **data_args) -> Dataset or (train, val, test).")
    data_args: dict[str, Any] = Field(default_factory=dict, description="Keyword args for the data builder.")
    split: list[float] = Field([0.7, 0.2, 0.1], description="train/val/test fractions when the data "
                                                            "builder returns one Dataset (split_seed).")
    epochs: int = Field(20, ge=1, le=100_000, description="Epochs to train for.")
    max_steps: int | None = Field(None, ge=1, le=10**12, description="Stop after this many optimizer steps (tests).")
    batch: int = Field(64, ge=1, le=2**24, description="GLOBAL batch: samples per optimizer step, all ranks.")
    micro_batch: int | None = Field(None, ge=1, le=2**24, description="Largest per-rank forward batch (memory bound); "
                                                            "null = batch // world_size.")
    grad_accum: Annotated[int, Field(ge=1, le=65536)] | Literal["auto"] = Field("auto", description="Micro-steps per optimizer step; "
                                                                  "'auto' derives it from micro_batch.")
    nbs: int = Field(64, ge=1, le=2**24, description="Nominal batch: lr0 is the LR at this global batch.")
    lr_scaling: Literal["linear", "sqrt", "none"] = Field("linear", description="LR vs batch/nbs "
                                                          "(linear: Goyal et al. 2017).")
    optimizer: Literal["AdamW", "SGD"] = Field("AdamW", description="Optimizer.")
    lr0: float = Field(1e-3, gt=0, description="Peak LR at the nominal batch `nbs`.")
    lrf: float = Field(0.01, gt=0, le=1, description="Final LR = lr * lrf.")
    cos_lr: bool = Field(False, description="Cosine decay after warmup (else linear, YOLOv8 default).")
    momentum: float = Field(0.937, ge=0, lt=1, description="SGD momentum / AdamW beta1 (YOLOv8).")
    weight_decay: float = Field(5e-4, ge=0, le=1, description="Weight decay (YOLOv8 default 5e-4).")
    warmup_epochs: float = Field(1.0, ge=0, le=100_000, description="Linear warmup length in epochs (see schedule.py).")
    grad_clip: float | None = Field(10.0, gt=0, description="Max grad norm (Ultralytics uses 10.0).")
    amp: bool = Field(True, description="Mixed precision (autocast, the same for 1 process, DDP and "
                                        "FSDP). The dtype comes from `amp_dtype`.")
    amp_dtype: Literal["auto", "bf16", "fp16"] = Field(
        "auto", description="auto: GPU bf16 (else fp16 + GradScaler); CPU bf16 only where the CPU "
                            "has native bf16 (AVX512-BF16/AMX), else fp32 (logged). bf16: bf16 "
                            "autocast everywhere (on a CPU without native bf16 it is emulated, "
                            "slower, same numbers). fp16: GPU only, with GradScaler.")
    workers: Annotated[int, Field(ge=0, le=64)] | Literal["auto"] = Field("auto", description="DataLoader workers per rank; 'auto' = "
                                           "0 for in-memory datasets, else the fastest count measured "
                                           "at start-up (trainkit/train/workers.py).")
    # le: torch seeds are 64-bit unsigned, and the sampler seeds seed + epoch (2**63 leaves room)
    seed: int = Field(0, ge=0, le=2**63 - 1, description="Seed for init, sampler order and dropout.")
    split_seed: int = Field(0, ge=0, le=2**63 - 1, description="Seed of the train/val/test split (fixed, apart "
                                                 "from `seed`, so every seed is tested on one set).")
    strategy: Literal["ddp", "fsdp", "auto"] = Field(
        "auto", description="ddp: every rank holds the model; fsdp: FSDP2 shards parameters, grads "
                            "and optimizer state; auto: fsdp when they would not fit one device.")
    activation_checkpointing: bool = Field(False, description="Recompute each block's activations "
                                           "in backward (fsdp.blocks names the blocks).")
    fsdp: FsdpConfig = Field(default_factory=FsdpConfig, description="FSDP2 settings (blocks, "
                             "reshard_after_forward) used when strategy resolves to fsdp.")
    deterministic: bool = Field(True, description="torch.use_deterministic_algorithms (warn only).")
    device: Literal["auto", "cpu", "cuda"] = Field("auto", description="'auto' = cuda if available.")
    run_dir: str = Field("runs/train", min_length=1, description="Where config.yaml, logs/, metrics.jsonl, "
                                                   "summary.json, plots and model.onnx go.")
    resume: bool | Annotated[str, Field(min_length=1)] = Field(True, description="true: newest complete checkpoint in checkpoint.dir "
                                                 "if any; false: start fresh; a path: that checkpoint.")
    log_every: int = Field(10, ge=1, le=10**9, description="Steps per metrics.jsonl step record (window means).")
    tensorboard: bool = Field(True, description="Write TensorBoard events to <run_dir>/tb if installed.")
    plot: bool = Field(True, description="Write <run_dir>/curves.png at the end (matplotlib).")
    checkpoint: CheckpointConfig = Field(default_factory=CheckpointConfig)
    export: ExportConfig = Field(default_factory=ExportConfig)

    @field_validator("split")
    @classmethod
    def _check_split(cls, split: list[float]) -> list[float]:
        """Three fractions > 0 summing to 1: an empty val or test set would report 0.0 as its loss."""
        if len(split) != 3:
            raise ValueError(f"expected 3 fractions (train, val, test), not {len(split)}")
        if any(f <= 0 for f in split):
            raise ValueError("expected every fraction > 0 (an empty val or test set measures nothing)")
        if abs(sum(split) - 1) > 1e-6:
            raise ValueError(f"expected fractions that sum to 1 (these sum to {sum(split):g})")
        return split

    @property
    def checkpoint_dir(self) -> Path:
        return Path(self.checkpoint.dir) if self.checkpoint.dir else Path(self.run_dir) / "checkpoints"

    def to_dict(self) -> dict[str, Any]:
        return self.model_dump(mode="json")

    def hash(self) -> str:
        """sha256 (16 hex) of what shapes the training result (not where files go, not resume)."""
        d = self.to_dict()
        for key in ("run_dir", "resume", "log_every", "tensorboard", "plot", "checkpoint", "export"):
            d.pop(key)
        return hashlib.sha256(json.dumps(d, sort_keys=True).encode()).hexdigest()[:16]


SECTIONS = {"checkpoint": CheckpointConfig, "export": ExportConfig, "fsdp": FsdpConfig}


# Keys of a train config that the controller's launcher reads (trainkit.runs.record: the run's name, a
# user command with its code and environment, the job's own data to stage, and how `train --recover`
# recovers); the engine ignores them.
LAUNCH_KEYS = ("name", "command", "workdir", "setup", "env", "excludes", "stage", "recover")


def load_config(path: str | Path | None, overrides: list[str] | tuple[str, ...] = ()) -> TrainConfig:
    """Read YAML at `path` (None = all defaults), apply `key=value` overrides, validate.

    Raises InputError naming every bad key (with a close match) or bad value (with its key path).
    """
    raw: dict[str, Any] = {}
    if path is not None:
        raw = yamlload.load_file(path, "train config") or {}
        if not isinstance(raw, dict):
            raise InputError(f"{path}: a train config is a mapping of keys to values")
        raw = {k: v for k, v in raw.items() if k not in LAUNCH_KEYS}
    for item in overrides:
        _apply_override(raw, item)
    return config_from_dict(raw, source=str(path or "<defaults>"))


def config_from_dict(raw: dict[str, Any], source: str = "<config>") -> TrainConfig:
    """Validate a plain dict (e.g. the one stored in a checkpoint). Raises InputError."""
    problems = _unknown_keys(raw)
    known = {k: ({s: x for s, x in v.items() if s in SECTIONS[k].model_fields}
                 if k in SECTIONS and isinstance(v, dict) else v)
             for k, v in raw.items() if k in TrainConfig.model_fields}
    try:
        cfg = TrainConfig.model_validate(yamlload.yaml12_floats(TrainConfig, known))
        if not problems:
            return cfg
    except ValidationError as err:
        problems += _render_errors(err)
    raise InputError(f"{source}: {len(problems)} problem(s)\n  " + "\n  ".join(capped(problems)),
                     fix="see `trainkit docs train-config` for every key, its type and default")


def _apply_override(raw: dict[str, Any], item: str) -> None:
    """`a.b=value`: value parsed as YAML (so 3 is an int, true a bool, [1,2] a list)."""
    key, sep, text = item.partition("=")
    if not sep or not key or "" in key.split("."):
        raise InputError(f"override {item!r} is not key=value", fix="e.g. epochs=5 checkpoint.keep=3")
    try:
        value = yamlload.load_text(text, f"override {key}") if text else ""
    except InputError:
        value = text
    node = raw
    *parents, leaf = key.split(".")
    for part in parents:
        child = node.setdefault(part, {})
        if not isinstance(child, dict):
            raise InputError(f"override {item!r}: {part} is not a section",
                             fix=f"set {'.'.join(key.split('.')[:-1])} as a whole, e.g. {part}={{...}}")
        node = child
    node[leaf] = value


def _unknown_keys(raw: dict[str, Any]) -> list[str]:
    problems = []
    for key, value in raw.items():
        if key not in TrainConfig.model_fields:
            problems.append(_unknown(key, list(TrainConfig.model_fields)))
        elif key in SECTIONS and isinstance(value, dict):
            known = list(SECTIONS[key].model_fields)
            problems += [_unknown(f"{key}.{sub}", [f"{key}.{k}" for k in known])
                         for sub in value if sub not in known]
    return problems


# Names other tools use for a key (PyTorch Lightning, Hugging Face TrainingArguments, Keras,
# Ultralytics' own older names); `learning_rate: 1e-3` is `lr0: 1e-3` here.
OTHER_NAMES = {"lr": "lr0", "learning_rate": "lr0", "base_lr": "lr0", "initial_lr": "lr0",
               "batch_size": "batch", "train_batch_size": "batch", "global_batch_size": "batch",
               "per_device_train_batch_size": "micro_batch", "micro_batch_size": "micro_batch",
               "num_workers": "workers", "dataloader_num_workers": "workers",
               "max_epochs": "epochs", "num_epochs": "epochs", "num_train_epochs": "epochs",
               "n_epochs": "epochs", "max_iters": "max_steps", "max_iter": "max_steps",
               "gradient_accumulation_steps": "grad_accum", "accumulate_grad_batches": "grad_accum",
               "accumulate": "grad_accum", "wd": "weight_decay", "optim": "optimizer",
               "gradient_clip_val": "grad_clip", "max_grad_norm": "grad_clip", "clip_grad": "grad_clip",
               "warmup": "warmup_epochs", "mixed_precision": "amp", "fp16": "amp", "bf16": "amp",
               "precision": "amp", "output_dir": "run_dir", "save_dir": "run_dir", "project": "run_dir",
               "random_seed": "seed", "cosine": "cos_lr", "lr_final": "lrf", "final_lr": "lrf",
               "resume_from_checkpoint": "resume", "save_total_limit": "checkpoint.keep",
               "save_steps": "checkpoint.every_n_steps", "checkpoint_dir": "checkpoint.dir",
               "onnx": "export.onnx", "model_kwargs": "model_args", "dataset": "data",
               "dataset_args": "data_args", "data_kwargs": "data_args"}


def _unknown(key: str, known: list[str]) -> str:
    close = difflib.get_close_matches(key, known, n=1, cutoff=0.6)
    other = OTHER_NAMES.get(key.rsplit(".", 1)[-1].lower())
    if other:
        close = [other]
    hint = f"; did you mean '{close[0]}'?" if close else ""
    return f"{key}: unknown key{hint}"


# pydantic's names for the members of a union in an error's location (not keys): `int`,
# `literal['auto']`, `constrained-float`, `list[str]`... A key such as `interval` is kept.
_UNION_TAG = re.compile(r"(int|float|str|bool|none|(list|dict|literal|function-\w+)\[.*\]|constrained-\w+)")


def _render_errors(err: ValidationError) -> list[str]:
    """One line per key: the key path, what was expected, what was given."""
    by_key: dict[str, list[str]] = {}
    given: dict[str, Any] = {}
    for e in err.errors():
        loc = [str(p) for p in e["loc"] if not _UNION_TAG.fullmatch(str(p))]
        key = ".".join(loc) or "<top level>"
        by_key.setdefault(key, []).append(e["msg"].replace("Input should be", "expected").replace(
            "Value error, ", "").replace("String should have", "expected a string with"))
        given[key] = e.get("input")
    lines = []
    for key, msgs in by_key.items():
        what = " or ".join(dict.fromkeys(msgs))
        got = "" if key == "<top level>" else f" (got {given[key]!r})"
        lines.append(f"{key}: {what}{got}")
    return lines


def write_config(cfg: TrainConfig, path: Path) -> None:
    """Write the resolved config as YAML that `load_config` reads back to an equal config."""
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(f"# resolved trainkit train config (hash {cfg.hash()})\n"
                    + yaml.safe_dump(cfg.to_dict(), sort_keys=False))
