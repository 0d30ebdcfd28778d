"""Data parallelism: DDP (every rank holds the model) or FSDP2 (`fully_shard`: each rank holds 1/W of
parameters, gradients and optimizer state), chosen by `strategy`, plus activation checkpointing.

`wrap(model, cfg, info)` returns (trained module, strategy). Both strategies keep the
parameter names (FQNs) of the plain model, so checkpoints (torch.distributed.checkpoint) move between
strategies and world sizes. FSDP2 needs a process group: with one process the model is not wrapped.
"""

from __future__ import annotations

import contextlib
import logging
import os

import torch
from torch import nn

from trainkit.errors import InputError
from trainkit.train import rng, schedule
from trainkit.train.config import TrainConfig
from trainkit.train.dist import DistInfo

log = logging.getLogger("trainkit.train")


def device_bytes(info: DistInfo) -> int:
    """Memory one rank may use: the GPU's total, or on CPU this node's available RAM / local ranks."""
    if info.device.type == "cuda":
        return torch.cuda.get_device_properties(info.device).total_memory
    try:
        avail = os.sysconf("SC_AVPHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")
    except (ValueError, OSError):
        avail = 8 << 30
    return avail // max(1, info.local_world_size)


def resolve_strategy(model: nn.Module, cfg: TrainConfig, info: DistInfo) -> str:
    """'ddp' or 'fsdp' for this run (see schedule.choose_strategy for 'auto')."""
    n = sum(p.numel() for p in model.parameters())
    bytes_per = next(model.parameters()).element_size()
    strategy = schedule.choose_strategy(cfg.strategy, n * bytes_per, cfg.optimizer,
                                        device_bytes(info), info.world_size)
    if strategy == "fsdp" and not info.distributed:
        log.info("strategy fsdp with one process: nothing to shard, training unwrapped")
        return "ddp"
    return strategy


def block_modules(model: nn.Module, blocks: list[str] | str, min_params: int) -> list[nn.Module]:
    """The modules sharded (and checkpointed) one by one, outermost first, never the root.

    A list names classes (`type(m).__name__`); 'auto' picks, bottom-up, every module whose own
    parameters (not already in a picked descendant) number >= `min_params`."""
    if blocks != "auto":
        wanted = set(blocks)
        return [m for m in model.modules() if m is not model and type(m).__name__ in wanted]
    picked: list[nn.Module] = []

    def visit(m: nn.Module) -> int:
        left = sum(p.numel() for p in m.parameters(recurse=False))
        left += sum(visit(c) for c in m.children())
        if m is not model and left >= min_params:
            picked.append(m)
            return 0
        return left

    visit(model)
    return picked[::-1]


def check_block_names(model: nn.Module, blocks: list[str] | str, name: str) -> None:
    """InputError naming fsdp.blocks when a listed class is not in the model (before: nothing was
    sharded or checkpointed one by one, silently)."""
    if blocks == "auto":
        return
    classes = sorted({type(m).__name__ for m in model.modules() if m is not model})
    missing = [b for b in blocks if b not in classes]
    if missing:
        raise InputError(f"fsdp.blocks: model {name} has no module of class {', '.join(missing)} "
                         f"(its classes: {', '.join(classes)})",
                         fix="name the repeated block class (e.g. [Block] for the gpt) or use auto")


def checkpoint_blocks(blocks: list[nn.Module]) -> None:
    """Activation checkpointing: each block's forward is recomputed in backward (non-reentrant,
    as torchtitan's `apply_ac` does with checkpoint_wrapper)."""
    from torch.utils.checkpoint import checkpoint

    for block in blocks:
        inner = block.forward

        def forward(*args, _inner=inner, **kwargs):
            keys = rng.current_keys()  # the recompute in backward runs outside the engine's keys_for

            def keyed(*a, **k):
                with rng.same_keys(keys):
                    return _inner(*a, **k)

            return checkpoint(keyed, *args, use_reentrant=False, **kwargs)

        block.forward = forward


def wrap(model: nn.Module, cfg: TrainConfig, info: DistInfo) -> tuple[nn.Module, str]:
    """Apply activation checkpointing and the data-parallel strategy. Returns (module, strategy)."""
    from torch.nn.parallel import DistributedDataParallel as DDP

    strategy = resolve_strategy(model, cfg, info)
    blocks = block_modules(model, cfg.fsdp.blocks, cfg.fsdp.min_block_params)
    if strategy == "fsdp" or cfg.activation_checkpointing:
        check_block_names(model, cfg.fsdp.blocks, cfg.model)
    if cfg.activation_checkpointing:
        checkpoint_blocks(blocks)
    if strategy == "fsdp":
        from torch.distributed.fsdp import MixedPrecisionPolicy, fully_shard

        # fp32 parameters and reductions; AMP comes from the same autocast as DDP (Run.autocast),
        # so a strategy change does not change the numbers (a bf16 param_dtype did, by ~1e-3).
        mp = MixedPrecisionPolicy()
        for block in blocks:
            fully_shard(block, mp_policy=mp, reshard_after_forward=cfg.fsdp.reshard_after_forward)
        fully_shard(model, mp_policy=mp, reshard_after_forward=cfg.fsdp.reshard_after_forward)
        log.info("fsdp: %d block(s) sharded over %d ranks", len(blocks), info.world_size)
        return model, strategy
    if info.distributed:
        ids = [info.local_rank] if info.device.type == "cuda" else None
        return DDP(model, device_ids=ids), strategy
    return model, strategy


_NO_SYNC_NEEDED = contextlib.nullcontext()   # reusable: nullcontext keeps no state


def grad_sync(wrapped: nn.Module, sync: bool):
    """Skip the gradient reduction on all but the last micro-step (DDP no_sync / FSDP2
    set_requires_gradient_sync). Called per micro-batch: the methods are looked up on the class
    (FSDP2 and DDP define them there), not the instance, whose nn.Module.__getattr__ raises and
    catches an AttributeError for a plain model."""
    cls = type(wrapped)
    if hasattr(cls, "set_requires_gradient_sync"):
        wrapped.set_requires_gradient_sync(sync)
        return _NO_SYNC_NEEDED
    if sync or not hasattr(cls, "no_sync"):
        return _NO_SYNC_NEEDED
    return wrapped.no_sync()


def full_state_dict(model: nn.Module) -> dict[str, torch.Tensor]:
    """The whole model's weights on CPU, on rank 0 (other ranks get {}). Collective under FSDP."""
    from torch.distributed.checkpoint.state_dict import StateDictOptions, get_model_state_dict

    opts = StateDictOptions(full_state_dict=True, cpu_offload=True)
    return get_model_state_dict(model, options=opts)
