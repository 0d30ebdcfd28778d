"""`trainkit top`: the node sampler on this machine's real /proc, and the bottleneck verdict."""

from __future__ import annotations

import json
import subprocess
import sys
import time

import pytest

from trainkit.cluster import top
from trainkit.node import top_sampler
from trainkit.provision.node import Node, Paths, nodes_in

pytestmark = pytest.mark.unit


def test_the_sampler_reads_real_counters_twice_for_rates(tmp_path):
    run = tmp_path / "runs" / "digits-1"
    run.mkdir(parents=True)
    (run / "metrics.jsonl").write_text(
        json.dumps({"kind": "run", "time": time.time()}) + "\n"
        + json.dumps({"kind": "step", "time": time.time(), "step": 40, "samples_per_s": 900.0,
                      "data_wait_pct": 14.0}) + "\n")
    proc = subprocess.run([sys.executable, str(top.SAMPLER), str(tmp_path), str(tmp_path), "0.2"],
                          capture_output=True, text=True, check=True)
    row = json.loads(proc.stdout)
    assert 0 <= row["cpu_pct"] <= 100 and 0 < row["mem_used_gb"] < row["mem_total_gb"]
    assert row["net_rx_mbs"] >= 0 and row["job"] == {"run_id": "digits-1", "step": 40,
                                                       "samples_per_s": 900.0, "data_wait_pct": 14.0,
                                                       "age_s": row["job"]["age_s"]}
    if row["disk"] is not None:  # a container's root may be an overlay with no block device
        assert 0 <= row["disk"]["util_pct"] <= 100 and row["disk"]["read_mbs"] >= 0


def test_the_mount_holding_a_path_gives_its_device():
    assert top_sampler.device_of("/proc") is None  # proc is not a block device


def row(wait=None, gpus=(), cpu=20.0, disk=0.0):
    return {"cpu_pct": cpu, "disk": {"util_pct": disk}, "gpus": [{"util_pct": u} for u in gpus],
            "job": None if wait is None else {"data_wait_pct": wait}}


@pytest.mark.parametrize("r, flagged, words", [
    (row(wait=14.0, gpus=[95]), True, "data-bound"),
    (row(wait=25.0, disk=99.0), True, "disk busy"),
    (row(wait=3.0, gpus=[60, 70]), True, "GPU under-used: 65%"),
    (row(wait=3.0, gpus=[90]), False, "compute-bound"),
    (row(wait=3.0), False, "no GPU: CPU figures only"),
    (row(gpus=[0]), True, "no job running"),
])
def test_rows_below_the_thresholds_are_flagged_with_a_verdict(r, flagged, words):
    got = top.verdict(r)
    assert got[0] is flagged and words in got[1]


def test_an_unreachable_node_is_a_row_not_a_crash():
    node = Node("gone", 0, address="127.0.0.1", port=1, paths=Paths(work_dir="/w", disk="/d"))  # port 1: refused
    got = top.sample_node(node, 0.1)
    assert got["node"] == "gone" and got["error"]


def test_ssh_options_go_before_the_destination_and_the_sampler_after_it():
    """ssh reads everything after user@host as the remote command: an option placed there
    would reach the node's shell (bash then fails with its usage message)."""
    inv = {"all": {"vars": {}, "children": {"head": {"hosts": {"n0": {
        "ansible_host": "198.51.100.11", "ansible_user": "root", "ansible_port": 2222}}},
        "workers": {"hosts": {}}}}}
    argv = nodes_in(inv, {})[0][0].argv("python3 - /w /d 1.0")
    dash = argv.index("--")
    assert argv[dash + 1:] == ["root@198.51.100.11", "python3 - /w /d 1.0"]
    assert "BatchMode=yes" in argv[:dash] and argv[argv.index("-p") + 1] == "2222"


def _row(node: str, **more) -> dict:
    return {"node": node, "gpus": [{"util_pct": 97.0, "mem_used_mb": 40960}] * 8, "cpu_pct": 55.0,
            "iowait_pct": 2.0, "mem_used_gb": 310.5, "mem_total_gb": 1024, "net_rx_mbs": 1250.3,
            "net_tx_mbs": 1190.8, "disk": {"read_mbs": 812.4, "write_mbs": 15.2, "util_pct": 64.0},
            "job": {"samples_per_s": 12890, "data_wait_pct": 1.5}, "verdict": "compute-bound", **more}


@pytest.mark.parametrize("width", [80, 100, 200])
def test_the_table_fits_the_terminal_with_whole_headers_dropping_the_least_useful_columns(width):
    from rich.console import Console

    rows = [_row("gpu-node-0"), _row("gpu-node-1", flagged=True, verdict="data-bound: wait 14% > 10%"),
            {"node": "gpu-node-2", "error": "ssh: connect timed out"}]
    console = Console(width=width, record=True, color_system=None)
    console.print(top.table(rows, "demo: 3 node(s)", width))
    text = console.export_text()
    lines = text.splitlines()
    assert max(len(line) for line in lines) <= width
    header = next(line for line in lines if "NODE" in line)
    shown = [c for c in top.COLUMNS if c in header]
    assert "…" not in header and shown[0] == "NODE" and shown[-1] == "VERDICT"
    dropped = [c for c in top.COLUMNS if c not in shown]
    assert all(top.PRIORITY.index(d) > top.PRIORITY.index(s) for d in dropped for s in shown if s != "VERDICT")
    assert (width >= 200) == (not dropped), (width, dropped)  # 80 and 100 columns drop a few
    assert {"NODE", "GPU%", "SMP/s", "WAIT", "VERDICT"} <= set(shown)  # what a glance needs
    assert "unreachable" in text


def test_a_node_with_eight_gpus_is_summarised_in_a_few_characters():
    gpus = [{"util_pct": u, "mem_used_mb": 1024} for u in (61, 97, 97, 97, 80, 97, 97, 97)]
    cells = top.cells(_row("n0", gpus=gpus))
    assert (cells["GPU%"], cells["GMEM"]) == ("61-97%x8", "8G")
    assert top.cells(_row("n1", gpus=gpus[1:2]))["GPU%"] == "97%"


def test_wide_keeps_every_column():
    assert [c.header for c in top.table([_row("n0")], "t", None).columns] == list(top.COLUMNS)
