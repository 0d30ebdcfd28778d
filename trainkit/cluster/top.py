"""`trainkit top`: a per-node view of a running cluster (GPU, CPU, memory, disk, network, the job).

Each node runs trainkit/node/top_sampler.py (standard library; piped to its Python by `Node.sh`, over
ssh, or here for `local`), which reads its counters twice one second apart.
`collect` gathers one row per node in parallel; `verdict` (pure) flags a row against the thresholds
trainkit's monitor uses (data wait > 10% of step time, after torchtitan's data_loading(%) metric;
NVML GPU utilisation < 80%); `table` renders rows with rich.
"""

from __future__ import annotations

import json
import shlex
import sys
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

from rich.table import Table
from rich.text import Text

from trainkit.provision.node import Node
from trainkit.train.monitor import DATA_BOUND_PCT, GPU_BUSY_PCT

SAMPLER = Path(__file__).parents[1] / "node" / "top_sampler.py"
SSH_TIMEOUT_S = 20


def sample_node(node: Node, secs: float = 1.0) -> dict[str, Any]:
    """Run the sampler on `node` (its work dir, and its data disk or else the work dir); the row,
    or {"node", "error"} when it could not be reached."""
    args = shlex.join([node.paths.work_dir, node.paths.disk or node.paths.work_dir, str(secs)])
    if node.local:  # this machine: the controller's own Python
        script = f"{shlex.quote(sys.executable)} - {args}"
    else:  # python falls back to python3 when the node has no trainkit venv yet
        script = f"{shlex.quote(node.python)} - {args} 2>/dev/null || python3 - {args}"
    try:
        proc = node.sh(script, SAMPLER.read_bytes(), timeout=SSH_TIMEOUT_S + secs)
        out, err = proc.stdout.decode(errors="replace"), proc.stderr.decode(errors="replace")
        if proc.returncode != 0:
            raise RuntimeError((err.strip().splitlines() or [f"exit {proc.returncode}"])[-1])
        row = json.loads(out.strip().splitlines()[-1])
    except (OSError, RuntimeError, ValueError, IndexError) as err:
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


# Columns of `top`: (short header, the row's cell). Order on screen = this order; at a narrow
# terminal the ones last in PRIORITY are dropped first (`--wide` keeps all, letting rich wrap).
COLUMNS = ("NODE", "GPU%", "GMEM", "CPU%", "IOW%", "MEM", "DISK r/w", "DUTIL", "NET rx/tx", "SMP/s", "WAIT",
           "VERDICT")
PRIORITY = ("NODE", "VERDICT", "GPU%", "SMP/s", "WAIT", "CPU%", "GMEM", "MEM", "NET rx/tx", "DISK r/w",
            "DUTIL", "IOW%")
VERDICT_MIN = 24  # the verdict column wraps; it needs this much to stay readable


def cells(r: dict[str, Any]) -> dict[str, str]:
    """One node's row as text per column (an unreachable node: its error as the verdict)."""
    if "error" in r:
        return {**{c: "-" for c in COLUMNS}, "NODE": r["node"], "VERDICT": f"unreachable: {r['error']}"}
    if "slurm" in r:   # a batch job's row (cluster/scheduler_top.py): the engine's figures, no node's
        job = r.get("job") or {}
        return {**{c: "-" for c in COLUMNS}, "NODE": r["node"], "SMP/s": _fmt(job.get("samples_per_s"), ".0f"),
                "WAIT": _fmt(job.get("data_wait_pct"), ".1f", "%"), "VERDICT": r["verdict"]}
    gpus, disk, job = r.get("gpus") or [], r.get("disk") or {}, r.get("job") or {}
    return {"NODE": r["node"], "GPU%": _gpu_util(gpus),
            "GMEM": f"{sum(g['mem_used_mb'] for g in gpus) / 1024:.0f}G" if gpus else "-",
            "CPU%": _fmt(r["cpu_pct"], ".0f", "%"), "IOW%": _fmt(r["iowait_pct"], ".0f", "%"),
            "MEM": f"{r['mem_used_gb']:.1f}/{r['mem_total_gb']:.0f}G",
            "DISK r/w": f"{_fmt(disk.get('read_mbs'), '.1f')}/{_fmt(disk.get('write_mbs'), '.1f')}",
            "DUTIL": _fmt(disk.get("util_pct"), ".0f", "%"),
            "NET rx/tx": f"{r['net_rx_mbs']:.1f}/{r['net_tx_mbs']:.1f}",
            "SMP/s": _fmt(job.get("samples_per_s"), ".0f"), "WAIT": _fmt(job.get("data_wait_pct"), ".1f", "%"),
            "VERDICT": r["verdict"]}


def _gpu_util(gpus: list[dict[str, Any]]) -> str:
    """A node's GPU utilisation in a few characters: `97%` (one GPU, or all equal: `97%x8`),
    else the range `61-97%x8`; per-GPU figures are in `--json`."""
    utils = [g["util_pct"] for g in gpus if g.get("util_pct") is not None]
    if not utils:
        return "-"
    lo, hi = round(min(utils)), round(max(utils))
    text = f"{hi}%" if lo == hi else f"{lo}-{hi}%"
    return text if len(gpus) == 1 else f"{text}x{len(gpus)}"


def _need(texts: list[dict[str, str]], col: str, verdict_min: bool = True) -> int:
    """Characters column `col` takes in rich's box (its widest cell + 3)."""
    widest = max([len(col)] + [len(t[col]) for t in texts])
    return (min(widest, VERDICT_MIN) if col == "VERDICT" and verdict_min else widest) + 3


def fit_columns(texts: list[dict[str, str]], width: int) -> list[str]:
    """The columns that fit `width` characters (rich's box: 3 per column + 1), dropping by PRIORITY
    from the end; NODE and VERDICT always stay."""
    keep = list(COLUMNS)
    for col in reversed(PRIORITY[2:]):
        if sum(_need(texts, c) for c in keep) + 1 <= width:
            break
        keep.remove(col)
    return keep


def full_width(rows: list[dict[str, Any]]) -> int:
    """Characters the table takes with every column at its widest cell (`top --wide`: printed at
    that width whatever the terminal's, so no cell is cut to an ellipsis)."""
    texts = [cells(r) for r in rows]
    return sum(_need(texts, c, verdict_min=False) for c in COLUMNS) + 1


def view(rows: list[dict[str, Any]], title: str, width: int | None):
    """What top prints at `width` (None: every column): the table of the columns that fit, or, where
    not even NODE and VERDICT fit (a very narrow terminal), one `COLUMN value` line per cell under
    each node's name, readable at any width."""
    texts = [cells(r) for r in rows]
    if width is None or _need(texts, "NODE") + _need(texts, "VERDICT") + 1 <= width:
        return table(rows, title, width)
    lines = [title]
    for text in texts:
        lines.append(text["NODE"])
        lines += [f"  {col} {text[col]}" for col in PRIORITY[1:]]
    return Text("\n".join(lines))


def table(rows: list[dict[str, Any]], title: str, width: int | None = None):
    """A rich Table of `rows` (flagged rows in red), with the columns that fit `width` (None: all)."""
    texts = [cells(r) for r in rows]
    shown = list(COLUMNS) if width is None else fit_columns(texts, width)
    t = Table(title=title, title_justify="left")
    for col in shown:
        t.add_column(col, no_wrap=col != "VERDICT")
    for r, text in zip(rows, texts):
        style = "red" if r.get("flagged") or "error" in r else "green"
        t.add_row(*(f"[{style}]{text[c]}[/{style}]" if c == "VERDICT" else text[c] for c in shown))
    return t
