"""Distributed setup from torchrun's environment, and the SIGTERM flag every rank agrees on.

torchrun sets RANK, LOCAL_RANK, WORLD_SIZE, LOCAL_WORLD_SIZE, MASTER_ADDR/PORT. Without them the
run is one process and no process group is created. Backend: nccl on GPU, gloo on CPU.
"""

from __future__ import annotations

import os
import signal
from dataclasses import dataclass
from datetime import timedelta
from typing import Any

import torch
import torch.distributed as dist

from trainkit.errors import InputError

# torchtitan's Comm.init_timeout_seconds: long enough for slow node start-up.
INIT_TIMEOUT_S = 300


@dataclass(frozen=True)
class DistInfo:
    rank: int
    local_rank: int
    world_size: int
    local_world_size: int
    device: torch.device
    ckpt_group: Any = None  # a gloo group of all ranks for checkpoint collectives (async saves)

    @property
    def is_main(self) -> bool:
        return self.rank == 0

    @property
    def distributed(self) -> bool:
        return self.world_size > 1

    @property
    def num_nodes(self) -> int:
        return max(1, self.world_size // self.local_world_size)


def setup(device: str = "auto") -> DistInfo:
    """Join the process group if launched by torchrun (WORLD_SIZE > 1); pick this rank's device."""
    env = os.environ
    rank, world = int(env.get("RANK", 0)), int(env.get("WORLD_SIZE", 1))
    local_rank = int(env.get("LOCAL_RANK", 0))
    local_world = int(env.get("LOCAL_WORLD_SIZE", world))
    use_cuda = torch.cuda.is_available() if device == "auto" else device == "cuda"
    if use_cuda and not torch.cuda.is_available():
        raise InputError(f"device: 'cuda' but this machine has no usable CUDA GPU ({_cuda_found()})",
                         fix="set device=auto (uses the GPU when there is one) or device=cpu")
    if use_cuda:
        torch.cuda.set_device(local_rank)
        dev = torch.device("cuda", local_rank)
    else:
        dev = torch.device("cpu")
    if world > 1 and not dist.is_initialized():
        dist.init_process_group("nccl" if use_cuda else "gloo",
                                timeout=timedelta(seconds=INIT_TIMEOUT_S),
                                device_id=dev if use_cuda else None)
    # checkpoint collectives on their own group, so a background save never interleaves with the
    # training collectives (PyTorch blog, "Reducing Model Checkpointing Times by Over 10x")
    group = dist.new_group(backend="gloo") if world > 1 else None
    return DistInfo(rank, local_rank, world, local_world, dev, group)


def _cuda_found() -> str:
    """What was found instead of a GPU, in words (for the device error)."""
    if torch.version.cuda is None:
        return f"torch {torch.__version__} is a CPU-only build"
    return f"torch built for CUDA {torch.version.cuda}, but {torch.cuda.device_count()} device(s) visible"


def teardown() -> None:
    if dist.is_available() and dist.is_initialized():
        dist.destroy_process_group()


class Preemption:
    """SIGTERM, or a first Ctrl-C (SIGINT), sets a flag; nothing else happens in the handler (the
    step finishes, every rank agrees, a checkpoint is written: exit 75). A second Ctrl-C aborts at
    once (KeyboardInterrupt). SIGINT left ignored by the parent (nohup, `&`) stays ignored.

    torchrun forwards SIGTERM to every worker and SIGKILLs them 30 s later (pytorch PR #61602), so
    the save that follows must fit in that window.
    """

    def __init__(self) -> None:
        self.requested = False
        self._previous = signal.signal(signal.SIGTERM, self._handle)
        self._previous_int = signal.getsignal(signal.SIGINT)
        if self._previous_int is not signal.SIG_IGN:
            signal.signal(signal.SIGINT, self._interrupt)

    def _handle(self, signum, frame) -> None:
        self.requested = True

    def _interrupt(self, signum, frame) -> None:
        self.requested = True
        signal.signal(signal.SIGINT, signal.default_int_handler)  # the second Ctrl-C aborts
        os.write(2, b"Ctrl-C: finishing this step and saving a checkpoint (Ctrl-C again aborts)\n")

    def restore(self) -> None:
        signal.signal(signal.SIGTERM, self._previous)
        signal.signal(signal.SIGINT, self._previous_int)


class Agreement:
    """The per-step all-reduce of (loss, stop, save) on one buffer made at start-up. It is the
    loop's one deliberate sync point per step: every rank must know the stop/save flags before it
    can decide, and the logged loss is the global mean. Single process: no collective, no sync."""

    def __init__(self, info: DistInfo) -> None:
        self.info = info
        device = info.device if info.device.type == "cuda" else torch.device("cpu")
        self.buf = torch.zeros(3, dtype=torch.float64, device=device)

    def __call__(self, loss_sum: torch.Tensor, stop: bool, save: bool) -> tuple[float, bool, bool]:
        """(global mean loss, stop if ANY rank asks, save if ANY rank asks)."""
        if not self.info.distributed:
            return loss_sum.item(), stop, save
        self.buf[0].copy_(loss_sum.detach().reshape(()))
        self.buf[1], self.buf[2] = float(stop), float(save)
        dist.all_reduce(self.buf)
        loss, n_stop, n_save = self.buf.tolist()
        return loss / self.info.world_size, n_stop > 0, n_save > 0


def gather_objects(info: DistInfo, obj) -> list:
    """Every rank's `obj`, in rank order (a list of one without a process group)."""
    if not info.distributed:
        return [obj]
    out = [None] * info.world_size
    dist.all_gather_object(out, obj)
    return out


def broadcast_object(info: DistInfo, obj):
    """Rank 0's `obj` (any picklable object) on every rank."""
    if not info.distributed:
        return obj
    box = [obj]
    dist.broadcast_object_list(box, src=0)
    return box[0]


def barrier(info: DistInfo) -> None:
    if info.distributed:
        dist.barrier()
