"""cluster/scheduler.py's settings() on a cluster with `scheduler: slurm`: the batch job's Slurm
settings come from the cluster (the head from inventory.yml as the login node, the shared storage
as the workdir, the role's partition, the nodes' trainkit Python, the hosts' GPUs), with the
optional `slurm:` block's partition/time/signal_s; the script runs/sbatch.py renders from them."""

from __future__ import annotations

from trainkit.cluster.replace import site_limit
from trainkit.cluster.scheduler import login, remote_root, settings
from trainkit.provision.inventory import inventory_for
from trainkit.runs.sbatch import BatchJob, render
from trainkit.spec.resolve import resolve
from trainkit.spec.schema import ClusterSpec
from trainkit.workspace import Workspace

SPEC = {"name": "lab", "cloud": "hosts", "scheduler": "slurm",
        "hosts": [{"name": "n0", "address": "10.0.0.10", "gpus": 4}, {"name": "n1", "address": "10.0.0.11", "gpus": 4}],
        "storage": {"nas": {"enabled": True, "mount_point": "/mnt/team"}}, "launch": {"root": "/srv/tk"}}


def _applied(tmp_path, **more):
    cluster = resolve(ClusterSpec.model_validate({**SPEC, **more}))
    ws = Workspace(tmp_path / "ws", "lab")
    ws.root.mkdir(parents=True)
    ws.write_inventory(inventory_for(cluster, None, ws))
    return cluster, ws


def test_the_cluster_gives_the_jobs_settings_and_the_head_is_the_login_node(tmp_path):
    cluster, ws = _applied(tmp_path)
    assert cluster.batch_jobs
    s = settings(cluster, ws)
    assert (s.partition, s.workdir, s.python, s.gpus_per_node, s.time, s.login) == \
        ("trainkit", "/mnt/team", "/srv/tk/venv/bin/python", 4, None, None)
    assert login(ws).address == "10.0.0.10" and remote_root(cluster) == "/mnt/team/.trainkit/lab"
    files = render(BatchJob(run_id="r1", run_dir=f"{remote_root(cluster)}/runs/r1", nodes=cluster.nodes,
                            nproc_per_node=4, rdzv_port=29400, slurm=s, engine_config={}))
    assert "#SBATCH --partition=trainkit" in files["job.sbatch"] and "#SBATCH --gpus-per-node=4" in files["job.sbatch"]


def test_the_optional_slurm_block_sets_partition_time_and_signal(tmp_path):
    cluster, ws = _applied(tmp_path, slurm={"partition": "gpu", "time": "2:00:00", "signal_s": 600})
    s = settings(cluster, ws)
    assert (s.partition, s.time, s.signal_s, s.workdir) == ("gpu", "2:00:00", 600, "/mnt/team")


def test_a_cluster_without_a_scheduler_runs_no_batch_jobs(tmp_path):
    cluster, _ = _applied(tmp_path, scheduler="none")
    assert not cluster.batch_jobs


def test_a_replacement_provisions_every_node_under_slurm_and_only_the_new_one_otherwise(tmp_path):
    """slurm.conf is one file on every node: the replacement's site.yml runs on all active nodes."""
    slurm, _ = _applied(tmp_path)
    plain, _ = _applied(tmp_path / "plain", scheduler="none")
    assert site_limit(slurm, ["n1"]) is None and site_limit(plain, ["n1"]) == ["n1"]
