"""Commands that change or inspect a cluster: plan, apply, destroy, status, ssh (train: jobs.py).

Each parses its options, takes the workspace lock, calls one `trainkit.cluster.lifecycle` function and
renders the result. Exit codes per phase are in `trainkit.errors`.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

import click

from trainkit import clouds, errors
from trainkit.clouds.base import NODES_LOCAL
from trainkit.cluster import lifecycle, listing, registry
from trainkit.commands.options import (
    FORMATS,
    ask,
    dump_json,
    format_option,
    load,
    next_steps,
    prices_option,
    require_applied,
    say,
    spec_arg,
    spec_args,
    spec_argument,
    workdir_option,
    yes_option,
)
from trainkit.commands.options import out_file as out_file_check
from trainkit.errors import InputError, LockedError
from trainkit.provision.node import read_nodes
from trainkit.runs import closing, controller_keys, handoff
from trainkit.runs import status as run_status
from trainkit.stack.review_render import money, to_markdown, to_text
from trainkit.util import progress
from trainkit.workspace import write_atomic


def _load(spec: str, workdir: str | None, price_file: str | None = None):
    """(cluster, workspace), quiet: the commands that act on the size print its warnings."""
    return load(spec, workdir, price_file)


@click.command()
@spec_argument
@workdir_option
@prices_option
@format_option(FORMATS, "markdown pastes into a pull request; json is stable for CI.")
@click.option("--out", "out_file", type=click.Path(dir_okay=False), callback=out_file_check,
              help="Also write the review here.")
@click.option("--detailed-exitcode", is_flag=True,
              help="Exit as terraform's -detailed-exitcode: 0 no changes, 2 changes pending, 1 any failure "
                   "(a blocking finding included; the message names its own code).")
@click.option("--upgrade-image", is_flag=True,
              help="Replace every node onto the current image (a node's image is otherwise fixed when it is created).")
def plan(spec, workdir, price_file, fmt, out_file, detailed_exitcode, upgrade_image):
    """Render, terraform plan, and review: changes by role, cost per hour/day, findings.

    Exit codes: 0 ok, 11 a blocking finding (e.g. budget exceeded, SSH open to the internet),
    3 terraform failed, 2 bad spec. With --detailed-exitcode, terraform's: 0 no changes,
    2 changes pending, 1 any failure.

    \b
    Example:
      trainkit plan examples/clusters/aws.yaml --format markdown --out review.md
    """

    if out_file and Path(out_file).resolve() in (Path(spec).resolve(), Path(price_file or spec).resolve()):
        raise InputError(f"--out {out_file} is the spec or price file; the review would overwrite it",
                         fix="write the review to another file, e.g. --out review.md")
    cluster, ws = load(spec, workdir, price_file, warn=True)
    refuse_upgrade_image(cluster, upgrade_image)
    with ws.lock("plan"):
        rev = lifecycle.plan(cluster, ws, upgrade_image=upgrade_image)
    text = {"text": to_text, "markdown": to_markdown,
            "json": dump_json}[fmt](rev)
    click.echo(text)
    if out_file:
        write_atomic(Path(out_file), text if text.endswith("\n") else text + "\n")
    if rev["blocking"]:
        if detailed_exitcode:
            click.echo(f"blocking finding: exit {errors.PLAN_BLOCKED} without --detailed-exitcode; with it "
                       f"{errors.UNEXPECTED}, as terraform's for any failure", err=True)
        sys.exit(errors.UNEXPECTED if detailed_exitcode else errors.PLAN_BLOCKED)
    if detailed_exitcode and rev["changes"]["has_changes"]:
        sys.exit(errors.DETAILED_CHANGES)


@click.command()
@spec_argument
@workdir_option
@prices_option
@yes_option("Do not ask; apply a new plan if the saved one is stale.")
@click.option("--no-provision", is_flag=True, help="Only terraform: skip waiting for SSH and Ansible.")
@click.option("--upgrade-image", is_flag=True,
              help="Replace every node onto the current image (a node's image is otherwise fixed when it is created).")
@click.option("--allow-storage-loss", is_flag=True,
              help="With --yes: apply a plan that destroys or replaces data disks or the shared file "
                   "system (their data is lost). Without --yes the question after the review decides.")
@format_option()
def apply(spec, workdir, price_file, yes, no_provision, upgrade_image, allow_storage_loss, fmt):
    """Create or update the cluster, then provision it.

    Plans again first, refreshed against the cloud: the plan saved by `trainkit plan` is applied
    without asking only if the cloud still matches it (a reclaimed node makes a new plan, which is
    shown and confirmed). Re-running on an existing cluster is safe: no changes, nothing recreated.

    \b
    Example:
      trainkit plan examples/clusters/aws.yaml && trainkit apply examples/clusters/aws.yaml
    """

    cluster, ws = load(spec, workdir, price_file, warn=True)
    refuse_upgrade_image(cluster, upgrade_image)
    apply_cluster(cluster, ws, yes, provision=not no_provision, upgrade_image=upgrade_image, fmt=fmt,
                  allow_storage_loss=allow_storage_loss)


def apply_cluster(cluster, ws, yes: bool, provision: bool = True, upgrade_image: bool = False,
                  fmt: str = "text", allow_storage_loss: bool = False) -> None:
    """`trainkit apply`'s work and output: the plan shown and confirmed (or `yes`), applied under
    the workspace lock, the nodes printed (fmt "json": the JSON on stdout, the lines on stderr;
    "stderr": only the lines, on stderr, as `train --up` wants them: its stdout is the run's). A
    plan that destroys storage is applied after the question, or with `yes` only when
    `allow_storage_loss` (lifecycle.apply's storage_loss)."""

    def confirm(rev) -> bool:
        click.echo(to_text(rev), err=True)
        if rev["blocking"]:
            raise InputError("the plan has blocking findings; fix the spec and plan again",
                             exit_code=errors.PLAN_BLOCKED)
        return yes or ask(lambda: click.confirm("Apply this plan?", default=False, err=True), "apply")

    with ws.lock("apply"):
        before = remember(lambda: (registry.remember_apply(cluster.name, ws.root, cluster.source,
                                                           listing.target_of(cluster)),))  # None: not written
        try:
            result = lifecycle.apply(cluster, ws, confirm, provision=provision, upgrade_image=upgrade_image,
                                     storage_loss=allow_storage_loss or not yes)
        except errors.TrainkitError as err:  # refused or declined before terraform ran: not INIT
            if before and (isinstance(err, (InputError, lifecycle.Declined)) or err.exit_code in _NOTHING_CHANGED):
                remember(lambda: registry.restore(ws.root, before[0]))
            raise
    nodes = result.outputs.get("nodes") or []
    if fmt == "json":
        click.echo(dump_json({"cluster": cluster.name, "cloud": cluster.spec.cloud, "workspace": str(ws.root),
                              "nodes": nodes, "provisioned": result.provisioned}))
    say(fmt, f"cluster {cluster.name} is up: {len(nodes) or cluster.nodes} node(s); workspace {ws.root}")
    for node in nodes:
        say(fmt, f"  {node['name']}: private {node['private_ip']}, public {node.get('public_ip') or '-'}")
    if fmt != "stderr":  # `train --up` goes on to train
        spec = spec_args(cluster, ws)
        next_steps(fmt, [(f"trainkit train {spec} --config digits", "start a run (a YAML file or a built-in name)"),
                         (f"trainkit status {spec}", "the nodes, and what they cost so far"),
                         (f"trainkit destroy {spec} --yes", "stop the billing; run results are kept")])


@click.command()
@spec_argument
@workdir_option
@yes_option("Do not ask for the cluster name (nor before sweeping).")
@click.option("--sweep", is_flag=True,
              help="Also delete resources still tagged trainkit-cluster=<name> after terraform destroy.")
@format_option()
def destroy(spec, workdir, yes, sweep, fmt):
    """Destroy the cluster its state backend holds, then ask the cloud what is left; keep run artifacts.

    Works from any workspace: the state backend, not this folder, says what exists. A backend that
    cannot be reached fails the command. Resources still carrying the cluster's tag afterwards (say,
    dropped from the state) are listed and the command fails; --sweep deletes them. Keys, terraform
    files and logs are removed only once nothing is left; runs/ and review.md are kept.

    \b
    Example:
      trainkit destroy examples/clusters/aws.yaml --yes
      trainkit destroy examples/clusters/aws.yaml --sweep
    """

    cluster, ws = _load(spec, workdir)
    for run_dir in run_status.active_runs(cluster, ws) if ws.inventory_yml.exists() else []:
        progress.info(f"warning: run {run_dir.name} is still running on the cluster: destroy stops it "
                      f"(SIGTERM: it saves a checkpoint) and fetches its results into {run_dir} first")
    if not yes:
        typed = ask(lambda: click.prompt(f"Type the cluster name ({cluster.name}) to destroy it", err=True),
                    "destroy")
        if typed != cluster.name:
            raise InputError(f"{typed!r} is not {cluster.name!r}; nothing was destroyed")
    # from a controller's workspace (a cancelled --down run: handoff.down_after_cancel): its key
    # leaves the hosts after the destroy, whether or not it left anything
    with controller_keys.at_the_end(controller_keys.revoker(cluster, ws, ws.root.parent.name)):
        destroy_cluster(cluster, ws, yes, sweep, fmt)


def destroy_cluster(cluster, ws, yes: bool, sweep: bool = False, fmt: str = "text") -> None:
    """`trainkit destroy`'s work and output once confirmed (also `train --down`): open runs
    stopped and fetched, the cluster destroyed, leftovers reported (swept with `sweep`). `fmt`
    as apply_cluster's."""

    def confirm_sweep(found) -> bool:
        click.echo(f"still in the cloud, tagged trainkit-cluster={cluster.name}:", err=True)
        for res in found:
            click.echo(f"  {res['type']} {res['id']}", err=True)
        return yes or ask(lambda: click.confirm(f"Delete these {len(found)} resource(s)?", default=False,
                                                err=True), "destroy --sweep")

    result, closed = closing.destroy(cluster, ws, sweep=sweep, confirm_sweep=confirm_sweep, unreachable_ok=yes)
    remember(lambda: registry.remember_destroy(ws.root))
    for run_id, closed_as in closed:
        if closed_as != "unreachable":  # that one was warned about
            click.echo(f"run {run_id} ({closed_as}): results fetched into {ws.runs_dir / run_id}", err=True)
    if fmt == "json":
        click.echo(dump_json({"cluster": cluster.name, "destroyed": not result.get("note"), "note": result.get("note"),
                              "swept": result.get("swept", []), "leftover_check": result.get("leftover_check"),
                              "runs_closed": [{"run_id": r, "status": s} for r, s in closed],
                              "not_cleaned": result.get("not_cleaned", []),
                              "runs_dir": str(ws.runs_dir)}))
    if result.get("note"):
        say(fmt, f"cluster {cluster.name}: {result['note']}")
    else:
        say(fmt, f"cluster {cluster.name} destroyed; run artifacts kept in {ws.runs_dir}")
    for res in result.get("swept", []):
        say(fmt, f"  swept {res['type']} {res['id']}")
    for host in result.get("not_cleaned", []):   # a warning: nothing bills (cluster/host_cleanup.py)
        click.echo(f"warning: host {host['host']} ({host['address']}) did not answer on SSH and was not "
                   f"cleaned: {host['fix']}", err=True)
    if result.get("leftover_check"):
        say(fmt, f"  {result['leftover_check']}")


@click.command()
@spec_arg(required=False)
@workdir_option
@format_option()
def status(spec, workdir, fmt):
    """Show the cluster's nodes as the cloud has them now, price per hour and cost since apply;
    with no SPEC, every cluster this machine knows.

    Cloud targets read the state backend and refresh it against the cloud (nothing is changed),
    so any workspace sees the same cluster, and a node reclaimed or deleted outside trainkit shows.
    A cluster never applied (or destroyed) is "not created", exit 0, on every target.

    With no SPEC: one row per cluster applied on this machine (NAME, TARGET, NODES, STATUS, COST/H,
    SO FAR, TTL/IDLE, LAUNCHED, WORKSPACE), from each workspace's own files: no cloud is asked, so
    a cloud row is as of the last command there. STATUS is UP, INIT (an apply started and left no
    nodes: it may bill; `trainkit status NAME` asks the cloud) or DOWN (destroyed). `apply` adds a
    cluster to the list; removing its workspace folder removes it. The list lives in
    $TRAINKIT_STATE_DIR (default $XDG_STATE_HOME/trainkit, else ~/.local/state/trainkit).

    \b
    Example:
      trainkit status                       # every cluster on this machine
      trainkit status local-demo            # one, by name
      trainkit status examples/clusters/aws.yaml --format json
    """

    if not spec:
        if workdir:
            raise click.UsageError("--workdir goes with a SPEC or NAME; `trainkit status` alone lists every cluster")
        _list_clusters(fmt)
        return
    cluster, ws = _load(spec, workdir)
    handoff.sync_runs(cluster, ws)   # runs a controller holds: their records from it
    try:
        with ws.lock("status"):
            out = lifecycle.status(cluster, ws)
    except LockedError as busy:  # e.g. during `trainkit train`: show the cache rather than nothing
        progress.info(f"{busy.message}: showing the nodes cached by the last command, not asking the cloud")
        out = lifecycle.status(cluster, ws, live=False)
    if fmt == "json":
        click.echo(dump_json(out))
        return
    state = "part-way (may still bill)" if out.get("held") and not out["nodes"] else \
        "up" if out["exists"] else "not created"
    click.echo(f"{out['cluster']} ({out['cloud']}): {state}" + (f"; state: {out['backend']}" if out.get("backend") else ""))
    if out.get("held") and not out["nodes"]:
        click.echo(f"  the state holds {len(out['held'])} resource(s) but no nodes: a destroy or apply stopped "
                   f"part-way, and they may still bill; finish it with `trainkit destroy {spec}` "
                   f"(or `trainkit apply {spec}`)")
        for address in out["held"]:
            click.echo(f"    {address}")
    for address in out.get("drift") or []:
        click.echo(f"  gone from the cloud (still in the state): {address}; `trainkit apply` replaces it")
    for node in out["nodes"]:
        click.echo(f"  {node['name']}: private {node.get('private_ip')}, public {node.get('public_ip') or '-'}")
    for name in out.get("lost") or []:
        click.echo(f"  {name}: lost (in the spec, not in the cluster: a replacement the cloud refused in every "
                   f"candidate, or a node not applied yet); {out['lost_fix']}")
    if out.get("per_hour") is not None:
        click.echo(f"  {money(out['per_hour'], out['cost'])}/h ({out['cost']['billing'].replace('_', '-')}); "
                   f"so far {out.get('cost_so_far', 0):,.2f} {out['currency']}")
        click.echo(f"  price basis: {out['cost']['items'][0]['basis']}")
        for warning in out["cost"].get("warnings", []):
            click.echo(f"  warning: {warning}")
    if out.get("ttl_deadline"):
        click.echo(f"  ttl: released by {out['ttl_deadline']} ({out['ttl_left_hours']:g} h left)")
    if out.get("idle_after_minutes"):
        click.echo(f"  idle: each node shuts down after {out['idle_after_minutes']:g} idle minutes")
    click.echo(f"  runs: {', '.join(out['runs']) or 'none'}")
    for run_id, job in (out.get("jobs") or {}).items():   # a scheduler's cluster: its queue now
        click.echo(f"  {run_id}: Slurm job {job['slurm_job']} {job['state'] or 'unknown to the scheduler'}")


def _list_clusters(fmt: str) -> None:
    """`trainkit status` alone: the known clusters (cluster/listing.py), as a table or JSON."""
    rows = listing.rows(registry.listed())
    if fmt == "json":
        click.echo(dump_json({"clusters": rows}))
    elif rows:
        click.echo(listing.table(rows))
    else:
        click.echo("no clusters on this machine yet: `trainkit apply SPEC` creates one", err=True)


# An apply that failed with these changed nothing (lifecycle.apply: bad input, a declined plan, a
# blocking finding, a missing tool, a busy workspace); Ctrl-C may have, and keeps its INIT row.
_NOTHING_CHANGED = (errors.PLAN_BLOCKED, errors.MISSING_TOOL, errors.LOCKED)


def remember(write):
    """Write the registry of known clusters and return what `write` returns (None on failure); a
    failure is a warning, never the command's: the cluster's work matters more than the list
    (`trainkit status` alone names the damage again)."""
    try:
        return write()
    except (errors.TrainkitError, OSError) as err:
        if isinstance(err, OSError):
            err = errors.TrainkitError(f"{err.strerror}: {err.filename}", fix="free space there or set TRAINKIT_STATE_DIR")
        progress.info(f"warning: {err.message} (this cluster may be missing from `trainkit status`); fix: {err.fix}")


@click.command()
@spec_argument
@workdir_option
@click.argument("node", required=False)
@format_option(help_text="json prints the node and the ssh command line instead of running it.")
def ssh(spec, workdir, node, fmt):
    """Open a shell on a node (default: the head node), through the head node if needed.

    \b
    Example:
      trainkit ssh examples/clusters/aws.yaml node-1
      trainkit ssh examples/clusters/aws.yaml --json   # {"node": ..., "argv": [...]}
    """

    cluster, ws = _load(spec, workdir)
    if cluster.room.node_source == NODES_LOCAL:
        raise InputError("the local target is this machine: no ssh needed",
                         fix=f"its files are in {ws.node_dir}")
    if cluster.room.has_module:
        with ws.lock("ssh"):
            lifecycle.sync(cluster, ws, need_ssh=True)  # the nodes and key as the state backend has them
    require_applied(cluster, ws)
    nodes = {n.name: n for n in read_nodes(ws.inventory_yml)[0]}
    name = node or next(iter(nodes))
    if name not in nodes:
        raise InputError(f"no node {name!r}", fix=f"nodes: {', '.join(nodes)}")
    if fmt == "json":
        click.echo(dump_json({"cluster": cluster.name, "node": name, "argv": nodes[name].ssh_argv()}))
        return
    os.execvp("ssh", nodes[name].ssh_argv())


def refuse_upgrade_image(cluster, upgrade_image: bool) -> None:
    """InputError (exit 2) for --upgrade-image on a target without an image to upgrade."""
    if upgrade_image and not cluster.room.has_module:
        raise InputError(f"--upgrade-image does nothing on {cluster.spec.cloud}: it replaces cloud nodes "
                         f"onto a new image, and serves the cloud targets ({', '.join(clouds.terraform_targets())})",
                         fix="drop --upgrade-image")
