"""`trainkit doctor`'s wall time on 2 and 4 namespace hosts, and the busbw it measures on a link
shaped with `tc tbf` against the shaped rate (not a test; `python -m benchmarks doctor`).

Namespace hosts: tests/e2e/netns.py (needs root, sshd, iproute2). Each cluster is applied once.
Then doctor runs with its CPU default buffer (16 MiB, 5 timed calls): first unshaped, then with the
last host's veth shaped to SHAPED_MBIT. The shaped host's figure is the busbw of its best pair, and
every pair it is in crosses the shaped link. nccl-tests' busbw for 2 ranks equals algbw, which is
the bytes each rank sends per call / t. So busbw / (shaped rate / 8) should be near 1 (a little
under: TCP/IP and Ethernet headers ride in the shaped rate). Issue #24's goal: doctor under 60 s on
this machine.

Set TRAINKIT_E2E_NETNS_SUBNET / _PREFIX to run it next to other namespace users.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import yaml

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO / "tests" / "e2e"))
TRAINKIT = Path(sys.executable).parent / "trainkit"
SHAPED_MBIT = 200
SITE_VARS = {"base_packages": [], "base_manage_kernel": False, "base_manage_time_sync": False,
             "nvidia_enabled": False, "ascend_enabled": False, "trainkit_venv_mode": "reuse",
             "trainkit_node_python": sys.executable}


def run(cluster, *args: str) -> subprocess.CompletedProcess:
    env = {**os.environ, **cluster.ansible_env(), **cluster.ansible_fact_cache(), "OMP_NUM_THREADS": "1"}
    return subprocess.run([str(TRAINKIT), *args], cwd=REPO, env=env, text=True, capture_output=True, timeout=900)


def applied(count: int, base: Path):
    from netns import NetnsCluster

    cluster = NetnsCluster(base, count=count, prefix=os.environ.get("TRAINKIT_E2E_NETNS_PREFIX", "tkbench"),
                           local_root=base / "node-local",
                           subnet=os.environ.get("TRAINKIT_E2E_NETNS_SUBNET", "198.51.100")).start()
    shared = base / "shared"
    shared.mkdir()
    spec = base / "cluster.yaml"
    spec.write_text(yaml.safe_dump({
        "name": f"doctor-bench-{count}", "cloud": "hosts",
        "hosts": [{"name": h.name, "address": h.address, "user": "root"} for h in cluster.hosts],
        "ssh": {"user": "root", "private_key": str(cluster.key)},
        "storage": {"data_disk": {"enabled": False}, "nas": {"enabled": True, "mount_point": str(shared)}},
        "launch": {"nproc_per_node": 1, "python": sys.executable, "root": str(cluster.local_root / "trainkit")}}))
    (base / "ws" / "group_vars").mkdir(parents=True)
    (base / "ws" / "group_vars" / "all.yml").write_text(yaml.safe_dump(SITE_VARS))
    common = [str(spec), "--workdir", str(base / "ws")]
    out = run(cluster, "apply", *common, "--yes")
    if out.returncode:
        raise RuntimeError(out.stdout[-2000:] + out.stderr[-2000:])
    return cluster, common


def doctor(cluster, common) -> tuple[float, dict]:
    t0 = time.monotonic()
    out = run(cluster, "doctor", *common, "--json")
    wall = time.monotonic() - t0
    if out.returncode not in (0, 12):
        raise RuntimeError(out.stdout[-2000:] + out.stderr[-2000:])
    return wall, json.JSONDecoder().raw_decode(out.stdout[out.stdout.index("{"):])[0]


def figure(report: dict, node: str) -> float:
    n = next(n for n in report["nodes"] if n["node"] == node)
    return next(c["figure"] for c in n["checks"] if c["name"] == "network")


def bench(count: int) -> None:
    with tempfile.TemporaryDirectory(prefix="tkbd") as tmp:
        cluster, common = applied(count, Path(tmp))
        try:
            wall, report = doctor(cluster, common)
            world = report["network"]["world"]["busbw_gbs"]
            print(f"  {count} hosts: doctor {wall:.1f} s wall (goal < 60 s), unshaped all-node busbw "
                  f"{world:.3f} GB/s, verdicts {[n['verdict'] for n in report['nodes']]}")
            last = cluster.hosts[-1]
            veth = f"{cluster.prefix}-v{count}"
            subprocess.run(["tc", "qdisc", "add", "dev", veth, "root", "tbf", "rate", f"{SHAPED_MBIT}mbit",
                            "burst", "64kb", "latency", "400ms"], check=True)
            try:
                wall, report = doctor(cluster, common)
            finally:
                subprocess.run(["tc", "qdisc", "del", "dev", veth, "root"], check=False)
            busbw = figure(report, last.name)
            rate = SHAPED_MBIT * 1e6 / 8 / 1e9
            print(f"  {count} hosts, {last.name} shaped to {SHAPED_MBIT} Mbit/s: doctor {wall:.1f} s, its busbw "
                  f"{busbw:.4f} GB/s / shaped {rate:.4f} GB/s = {busbw / rate:.2f}; verdict "
                  f"{next(n['verdict'] for n in report['nodes'] if n['node'] == last.name)}")
        finally:
            cluster.stop()


def main() -> None:
    from netns import missing_tools

    missing = missing_tools()
    if missing:
        print(f"bench_doctor: skipped, namespace hosts need {', '.join(missing)}")
        return
    print("doctor on namespace hosts (gloo, 16 MiB, 5 timed calls per test)")
    for count in (2, 4):
        bench(count)


if __name__ == "__main__":
    main()
