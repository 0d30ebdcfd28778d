"""`trainkit top`: a per-node view of a running cluster (GPU, CPU, memory, disk, network, the job).

Each node runs trainkit/node/top_sampler.py (standard library; piped to its Python over ssh with the
inventory's ssh options, or run here for `local`), which reads its counters twice one second apart.
`collect` gathers one row per node in parallel; `verdict` (pure) flags a row against the thresholds
trainkit's monitor uses (data wait > 10% of step time, after torchtitan's data_loading(%) metric;
NVML GPU utilisation < 80%); `table` renders rows with rich.
"""

from __future__ import annotations

import json
import shlex
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from rich.table import Table

from trainkit.provision.inventory import inventory_hosts
from trainkit.provision.reach import ssh_argv
from trainkit.train.monitor import DATA_BOUND_PCT, GPU_BUSY_PCT

SAMPLER = Path(__file__).parents[1] / "node" / "top_sampler.py"
SSH_TIMEOUT_S = 20


@dataclass(frozen=True)
class Node:
    """Where a node's sampler runs: `ssh` argv prefix (None: this machine) and the paths it reads."""

    name: str
    ssh: tuple[str, ...] | None
    python: str
    work_dir: str
    data_path: str


def nodes_from_inventory(inventory: dict[str, Any]) -> list[Node]:
    """One Node per inventory host (head first), from the inventory trainkit wrote (pure)."""

    allvars = inventory["all"].get("vars") or {}
    work = allvars.get("trainkit_work_dir", "/opt/trainkit/work")
    data = allvars.get("disks_mount_point", "/data") if allvars.get("disks_enabled") else work
    out = []
    for name, host in inventory_hosts(inventory).items():
        merged = {**allvars, **host}
        local = merged.get("ansible_connection") == "local"
        out.append(Node(name, None if local else tuple(ssh_argv(merged, ("-o", "BatchMode=yes"))),
                        sys.executable if local else merged.get("trainkit_node_python", "python3"),
                        merged.get("trainkit_work_dir", work), data))
    return out


def sample_node(node: Node, secs: float = 1.0) -> dict[str, Any]:
    """Run the sampler on `node`; the row, or {"node", "error"} when it could not be reached."""
    args = [node.work_dir, node.data_path, str(secs)]
    if node.ssh is None:
        argv, stdin = [node.python, str(SAMPLER), *args], None
    else:  # python falls back to python3 when the node has no trainkit venv yet
        remote = f"{shlex.quote(node.python)} - {shlex.join(args)} 2>/dev/null || python3 - {shlex.join(args)}"
        argv, stdin = [*node.ssh, remote], SAMPLER.read_text()
    try:
        proc = subprocess.run(argv, input=stdin, capture_output=True, text=True,
                              timeout=SSH_TIMEOUT_S + secs)
        if proc.returncode != 0:
            raise RuntimeError((proc.stderr.strip().splitlines() or [f"exit {proc.returncode}"])[-1])
        row = json.loads(proc.stdout.strip().splitlines()[-1])
    except (OSError, RuntimeError, ValueError, IndexError, subprocess.TimeoutExpired) as err:
        return {"node": node.name, "error": str(err)[:200]}
    row["node"] = node.name
    row["flagged"], row["verdict"] = verdict(row)
    return row


def collect(nodes: list[Node], secs: float = 1.0) -> list[dict[str, Any]]:
    """Sample every node at once (one thread each); rows in node order."""
    with ThreadPoolExecutor(max(1, len(nodes))) as pool:
        return list(pool.map(lambda n: sample_node(n, secs), nodes))


def verdict(row: dict[str, Any]) -> tuple[bool, str]:
    """(flagged, one-line bottleneck verdict) for a sampled row (pure)."""
    job, gpus = row.get("job") or {}, row.get("gpus") or []
    wait = job.get("data_wait_pct")
    util = sum(g["util_pct"] for g in gpus) / len(gpus) if gpus else None
    disk = (row.get("disk") or {}).get("util_pct") or 0.0
    if wait is not None and wait > DATA_BOUND_PCT:
        cause = "disk busy" if disk > 90 else ("CPU saturated" if row.get("cpu_pct", 0) > 90 else
                                               "raise workers or make loading cheaper")
        return True, f"data-bound: data wait {wait:.0f}% > {DATA_BOUND_PCT:.0f}% ({cause})"
    if util is not None and util < GPU_BUSY_PCT:
        why = "no job running" if not job else "input, communication or small batches"
        return True, f"GPU under-used: {util:.0f}% < {GPU_BUSY_PCT:.0f}% ({why})"
    if util is None:
        return False, "no GPU: CPU figures only" + ("" if job else "; no job running")
    return False, "compute-bound"


def _fmt(value: Any, spec: str = ".0f", unit: str = "") -> str:
    return "-" if value is None else f"{value:{spec}}{unit}"


def table(rows: list[dict[str, Any]], title: str):
    """A rich Table of `rows` (flagged rows in red)."""

    t = Table(title=title, title_justify="left")
    for col in ("node", "GPU util", "GPU mem", "CPU", "iowait", "mem", "disk r/w MB/s", "disk util",
                "net rx/tx MB/s", "samples/s", "data wait", "verdict"):
        t.add_column(col, no_wrap=col != "verdict")
    for r in rows:
        if "error" in r:
            t.add_row(r["node"], *["-"] * 10, f"[red]unreachable: {r['error']}[/red]")
            continue
        gpus, disk, job = r.get("gpus") or [], r.get("disk") or {}, r.get("job") or {}
        util = "/".join(_fmt(g["util_pct"], ".0f", "%") for g in gpus) or "-"
        mem = "/".join(f"{g['mem_used_mb'] / 1024:.1f}G" for g in gpus) or "-"
        style = "red" if r.get("flagged") else "green"
        t.add_row(r["node"], util, mem, _fmt(r["cpu_pct"], ".0f", "%"), _fmt(r["iowait_pct"], ".0f", "%"),
                  f"{r['mem_used_gb']:.1f}/{r['mem_total_gb']:.0f}G",
                  f"{_fmt(disk.get('read_mbs'), '.1f')}/{_fmt(disk.get('write_mbs'), '.1f')}",
                  _fmt(disk.get("util_pct"), ".0f", "%"),
                  f"{r['net_rx_mbs']:.1f}/{r['net_tx_mbs']:.1f}", _fmt(job.get("samples_per_s"), ".0f"),
                  _fmt(job.get("data_wait_pct"), ".1f", "%"), f"[{style}]{r['verdict']}[/{style}]")
    return t
