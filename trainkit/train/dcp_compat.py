"""What torch.distributed.checkpoint (DCP) raises and whether its staging works in this torch:
the error helpers the sharded writer and the resume path share, and the stager probe.

Pure of trainkit state: each function takes torch objects or exceptions and returns a value.
"""

from __future__ import annotations

import errno

import torch

STAGER_BUG = "StateDictStager.close clears its copier table, then KeyError: <class 'type'>"


def stager_works(stager, device: str) -> bool:
    """Whether `stager` (a DefaultStager) stages a small state twice: a tensor on `device` and an
    object whose copy passes through a class (torch.device reduces to (torch.device, args)).
    torch 2.11.0+cu130 on an H200 failed every sharded save here with KeyError: <class 'type'>
    (STAGER_BUG: the stager's close() empties the dispatch table that one branch of
    deepcopy_with_tensor_offload indexes directly); torch 2.13's stager passes."""
    probe = {"t": torch.zeros(4, device=device), "where": torch.device(device), "n": 1}
    try:
        for _ in range(2):
            staged = stager.stage(probe)
            staged = staged.result() if hasattr(staged, "result") else staged
            if not torch.equal(staged["t"].cpu(), probe["t"].cpu()) or staged["where"] != probe["where"]:
                return False
    except Exception:  # noqa: BLE001 - any failure means: do not stage with it
        return False
    return True


def done_future():
    """A Future that is already done (a synchronous save hands it where an async one's goes)."""
    from concurrent.futures import Future

    fut: Future = Future()
    fut.set_result(None)
    return fut


def dcp_errors() -> tuple[type[BaseException], ...]:
    """What a DCP load or save raises: its CheckpointException is a BaseException, not an Exception."""
    from torch.distributed.checkpoint.api import CheckpointException

    return (Exception, CheckpointException)


# Errors that more room cures: no space, quota exceeded, file too large (a size limit).
SPACE_ERRNOS = frozenset({errno.ENOSPC, errno.EDQUOT, errno.EFBIG})


def root_cause(err: BaseException) -> BaseException:
    """The real error inside DCP's CheckpointException (one rank's), or `err` itself; follows
    __cause__ to an OSError where DCP wrapped one."""
    err = _unwrap(err)
    while not isinstance(err, OSError) and isinstance(err.__cause__, BaseException):
        err = err.__cause__
    return err


def cause(err: BaseException) -> str:
    """The first line of the real error inside DCP's CheckpointException (which carries every
    rank's traceback in its text), or of `err` itself."""
    err = _unwrap(err)
    text = str(err).strip().splitlines()
    return f"{type(err).__name__}: {text[0] if text else ''}"


def _unwrap(err: BaseException) -> BaseException:
    """One rank's exception out of DCP's CheckpointException, else `err`."""
    failures = getattr(err, "failures", None)
    if failures:
        inner = next(iter(failures.values()))  # (exception, frames) or a WrappedException
        err = inner[0] if isinstance(inner, tuple) else getattr(inner, "exception", inner)
    return err
