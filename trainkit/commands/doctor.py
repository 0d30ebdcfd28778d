"""`trainkit doctor`: glue over trainkit.cluster.doctor (parse, call diagnose, render)."""

from __future__ import annotations

import click
from rich.console import Console
from rich.table import Table

from trainkit.clouds.base import NODES_SCHEDULER
from trainkit.cluster import doctor as doc
from trainkit.cluster import lifecycle, scheduler_doctor
from trainkit.cluster.doctor_verdict import FAILED, Thresholds
from trainkit.commands.options import (
    Finite,
    dump_json,
    format_option,
    load,
    require_applied,
    spec_argument,
    workdir_option,
)
from trainkit.errors import DOCTOR, TrainkitError

STYLE = {"ok": "green", "slow": "yellow", "failed": "red", "warn": "yellow", "skipped": "dim"}


@click.command()
@spec_argument
@workdir_option
@format_option(help_text="json: the whole report (also saved as <workspace>/doctor.json).")
@click.option("--size-mb", type=Finite(0.001, 8192), default=None,
              help="All-reduce buffer in MiB (default 16 on CPU nodes, 256 on GPU nodes).")
@click.option("--iters", type=click.IntRange(1, 1000), default=5, show_default=True,
              help="Timed all-reduce calls per test (after one warm-up call).")
@click.option("--slow-fraction", type=Finite(0.01, 1), default=Thresholds.slow_fraction, show_default=True,
              help="A node is slow when its best link's busbw is under this share of the reference.")
@click.option("--min-free-gb", type=Finite(0, 1e6), default=Thresholds.min_free_gb, show_default=True,
              help="Free space the data disk and shared storage must have.")
def doctor(spec, workdir, fmt, size_mb, iters, slow_fraction, min_free_gb):
    """Check every node before a paid run: GPUs (count and model vs the catalog, driver/CUDA,
    ECC, Xid errors, `dcgmi diag -r 1` where installed), free disk, the shared mount (present,
    writable, the same storage on every node), clock skew, and an all-reduce test (NCCL on GPUs,
    gloo on CPUs) across all nodes and per node pair, as nccl-tests' algbw/busbw. A verdict per
    node: ok, slow (a link under the threshold) or failed. Exit 12 when a node failed.
    `train` runs the same checks before its first attempt (`trainkit docs doctor`). On a Slurm
    cluster (`cloud: slurm`): sinfo's node states of the partition (down and drained nodes failed,
    with their Reason) and the probe on its idle nodes through srun; no all-reduce test.

    \b
    Example:
      trainkit doctor examples/clusters/hosts.yaml
      trainkit doctor cluster.yaml --json --size-mb 64
    """
    cluster, ws = load(spec, workdir)
    if cluster.room.has_module:
        with ws.lock("doctor"):
            lifecycle.sync(cluster, ws, need_ssh=True)  # the nodes and key as the state backend has them
    require_applied(cluster, ws)
    opts = doc.Options(size_bytes=int(size_mb * 2**20) if size_mb else None, iters=iters,
                       thresholds=Thresholds(slow_fraction=slow_fraction, min_free_gb=min_free_gb))
    as_json = fmt == "json"
    def echo(m: str) -> None:
        click.echo(m, err=True)

    if cluster.room.node_source == NODES_SCHEDULER:   # sinfo, then the probe on the idle nodes through srun
        report = scheduler_doctor.diagnose(cluster, ws, opts.thresholds, echo)
    else:
        report = doc.diagnose(cluster, ws, opts, echo=echo)
    if not as_json:
        Console().print(render(report))
    elif not report["failed"]:
        click.echo(dump_json(report))
    if report["failed"]:  # with --json the report is the error's `result`: one document on stdout
        err = TrainkitError(f"doctor: failed node(s): {', '.join(report['failed'])}",
                            fix="see the checks above and `trainkit docs doctor`", exit_code=DOCTOR)
        err.data = report
        raise err


def render(report: dict) -> Table:
    """One row per check of every node, the node's verdict on its first row."""
    net = report.get("network") or {}
    title = f"{report['cluster']}: {len(report['nodes'])} node(s), {report['wall_s']:.1f}s"
    if net.get("world"):
        w = net["world"]
        title += (f"; {net['backend']} all-reduce {net['bytes'] / 2**20:.0f} MiB: algbw {w['algbw_gbs']:.3f} GB/s,"
                  f" busbw {w['busbw_gbs']:.3f} GB/s")
        if net.get("rated_busbw_gbs"):
            title += f" (rated {net['rated_busbw_gbs']:.3f} GB/s)"
    t = Table(title=title, title_justify="left")
    for col in ("NODE", "VERDICT", "CHECK", "STATUS", "DETAIL"):
        t.add_column(col, no_wrap=col != "DETAIL")
    for node in report["nodes"]:
        verdict = node["verdict"]
        for i, c in enumerate(node["checks"]):
            first = i == 0
            t.add_row(node["node"] if first else "", f"[{STYLE[verdict]}]{verdict}[/]" if first else "",
                      c["name"], f"[{STYLE[c['status']]}]{c['status']}[/]", c["detail"])
    return t


__all__ = ["doctor", "FAILED"]
