"""Pure arithmetic of a run: batch split, LR scaling, warmup/decay, checkpoint interval. No torch.

Every function here is a function of numbers to numbers, so it is unit-tested exhaustively.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from trainkit.errors import InputError

# Ultralytics `trainer.py`: nw = max(round(warmup_epochs * nb), 100) -- a floor of 100 iterations.
WARMUP_FLOOR_STEPS = 100
# trainkit's cap on that floor, so a tiny run is not all warmup: at most 10% of the run.
WARMUP_FLOOR_MAX_SHARE = 0.10
# Any warmup (floor or asked) is capped at half the run, so the decay to lr0*lrf still happens.
WARMUP_MAX_SHARE = 0.5


@dataclass(frozen=True)
class BatchPlan:
    """How the GLOBAL batch is split: global = micro * accum * world (exactly)."""

    global_batch: int
    world_size: int
    per_rank: int
    micro: int
    accum: int


def plan_batch(global_batch: int, world_size: int, micro_batch: int | None = None,
               grad_accum: int | str = "auto") -> BatchPlan:
    """Derive per-rank micro-batch and accumulation steps from the global batch and world size.

    `grad_accum` int: used as is. "auto": the fewest micro-steps whose micro-batch fits `micro_batch`
    (None = no memory bound, accum 1). Raises InputError when the numbers do not divide exactly
    (torchtitan asserts the same: global % (local * dp) == 0).
    """
    if global_batch % world_size:
        raise InputError(f"batch={global_batch} (global) is not divisible by world size {world_size}",
                         fix=f"use a multiple of {world_size}")
    per_rank = global_batch // world_size
    if grad_accum == "auto":
        bound = micro_batch or per_rank
        accum = next(a for a in range(math.ceil(per_rank / bound), per_rank + 1) if per_rank % a == 0)
    else:
        accum = int(grad_accum)
        if accum < 1 or per_rank % accum:
            divisors = [d for d in range(1, per_rank + 1) if per_rank % d == 0][:8]
            raise InputError(f"grad_accum={accum} does not divide the per-rank batch {per_rank} "
                             f"(batch {global_batch} / world {world_size})",
                             fix=f"use one of {', '.join(map(str, divisors))}"
                                 f"{' ...' if per_rank > divisors[-1] else ''} or grad_accum=auto")
        if micro_batch and per_rank // accum > micro_batch:
            raise InputError(f"micro-batch {per_rank // accum} exceeds micro_batch={micro_batch}",
                             fix="raise grad_accum or set grad_accum=auto")
    return BatchPlan(global_batch, world_size, per_rank, per_rank // accum, accum)


def scaled_lr(lr0: float, global_batch: int, nbs: int, rule: str = "linear") -> float:
    """lr0 is the LR at the nominal batch `nbs`; scale it to `global_batch`.

    linear: Goyal et al. 2017 (arXiv:1706.02677) "Linear Scaling Rule"; sqrt: the usual Adam
    alternative; none: lr0 as is.
    """
    ratio = global_batch / nbs
    return lr0 * {"linear": ratio, "sqrt": math.sqrt(ratio), "none": 1.0}[rule]


def warmup_steps(warmup_epochs: float, steps_per_epoch: int, total_steps: int) -> int:
    """Warmup length in optimizer steps.

    Ultralytics: max(round(warmup_epochs * steps_per_epoch), 100). trainkit's choice for tiny runs:
    the 100-step floor never exceeds 10% of the run, and no warmup exceeds half the run.
    warmup_epochs == 0 means no warmup.
    """
    if warmup_epochs <= 0 or total_steps <= 0:
        return 0
    floor = min(WARMUP_FLOOR_STEPS, int(total_steps * WARMUP_FLOOR_MAX_SHARE))
    asked = max(round(warmup_epochs * steps_per_epoch), floor)
    return max(1, min(asked, int(total_steps * WARMUP_MAX_SHARE)))


def lr_factor(step: int, warmup: int, total_steps: int, lrf: float, cosine: bool = False) -> float:
    """Multiplier on the peak LR for optimizer step `step` (0-based).

    Linear warmup from 1/warmup to 1 over `warmup` steps, then decay (linear or cosine) to `lrf`
    at the last step.
    """
    if step < warmup:
        return (step + 1) / warmup
    span = max(1, total_steps - 1 - warmup)
    t = min(1.0, (step - warmup) / span)
    if cosine:
        return lrf + (1 - lrf) * 0.5 * (1 + math.cos(math.pi * t))
    return 1 - (1 - lrf) * t


def young_daly_interval(save_s: float, mtbf_s: float, higher_order: bool = True) -> float:
    """Optimal seconds between checkpoints for save cost C=`save_s` and mean time between failures M.

    Young 1974 (CACM 17(9)): T = sqrt(2CM). Daly 2006 (FGCS 22(3)), for C < 2M:
    T = sqrt(2CM) * [1 + (1/3) sqrt(C/2M) + (1/9)(C/2M)] - C; otherwise T = M.
    """
    if save_s <= 0:
        raise ValueError("save time must be positive")
    if not higher_order:
        return math.sqrt(2 * save_s * mtbf_s)
    if save_s >= 2 * mtbf_s:
        return mtbf_s
    r = save_s / (2 * mtbf_s)
    return math.sqrt(2 * save_s * mtbf_s) * (1 + math.sqrt(r) / 3 + r / 9) - save_s


def suggested_workers(cpu_count: int, local_world_size: int) -> int:
    """Lightning's `suggested_max_num_workers`: max(1, cpu_count // local_world_size - 1)."""
    return max(1, cpu_count // max(1, local_world_size) - 1)


# Share of one device the model's training state may take before `auto` shards it; the rest is
# left for activations, buffers and the allocator (trainkit's choice, a conservative half).
FSDP_HEADROOM = 0.5
# Optimizer state per parameter, in parameter copies: AdamW keeps exp_avg and exp_avg_sq,
# SGD with momentum one buffer (torch.optim docs).
OPTIMIZER_COPIES = {"AdamW": 2, "SGD": 1}


def training_state_bytes(param_bytes: int, optimizer: str) -> int:
    """Parameters + gradients + optimizer state of a model whose parameters take `param_bytes`."""
    return param_bytes * (2 + OPTIMIZER_COPIES.get(optimizer, 2))


def choose_strategy(asked: str, param_bytes: int, optimizer: str, device_bytes: int,
                    world_size: int) -> str:
    """'ddp' or 'fsdp'. `asked` ddp/fsdp is kept; 'auto' is fsdp when there is more than one process
    and the training state would take more than FSDP_HEADROOM of one device."""
    if asked != "auto":
        return asked
    too_big = training_state_bytes(param_bytes, optimizer) > FSDP_HEADROOM * device_bytes
    return "fsdp" if world_size > 1 and too_big else "ddp"
