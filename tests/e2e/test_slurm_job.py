"""The `slurm` target's batch job under a real Slurm (issue 41): two namespace hosts (netns.py) run
Debian's slurmctld/slurmd and munge (slurm_cluster.py); the digits example trains across both
through `sbatch` of the script trainkit/runs/sbatch.py renders, submitted over ssh to the login
node (host 1, also the controller), and its run folder comes back through the login node.

Choices the namespace machines force: every host sees the same filesystem, so a folder under the
test's tmp dir is the site's shared storage (`slurm.workdir`); the compute nodes run trainkit from
the controller's own venv Python (`slurm.python`), reachable through that filesystem, as a site's
shared software tree would be."""

from __future__ import annotations

import dataclasses
import json
import sys
import time
from pathlib import Path

import pytest
import slurm_cluster
import yaml
from slurm_cluster import PARTITION, SlurmCluster

from trainkit.runs.sbatch import BatchJob
from trainkit.runs.slurm_jobs import ENDED, fetch, job_state, login_node, submit
from trainkit.spec.slurm_block import SlurmSpec

REPO = Path(__file__).resolve().parents[2]
JOB_TIMEOUT_S = 300   # the digits job takes well under a minute of CPU; a loaded 2-core machine is slower


@pytest.fixture
def slurm(netns_hosts, tmp_path) -> SlurmCluster:
    missing = slurm_cluster.missing_tools()
    if missing:
        pytest.fail("the Slurm fixture needs: " + ", ".join(missing))
    return SlurmCluster(netns_hosts, tmp_path / "slurm").start()


def _wait_ended(login, job_id: str) -> str | None:
    deadline, state = time.monotonic() + JOB_TIMEOUT_S, None
    while time.monotonic() < deadline:
        state = job_state(login, job_id)
        if state in ENDED:
            return state
        time.sleep(2)
    return state


def test_the_digits_job_trains_across_two_slurm_nodes_through_sbatch(slurm, tmp_path):
    cluster, shared = slurm.cluster, tmp_path / "shared"
    spec = SlurmSpec.model_validate({
        "login": {"address": slurm.login.address, "user": "root", "key": str(cluster.key)},
        "partition": PARTITION, "time": "15", "signal_s": 60, "workdir": str(shared),
        "python": sys.executable})
    login = dataclasses.replace(login_node(spec), ssh_options=(
        "-F", "/dev/null", "-o", f"UserKnownHostsFile={cluster.known_hosts}", "-o", "IdentitiesOnly=yes"))
    config = yaml.safe_load((REPO / "examples/train/digits.yaml").read_text())
    run_dir = f"{shared}/runs/digits-slurm"
    job = BatchJob(run_id="digits-slurm", run_dir=run_dir, nodes=2, nproc_per_node=1, rdzv_port=29400,
                   slurm=spec, engine_config=config, overrides=("epochs=3", "export.onnx=false", "workers=0"))

    job_id = submit(login, job)
    state = _wait_ended(login, job_id)
    back = tmp_path / "back"
    files = fetch(login, run_dir, back)
    logs = "\n".join(f"--- {p.name}\n{p.read_text(errors='replace')[-2000:]}" for p in sorted((back / "logs").glob("*")))
    assert state == "COMPLETED", f"job {job_id}: {state}\n{logs}\n{slurm.logs()}"

    summary = json.loads((back / "summary.json").read_text())
    assert summary["status"] == "completed" and summary["world_size"] == 2 and summary["num_nodes"] == 2, summary
    assert summary["steps"] == summary["total_steps"] > 0
    names = {p.relative_to(back).as_posix() for p in files}
    assert {"job.sbatch", "node.sh", "config.yaml", f"logs/slurm-{job_id}.out", "logs/node-0.log",
            "logs/node-1.log"} <= names, sorted(names)
    assert any(n.startswith("checkpoints/") for n in names), sorted(names)
    # torchrun ran on both nodes of the allocation, the store on node 0 only
    for rank, host in enumerate(slurm.hosts):
        log = (back / "logs" / f"node-{rank}.log").read_text()
        assert f"trainkit: node {rank} ({host.name}, {host.address})" in log, log[-1500:]
    assert "restart 0" in (back / "logs" / f"slurm-{job_id}.out").read_text()
