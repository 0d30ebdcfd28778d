"""`trainkit train --up --down`: apply, train and destroy in one command, the destroy whatever
happens (a failed apply, a failed or preempted run, Ctrl-C), as SkyPilot's `sky launch --down`.

`make cluster train destroy` runs this one command, so a failing train no longer stops make
before its `destroy`. The one case left up on purpose: the workspace or the cluster is busy with
another command or run (exit 8); destroying it would stop someone else's work, so the error says
so and names the destroy command instead.
"""

from __future__ import annotations

import shlex
from contextlib import contextmanager
from typing import Any, Callable, Iterator

import click

from trainkit import errors
from trainkit.commands.ops import destroy_cluster
from trainkit.errors import LockedError, TrainkitError


@contextmanager
def torn_down(load: Callable[[], tuple[Any, Any]], spec: str, workdir: str | None) -> Iterator[None]:
    """Run the body, then destroy the cluster (as `trainkit destroy --yes`) whatever happened.
    `load()` gives (cluster, workspace) as they are after the body (an apply
    may have chosen a zone of a `zone:` list).

    The body's own error is raised again after a successful destroy, with a note saying the
    cluster was destroyed. When the destroy fails, its error (exit 7, or 13 for credentials) is
    raised, with a note naming the body's failure: a cluster that may still bill comes first.
    A LockedError from the body destroys nothing (another command or run uses the cluster).
    """
    where = f" --workdir {shlex.quote(workdir)}" if workdir else ""
    remove = f"trainkit destroy {shlex.quote(spec)}{where} --yes"
    try:
        yield
    except LockedError as busy:
        busy.append_note(f"--down destroyed nothing: another command or run is using the cluster; "
                         f"once it is done: `{remove}`")
        raise
    except (Exception, KeyboardInterrupt) as err:
        cluster, ws = _destroy(load, remove, err)
        if isinstance(err, TrainkitError):
            err.append_note(f"--down: cluster {cluster.name} was destroyed after this failure; run "
                            f"results are kept in {ws.runs_dir}")
            if err.exit_code == 130:  # "the run keeps running": not any more
                err.fix = None
        raise
    _destroy(load, remove, None)


def _destroy(load: Callable[[], tuple[Any, Any]], remove: str, cause: BaseException | None) -> tuple[Any, Any]:
    """Destroy the cluster; returns (cluster, workspace). On failure raise the destroy's error (a
    second Ctrl-C: exit 130) with notes naming `cause` and the command that finishes the job."""
    why = "the run is over" if cause is None else "after a failure"
    try:
        cluster, ws = load()
        click.echo(f"--down: destroying cluster {cluster.name} ({why})", err=True)
        destroy_cluster(cluster, ws, yes=True, fmt="stderr")  # stdout is the run's
    except KeyboardInterrupt:
        raise TrainkitError("interrupted while --down destroyed the cluster: it may still exist and bill",
                            fix=f"finish it: `{remove}`", exit_code=130) from cause
    except TrainkitError as failed:
        if cause is not None:
            failed.append_note(f"before the destroy: {_describe(cause)}")
        failed.append_note(f"--down could not destroy the cluster: it may still bill; finish it with `{remove}`")
        raise failed from cause
    return cluster, ws


def _describe(err: BaseException) -> str:
    if isinstance(err, TrainkitError):
        return f"{err.message} (exit {err.exit_code})"
    if isinstance(err, KeyboardInterrupt):
        return "interrupted (Ctrl-C)"
    return f"{type(err).__name__}: {err} (exit {errors.UNEXPECTED})"
