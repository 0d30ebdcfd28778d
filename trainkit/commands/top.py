"""`trainkit top`: live per-node utilisation of a cluster (glue over trainkit.cluster.top)."""

from __future__ import annotations

import json
import time
from functools import partial

import click
from rich.console import Console
from rich.live import Live
from rich.text import Text

from trainkit.cluster import scheduler_top
from trainkit.cluster.doctor import busbw_line, last_report, node_busbw
from trainkit.cluster.top import collect, full_width, view
from trainkit.commands.options import (
    Finite,
    format_option,
    json_safe,
    load,
    require_applied,
    spec_argument,
    workdir_option,
)
from trainkit.errors import InputError
from trainkit.provision.node import read_nodes


@click.command()
@spec_argument
@workdir_option
@click.option("--once", is_flag=True, help="Sample once and exit (for scripts and CI).")
@format_option(help_text="json: rows as JSON (with --once: one array; else one array a line).")
@click.option("--interval", type=Finite(1, 60), default=1.0, show_default=True,
              help="Seconds between refreshes (each sample also spans one second).")
@click.option("--wide", is_flag=True, help="Every column, whatever the terminal's width.")
def top(spec, workdir, once, fmt, interval, wide):
    """Show each node's GPU utilisation and memory, CPU, memory, data-disk and network throughput,
    and the running job's samples/s and data wait, refreshed every second. Rows under the
    thresholds (GPU util < 80%, data wait > 10%) are flagged with the bottleneck verdict. Columns
    that do not fit the terminal are dropped, least useful first (--wide shows all): NODE, GPU%
    and GMEM (per GPU), CPU%, IOW% (iowait), MEM, DISK r/w and DUTIL (data disk MB/s, busy %),
    NET rx/tx (MB/s), SMP/s (samples/s), WAIT (data wait), VERDICT. On a Slurm cluster
    (`cloud: slurm`, or `scheduler: slurm`): one row per run in the queue, its job's state and the engine's step, loss,
    samples/s and data wait (trainkit reaches the login node only: no node counters).

    \b
    Example:
      trainkit top examples/clusters/hosts.yaml
      trainkit top examples/clusters/local.yaml --once --json
    """

    as_json = fmt == "json"
    cluster, ws = load(spec, workdir)
    if not ws.inventory_yml.exists():  # cloud targets too: top reads the nodes from the inventory
        require_applied(cluster, ws)
    nodes, _ = read_nodes(ws.inventory_yml)
    scheduler = cluster.batch_jobs
    # runs are Slurm batch jobs: the open runs' jobs, through the login node (cluster/scheduler_top.py)
    sample = partial(scheduler_top.rows, ws) if scheduler else partial(collect, nodes)
    noun = "run(s) in the scheduler's queue" if scheduler else "node(s)"
    try:
        report = last_report(ws)  # the last `trainkit doctor`: its busbw under the title, per node in JSON
    except InputError as err:  # only shown here: say so, and watch the nodes all the same
        click.echo(f"warning: {err.message} (ignored)\n  fix: {err.fix}", err=True)
        report = None
    doctor = busbw_line(report)
    busbw = node_busbw(report)
    if once:
        rows = with_busbw(sample(), busbw)
        if as_json:
            click.echo(json.dumps(json_safe(rows), indent=2, allow_nan=False))
        else:
            console = _console(wide, rows)
            console.print(view(rows, _title(f"{cluster.name}: {len(rows)} {noun}", doctor),
                               None if wide else console.width))
        return
    _live(cluster.name, sample, noun, interval, as_json, wide, doctor, busbw)


def with_busbw(rows: list[dict], busbw: dict[str, float]) -> list[dict]:
    """Each row with `doctor_busbw_gbs`: its node's best-pair busbw in the last doctor run (or None)."""
    return [{**r, "doctor_busbw_gbs": busbw.get(r["node"])} for r in rows]


def _console(wide: bool, rows: list[dict]) -> Console:
    """The console top prints on: the terminal's width (80 where it says 0 or less: COLUMNS=0
    printed nothing), and with --wide at least the table's full width."""
    width = Console().width
    width = width if width > 0 else DEFAULT_WIDTH
    return Console(width=max(width, full_width(rows)) if wide else width)


DEFAULT_WIDTH = 80  # rich's own default where no terminal width is known


def _title(head: str, doctor: str | None) -> str:
    return f"{head}\n{doctor}" if doctor else head


def _live(name, sample, noun, interval, as_json, wide, doctor, busbw) -> None:


    if as_json:  # one JSON array a line, for a pipe
        while True:
            click.echo(json.dumps(json_safe(with_busbw(sample(), busbw)), allow_nan=False))
            time.sleep(max(0.0, interval - 1))
    console = _console(wide, [])
    with Live(Text(f"{name}: sampling..."), auto_refresh=False, console=console) as live:
        width = None if wide else console.width
        try:
            while True:
                rows = sample()
                if wide:  # as wide as the table, whatever the terminal: no cell cut to an ellipsis
                    console.width = max(console.width, full_width(rows))
                live.update(view(rows, _title(f"{name}: {len(rows)} {noun}, {time.strftime('%H:%M:%S')} "
                                               "(Ctrl-C to quit)", doctor), width), refresh=True)
                time.sleep(max(0.0, interval - 1))
        except KeyboardInterrupt:
            pass
