"""Commands that change or inspect a cluster: plan, apply, destroy, status, ssh (train: jobs.py).

Each parses its options, takes the workspace lock, calls one `trainkit.lifecycle` function and
renders the result. Exit codes per phase are in `trainkit.errors`.
"""

from __future__ import annotations

import json
import os
import shlex
import sys
from pathlib import Path

import click

from trainkit import errors, lifecycle, progress
from trainkit.errors import InputError

spec_argument = click.argument("spec", type=click.Path(dir_okay=False))
workdir_option = click.option("--workdir", type=click.Path(file_okay=False),
                              help="Workspace folder (default .trainkit/<cluster name>).")
prices_option = click.option("--prices", "price_file", type=click.Path(exists=True, dir_okay=False),
                             help="Your own price file (overrides catalog prices).")


def _load(spec: str, workdir: str | None, price_file: str | None = None):
    from trainkit.resolve import load_cluster
    from trainkit.workspace import Workspace

    cluster = load_cluster(spec, price_file)
    for warning in cluster.warnings:
        progress.info(f"warning: {warning}")
    return cluster, Workspace.for_cluster(cluster.name, workdir)


@click.command()
@spec_argument
@workdir_option
@prices_option
@click.option("--format", "fmt", type=click.Choice(["text", "markdown", "json"]), default="text",
              show_default=True, help="markdown pastes into a pull request; json is stable for CI.")
@click.option("--out", "out_file", type=click.Path(dir_okay=False), help="Also write the review here.")
@click.option("--detailed-exitcode", is_flag=True,
              help="Exit 10 when the plan has changes (0 when none), like terraform's flag.")
def plan(spec, workdir, price_file, fmt, out_file, detailed_exitcode):
    """Render, terraform plan, and review: changes by role, cost per hour/day, findings.

    Exit codes: 0 ok, 10 changes pending (with --detailed-exitcode), 11 a blocking finding
    (e.g. budget exceeded, SSH open to the internet), 3 terraform failed, 2 bad spec.

    \b
    Example:
      trainkit plan examples/clusters/aws.yaml --format markdown --out review.md
    """
    from trainkit.review import to_markdown, to_text

    cluster, ws = _load(spec, workdir, price_file)
    with ws.lock("plan"):
        rev = lifecycle.plan(cluster, ws)
    text = {"text": to_text, "markdown": to_markdown,
            "json": lambda r: json.dumps(r, indent=2, sort_keys=True)}[fmt](rev)
    click.echo(text)
    if out_file:
        Path(out_file).write_text(text if text.endswith("\n") else text + "\n")
    if rev["blocking"]:
        sys.exit(errors.PLAN_BLOCKED)
    if detailed_exitcode and rev["changes"]["has_changes"]:
        sys.exit(errors.PLAN_CHANGES)


@click.command()
@spec_argument
@workdir_option
@prices_option
@click.option("--yes", is_flag=True, help="Do not ask; apply a new plan if the saved one is stale.")
@click.option("--no-provision", is_flag=True, help="Only terraform: skip waiting for SSH and Ansible.")
def apply(spec, workdir, price_file, yes, no_provision):
    """Create or update the cluster (terraform apply of the saved plan), then provision it.

    Re-running on an existing cluster is safe: no changes, nothing recreated.

    \b
    Example:
      trainkit plan examples/clusters/aws.yaml && trainkit apply examples/clusters/aws.yaml
    """
    from trainkit.review import to_text

    cluster, ws = _load(spec, workdir, price_file)

    def confirm(rev) -> bool:
        click.echo(to_text(rev), err=True)
        if rev["blocking"]:
            raise InputError("the plan has blocking findings; fix the spec and plan again",
                             exit_code=errors.PLAN_BLOCKED)
        return yes or click.confirm("Apply this plan?", default=False, err=True)

    with ws.lock("apply"):
        result = lifecycle.apply(cluster, ws, confirm, provision=not no_provision)
    nodes = result.outputs.get("nodes") or []
    click.echo(f"cluster {cluster.name} is up: {len(nodes) or cluster.nodes} node(s); "
               f"workspace {ws.root}")
    for node in nodes:
        click.echo(f"  {node['name']}: private {node['private_ip']}, public {node.get('public_ip') or '-'}")


@click.command()
@spec_argument
@workdir_option
@click.option("--yes", is_flag=True, help="Do not ask for the cluster name.")
def destroy(spec, workdir, yes):
    """Destroy the cluster, check nothing is left, keep run artifacts.

    Keys and terraform files are removed only once the state is empty.

    \b
    Example:
      trainkit destroy examples/clusters/aws.yaml --yes
    """
    cluster, ws = _load(spec, workdir)
    if not yes:
        typed = click.prompt(f"Type the cluster name ({cluster.name}) to destroy it", err=True)
        if typed != cluster.name:
            raise InputError(f"{typed!r} is not {cluster.name!r}; nothing was destroyed")
    with ws.lock("destroy"):
        result = lifecycle.destroy(cluster, ws)
    if result.get("note"):
        click.echo(f"cluster {cluster.name}: {result['note']}")
    else:
        click.echo(f"cluster {cluster.name} destroyed; run artifacts kept in {ws.runs_dir}")


@click.command()
@spec_argument
@workdir_option
@click.option("--json", "as_json", is_flag=True, help="Machine-readable output.")
def status(spec, workdir, as_json):
    """Show the cluster's nodes, price per hour and cost since apply.

    \b
    Example:
      trainkit status examples/clusters/aws.yaml --json
    """
    cluster, ws = _load(spec, workdir)
    out = lifecycle.status(cluster, ws)
    if as_json:
        click.echo(json.dumps(out, indent=2, sort_keys=True))
        return
    click.echo(f"{out['cluster']} ({out['cloud']}): {'up' if out['exists'] else 'not created'}")
    for node in out["nodes"]:
        click.echo(f"  {node['name']}: private {node.get('private_ip')}, public {node.get('public_ip') or '-'}")
    if out.get("per_hour") is not None:
        click.echo(f"  {out['per_hour']:.2f} {out['currency']}/h; so far {out.get('cost_so_far', 0):.2f}")
    click.echo(f"  runs: {', '.join(out['runs']) or 'none'}")


@click.command()
@spec_argument
@workdir_option
@click.argument("node", required=False)
def ssh(spec, workdir, node):
    """Open a shell on a node (default: the head node), through the head node if needed.

    \b
    Example:
      trainkit ssh examples/clusters/aws.yaml node-1
    """
    import yaml

    from trainkit.inventory import inventory_hosts

    cluster, ws = _load(spec, workdir)
    if cluster.spec.cloud == "local":
        raise InputError("the local target is this machine: no ssh needed",
                         fix=f"its files are in {ws.root / 'node'}")
    if not ws.inventory_yml.exists():
        raise InputError(f"{cluster.name} has no inventory yet", fix="run `trainkit apply` first")
    hosts = inventory_hosts(yaml.safe_load(ws.inventory_yml.read_text()))
    name = node or next(iter(hosts))
    if name not in hosts:
        raise InputError(f"no node {name!r}", fix=f"nodes: {', '.join(hosts)}")
    os.execvp("ssh", ssh_argv(hosts[name]))


def ssh_argv(host: dict) -> list[str]:
    """The ssh command line for an inventory host (its key, port and jump host)."""
    argv = ["ssh", "-o", "StrictHostKeyChecking=accept-new"]
    if host.get("ansible_ssh_private_key_file"):
        argv += ["-i", host["ansible_ssh_private_key_file"]]
    if host.get("ansible_port"):
        argv += ["-p", str(host["ansible_port"])]
    argv += shlex.split(host.get("ansible_ssh_common_args") or "")
    return argv + [f"{host.get('ansible_user', 'root')}@{host['ansible_host']}"]
