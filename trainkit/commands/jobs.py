"""Commands for runs: train (start / attach / resume / recover), logs, runs, cancel.

Glue only: parse, call trainkit.runs.start (a run's start: lock, record, launch, follow) /
trainkit.runs.closing / trainkit.runs.status, render. docs/runs.md explains runs, recovery and the contract.
"""

from __future__ import annotations

import json
import shlex
from contextlib import nullcontext
from pathlib import Path

import click

from trainkit.cluster import lifecycle
from trainkit.commands import complete
from trainkit.commands.down import torn_down
from trainkit.commands.ops import apply_cluster
from trainkit.commands.options import (
    Finite,
    dump_json,
    format_option,
    next_steps,
    require_applied,
    spec_args,
    spec_argument,
    workdir_option,
    yes_option,
)
from trainkit.commands.options import load as _load
from trainkit.errors import FORMAT_VERSION, InputError
from trainkit.runs import closing, controller_keys, handoff, recover, start
from trainkit.runs import record as runs
from trainkit.runs import status as run_status
from trainkit.util.nodeargs import http_url


@click.command()
@spec_argument
@workdir_option
@click.option("--config", "config", default=None, shell_complete=complete.train_configs,
              help="Training config: a YAML file, or a built-in name (`trainkit examples`). "
                   "Default: digits.")
@click.argument("overrides", nargs=-1)
@click.option("--detach", is_flag=True, help="Start the run and return its id; do not wait. With --recover: "
              "the recovery loop goes to the spec's controller host (`trainkit docs runs`).")
@click.option("--attach", "attach", metavar="RUN", shell_complete=complete.run_ids,
              callback=lambda ctx, p, v: _run_id(v, "--attach"), help="Re-attach to a running RUN (stream, wait, fetch).")
@click.option("--resume", "resume", metavar="RUN", shell_complete=complete.run_ids,
              callback=lambda ctx, p, v: _run_id(v, "--resume"),
              help="Continue RUN from its newest checkpoint.")
@click.option("--force", is_flag=True, help="With --resume: accept a changed config.")
@click.option("--recover", "recover_", is_flag=True, help="Keep the job going through reclaims until it completes.")
@click.option("--max-recoveries", type=click.IntRange(0), default=3, show_default=True)
@click.option("--max-restarts-on-errors", type=click.IntRange(0), default=0, show_default=True,
              help="Relaunches after a failure of the job itself (not a reclaim).")
@click.option("--backoff", "backoff_s", type=Finite(0, 86400), default=60.0, show_default=True,
              help="Seconds before the first relaunch; doubles each time (max 900).")
@click.option("--poll", "poll_s", type=Finite(0.2, 3600), default=2.0, show_default=True,
              help="Seconds between looks at the nodes.")
@click.option("--notice-url", callback=lambda ctx, param, url: url if url is None else http_url(url, "--notice-url"),
              help="Spot-termination metadata URL the nodes poll, http:// or https:// (default: the "
              "cloud's, when spot is on).")
@click.option("--notice-poll", "notice_poll_s", type=Finite(0.2, 3600), default=5.0, show_default=True)
@click.option("--no-doctor", is_flag=True, help="Start without `trainkit doctor`'s node checks (exit 12 "
              "on a failed node; with --recover they also run after every replacement; `trainkit docs doctor`).")
@click.option("--up", is_flag=True, help="Apply the cluster first (as `trainkit apply`), after the config is checked.")
@click.option("--down", is_flag=True, help="Destroy the cluster when the run ends, whatever happens (failure, "
              "preemption, Ctrl-C; `trainkit destroy --yes`): nothing is left billing. With --recover --detach "
              "and a controller host, the controller does it. Default: the spec's `down:`.")
@yes_option("With --up: apply without asking.")
@format_option(help_text="json prints the run's result (its id with --detach) as one object.")
def train(spec, workdir, config, overrides, detach, attach, resume, force, recover_, no_doctor, up, down, yes, fmt,
          **tuning):
    """Start a training run on every node as a detached, supervised job; stream rank 0's log
    and fetch the results into runs/<run-id>/ (unless --detach).

    Each call starts a NEW run (id <name>-<timestamp>, its own checkpoint folder); --resume RUN
    continues one. Exit 0 completed, 75 preempted (checkpoint saved), 6 failed. `--up --down`
    applies, trains and destroys in one command (`make cluster train destroy` runs it): the
    destroy happens whatever the run does, and a failure keeps its own exit code.

    \b
    Example:
      trainkit train examples/clusters/local.yaml --config examples/train/digits.yaml epochs=5
      trainkit train cluster.yaml --config examples/custom/train.yaml --recover --detach
      trainkit train cluster.yaml --attach digits-20260101-120000
      trainkit train examples/clusters/local.yaml --up --down --yes   # apply, train, destroy
    """
    _check_flags(attach, resume, detach, config, overrides, force)
    cluster, ws = _load(spec, workdir, warn=up)  # --up: the sizing warnings, as `trainkit apply` prints them
    opts = recover.Options(detach=detach, recover=recover_, doctor=not no_doctor, **tuning)
    handed = handoff.wanted(cluster, opts)   # the loop and its --down go to the controller host
    # spec `down: true`: the default of --down, where a run is followed to its end (here or by a controller);
    # --down with a plain --detach is refused here (nothing would be there to destroy at the end)
    down = down or (cluster.spec.down and (handed or not detach))
    if down and detach and not handed:
        raise click.UsageError("--down destroys the cluster when the run ends: drop --detach (or --down), or hand "
                               "the run to a controller (--recover --detach with controller.host in the spec)")
    req = start.checked(cluster, ws, start.Request(spec, config, overrides, attach, resume, force, down=down,
                                                   opts=opts))
    if up:  # before anything exists: an example's placeholders are refused, nothing to tear down
        lifecycle.refuse_placeholders(cluster)
    # on a controller host (its own --attach): when the run ends for good its key leaves the hosts,
    # after --down's destroy (torn_down, inside)
    after = controller_keys.revoker(cluster, ws, attach) if attach else None
    with controller_keys.at_the_end(after), \
            torn_down(lambda: _load(spec, workdir), spec, workdir) if down and not handed else nullcontext():
        if up:
            apply_cluster(cluster, ws, yes, fmt="stderr")  # stdout is the run's
            cluster, ws = _load(spec, workdir)  # a `zone:`/`type:` list: where the apply came up
        require_applied(cluster, ws)
        result = start.run(cluster, ws, req, say=_say, echo=_echo)
    if fmt == "json":
        click.echo(dump_json(result))
    elif detach:
        click.echo(result["run_id"])  # stdout: the id alone, for scripts
    else:
        _done(result)
    if not detach:
        _next(spec_args(cluster, ws), result, down, fmt)


def _check_flags(attach, resume, detach, config, overrides, force) -> None:
    """UsageError for flags that do not go together."""
    if attach and (resume or detach or config or overrides):
        raise click.UsageError("--attach RUN follows a run that is going: drop --resume/--detach/"
                               "--config/overrides (to continue a stopped run: --resume RUN)")
    if force and not resume:
        raise click.UsageError("--force only goes with --resume RUN (it accepts a changed config)")


def _run_id(value: str | None, option: str) -> str | None:
    """A RUN value as given; InputError for an empty one (`--resume ""` started a new run)."""
    if value is not None and not value.strip():
        raise InputError(f"{option} {value!r}: not a run id (empty)",
                         fix=f"give a run id as `trainkit runs SPEC` lists it, e.g. {option} digits-20260101-120000")
    return value


def _say(line: str) -> None:
    click.echo(line, err=True)


def _echo(line: str) -> None:
    click.echo(f"  rank 0 | {line}", err=True)


def _next(spec: str, result: dict, down: bool, fmt: str) -> None:
    """The next-step block after a run: its curves (TensorBoard, when the run wrote them), the runs,
    and the destroy unless --down did it."""
    tb = Path(result["run_dir"]) / "tb"
    steps = [(f"tensorboard --logdir {shlex.quote(str(tb))}", "the run's curves")] if tb.is_dir() else []
    steps.append((f"trainkit runs {spec}", "every run: status, step, best metric"))
    if not down:
        steps.append((f"trainkit destroy {spec} --yes", "stop the billing; run results are kept"))
    next_steps(fmt, steps)


def _done(result: dict) -> None:
    click.echo(f"run {result['run_id']} finished: results in {result['run_dir']}")
    for key in ("val_acc", "test_acc", "resumed_from_step", "recoveries", "onnx"):
        if result.get(key) is not None:
            click.echo(f"  {key}: {result[key]}")


@click.command()
@spec_argument
@click.argument("run", required=False, shell_complete=complete.run_ids)
@workdir_option
@click.option("--rank", type=click.IntRange(0), help="A rank's log (engine runs: logs/rank-N.log).")
@click.option("--node", "node_index", type=click.IntRange(0), help="A node's log (logs/node-I.log).")
@click.option("--follow", "-f", is_flag=True, help="Keep printing until the run ends.")
@format_option(help_text="json prints JSON Lines: one {format_version, run_id, text} object per piece read.")
def logs(spec, run, workdir, rank, node_index, follow, fmt):
    """Print a run's log from the nodes (default: the newest run, rank 0; for a `command:` run,
    node 0's log).

    \b
    Example:
      trainkit logs examples/clusters/local.yaml --follow
      trainkit logs cluster.yaml digits-20260101-120000 --node 1
    """
    cluster, ws = _load(spec, workdir)
    handoff.sync_runs(cluster, ws)   # runs its controller holds: their record and logs from there
    try:
        run_dir = runs.resolve_run(ws.runs_dir, run)
    except runs.NoRuns as none:  # as `trainkit runs` says it: not an error, exit 0
        click.echo(none.message, err=True)
        return
    for data in run_status.read_log(ws, run_dir, rank, node_index, follow, on_wait=_waiting):
        text = data.decode(errors="replace")
        if fmt == "json":  # one line per object (JSON Lines), so --follow can be read as it comes
            click.echo(json.dumps({"format_version": FORMAT_VERSION, "run_id": run_dir.name, "text": text}))
        else:
            click.echo(text, nl=False)


def _waiting(text: str) -> None:
    """`logs --follow` while nothing is written yet: say what it waits for (stderr)."""
    click.echo(text, err=True)


@click.command("runs")
@spec_argument
@workdir_option
@format_option()
def runs_(spec, workdir, fmt):
    """List the cluster's runs: status (running / preempted / failed / completed / cancelled),
    step, best metric, wall time. Runs not yet final are looked up on the nodes.

    \b
    Example:
      trainkit runs examples/clusters/local.yaml --json
    """
    cluster, ws = _load(spec, workdir)
    handoff.sync_runs(cluster, ws)
    rows = [run_status.run_row(ws, p) for p in sorted(ws.runs_dir.glob("*"), key=runs.created_at)
            if (p / "run.json").is_file()] if ws.runs_dir.is_dir() else []
    if fmt == "json":
        click.echo(dump_json(rows))
        return
    if not rows:  # as `trainkit logs` says it
        click.echo(runs.no_runs_text(ws.runs_dir), err=True)
        return
    click.echo(f"{'RUN':<34} {'STATUS':<10} {'STEP':>6} {'BEST':<18} {'WALL':>8}")
    for r in rows:
        best = " ".join(f"{k}={v:.3f}" for k, v in r["best"].items())[:18] or "-"
        wall = f"{r['wall_s']:.0f}s" if r["wall_s"] is not None else "-"
        click.echo(f"{r['run_id']:<34} {r['status']:<10} {r['step'] if r['step'] is not None else '-':>6} "
                   f"{best:<18} {wall:>8}")
        if r.get("fault"):   # a full or read-only disk ended it, not the code or a lost node
            click.echo(f"{'':<34} storage fault: {r['fault']}")


@click.command()
@spec_argument
@click.argument("run", shell_complete=complete.run_ids)
@workdir_option
@click.option("--wait", "wait_s", type=Finite(0, 86400), default=120.0, show_default=True,
              help="Seconds to wait for the checkpoint and stop.")
@format_option()
def cancel(spec, run, workdir, wait_s, fmt):
    """Stop RUN cleanly: SIGTERM to the job on every node (it writes a checkpoint), then stop.
    Resume it later with `trainkit train --resume RUN`.

    \b
    Example:
      trainkit cancel examples/clusters/local.yaml digits-20260101-120000
    """
    cluster, ws = _load(spec, workdir)
    handoff.sync_runs(cluster, ws)
    run_dir = runs.resolve_run(ws.runs_dir, run)
    status, ended, where = closing.cancel(cluster, ws, run_dir, wait_s)
    if fmt == "json":
        click.echo(dump_json({"run_id": run_dir.name, "cancelled": not ended,
                              "status": status if ended else "cancelled", "results": str(where)}))
        return
    if ended:
        click.echo(f"run {run_dir.name} already {status}: nothing to cancel; results in {where}")
        return
    click.echo(f"run {run_dir.name} cancelled; results in {where}")
