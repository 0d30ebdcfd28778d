"""`trainkit top --once --json` on the local target (the namespace hosts: test_hosts_multinode.py)."""

from __future__ import annotations

import json
import subprocess
import sys


def test_top_once_json_gives_a_row_per_node_on_local(tmp_path, repo):
    from trainkit.provision.playbook import prepare_inventory
    from trainkit.spec.resolve import load_cluster
    from trainkit.workspace import Workspace

    cluster = load_cluster(repo / "examples/clusters/local.yaml")
    ws = Workspace(tmp_path / "ws")
    prepare_inventory(cluster, ws)
    proc = subprocess.run([sys.executable, "-m", "trainkit", "top", str(repo / "examples/clusters/local.yaml"),
                           "--workdir", str(ws.root), "--once", "--json"], capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr
    rows = json.loads(proc.stdout)
    assert [r["node"] for r in rows] == [cluster.name] and "cpu_pct" in rows[0] and rows[0]["verdict"]
