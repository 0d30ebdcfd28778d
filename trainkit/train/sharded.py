"""Sharded, asynchronous checkpoints with torch.distributed.checkpoint (DCP).

Layout: <root>/step-00000042/ holds DCP's shard files (`__<rank>_0.distcp`, every rank writes its
own), DCP's `.metadata` (renamed into place last by DCP's coordinator), `meta.pt` (step, epoch,
scheduler, scaler, config: small, rank 0) and trainkit's `COMPLETE` marker (JSON: step, every
file's bytes, and their sha256 when the checkpoint is <= 2 GiB), written atomically by rank 0 only
after every rank's shard and `.metadata` are on disk. Resume takes the newest folder whose marker
verifies; a folder without one is skipped with a warning, so a kill -9 at any point loses at most
the save in flight. Keep-N prunes the oldest complete folders.

Async (`dcp.async_save` with a persistent `DefaultStager`, as torchtitan's async modes): the copy of
the state to host memory (staging) runs in a background thread into buffers reused from save to save,
and overlaps the next step's forward and backward; the loop calls `wait_staged()` before the
optimizer changes the parameters (models with buffers, e.g. BatchNorm statistics that forward
updates, stage synchronously instead). Shards are then written and `.metadata` committed in another
background thread, on a separate gloo process group so checkpoint collectives never interleave with
training ones (PyTorch async checkpointing blog). One save is in flight at a time.

Loading reshards: any world size and either strategy (ddp/fsdp) loads any checkpoint, because DCP
stores each tensor with its global shape and the plain parameter names.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import shutil
import signal
import threading
import time
import warnings
from pathlib import Path
from typing import Any

import torch
from torch import nn

import trainkit
from trainkit.errors import TRAIN, TrainkitError
from trainkit.train import checkpoint as ckpt
from trainkit.train import dist, schedule
from trainkit.train.checkpoint import MARKER, STATE, CheckpointError, atomic_write, step_dir
from trainkit.train.config import TrainConfig
from trainkit.train.dcp_compat import SPACE_ERRNOS, STAGER_BUG, cause, dcp_errors, done_future, root_cause, stager_works

log = logging.getLogger("trainkit.train")
# one process has no process group: DCP then saves/loads alone, which is what is meant here
warnings.filterwarnings("ignore", message="torch.distributed is disabled, unavailable or uninit")
META = "meta.pt"
DCP_METADATA = ".metadata"
SHA_MAX_BYTES = 2 << 30  # above this, markers carry sizes only (hashing would cost a full re-read)


class KillFault:
    """Test hooks, read ONCE at start-up: TRAINKIT_FAULT_KILL_IN_SAVE="<step>[:<delay s>]" makes every
    rank SIGKILL itself <delay> seconds after the save of <step> starts (mid-write);
    TRAINKIT_FAULT_SLOW_SAVE="<step>:<seconds>" holds the save of <step> in flight that long before
    it is committed (its COMPLETE marker written), in the run's first attempt only
    (TRAINKIT_ATTEMPT unset or 1): a test can kill a machine while that checkpoint is incomplete."""

    def __init__(self, spec: str | None, slow: str | None = None) -> None:
        step, _, delay = (spec or "").partition(":")
        self.step = int(step) if step else None
        self.delay = float(delay or 0)
        slow_step, _, seconds = (slow or "").partition(":")
        self.slow_step = int(slow_step) if slow_step else None
        self.slow_s = float(seconds or 0)

    @classmethod
    def from_env(cls) -> "KillFault":
        first = os.environ.get("TRAINKIT_ATTEMPT", "1") == "1"
        return cls(os.environ.get("TRAINKIT_FAULT_KILL_IN_SAVE"),
                   os.environ.get("TRAINKIT_FAULT_SLOW_SAVE") if first else None)

    def arm(self, step: int) -> None:
        if self.step == step:
            timer = threading.Timer(self.delay, os.kill, (os.getpid(), signal.SIGKILL))
            timer.daemon = True
            timer.start()

    def hold(self, step: int) -> None:
        """In the save's background thread, before it is committed."""
        if self.slow_step == step:
            time.sleep(self.slow_s)


def app_state(model: nn.Module, opt: torch.optim.Optimizer) -> dict[str, Any]:
    """{"model", "optim"}: DCP state dicts keyed by plain parameter names (DDP/FSDP alike)."""
    from torch.distributed.checkpoint.state_dict import get_state_dict

    msd, osd = get_state_dict(model, opt)
    return {"model": msd, "optim": osd}


class Checkpointer:
    """The run's one checkpoint writer: collective saves (every rank calls `save`) and the complete
    steps under `root`, keeping the newest `keep` (>= 2). restore.py reads both formats."""

    def __init__(self, root: Path, keep: int, rank: int = 0, group=None, distributed: bool = False,
                 fault: KillFault | None = None, staged: bool = True) -> None:
        self.root, self.keep, self.rank = Path(root), max(2, keep), rank
        self.staged = staged  # False: every save is a plain dcp.save (checkpoint.async_save: false)
        self.group, self.distributed = group, distributed
        self.fault = fault or KillFault(None)
        self._thread: threading.Thread | None = None
        self._staging = None  # Future of the staging copy in flight
        self._stager = None
        self._error: BaseException | None = None
        self._folder: Path | None = None  # the save in flight
        self.in_flight_step: int | None = None   # its step, until wait() has seen it committed
        self.last_path: Path | None = None
        self.last_write_s = 0.0  # rank 0: save start -> marker written (C for Young/Daly)
        self.blocked_s = 0.0  # total seconds training waited for staging outside save()

    def save(self, model: nn.Module, opt, meta: dict[str, Any], step: int, block: bool) -> float:
        """Save as step `step`. Returns the seconds the caller was blocked (plan + staging copy).
        Raises TrainkitError (exit 6, naming checkpoint.dir) when this or the previous save fails."""
        try:
            return self._save(model, opt, meta, step, block)
        except dcp_errors() as err:
            raise self._failed(err, step_dir(self.root, step)) from None

    def _save(self, model: nn.Module, opt, meta: dict[str, Any], step: int, block: bool) -> float:
        import torch.distributed.checkpoint as dcp

        t0 = time.perf_counter()
        self.wait()
        folder = step_dir(self.root, step)
        if self.rank == 0:
            if folder.exists():  # a partial leftover of an interrupted run at this step
                shutil.rmtree(folder)
            folder.mkdir(parents=True)
            buf = _to_bytes(meta)
            atomic_write(folder / META, buf)
        if self.distributed:
            # No rank writes into the folder before rank 0 has cleaned and made it: on shared
            # storage DCP's writer on another node made it first (rank 0's mkdir: FileExistsError,
            # exit 6), or wrote its shard into a leftover that rank 0 then deleted.
            torch.distributed.barrier(group=self.group)
        stager = self.stager() if self.staged else None
        self._folder, self.in_flight_step = folder, step
        if stager is None:  # async_save off, or no stager works in this torch: write now, here
            self.fault.arm(step)
            dcp.save(app_state(model, opt), checkpoint_id=str(folder), process_group=self.group,
                     no_dist=not self.distributed)
            self._finish(done_future(), folder, step, t0)
            self.wait()
            return time.perf_counter() - t0
        resp = dcp.async_save(app_state(model, opt), checkpoint_id=str(folder),
                              process_group=self.group, no_dist=not self.distributed,
                              async_stager=stager)
        self._staging = resp.staging_completion
        self.fault.arm(step)
        self._thread = threading.Thread(target=self._finish, args=(resp.upload_completion, folder,
                                                                  step, t0), daemon=True)
        self._thread.start()
        if block or any(True for _ in model.buffers()):
            self.wait_staged()
        blocked = time.perf_counter() - t0
        if block:
            self.wait()
        return blocked

    def stager(self):
        """One DefaultStager for the run: its host buffers are reused by every save (no fresh
        page faults each time); pinned and non-blocking on GPU. None when no stager passes
        `stager_works` in this torch: the saves are then synchronous (`dcp.save`), said once."""
        if self._stager is None:
            from torch.distributed.checkpoint.staging import DefaultStager, StagingOptions

            gpu = torch.cuda.is_available() and torch.cuda.is_initialized()
            for pinned in dict.fromkeys((gpu, False)):
                stager = DefaultStager(StagingOptions(use_pinned_memory=pinned, use_shared_memory=False,
                                                      use_async_staging=True,
                                                      use_non_blocking_copy=pinned))
                if stager_works(stager, "cuda" if gpu else "cpu"):
                    self._stager = stager
                    break
                stager.close()
                log.warning("checkpoint: torch %s's %s staging copy fails (%s); %s", torch.__version__,
                            "pinned" if pinned else "host", STAGER_BUG,
                            "trying host memory" if pinned else "checkpoints are written synchronously")
            else:
                self._stager = False
        return self._stager or None

    @property
    def writing(self) -> bool:
        """Whether a save's background write (files, .metadata, COMPLETE marker) is still going."""
        return self._thread is not None and self._thread.is_alive()

    def wait_staged(self) -> float:
        """Block until the staging copy in flight is done (before parameters change). Returns the
        seconds waited (the part of the copy the step's compute did not hide)."""
        if self._staging is None:
            return 0.0
        t0 = time.perf_counter()
        self._staging.result()
        self._staging = None
        self.blocked_s += time.perf_counter() - t0
        return time.perf_counter() - t0

    def close(self) -> None:
        self.wait()
        if self._stager:
            self._stager.close()
        self._stager = None

    def _finish(self, fut, folder: Path, step: int, t0: float) -> None:
        try:
            self.fault.hold(step)
            fut.result()
            if self.rank == 0:
                atomic_write(folder / MARKER, json.dumps(_marker(folder, step)).encode())
                self.last_path, self.last_write_s = folder, time.perf_counter() - t0
                self._prune()
        except BaseException as err:  # surfaced by the next wait()
            self._error = err

    def wait(self) -> None:
        """Block until the save in flight is committed; raise its error as `_failed` says."""
        folder = self._folder
        try:
            self.wait_staged()
            self._join()
        except dcp_errors() as err:
            raise self._failed(err, folder) from None
        self.in_flight_step = None

    def _join(self) -> None:  # the background write (if any), re-raising the error it stored
        if self._thread is not None:
            self._thread.join()
            self._thread = None
        if self._error is not None:
            err, self._error = self._error, None
            raise err

    def _failed(self, err: BaseException, folder: Path | None) -> BaseException:
        """A failed write (full disk, no permission, a gone NAS) as one clear error. The folder it
        left has no marker, so it is removed (freeing space); complete checkpoints stay."""
        if isinstance(err, TrainkitError):
            return err
        if self.rank == 0 and folder is not None and not (folder / MARKER).exists():
            shutil.rmtree(folder, ignore_errors=True)
        where = next((p for p in (self.root, *self.root.parents) if p.exists()), Path("."))
        free = shutil.disk_usage(where).free
        inner = root_cause(err)
        said = f"checkpoint.dir: writing {folder or self.root} failed " \
               f"({cause(inner if isinstance(inner, OSError) else err)})"
        then = "then run the same command: it resumes from the newest complete checkpoint"
        if not isinstance(inner, OSError):  # torch's own failure: more room would not help
            return TrainkitError(f"{said}; {free / 2**20:.1f} MiB free there, so not for want of room",
                                 exit_code=TRAIN,
                                 fix=f"set checkpoint.async_save: false (torch {torch.__version__}'s "
                                     f"background save failed), {then}")
        if inner.errno not in SPACE_ERRNOS:  # read-only, no permission, a NAS gone
            return TrainkitError(f"{said}", exit_code=TRAIN,
                                 fix=f"make {where} writable (mounted read-write, owned by this user) "
                                     f"or point checkpoint.dir elsewhere, {then}")
        return TrainkitError(f"{said}; {free / 2**20:.1f} MiB free there", exit_code=TRAIN,
                             fix=f"free space there or point checkpoint.dir at a folder with room, {then}")

    def _prune(self) -> None:
        ckpt.prune(self.root, self.keep)

    def complete_steps(self) -> list[int]:
        return ckpt.complete_steps(self.root)


def _to_bytes(obj: Any) -> bytes:
    import io

    buf = io.BytesIO()
    torch.save(obj, buf)
    return buf.getvalue()


def _marker(folder: Path, step: int) -> dict[str, Any]:
    files = {p.name: p.stat().st_size for p in sorted(folder.iterdir())
             if p.is_file() and p.name != MARKER and not p.name.endswith(".tmp")}
    marker: dict[str, Any] = {"format": "dcp", "step": step, "files": files, "time": time.time()}
    if sum(files.values()) <= SHA_MAX_BYTES:
        marker["sha256"] = {name: _sha256(folder / name) for name in files}
    return marker


def _sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            digest.update(chunk)
    return digest.hexdigest()


def is_sharded(folder: Path) -> bool:
    return (folder / META).exists() or (folder / DCP_METADATA).exists()


def verify(folder: Path) -> None:
    """Raise CheckpointError unless `folder` is a complete sharded checkpoint (marker, files,
    checksums). Either format: trainkit.train.restore.verify."""
    if not (folder / MARKER).exists():
        raise CheckpointError("no completion marker (partial write)")
    try:
        marker = json.loads((folder / MARKER).read_text())
        sizes = {name: (folder / name).stat().st_size for name in marker["files"]}
    except (OSError, ValueError, KeyError) as err:
        raise CheckpointError(f"unreadable or missing file: {err}") from None
    if sizes != marker["files"] or DCP_METADATA not in sizes or META not in sizes:
        raise CheckpointError("file sizes do not match the completion marker (corrupt)")
    for name, digest in marker.get("sha256", {}).items():
        if _sha256(folder / name) != digest:
            raise CheckpointError(f"{name}: sha256 does not match the completion marker (corrupt)")


def load_meta(folder: Path) -> dict[str, Any]:
    return torch.load(folder / META, map_location="cpu", weights_only=False)


def load_into(folder: Path, model: nn.Module, opt, group=None, distributed: bool = False) -> None:
    """Every rank: load `folder`'s shards into this rank's (possibly sharded) model and optimizer."""
    import torch.distributed.checkpoint as dcp
    from torch.distributed.checkpoint.state_dict import set_state_dict

    state = app_state(model, opt)
    dcp.load(state, checkpoint_id=str(folder), process_group=group, no_dist=not distributed)
    set_state_dict(model, opt, model_state_dict=state["model"], optim_state_dict=state["optim"])


def consolidate(folder: Path) -> dict[str, Any]:
    """One process, no process group: the whole checkpoint as plain tensors (model weights as
    `state["model"]`, loadable with `load_state_dict`) plus meta.pt's entries."""
    from torch.distributed.checkpoint import FileSystemReader
    from torch.distributed.checkpoint.format_utils import _EmptyStateDictLoadPlanner, _load_state_dict

    state: dict[str, Any] = {}
    _load_state_dict(state, storage_reader=FileSystemReader(str(folder)),
                     planner=_EmptyStateDictLoadPlanner(), no_dist=True)
    return {**load_meta(folder), "model": state["model"], "optimizer": state.get("optim")}


__all__ = ["Checkpointer", "KillFault", "consolidate", "load_into", "load_meta", "verify", "STATE"]


# ------------------------------------------------------------------ when and what to save

class SavePolicy:
    """When a scheduled checkpoint is due: every_n_steps, else interval seconds, else 'auto'
    (the first step after EVERY start, fresh or resumed, saves to measure the write time C; then
    Young/Daly with M = mtbf / nodes). Time-based decisions are rank 0's clock; `dist.agree` makes
    every rank follow it. `clock` is injectable for tests."""

    def __init__(self, cfg: TrainConfig, info: dist.DistInfo, clock=time.monotonic) -> None:
        c = cfg.checkpoint
        self.every, self.is_main, self.clock = c.every_n_steps, info.is_main, clock
        self.auto = c.every_n_steps is None and c.interval == "auto"
        self.interval = None if (c.every_n_steps or self.auto) else c.interval
        self.mtbf_s = c.mtbf_hours * 3600 / info.num_nodes
        self.last = clock()
        self.measuring = False

    def due(self, step: int) -> bool:
        if self.every:
            return step % self.every == 0
        if self.auto and self.interval is None:
            self.measuring = True  # the first step after this start: save now, measure C
            return True
        return (self.is_main and self.interval is not None
                and self.clock() - self.last >= self.interval)

    def saved(self, saver) -> None:
        self.last = self.clock()
        if self.measuring and self.interval is None:
            saver.wait()  # the first save's write time is C
            self.interval = schedule.young_daly_interval(max(saver.last_write_s, 1e-3), self.mtbf_s)
            log.info("checkpoint interval auto: C=%.3fs M=%.0fs -> every %.3gs (Young/Daly)",
                     saver.last_write_s, self.mtbf_s, self.interval)
            self.last = self.clock()


def save_run(run, saver: Checkpointer, monitor, reason: str, block: bool) -> None:
    """What a checkpoint of `run` holds, written by `saver`. Collective (every rank calls it): every
    rank writes its shard; rank 0 the meta (step, schedule, scaler, config, best) and the marker."""
    run.extra["saved_step"] = run.step
    meta = {"step": run.step, "epoch": run.epoch, "step_in_epoch": run.step_in_epoch,
            "scheduler": run.sched.state_dict(), "scaler": run.scaler.state_dict(),
            "world_size": run.info.world_size, "strategy": run.strategy,
            "global_batch": run.plan.global_batch, "config": run.cfg.to_dict(),
            "config_hash": run.cfg.hash(), "input_shape": run.extra["input_shape"],
            "torch_version": torch.__version__,
            "trainkit_version": trainkit.__version__, "best": run.extra.get("best")}
    blocked = saver.save(run.wrapped, run.opt, meta, run.step,
                         block=block or not run.cfg.checkpoint.async_save)
    monitor.write("checkpoint", step=run.step, reason=reason, blocked_s=blocked,
                  write_s=saver.last_write_s if block else None)
    run.extra["checkpoint_blocked_s"] = blocked
