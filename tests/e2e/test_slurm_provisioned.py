"""`scheduler: slurm` on a cluster trainkit provisions (issue 41, item 2): two namespace hosts
(netns.py) as a `hosts` cluster; `trainkit apply` runs site.yml, whose slurm role (ansible/roles/
slurm) brings up munge, slurmctld on the head and slurmd on both from the machine's Debian
packages; `trainkit train` then trains the digits example across both nodes through `sbatch` on
the head (runs/slurm_runs.py), as on a site's own Slurm (test_slurm_job.py); a host lost mid-run is
replaced by a spare under `train --recover` (runs/slurm_nodes.py), which the role sets up and
which joins the partition, and the job Slurm requeued resumes on it from its checkpoint; `destroy` stops the daemons.

Choices the namespace machines force (test_hosts_multinode.py has the rest: shared storage,
node-local launch.root, the controller's venv Python, group_vars for site settings):
- Each host is its own machine for Slurm: /etc/slurm and /etc/munge are bind mounts (in the host's
  own mount namespace) of folders of its own, as slurm_cluster.py does, so the role writes each
  host's slurm.conf and munge key where a real machine keeps them, and this machine's /etc stays
  as it was. /run is a tmpfs per host (netns.py): the pid files and munge's socket are per host.
- The daemons' state, spool and log folders are site settings (group_vars) under the test's tmp dir;
  the spool and log names carry the node name (%n), as slurm.conf(5) allows. pytest's tmp dir is
  root's alone (0700), so slurmctld runs as root there (SlurmUser=root, as slurm_cluster.py has it).
- No systemd: the role finds no /run/systemd/system (sd_booted(3)) and starts the daemons itself.
"""

from __future__ import annotations

import json
import re
import stat
import sys
import time
from pathlib import Path

import netns
import pytest
import slurm_cluster
import yaml
from netns import NetnsCluster
from test_hosts_multinode import SITE_VARS, _kill_group, _start, trainkit

REPO = Path(__file__).resolve().parents[2]
CLUSTER = "slurm-pair"
TRAIN_ARGS = ["--config", str(REPO / "examples/train/digits.yaml"), "epochs=2", "export.onnx=false", "workers=0"]


@pytest.fixture
def hosts3(request, tmp_path_factory) -> NetnsCluster:
    """Three namespace hosts (conftest's netns_hosts with one more): two nodes and a spare."""
    missing = netns.missing_tools() + slurm_cluster.missing_tools()
    if missing:
        pytest.fail("scheduler: slurm on namespace hosts needs: " + ", ".join(missing))
    base = tmp_path_factory.mktemp("nn")  # short: ssh control sockets must fit in 108 bytes
    prefix, subnet = netns.names_for(request.module.__name__)
    cluster = NetnsCluster(base, count=3, prefix=prefix, local_root=base / "node-local", subnet=subnet)
    request.addfinalizer(cluster.stop)
    return cluster.start()


def _machines(cluster: NetnsCluster) -> None:
    """/etc/slurm and /etc/munge of each host: its own folders (see the module docstring)."""
    for host in cluster.hosts:
        mounts = []
        for etc in ("slurm", "munge"):
            own = host.dir / f"etc-{etc}"
            own.mkdir(parents=True, exist_ok=True)
            mounts.append(f"mount --bind {own} /etc/{etc}")
        cluster.ssh(host, " && ".join(mounts))


def _spec(cluster: NetnsCluster, shared: Path, root: Path, path: Path) -> Path:
    spec = {
        "name": CLUSTER, "cloud": "hosts", "scheduler": "slurm",
        "hosts": [{"name": h.name, "address": h.address, "port": h.port, "user": "root", "spare": i == 2}
                  for i, h in enumerate(cluster.hosts)],
        "ssh": {"user": "root", "private_key": str(cluster.key)},
        "storage": {"data_disk": {"enabled": False}, "nas": {"enabled": True, "mount_point": str(shared)}},
        "launch": {"nproc_per_node": 1, "rdzv_port": 29400, "python": sys.executable, "root": str(root)},
        "slurm": {"time": "15", "signal_s": 60},
    }
    path.write_text(yaml.safe_dump(spec, sort_keys=False))
    return path


def _lines(path: Path) -> list[str]:
    return path.read_text().splitlines() if path.is_file() else []


def _start_attached(cluster: NetnsCluster, *args: str):
    return _start(cluster, "train", *args)


def _pids(cluster: NetnsCluster) -> dict[str, str]:
    """The daemons' pids by host, from their pid files (in each host's own /run)."""
    files = {"munged": "/run/munge/munged.pid", "slurmd": "/run/slurmd.pid", "slurmctld": "/run/slurmctld.pid"}
    return {f"{h.name} {name}": cluster.ssh(h, f"cat {path} 2>/dev/null", check=False).stdout.strip()
            for h in cluster.hosts[:2] for name, path in files.items()}


def test_apply_brings_up_slurm_through_the_role_train_runs_through_sbatch_and_a_spare_joins(
        hosts3, tmp_path):
    cluster = hosts3
    h1, h2, h3 = cluster.hosts
    _machines(cluster)
    shared = cluster.workdir / "shared"
    shared.mkdir()
    spec = _spec(cluster, shared, cluster.local_root / "trainkit", tmp_path / "cluster.yaml")
    ws, state = tmp_path / "ws", cluster.workdir / "slurm"
    (ws / "group_vars").mkdir(parents=True)
    (ws / "group_vars" / "all.yml").write_text(yaml.safe_dump({
        **SITE_VARS, "slurm_state_dir": str(state / "ctld"), "slurm_spool_dir": str(state / "spool"),
        "slurm_log_dir": str(state / "log"), "slurm_user": "root",
        # a lost node is DOWN (and its job requeued) after 30 s, not Slurm's default 300 (slurm.conf(5))
        "slurm_slurmd_timeout": 30}))
    common = [str(spec), "--workdir", str(ws)]

    out = trainkit(cluster, "apply", *common, "--yes")
    logs = "\n".join(f"--- {p.name}\n{p.read_text(errors='replace')[-1500:]}" for p in sorted((state / "log").glob("*")))
    assert out.returncode == 0, f"{out.stdout[-6000:]}\n{logs}"
    # both nodes idle in the role's partition, the head the controller
    sinfo = cluster.ssh(h1, "sinfo -h -N -p trainkit -o '%N %T'").stdout.split("\n")
    # NodeNames are places (<cluster>-n<rank>: provision/slurm_vars.node_name), not machines
    n0, n1 = f"{CLUSTER}-n0", f"{CLUSTER}-n1"
    assert sorted(ln for ln in sinfo if ln) == [f"{n0} idle", f"{n1} idle"], sinfo
    for host in (h1, h2):
        conf = (host.dir / "etc-slurm" / "slurm.conf").read_text()
        assert f"ClusterName={CLUSTER}" in conf and f"SlurmctldHost={h1.name}({h1.address})" in conf, conf
        assert f"NodeName={n1} NodeAddr={h2.address} CPUs=" in conf, conf
        assert "HealthCheckProgram=" in conf and "GresTypes" not in conf, conf   # no GPUs here
    # one munge key, made on this machine (0400), the same on both hosts, never in Ansible's output
    key = ws / "ssh" / "munge.key"
    assert stat.S_IMODE(key.stat().st_mode) == 0o400
    assert (h1.dir / "etc-munge" / "munge.key").read_bytes() == key.read_bytes() == \
        (h2.dir / "etc-munge" / "munge.key").read_bytes()
    shown = key.read_bytes().hex()
    for path in (ws / "ansible").rglob("*"):
        if path.is_file():
            text = path.read_bytes()
            assert key.read_bytes() not in text and shown.encode() not in text, path
    # the health check (trainkit's node probe) passes on a healthy node and drains nothing
    health = cluster.ssh(h2, str(cluster.local_root / "trainkit" / "bin" / "slurm-health"), check=False)
    assert health.returncode == 0, health.stdout + health.stderr

    # a second apply changes nothing: the daemons keep running as they were
    before = _pids(cluster)
    assert [k for k, pid in before.items() if not pid] == [f"{h2.name} slurmctld"], before
    out = trainkit(cluster, "apply", *common, "--yes")
    assert out.returncode == 0, out.stdout[-4000:]
    assert _pids(cluster) == before

    out = trainkit(cluster, "train", *common, *TRAIN_ARGS, "--json")
    assert out.returncode == 0, f"{out.stdout[-6000:]}\n{logs}"
    start = re.search(r"^\{", out.stdout, re.MULTILINE)   # the result; rank 0's lines come before it
    assert start, out.stdout[-4000:]
    result, _ = json.JSONDecoder().raw_decode(out.stdout[start.start():])
    run_dir = Path(result["run_dir"])
    summary = json.loads((run_dir / "summary.json").read_text())
    assert summary["status"] == "completed" and summary["world_size"] == 2 and summary["num_nodes"] == 2, summary
    record = json.loads((run_dir / "run.json").read_text())
    assert record["slurm_job"].isdigit() and record["remote_dir"] == f"{shared}/.trainkit/{CLUSTER}/runs/{run_dir.name}"
    batch = (run_dir / "job.sbatch").read_text()
    assert "#SBATCH --partition=trainkit" in batch and "#SBATCH --time=15" in batch, batch
    for rank, host in enumerate((h1, h2)):
        assert f"({CLUSTER}-n{rank}, {host.address})" in (run_dir / "logs" / f"node-{rank}.log").read_text()

    # a second run; host 2 is lost for good mid-run. `train --attach RUN --recover` follows the job:
    # Slurm marks host 2 DOWN (SlurmdTimeout, 30 s here) and requeues the job; trainkit sees the node
    # lost in sinfo and the spare takes its place (runs/slurm_nodes.py -> cluster/replace.py): the
    # role runs on it (and rewrites slurm.conf on the head), its slurmd joins, and the requeued job
    # resumes on host 1 and the spare
    out = trainkit(cluster, "train", *common, *TRAIN_ARGS, "epochs=4", "checkpoint.every_n_steps=5", "--detach")
    assert out.returncode == 0, out.stdout[-4000:]
    run_id = out.stdout.strip().splitlines()[-1]
    metrics = shared / ".trainkit" / CLUSTER / "runs" / run_id / "metrics.jsonl"
    deadline = time.monotonic() + 300
    while time.monotonic() < deadline and len(_lines(metrics)) < 12:
        time.sleep(1)
    assert _lines(metrics), f"no steps logged\n{logs}"
    job_id = json.loads((ws / "runs" / run_id / "run.json").read_text())["slurm_job"]
    out = trainkit(cluster, "status", *common, "--json")   # the open run's job, from the queue on the head
    assert out.returncode == 0, out.stdout[-3000:]
    status, _ = json.JSONDecoder().raw_decode(out.stdout[out.stdout.index("{"):])
    assert status["jobs"] == {run_id: {"slurm_job": job_id, "state": "RUNNING"}}, status
    assert cluster.kill(h2) > 0
    attach = _start_attached(cluster, *common, "--attach", run_id, "--recover", "--json")
    try:   # Slurm holds a requeued job back before it starts again (test_slurm_job.py): let it start now
        while attach.poll() is None and time.monotonic() < deadline + 400:
            cluster.ssh(h1, f"scontrol update JobId={job_id} StartTime=now", check=False)
            time.sleep(3)
    finally:
        _kill_group(attach)   # still following after the deadline: its output says where it waits
        text, _ = attach.communicate(timeout=60)
    said = cluster.ssh(h1, "sinfo -N -p trainkit; squeue", check=False).stdout
    ctld = "\n".join(p.read_text(errors="replace")[-3000:] for p in sorted((state / "log").glob("slurmctld*")))
    assert attach.returncode == 0, f"{text[-6000:]}\n{said}\n{ctld}"
    events = [json.loads(ln) for ln in (ws / "runs" / run_id / "events.jsonl").read_text().splitlines()]
    kinds = [e["event"] for e in events]
    assert "requeued" in kinds and kinds.count("replaced") == 1 and "provisioned" in kinds, kinds
    assert next(e for e in events if e["event"] == "replaced")["by"] == h3.name, events
    assert "resubmitted" not in kinds, kinds   # Slurm's requeue carried the run: one attempt
    sinfo = cluster.ssh(h1, "sinfo -h -N -p trainkit -o '%N %T'").stdout.split("\n")
    assert sorted(ln for ln in sinfo if ln) == [f"{n0} idle", f"{n1} idle"], sinfo   # n1 is host 3 now
    assert (h3.dir / "etc-munge" / "munge.key").read_bytes() == key.read_bytes()
    assert f"NodeName={n1} NodeAddr={h3.address}" in (h1.dir / "etc-slurm" / "slurm.conf").read_text()
    summary = json.loads((ws / "runs" / run_id / "summary.json").read_text())
    assert summary["status"] == "completed" and summary["resumed_from_step"] > 0, summary
    assert f"({n1}, {h3.address})" in (ws / "runs" / run_id / "logs" / "node-1.log").read_text()
    assert "(restart 1)" in (ws / "runs" / run_id / "logs" / f"slurm-{job_id}.out").read_text()

    # destroy (cleanup.yml on the machines that stay): the daemons the role started are stopped
    out = trainkit(cluster, "destroy", *common, "--yes")
    assert out.returncode == 0, out.stdout[-4000:]
    alive = "for p in /run/slurmd.pid /run/slurmctld.pid /run/munge/munged.pid; do " \
            "[ -s $p ] && kill -0 $(cat $p) 2>/dev/null && echo $p; done; true"
    assert [cluster.ssh(h, alive).stdout.split() for h in (h1, h3)] == [[], []]
