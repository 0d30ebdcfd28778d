"""Building a run, resuming it from a checkpoint, saving it, and summarising it.

`build_run` turns a config + distributed info into a `Run` (model, optimizer, schedule, loaders);
`resume` loads the newest complete checkpoint (or `resume=<path>`) into it so that training continues
bitwise-identically; `summarize` builds summary.json. When and what to save is
`trainkit.train.sharded` (SavePolicy, save_run), beside the writer.
"""

from __future__ import annotations

import contextlib
import functools
import logging
import random
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import torch

import trainkit
from trainkit.errors import TRAIN, InputError, TrainkitError
from trainkit.train import artifacts, data, dist, parallel, restore, rng, schedule, sharded
from trainkit.train import checkpoint as ckpt
from trainkit.train.config import TrainConfig
from trainkit.train.model import build_model, build_optimizer, check_fits

log = logging.getLogger("trainkit.train")


_NO_AUTOCAST = contextlib.nullcontext()   # reusable: nullcontext keeps no state
# Micro-batches of per-sample keys hashed at once (Run.keys): 256 x micro int64s, 128 KiB at micro 64.
KEY_BLOCK = 256


@dataclass
class Result:
    exit_code: int
    summary: dict[str, Any]


@dataclass
class Run:
    """Everything the hot loop touches; built once by `build_run`, mutated only by the loop/resume."""

    cfg: TrainConfig
    info: dist.DistInfo
    plan: schedule.BatchPlan
    model: torch.nn.Module            # unwrapped (FSDP2 shards it in place): saved, evaluated
    wrapped: torch.nn.Module          # what is trained: DDP(model), or the (sharded) model itself
    strategy: str                     # "ddp" or "fsdp"
    opt: torch.optim.Optimizer
    sched: torch.optim.lr_scheduler.LambdaLR
    scaler: torch.amp.GradScaler
    amp_dtype: torch.dtype | None
    splits: dict[str, Any]
    loader: Any
    sampler: data.GlobalBatchSampler
    steps_per_epoch: int
    total_steps: int
    lr: float
    warmup: int
    step: int = 0
    epoch: int = 0
    step_in_epoch: int = 0
    resumed_from: int | None = None
    extra: dict[str, Any] = field(default_factory=dict)
    key_block: KeyBlock | None = field(default=None, repr=False)

    def autocast(self):
        # One meaning of AMP for every strategy: FSDP autocasts too (its MixedPrecisionPolicy
        # keeps fp32), so 1 process, DDP and FSDP differ only by float reduction order.
        if self.amp_dtype is None:   # fp32: no autocast object to build and enter per micro-batch
            return _NO_AUTOCAST
        return torch.autocast(self.info.device.type, dtype=self.amp_dtype)

    def keys(self, micro: int) -> tuple[torch.Tensor, int]:
        """(per-sample RNG keys of micro-batch `micro` of this step, the first of them as an int:
        the global RNG's seed, rng.keys_for). Rank r's item k of the epoch is position r + W*k of
        the epoch's global order (data.GlobalBatchSampler). Hashed KEY_BLOCK micro-batches at a
        time (a pure function of epoch and position: a block is reused until the loop leaves
        it), and split into micro-batches then, so a step pays a list lookup, not a dozen tensor
        ops, a slice and a conversion (40 us of a 3 ms step here, benchmarks/bench_train.py)."""
        k0 = self.step_in_epoch * self.plan.per_rank + micro * self.plan.micro
        held = self.key_block
        if held is None or held.epoch != self.epoch or not 0 <= k0 - held.start < len(held.keys) * self.plan.micro:
            held = self.key_block = KeyBlock.hash(self.cfg.seed, self.epoch, k0, self.plan.micro, self.info)
        i = (k0 - held.start) // self.plan.micro   # k0 and start are both multiples of micro
        return held.keys[i], held.seeds[i]


@dataclass(frozen=True)
class KeyBlock:
    """The per-sample keys of KEY_BLOCK micro-batches of one epoch from item `start` of this rank,
    one tensor per micro-batch, and each one's first key as an int (Run.keys)."""

    epoch: int
    start: int
    keys: tuple[torch.Tensor, ...]
    seeds: list[int]

    @classmethod
    def hash(cls, seed: int, epoch: int, start: int, micro: int, info: dist.DistInfo) -> "KeyBlock":
        pos = info.rank + info.world_size * torch.arange(start, start + KEY_BLOCK * micro)
        keys = rng.sample_keys(seed, epoch, pos)
        return cls(epoch, start, keys.split(micro), keys[::micro].tolist())


def seed_everything(seed: int) -> None:
    random.seed(seed)
    np.random.seed(seed % 2**32)
    torch.manual_seed(seed)


def cpu_has_native_bf16() -> bool:
    """True where oneDNN reports native bf16 on this CPU (AVX512-BF16 or AMX)."""
    return bool(torch.backends.mkldnn.is_available() and torch.ops.mkldnn._is_mkldnn_bf16_supported())


def pick_amp_dtype(amp: bool, device: torch.device, want: str = "auto",
                   native_bf16=cpu_has_native_bf16) -> torch.dtype | None:
    """The autocast dtype for `amp`/`amp_dtype` on `device`, or None (fp32). Logs what it chose.

    GPU, auto: bf16 where supported (no GradScaler needed: nanoGPT, PyTorch AMP docs), else fp16 +
    scaler. CPU, auto: bf16 only where `native_bf16()` (elsewhere bf16 is emulated and slower than
    fp32, so AMP is off). `want="bf16"` forces bf16 whatever the CPU reports: CPU autocast runs it
    everywhere, so the numbers do not depend on the machine. `want="fp16"` on a CPU raises InputError
    (no GradScaler on CPU). The choice is a function of (amp, want, device, native_bf16) only.
    """
    if not amp:
        log.info("amp: off (amp: false); training in fp32")
        return None
    if device.type == "cuda":
        if want == "fp16" or (want == "auto" and not torch.cuda.is_bf16_supported()):
            return torch.float16
        return torch.bfloat16
    if want == "fp16":
        raise InputError("amp_dtype: fp16 needs a CUDA GPU (GradScaler); this run is on a CPU",
                         fix="use amp_dtype: bf16 (or auto) on a CPU")
    native = native_bf16()
    if want == "bf16" or native:
        log.info("amp: bf16 autocast on CPU (%s)", "oneDNN reports native bf16" if native
                 else "amp_dtype: bf16 forced; emulated on this CPU, slower")
        return torch.bfloat16
    log.info("amp: off on this CPU (no native bf16: capability %s); training in fp32 "
             "(amp_dtype: bf16 forces it)", torch.backends.cpu.get_cpu_capability())
    return None


def build_run(cfg: TrainConfig, info: dist.DistInfo) -> Run:
    """Data, batch plan, model (same init on every rank: seed), strategy, optimizer, LR schedule."""
    if cfg.deterministic and info.device.type == "cuda":  # CPU kernels are deterministic already
        torch.use_deterministic_algorithms(True, warn_only=True)
        torch.backends.cudnn.benchmark = False
    seed_everything(cfg.seed)
    splits = data.build_splits(cfg)
    plan = schedule.plan_batch(cfg.batch, info.world_size, cfg.micro_batch, cfg.grad_accum)
    loader, sampler = data.train_loader(splits["train"], plan.micro, plan.global_batch, cfg, info)
    spe = sampler.usable // plan.global_batch
    if spe < 1:
        raise InputError(f"batch: the train split ({len(splits['train'])} items) is smaller than one "
                         f"global batch ({cfg.batch})", fix="lower batch (or use more data)")
    total = min(cfg.epochs * spe, cfg.max_steps or cfg.epochs * spe)
    lr = schedule.scaled_lr(cfg.lr0, cfg.batch, cfg.nbs, cfg.lr_scaling)
    warmup = schedule.warmup_steps(cfg.warmup_epochs, spe, total)
    model = build_model(cfg)
    rng.swap_dropout(model)
    model = model.to(info.device)
    shape = check_fits(model, splits["train"], cfg, info.device, plan.micro)  # exit 2, not a crash later
    for name in ("val", "test"):  # their first item too: a set built apart may not match
        check_fits(model, splits[name], cfg, info.device, 1, name)
    amp_dtype = pick_amp_dtype(cfg.amp, info.device, cfg.amp_dtype)
    wrapped, strategy = parallel.wrap(model, cfg, info)
    opt = build_optimizer(model, cfg, lr)
    factor = functools.partial(schedule.lr_factor, warmup=warmup, total_steps=total, lrf=cfg.lrf,
                               cosine=cfg.cos_lr)
    sched = torch.optim.lr_scheduler.LambdaLR(opt, factor)
    scaler = torch.amp.GradScaler(info.device.type, enabled=amp_dtype == torch.float16)
    return Run(cfg, info, plan, model, wrapped, strategy, opt, sched, scaler, amp_dtype, splits,
               loader, sampler, spe, total, lr, warmup,
               extra={"input_shape": shape})


def make_saver(run: Run) -> sharded.Checkpointer:
    return sharded.Checkpointer(run.cfg.checkpoint_dir, run.cfg.checkpoint.keep, run.info.rank,
                                run.info.ckpt_group, run.info.distributed, sharded.KillFault.from_env(),
                                staged=run.cfg.checkpoint.async_save)


def resume(run: Run, saver: sharded.Checkpointer) -> None:
    """Load `cfg.resume` (a step-N folder, or a checkpoint root: its newest complete one) or, if
    true, the newest complete checkpoint under checkpoint.dir, into `run`.

    Rank 0 finds and verifies it and tells every rank; a sharded checkpoint is then read by every
    rank (resharded to this world size and strategy), an old single-file one is read by rank 0 and
    broadcast. Raises InputError (on every rank) if an explicit `resume` path does not verify, or
    the checkpoint does not fit this run's model or optimizer.
    """
    cfg, info = run.cfg, run.info
    found = dist.broadcast_object(info, find_resume(cfg, saver) if info.is_main else None)
    if isinstance(found, TrainkitError):
        raise found
    if found is None:
        return
    folder = Path(found)
    is_dcp = sharded.is_sharded(folder)
    state = sharded.load_meta(folder) if is_dcp else dist.broadcast_object(
        info, ckpt.load_single(folder) if info.is_main else None)
    try:
        if is_dcp:
            sharded.load_into(folder, run.wrapped, run.opt, info.ckpt_group, info.distributed)
        else:
            load_full(run, state)
    except sharded.dcp_errors() as err:  # DCP raises its CheckpointException on every rank
        changed = config_changes(state.get("config") or {}, cfg)
        raise InputError(f"resume: {folder} does not fit this run's model or optimizer "
                         f"({sharded.cause(err)})" + (f"; it was written with {', '.join(changed)}"
                                                      if changed else ""),
                         fix="set those keys back, or start fresh in a new run_dir (or "
                             "checkpoint.dir), which keeps these checkpoints") from None
    apply_meta(run, state)
    log.info("resumed from %s (step %d, epoch %d, step %d of the epoch)", folder, run.step, run.epoch,
             run.step_in_epoch)


def find_resume(cfg: TrainConfig, saver: sharded.Checkpointer) -> str | TrainkitError | None:
    """Rank 0: the checkpoint folder to resume from, None for a fresh start, or the InputError an
    explicit `resume` deserves (it is broadcast, then raised on every rank): checkpoints under
    checkpoint.dir of which none verifies (exit 6: `unusable_checkpoints`), a path that is not a
    checkpoint, or a checkpoint.dir holding steps past where this run starts (its saves would
    replace them and keep-N would prune its own, leaving another run's newest for the next resume)."""
    if cfg.resume is True:
        hit = restore.newest_valid(saver.root)
        if hit is None and any(saver.root.glob("step-*")):
            return unusable_checkpoints(saver.root)
        return str(hit) if hit else None
    found = None if cfg.resume is False else _explicit_resume(Path(cfg.resume))
    if isinstance(found, InputError):
        return found
    start = ckpt.step_of(Path(found)) if found else 0
    newer = [s for s in saver.complete_steps() if s > start]
    if newer:
        what = "resume=false starts at step 0" if found is None else f"resume={found} starts at step {start}"
        return InputError(f"resume: checkpoint.dir {saver.root} already holds checkpoints up to step "
                          f"{newer[-1]} and {what}: this run's saves would replace and prune them",
                          fix="give this run its own checkpoint.dir (or run_dir), or resume=true to "
                              "continue from the newest")
    return found


def unusable_checkpoints(root: Path) -> TrainkitError:
    """resume=true over a checkpoint.dir whose step folders all fail to verify: exit 6, naming
    them. Training from step 0 there would silently throw the run's work away (and its saves would
    replace the folders one might still repair)."""
    names = sorted(p.name for p in root.glob("step-*"))
    shown = ", ".join(names[-5:]) + (f" (and {len(names) - 5} more)" if len(names) > 5 else "")
    return TrainkitError(f"resume: no checkpoint under {root} verifies: {shown} (the log says why each "
                         "was skipped), so there is nothing to resume from",
                         fix="restore a good copy of one of them, or start over on purpose: resume=false "
                             "with a new checkpoint.dir (trainkit train: a new run, without --resume)",
                         exit_code=TRAIN)


def _explicit_resume(path: Path) -> str | InputError:
    """`resume: PATH`: a step-N folder, or a folder of them (its newest complete one)."""
    fix = "name a step-N folder (or a folder of them); resume=true takes the newest in checkpoint.dir"
    if not path.is_dir():
        return InputError(f"resume: {path} is not a folder", fix=fix)
    if not restore.is_checkpoint(path):
        hit = restore.newest_valid(path)  # a checkpoint root
        return str(hit) if hit else InputError(f"resume: no complete checkpoint in {path}", fix=fix)
    try:
        restore.verify(path)
        return str(path)
    except (ckpt.CheckpointError, OSError) as err:
        return InputError(f"resume: {path}: {err}", fix=fix)


def config_changes(saved: dict[str, Any], cfg: TrainConfig) -> list[str]:
    """'key=saved (now new)' for each key that shapes the model or optimizer state and differs."""
    now = cfg.to_dict()
    return [f"{k}={saved[k]!r} (now {now[k]!r})" for k in ("model", "model_args", "optimizer")
            if k in saved and saved[k] != now[k]]


def load_full(run: Run, state: dict[str, Any]) -> None:
    """A single-file (full, unsharded) checkpoint into any strategy."""
    from torch.distributed.checkpoint.state_dict import StateDictOptions, set_model_state_dict

    set_model_state_dict(run.model, state["model"], options=StateDictOptions(full_state_dict=True))
    if run.strategy == "ddp":
        run.opt.load_state_dict(state["optimizer"])
    else:
        log.warning("old single-file checkpoint under fsdp: weights loaded, optimizer state restarts")


def apply_meta(run: Run, state: dict[str, Any]) -> None:
    """Restore position, schedule and scaler; warn where the run differs from the saved one.
    The LR comes from this run's config: the checkpoint's schedule gives only its position."""
    base = list(run.sched.base_lrs)  # this run's, from its config
    run.sched.load_state_dict(state["scheduler"])
    keep_lr(run, base)
    run.scaler.load_state_dict(state["scaler"])
    run.step, run.epoch, run.step_in_epoch = state["step"], state["epoch"], state["step_in_epoch"]
    run.resumed_from = run.extra["saved_step"] = run.step
    run.extra["best"] = state.get("best")  # weights/best.pt tracking continues (artifacts.py)
    if state["world_size"] != run.info.world_size:
        log.info("world size %d -> %d: resharded; dropout keys are per sample, so the run continues "
                 "as it would have", state["world_size"], run.info.world_size)
    if state["config_hash"] != run.cfg.hash():
        log.warning("config differs from the checkpoint's (hash %s -> %s): resuming anyway",
                    state["config_hash"], run.cfg.hash())
    if state["global_batch"] != run.plan.global_batch:
        log.warning("global batch %d -> %d: the sample order after resume differs",
                    state["global_batch"], run.plan.global_batch)


def keep_lr(run: Run, base: list[float]) -> None:
    """Put this run's peak LR back after a checkpoint's scheduler (and optimizer) state brought its
    own: LambdaLR's state holds base_lrs, and the param groups hold the LR of the saved step."""
    if run.sched.base_lrs != base:
        log.warning("lr %s -> %s (batch, nbs or lr0 changed): the schedule goes on at the new LR",
                    run.sched.base_lrs[0], base[0])
    run.sched.base_lrs = list(base)
    for group, lr, factor in zip(run.opt.param_groups, base, run.sched.lr_lambdas):
        group["initial_lr"], group["lr"] = lr, lr * factor(run.sched.last_epoch)
    run.sched._last_lr = [g["lr"] for g in run.opt.param_groups]  # what get_last_lr() reports


def describe(run: Run) -> dict[str, Any]:
    """The `run` record of metrics.jsonl: what was derived from config + machine."""
    opts = data.loader_options(run.cfg, run.info, run.loader.num_workers)
    return {"world_size": run.info.world_size, "num_nodes": run.info.num_nodes,
            "global_batch": run.plan.global_batch, "micro_batch": run.plan.micro,
            "grad_accum": run.plan.accum, "lr": run.lr, "warmup_steps": run.warmup,
            "total_steps": run.total_steps, "steps_per_epoch": run.steps_per_epoch,
            "workers": opts["num_workers"], "pin_memory": opts["pin_memory"],
            "persistent_workers": opts.get("persistent_workers", False),
            "prefetch_factor": opts.get("prefetch_factor"), "device": str(run.info.device),
            "amp": str(run.amp_dtype).replace("torch.", "") if run.amp_dtype else None,
            "strategy": run.strategy,
            "resumed_from_step": run.resumed_from, "config_hash": run.cfg.hash()}


def summarize(run: Run, reason: str, exit_code: int, metrics: dict[str, Any]) -> dict[str, Any]:
    """summary.json (keys are a stable interface: see docs/training.md)."""
    keys = ("train_loss", "val_loss", "val_acc", "val_ppl", "test_loss", "test_acc", "test_ppl",
            "samples_per_s",
            "data_wait_pct", "verdict", "checkpoint", "checkpoint_write_s", "onnx",
            "onnx_max_abs_diff", "onnx_error", "wall_time_s")
    status = {"preempted": "preempted", "diverged": "failed"}.get(reason, "completed")
    return {"status": status, "exit_reason": reason,
            "exit_code": exit_code, "steps": run.step, "total_steps": run.total_steps,
            "epochs_completed": run.epoch, "resumed_from_step": run.resumed_from,
            "world_size": run.info.world_size, "num_nodes": run.info.num_nodes,
            "strategy": run.strategy, "global_batch": run.plan.global_batch, "micro_batch": run.plan.micro,
            "grad_accum": run.plan.accum, "lr": run.lr, "device": str(run.info.device),
            **{k: metrics.get(k) for k in keys},
            **artifacts.finish(run, describe(run), write_last=reason != "diverged"),
            "config_hash": run.cfg.hash(),
            "torch_version": torch.__version__, "trainkit_version": trainkit.__version__}
