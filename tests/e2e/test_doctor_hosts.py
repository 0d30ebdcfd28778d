"""`trainkit doctor` and `train`'s doctor gate on real SSH hosts in network namespaces (netns.py).

One cluster of THREE namespace hosts serves every row (built and applied once: seconds per row
after that). Three, because a pair test cannot say which end of a slow link is slow: with h2's
link shaped, the pairs (h1,h2) and (h2,h3) are slow and (h1,h3) is fast, which points at h2.

- A slow link: h2's veth (root side: everything sent to h2) shaped with `tc qdisc ... tbf` to
  40 Mbit/s, far under what gloo moves over an unshaped veth here. doctor reports h2 slow with its
  measured busbw under the threshold, h1 and h3 ok; `train` prints the warning and runs.
- A missing shared mount: in h3's own mount namespace a tmpfs hides the folder above the shared
  folder, so the mount point does not exist there (as a node whose NFS mount failed). doctor
  reports h3 failed naming the shared check; `train` exits 12 naming h3 and starts nothing.
- `train --recover` with a failed node: a second spec over the same three hosts holds h3 as a
  spare; h2 without the shared mount is replaced by h3 as if reclaimed, the checks pass on
  (h1, h3), and the run goes ahead there.
The all-reduce buffer is 2 MiB (`--size-mb 2`): the whole doctor run is seconds.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import yaml
from netns import NetnsCluster, missing_tools, names_for

pytestmark = pytest.mark.e2e

REPO = Path(__file__).resolve().parents[2]
TRAINKIT = Path(sys.executable).parent / "trainkit"
PREFIX, SUBNET = names_for(__name__)  # this module's own namespace names and /24
SHAPED_RATE = "40mbit"   # 5 MB/s; gloo over an unshaped veth here moves 100s of MB/s
SITE_VARS = {"base_packages": [], "base_manage_kernel": False, "base_manage_time_sync": False,
             "nvidia_enabled": False, "ascend_enabled": False,
             "trainkit_venv_mode": "reuse", "trainkit_node_python": sys.executable}
DOCTOR_ARGS = ("--size-mb", "2", "--iters", "3")


@pytest.fixture(scope="module")
def hosts3(tmp_path_factory):
    """Three applied namespace hosts, their spec and workspace: (cluster, common args, nas folder)."""
    missing = missing_tools() + ([] if _which("tc") else ["tc (iproute2)"])
    if missing:
        pytest.fail("namespace hosts need: " + ", ".join(missing))
    base = tmp_path_factory.mktemp("dr")
    cluster = NetnsCluster(base, count=3, prefix=PREFIX, local_root=base / "node-local", subnet=SUBNET)
    try:
        cluster.start()
        nas = base / "nas"
        shared = nas / "shared"
        shared.mkdir(parents=True)
        spec = base / "cluster.yaml"
        spec.write_text(yaml.safe_dump({
            "name": "doctor-trio", "cloud": "hosts",
            "hosts": [{"name": h.name, "address": h.address, "port": h.port, "user": "root"} for h in cluster.hosts],
            "ssh": {"user": "root", "private_key": str(cluster.key)},
            "storage": {"data_disk": {"enabled": False}, "nas": {"enabled": True, "mount_point": str(shared)}},
            "launch": {"nproc_per_node": 1, "rdzv_port": 29400, "python": sys.executable,
                       "root": str(cluster.local_root / "trainkit")}}, sort_keys=False))
        ws = base / "ws"
        (ws / "group_vars").mkdir(parents=True)
        (ws / "group_vars" / "all.yml").write_text(yaml.safe_dump(SITE_VARS))
        common = [str(spec), "--workdir", str(ws)]
        out = trainkit(cluster, "apply", *common, "--yes")
        assert out.returncode == 0, out.stdout
        yield cluster, common, nas
    finally:
        cluster.stop()


def test_a_shaped_link_makes_its_node_slow_with_its_busbw_the_others_ok_and_train_warns(hosts3, tmp_path):
    cluster, common, _ = hosts3
    h1, h2, h3 = cluster.hosts
    veth = f"{cluster.prefix}-v2"  # the root-namespace end of h2's link (netns.py names it)
    subprocess.run(["tc", "qdisc", "add", "dev", veth, "root", "tbf", "rate", SHAPED_RATE,
                    "burst", "16kb", "latency", "400ms"], check=True)
    try:
        t0 = time.monotonic()
        out = trainkit(cluster, "doctor", *common, "--json", *DOCTOR_ARGS)
        assert out.returncode == 0, out.stdout
        print(f"doctor with a shaped link {time.monotonic() - t0:.0f}s")
        report = _report(out.stdout)
        verdicts = {n["node"]: n["verdict"] for n in report["nodes"]}
        assert verdicts == {h1.name: "ok", h2.name: "slow", h3.name: "ok"}, out.stdout
        net = {n["node"]: next(c for c in n["checks"] if c["name"] == "network") for n in report["nodes"]}
        shaped_gbs = 40e6 / 8 / 1e9
        assert net[h2.name]["figure"] < net[h2.name]["threshold"], net
        assert net[h2.name]["figure"] <= shaped_gbs * 1.5, net   # no faster than the shaped link allows
        assert net[h1.name]["figure"] > 4 * net[h2.name]["figure"], net
        assert report["network"]["backend"] == "gloo" and len(report["network"]["pairs"]) == 3
        print(f"doctor {report['wall_s']}s; busbw h2 {net[h2.name]['figure']:.4f} GB/s (shaped "
              f"{shaped_gbs:.4f}), h1 {net[h1.name]['figure']:.3f} GB/s")

        # top: the last doctor run's busbw under the title, and per node in --json
        out = trainkit(cluster, "top", *common, "--once", "--wide", timeout=60)
        assert out.returncode == 0 and "last doctor" in out.stdout and f"{h2.name} slow" in out.stdout, out.stdout
        out = trainkit(cluster, "top", *common, "--once", "--json", timeout=60)
        rows = json.loads(out.stdout[out.stdout.index("["):])
        assert {r["node"]: r["doctor_busbw_gbs"] for r in rows} == {k: c["figure"] for k, c in net.items()}

        # train: the warning, then the run goes ahead (a command job that just says hello;
        # --detach: the warning comes before the launch, following the run adds nothing here)
        t0 = time.monotonic()
        out = trainkit(cluster, "train", *common, "--config", str(hello(tmp_path)), "--detach")
        assert out.returncode == 0, out.stdout
        print(f"train with the warning {time.monotonic() - t0:.0f}s")
        assert f"warning: node {h2.name} is slow: busbw" in out.stdout, out.stdout
    finally:
        subprocess.run(["tc", "qdisc", "del", "dev", veth, "root"], check=False)


def test_a_node_without_the_shared_mount_fails_and_train_exits_12_naming_it(hosts3, tmp_path):
    cluster, common, nas = hosts3
    h1, h2, h3 = cluster.hosts
    cluster.ssh(h3, f"mount -t tmpfs -o size=1m tmpfs {nas}")  # only in h3's mount namespace
    try:
        out = trainkit(cluster, "doctor", *common, "--json", *DOCTOR_ARGS)
        assert out.returncode == 12, out.stdout
        report = _report(out.stdout)
        assert report["failed"] == [h3.name], out.stdout
        shared = {n["node"]: next(c for c in n["checks"] if c["name"] == "shared") for n in report["nodes"]}
        assert shared[h3.name]["status"] == "failed" and "missing" in shared[h3.name]["detail"], shared
        assert shared[h1.name]["status"] == shared[h2.name]["status"] == "ok", shared

        runs_before = sorted((Path(common[2]) / "runs").glob("*")) if (Path(common[2]) / "runs").exists() else []
        out = trainkit(cluster, "train", *common, "--config", str(hello(tmp_path)))
        assert out.returncode == 12, out.stdout
        assert f"{h3.name}: shared: shared mount" in out.stdout and "missing" in out.stdout, out.stdout
        assert "--no-doctor" in out.stdout
        runs_after = sorted((Path(common[2]) / "runs").glob("*")) if (Path(common[2]) / "runs").exists() else []
        assert runs_after == runs_before  # no run was started
    finally:
        cluster.ssh(h3, f"umount {nas}", check=False)


def test_train_recover_replaces_a_failed_node_with_the_spare_and_runs(hosts3, tmp_path):
    cluster, _, nas = hosts3
    h1, h2, h3 = cluster.hosts
    spec = yaml.safe_load(Path(hosts3[1][0]).read_text())
    spec["name"] = "doctor-spare"
    spec["hosts"][2]["spare"] = True
    path = tmp_path / "spare.yaml"
    path.write_text(yaml.safe_dump(spec, sort_keys=False))
    ws = tmp_path / "ws"
    (ws / "group_vars").mkdir(parents=True)
    (ws / "group_vars" / "all.yml").write_text(yaml.safe_dump(SITE_VARS))
    common = [str(path), "--workdir", str(ws)]
    out = trainkit(cluster, "apply", *common, "--yes")
    assert out.returncode == 0, out.stdout
    cluster.ssh(h2, f"mount -t tmpfs -o size=1m tmpfs {nas}")
    try:
        out = trainkit(cluster, "train", *common, "--config", str(hello(tmp_path)), "--recover",
                       "--poll", "0.5", "--backoff", "0")
        assert out.returncode == 0, out.stdout
        assert f"replacing failed node(s) {h2.name}" in out.stdout, out.stdout
        assert json.loads((ws / "hosts.json").read_text())["active"] == [h1.name, h3.name]
        report = json.loads((ws / "doctor.json").read_text())  # the checks after the replacement
        assert [n["node"] for n in report["nodes"]] == [h1.name, h3.name] and not report["failed"], report
    finally:
        cluster.ssh(h2, f"umount {nas}", check=False)


def trainkit(cluster: NetnsCluster, *args: str, timeout: float = 300) -> subprocess.CompletedProcess:
    """The CLI in its own process group (killed whole on timeout), stdout and stderr together."""
    env = {**os.environ, **cluster.ansible_env(), **cluster.ansible_fact_cache(), "OMP_NUM_THREADS": "1"}
    proc = subprocess.Popen([str(TRAINKIT), *args], cwd=REPO, env=env, text=True, stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, start_new_session=True)
    try:
        out, _ = proc.communicate(timeout=timeout)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
    return subprocess.CompletedProcess(proc.args, proc.returncode, out, "")


def hello(folder: Path) -> Path:
    """A command job that only says hello on every node: `train` itself is what is tested."""
    config = folder / "hello.yaml"
    config.write_text(yaml.safe_dump({"name": "hello", "command": "echo hello from $NODE_RANK"}))
    return config


def _report(stdout: str) -> dict:
    """The JSON report in the CLI's output (progress lines before it, an error message after): the
    document itself, or, when a node failed, the error document's `result`."""
    doc = json.JSONDecoder().raw_decode(stdout[stdout.index("{"):])[0]
    return doc["result"] if "exit_code" in doc else doc


def _which(tool: str) -> bool:
    import shutil

    return shutil.which(tool) is not None
