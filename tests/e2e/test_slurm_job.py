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
import math
import os
import subprocess
import sys
import time
from pathlib import Path

import netns
import pytest
import slurm_cluster
import yaml
from slurm_cluster import PARTITION, SlurmCluster

from trainkit.runs.sbatch import BatchJob
from trainkit.runs.slurm_jobs import ENDED, fetch, job_state, login_node, submit
from trainkit.spec.slurm_block import SlurmSpec

REPO = Path(__file__).resolve().parents[2]
CHECKPOINT_EVERY = 5  # steps between checkpoints in the node-loss test (19 steps an epoch)
JOB_TIMEOUT_S = 300   # the digits job takes well under a minute of CPU; a loaded 2-core machine is slower


@pytest.fixture
def slurm(netns_hosts, tmp_path) -> SlurmCluster:
    missing = slurm_cluster.missing_tools()
    if missing:
        pytest.fail("the Slurm fixture needs: " + ", ".join(missing))
    return SlurmCluster(netns_hosts, tmp_path / "slurm").start()


@pytest.fixture
def slurm3(request, tmp_path_factory, tmp_path) -> SlurmCluster:
    """Three namespace hosts under Slurm (conftest's netns_hosts with one more host): a job of two
    nodes has somewhere to go when one of its nodes is lost for good."""
    missing = netns.missing_tools() + slurm_cluster.missing_tools()
    if missing:
        pytest.fail("the Slurm fixture needs: " + ", ".join(missing))
    base = tmp_path_factory.mktemp("nn")  # short: ssh control sockets must fit in 108 bytes
    prefix, subnet = netns.names_for(request.module.__name__)
    cluster = netns.NetnsCluster(base, count=3, prefix=prefix, subnet=subnet)
    request.addfinalizer(cluster.stop)
    return SlurmCluster(cluster.start(), tmp_path / "slurm").start()


def _wait_ended(login, job_id: str, release: SlurmCluster | None = None) -> str | None:
    """The job's state once it has ended (or the last one seen at the timeout); with `release`, a
    job pending again after its requeue is let start now (scontrol update StartTime=now)."""
    deadline, state = time.monotonic() + JOB_TIMEOUT_S, None
    while time.monotonic() < deadline:
        state = job_state(login, job_id)
        if state in ENDED:
            return state
        if release is not None and state == "PENDING":
            # may come too late ("no longer pending"): the job started meanwhile
            release.cluster.ssh(release.login, f"scontrol update JobId={job_id} StartTime=now", check=False)
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
    assert "(restart 0)" in (back / "logs" / f"slurm-{job_id}.out").read_text()


def test_usr1_ahead_of_the_time_limit_checkpoints_requeues_and_the_job_resumes(slurm, tmp_path):
    """The signal `--signal=B:USR1@<s>` gives the batch shell, sent as Slurm sends it (scancel
    --batch --signal=USR1: to the batch shell only), once the engine has logged steps: the ranks
    checkpoint and end preempted, the shell requeues its own job, and the second start (restart 1)
    resumes from that checkpoint on the shared folder and completes."""
    cluster, shared = slurm.cluster, tmp_path / "shared"
    spec = SlurmSpec.model_validate({
        "login": {"address": slurm.login.address, "user": "root", "key": str(cluster.key)},
        "partition": PARTITION, "time": "15", "workdir": str(shared), "python": sys.executable})
    login = dataclasses.replace(login_node(spec), ssh_options=(
        "-F", "/dev/null", "-o", f"UserKnownHostsFile={cluster.known_hosts}", "-o", "IdentitiesOnly=yes"))
    config = yaml.safe_load((REPO / "examples/train/digits.yaml").read_text())
    run_dir = Path(f"{shared}/runs/digits-requeue")
    job = BatchJob(run_id="digits-requeue", run_dir=str(run_dir), nodes=2, nproc_per_node=1, rdzv_port=29400,
                   slurm=spec, engine_config=config, overrides=("epochs=4", "export.onnx=false", "workers=0",
                                                                 "checkpoint.interval=null"))
    job_id = submit(login, job)
    deadline = time.monotonic() + JOB_TIMEOUT_S
    while time.monotonic() < deadline and len(_lines(run_dir / "metrics.jsonl")) < 3:
        time.sleep(1)
    assert _lines(run_dir / "metrics.jsonl"), f"no steps logged\n{slurm.logs()}"
    slurm.sh(slurm.login, f"scancel --batch --signal=USR1 {job_id}")
    # Slurm holds a requeued job back before it may start again (AuthInfo cred_expire, 120 s by default: slurm.conf(5));
    # the test lets it start at once, as an admin would with the same command
    state = _wait_ended(login, job_id, release=slurm)
    back = tmp_path / "back"
    fetch(login, str(run_dir), back)
    batch_log = (back / "logs" / f"slurm-{job_id}.out").read_text()
    assert state == "COMPLETED", f"job {job_id}: {state}\n{batch_log}\n{slurm.logs()}"
    assert "trainkit: USR1" in batch_log and f"requeueing job {job_id}" in batch_log, batch_log
    assert "(restart 0)" in batch_log and "(restart 1)" in batch_log, batch_log
    summary = json.loads((back / "summary.json").read_text())
    assert summary["status"] == "completed" and summary["resumed_from_step"] > 0, summary
    assert summary["steps"] == summary["total_steps"] and summary["world_size"] == 2, summary


def _lines(path: Path) -> list[str]:
    return path.read_text().splitlines() if path.is_file() else []


def test_a_node_lost_mid_run_requeues_the_job_onto_others_and_it_resumes(slurm3, tmp_path):
    """`train --recover` on 3 hosts, a job of 2 nodes: host 2 dies mid-run for good (every process
    of its namespace SIGKILLed: slurmd, torchrun, its rank); Slurm marks it down and requeues the
    job (--requeue), which starts again on hosts 1 and 3 and resumes from the newest checkpoint on
    the shared folder, losing at most one checkpoint interval. trainkit's follow loop records the
    requeue (`requeued`, Restarts=1) and keeps following the same job: one attempt, completed."""
    slurm, shared, ws = slurm3, tmp_path / "shared", tmp_path / "ws"
    spec = str(_cli_spec(slurm, shared, tmp_path / "lab.yaml"))
    assert _tk(ws, "apply", spec, "--yes", timeout=120).returncode == 0
    proc = subprocess.Popen([str(TRAINKIT), "train", spec, *DIGITS, "epochs=4",
                             f"checkpoint.every_n_steps={CHECKPOINT_EVERY}", "--recover", "--json", "--workdir", str(ws)],
                            cwd=REPO, text=True, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                            stdin=subprocess.DEVNULL, env={**os.environ, "OMP_NUM_THREADS": "1"})
    try:
        _wait_for("the run's job", lambda: any(json.loads(p.read_text()).get("slurm_job")
                                               for p in (ws / "runs").glob("*/run.json")), slurm, proc)
        run_id = next((ws / "runs").glob("*/run.json")).parent.name
        job_id, remote = _record(ws, run_id)["slurm_job"], shared / ".trainkit" / "lab" / "runs" / run_id
        _wait_for("12 metrics lines", lambda: len(_lines(remote / "metrics.jsonl")) >= 12, slurm, proc)
        before = [json.loads(ln) for ln in _lines(remote / "metrics.jsonl")]
        assert slurm.cluster.kill(slurm.hosts[1]) > 0

        def ended() -> bool:   # Slurm holds a requeued job back: let it start now, as an admin would
            slurm.cluster.ssh(slurm.login, f"scontrol update JobId={job_id} StartTime=now", check=False)
            return proc.poll() is not None
        _wait_for("the run's end", ended, slurm)
        out = proc.communicate(timeout=60)[0]
    finally:
        if proc.poll() is None:
            proc.kill()
    back = ws / "runs" / run_id
    batch_log = (back / "logs" / f"slurm-{job_id}.out").read_text()
    assert proc.returncode == 0, f"{out}\n{batch_log}\n{slurm.logs()}"
    assert "(restart 1)" in batch_log, batch_log
    third = slurm.hosts[2]   # the second start ran on the host that had been idle
    assert f"({third.name}, {third.address})" in (back / "logs" / "node-1.log").read_text()
    summary = json.loads((back / "summary.json").read_text())
    assert summary["status"] == "completed" and summary["steps"] == summary["total_steps"], summary
    # at most one checkpoint interval lost: it resumes no earlier than the last step logged before
    # the kill less the interval (the ranks may have gone a few steps past that line)
    last = max(r["step"] for r in before if r.get("kind") == "step")
    assert summary["resumed_from_step"] >= max(last - CHECKPOINT_EVERY, 1), (last, summary)
    events = [json.loads(ln) for ln in (back / "events.jsonl").read_text().splitlines()]
    assert [(e["slurm_job"], e["restarts"]) for e in events if e["event"] == "requeued"] == [(job_id, 1)], events
    record = _record(ws, run_id)
    assert record["status"] == "completed" and len(record["attempts"]) == 1, record


# -- the CLI on `cloud: slurm`: apply, train, runs, logs, cancel, destroy -------------------------

TRAINKIT = Path(sys.executable).parent / "trainkit"
DIGITS = ["--config", str(REPO / "examples/train/digits.yaml"), "export.onnx=false", "workers=0"]


def _cli_spec(slurm: SlurmCluster, shared: Path, path: Path) -> Path:
    spec = {"name": "lab", "cloud": "slurm", "nodes": 2, "launch": {"nproc_per_node": 1},
            "slurm": {"login": {"address": slurm.login.address, "user": "root", "key": str(slurm.cluster.key)},
                      "partition": PARTITION, "time": "15", "signal_s": 60, "workdir": str(shared),
                      "python": sys.executable}}
    path.write_text(yaml.safe_dump(spec, sort_keys=False))
    return path


def _tk(ws: Path, *args: str, timeout: float = JOB_TIMEOUT_S) -> subprocess.CompletedProcess:
    """The CLI in its own process, its workspace under the test's tmp dir; stderr into stdout."""
    return subprocess.run([str(TRAINKIT), *args, "--workdir", str(ws)], cwd=REPO, text=True, timeout=timeout,
                          stdout=subprocess.PIPE, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                          env={**os.environ, "OMP_NUM_THREADS": "1"})


def _no_job_and_no_process(slurm: SlurmCluster, marker: str) -> tuple[str, list[str]]:
    """(squeue's job list, the hosts whose network namespace still runs a process whose command
    line holds `marker`: torchrun, a rank, node.sh)."""
    queue = slurm.sh(slurm.login, "squeue -h -o %i").strip()
    busy = []
    for h in slurm.hosts:
        for pid in h.pids():
            try:
                cmdline = Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
            except OSError:   # ended meanwhile
                continue
            if marker in cmdline:
                busy.append(f"{h.name}: {cmdline[:200]}")
    return queue, busy


def test_trainkit_apply_train_runs_logs_and_destroy_on_a_slurm_cluster(slurm, tmp_path):
    """`trainkit apply` checks the login node, `train` submits the digits job through it and
    follows it to its end across both nodes, the run folder comes back, `runs`/`logs` read it, and
    `destroy --yes` removes trainkit's folder from the shared storage and nothing else."""
    shared, ws = tmp_path / "shared", tmp_path / "ws"
    shared.mkdir()
    (shared / "site-file").write_text("the site's own\n")
    spec = str(_cli_spec(slurm, shared, tmp_path / "lab.yaml"))
    bad = tmp_path / "bad.yaml"   # a partition the cluster does not have: apply says so, records nothing
    bad.write_text(Path(spec).read_text().replace(f"partition: {PARTITION}", "partition: nosuch"))
    res = _tk(tmp_path / "ws-bad", "apply", str(bad), "--yes", timeout=120)
    assert res.returncode == 2 and "slurm.partition: 'nosuch'" in res.stdout, res.stdout
    assert not (tmp_path / "ws-bad" / "inventory.yml").exists()
    res = _tk(ws, "apply", spec, "--yes", timeout=120)
    assert res.returncode == 0, res.stdout

    res = _tk(ws, "train", spec, *DIGITS, "epochs=2", "--json")
    assert res.returncode == 0, f"{res.stdout}\n{slurm.logs()}"
    result, _ = json.JSONDecoder().raw_decode(res.stdout[res.stdout.index("{"):])   # the next steps follow
    assert "  rank 0 | trainkit: node 0 (" in res.stdout, res.stdout   # node 0's log followed as it came
    run_dir = Path(result["run_dir"])
    summary = json.loads((run_dir / "summary.json").read_text())
    assert summary["status"] == "completed" and summary["world_size"] == 2 and summary["num_nodes"] == 2
    record = json.loads((run_dir / "run.json").read_text())
    job_id = record["slurm_job"]
    assert record["status"] == "completed" and job_id.isdigit(), record
    events = [json.loads(ln) for ln in (run_dir / "events.jsonl").read_text().splitlines()]
    assert any(e["event"] == "submitted" and e["slurm_job"] == job_id for e in events), events
    assert {"logs/node-0.log", "logs/node-1.log", f"logs/slurm-{job_id}.out"} <= \
        {p.relative_to(run_dir).as_posix() for p in run_dir.rglob("*")}

    res = _tk(ws, "runs", spec, "--json", timeout=120)
    assert res.returncode == 0 and json.loads(res.stdout)[0]["status"] == "completed", res.stdout
    res = _tk(ws, "logs", spec, run_dir.name, "--node", "1", timeout=120)
    assert res.returncode == 0 and f"({slurm.hosts[1].name}, {slurm.hosts[1].address})" in res.stdout, res.stdout
    res = _tk(ws, "logs", spec, run_dir.name, "--rank", "1", timeout=120)
    assert res.returncode == 0 and res.stdout == (run_dir / "logs" / "rank-1.log").read_text() != "", res.stdout

    remote = shared / ".trainkit" / "lab"
    assert (remote / "runs" / run_dir.name / "summary.json").is_file()
    res = _tk(ws, "destroy", spec, "--yes", timeout=120)
    assert res.returncode == 0, res.stdout
    assert not remote.exists() and (shared / "site-file").read_text() == "the site's own\n"
    assert summary == json.loads((run_dir / "summary.json").read_text())   # the run stays in the workspace
    assert slurm.sh(slurm.login, "sinfo -h -o %T").split() == ["idle"]   # the cluster is as it was


def test_cancel_and_a_job_dead_at_start_up_leave_nothing_running_on_slurm(slurm, tmp_path):
    """`train --detach` returns the run id; `cancel` (scancel --signal=TERM, then scancel) leaves no
    job in squeue and no process of it on the hosts, and the run is cancelled with its folder back.
    Then a job whose data the engine refuses on the nodes ends `failed` with the engine's error
    shown, and frees its allocation."""
    shared, ws = tmp_path / "shared", tmp_path / "ws"
    spec = str(_cli_spec(slurm, shared, tmp_path / "lab.yaml"))
    assert _tk(ws, "apply", spec, "--yes", timeout=120).returncode == 0

    # far more epochs than the test lasts: the job must still run when `cancel` comes (50 epochs,
    # about 40 s here, ended before the cancel in a loaded CI run)
    res = _tk(ws, "train", spec, *DIGITS, "epochs=5000", "--detach", timeout=120)
    assert res.returncode == 0, res.stdout
    run_id = res.stdout.strip().splitlines()[-1]
    remote = shared / ".trainkit" / "lab" / "runs" / run_id
    deadline = time.monotonic() + JOB_TIMEOUT_S
    while time.monotonic() < deadline and len(_lines(remote / "metrics.jsonl")) < 2:
        time.sleep(1)
    assert _lines(remote / "metrics.jsonl"), f"no steps logged\n{slurm.logs()}"
    res = _tk(ws, "runs", spec, "--json", timeout=120)
    assert json.loads(res.stdout)[0]["status"] == "running", res.stdout
    res = _tk(ws, "status", spec, "--json", timeout=120)
    job_id = json.loads((ws / "runs" / run_id / "run.json").read_text())["slurm_job"]
    assert json.loads(res.stdout)["jobs"] == {run_id: {"slurm_job": job_id, "state": "RUNNING"}}, res.stdout
    res = _tk(ws, "logs", spec, run_id, timeout=120)   # read from the shared folder while it runs
    assert res.returncode == 0 and "trainkit: node 0 (" in res.stdout, res.stdout
    res = _tk(ws, "cancel", spec, run_id, "--json", timeout=JOB_TIMEOUT_S)
    assert res.returncode == 0 and json.loads(res.stdout)["status"] == "cancelled", res.stdout
    assert _no_job_and_no_process(slurm, run_id) == ("", [])
    run_dir = ws / "runs" / run_id
    assert json.loads((run_dir / "run.json").read_text())["status"] == "cancelled"
    assert (run_dir / "logs" / "node-0.log").is_file()

    res = _tk(ws, "train", spec, *DIGITS, "data=folder", f"data_args.path={tmp_path / 'no-such-data'}")
    assert res.returncode == 6, res.stdout
    assert "data_args.path" in res.stdout and "failed" in res.stdout, res.stdout
    records = [json.loads(p.read_text()) for p in (ws / "runs").glob("*/run.json")]
    assert sorted(r["status"] for r in records) == ["cancelled", "failed"], records
    assert _no_job_and_no_process(slurm, "trainkit") == ("", [])


# The GPT example (examples/train/gpt.yaml) shrunk to seconds of CPU, as tests/dist/test_train_fsdp.py
# shrinks it: 2 blocks 32 wide on 16 000 bytes of pydoc text, one epoch (about 25 steps at global
# batch 16; 6 s of CPU in one process here)
GPT_MODEL = {"block_size": 32, "n_layer": 2, "n_head": 2, "n_embd": 32, "dropout": 0.1}
GPT = ["--config", str(REPO / "examples/train/gpt.yaml"),
       "model_args={block_size: 32, n_layer: 2, n_head: 2, n_embd: 32, dropout: 0.1}",
       "data_args={block_size: 32, max_bytes: 16000}", "batch=16"]
# The engine's part of a run folder on every target (tests/e2e/test_train_local.py FETCHED), one
# rank log per rank; model.onnx is not among them: the GPT example does not export (export.onnx: false)
ENGINE_FILES = {"config.yaml", "curves.png", "hparams.yaml", "metrics.jsonl", "summary.json",
                "weights/best.pt", "weights/last.pt", "logs/rank-0.log", "logs/rank-1.log"}


def test_the_gpt_example_trains_across_two_slurm_nodes_through_trainkit_train(slurm, tmp_path):
    """`trainkit train` of the GPT example on `cloud: slurm`: one batch job, torchrun on both
    nodes, the run completes and its folder comes back as on `local`/`hosts` (metrics, weights,
    curves, the newest complete checkpoint), the checkpoint loads into the example's model and
    perplexity is reported."""
    import torch

    from trainkit.train import restore
    from trainkit.train.gpt import GPT as GPTModel

    shared, ws = tmp_path / "shared", tmp_path / "ws"
    spec = str(_cli_spec(slurm, shared, tmp_path / "lab.yaml"))
    assert _tk(ws, "apply", spec, "--yes", timeout=120).returncode == 0
    res = _tk(ws, "train", spec, *GPT, "--json")
    assert res.returncode == 0, f"{res.stdout}\n{slurm.logs()}"
    result, _ = json.JSONDecoder().raw_decode(res.stdout[res.stdout.index("{"):])
    run_dir = Path(result["run_dir"])
    job_id = json.loads((run_dir / "run.json").read_text())["slurm_job"]

    summary = json.loads((run_dir / "summary.json").read_text())
    assert (summary["status"], summary["world_size"], summary["num_nodes"]) == ("completed", 2, 2), summary
    assert summary["steps"] == summary["total_steps"] > 0 and summary["global_batch"] == 16, summary
    assert summary["val_ppl"] == pytest.approx(math.exp(summary["val_loss"]), rel=1e-6), summary
    assert 1 < summary["test_ppl"] < 256, summary   # per byte: below a uniform guess over 256 values
    names = {p.relative_to(run_dir).as_posix() for p in run_dir.rglob("*") if p.is_file()}
    assert ENGINE_FILES | {"job.sbatch", "node.sh", "logs/node-0.log", "logs/node-1.log",
                           f"logs/slurm-{job_id}.out", "run.json", "events.jsonl"} <= names, sorted(names)
    assert yaml.safe_load((run_dir / "config.yaml").read_text())["model_args"] == GPT_MODEL
    steps = [r for r in map(json.loads, (run_dir / "metrics.jsonl").read_text().splitlines()) if r["kind"] == "step"]
    assert steps and steps[-1]["loss"] < steps[0]["loss"], steps   # it learns
    for rank, host in enumerate(slurm.hosts):
        log = (run_dir / "logs" / f"node-{rank}.log").read_text()
        assert f"trainkit: node {rank} ({host.name}, {host.address})" in log, log[-1500:]

    # the newest checkpoint came back complete, and it is the example's model, whole
    newest = run_dir / "checkpoints" / Path(summary["checkpoint"]).name
    assert restore.is_checkpoint(newest), sorted(names)
    model = GPTModel(**GPT_MODEL)
    model.load_state_dict(restore.load(newest)["model"])   # strict: every key, full shapes
    logits = model.eval()(torch.zeros(1, GPT_MODEL["block_size"], dtype=torch.long))
    assert logits.shape == (1, GPT_MODEL["block_size"], 256) and torch.isfinite(logits).all()


def _record(ws: Path, run_id: str) -> dict:
    return json.loads((ws / "runs" / run_id / "run.json").read_text())


def _wait_for(what: str, ok, slurm: SlurmCluster, proc: subprocess.Popen | None = None) -> None:
    """Poll `ok()` until it holds (JOB_TIMEOUT_S at most); the CLI's output so far on a timeout."""
    deadline = time.monotonic() + JOB_TIMEOUT_S
    while time.monotonic() < deadline:
        if ok():
            return
        if proc is not None and proc.poll() is not None:
            break
        time.sleep(1)
    out = proc.communicate(timeout=60)[0] if proc is not None and proc.poll() is not None else ""
    raise AssertionError(f"{what}: not seen\n{out}\n{slurm.logs()}")


def test_doctor_top_resume_and_recover_through_a_requeue_and_a_failed_job_on_slurm(slurm, tmp_path):
    """`doctor` probes the idle nodes through srun and names a drained node with its Reason (exit
    12); `top` shows a running job's state and step. `train --resume RUN` of a cancelled run submits a new attempt in the same folder on the
    shared storage, which resumes from its checkpoint; with `--recover` the follow loop records
    Slurm's requeue of that job (USR1 as Slurm sends it ahead of the time limit: the job
    checkpoints and requeues itself) as a `requeued` event and keeps following it, and when the
    job then ends FAILED (its batch shell killed: a job lost under the scheduler) submits the run
    once more; the run completes with three attempts, and `runs` shows them."""
    shared, ws = tmp_path / "shared", tmp_path / "ws"
    spec = str(_cli_spec(slurm, shared, tmp_path / "lab.yaml"))
    assert _tk(ws, "apply", spec, "--yes", timeout=120).returncode == 0
    # doctor: the probe on both idle nodes through srun; then a drained node named with its Reason
    res = _tk(ws, "doctor", spec, "--json", "--min-free-gb", "0", timeout=120)
    assert res.returncode == 0, res.stdout
    report = json.loads(res.stdout[res.stdout.index("{"):])
    assert [(n["node"], n["verdict"]) for n in report["nodes"]] == [(h.name, "ok") for h in slurm.hosts], report
    assert all(any(c["name"] == "workdir" for c in n["checks"]) for n in report["nodes"]), report
    second = slurm.hosts[1].name
    slurm.sh(slurm.login, f"scontrol update NodeName={second} State=DRAIN Reason=ecc-test")
    res = _tk(ws, "doctor", spec, "--min-free-gb", "0", timeout=120)
    slurm.sh(slurm.login, f"scontrol update NodeName={second} State=RESUME")
    assert res.returncode == 12 and f"failed node(s): {second}" in res.stdout and "ecc-test" in res.stdout, res.stdout
    res = _tk(ws, "train", spec, *DIGITS, "epochs=15", f"checkpoint.every_n_steps={CHECKPOINT_EVERY}", "--detach",
              timeout=120)
    assert res.returncode == 0, res.stdout
    run_id = res.stdout.strip().splitlines()[-1]
    remote = shared / ".trainkit" / "lab" / "runs" / run_id
    _wait_for("steps of attempt 1", lambda: len(_lines(remote / "metrics.jsonl")) >= 5, slurm)
    res = _tk(ws, "cancel", spec, run_id, "--json")
    assert res.returncode == 0 and json.loads(res.stdout)["status"] == "cancelled", res.stdout

    proc = subprocess.Popen([str(TRAINKIT), "train", spec, "--resume", run_id, "--recover", "--max-recoveries", "2",
                             "--json", "--workdir", str(ws)], cwd=REPO, text=True, stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, env={**os.environ, "OMP_NUM_THREADS": "1"})
    try:
        _wait_for("attempt 2 submitted", lambda: len(_record(ws, run_id)["attempts"]) == 2, slurm, proc)
        job2 = _record(ws, run_id)["slurm_job"]
        logged = len(_lines(remote / "metrics.jsonl"))
        _wait_for("steps of attempt 2", lambda: len(_lines(remote / "metrics.jsonl")) > logged, slurm, proc)
        res = _tk(ws, "top", spec, "--once", "--json", timeout=120)   # the job's state and the engine's step
        rows = json.loads(res.stdout)
        assert [(r["slurm"]["job"], r["slurm"]["state"]) for r in rows] == [(job2, "RUNNING")], res.stdout
        assert rows[0]["job"]["step"] > 0 and rows[0]["job"]["samples_per_s"] > 0, res.stdout
        slurm.sh(slurm.login, f"scancel --batch --signal=USR1 {job2}")

        def restarted() -> bool:   # Slurm holds a requeued job back: let it start now, as an admin would
            slurm.cluster.ssh(slurm.login, f"scontrol update JobId={job2} StartTime=now", check=False)
            return f"job {job2} (restart 1)" in (remote / "logs" / f"slurm-{job2}.out").read_text()
        _wait_for("job 2 started again after its requeue", restarted, slurm, proc)
        logged = len(_lines(remote / "metrics.jsonl"))
        _wait_for("steps after the requeue", lambda: len(_lines(remote / "metrics.jsonl")) > logged, slurm, proc)
        slurm.sh(slurm.login, f"scancel --batch --signal=KILL {job2}")
        out = proc.communicate(timeout=JOB_TIMEOUT_S)[0]
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 0, f"{out}\n{slurm.logs()}"
    record = _record(ws, run_id)
    assert record["status"] == "completed" and len(record["attempts"]) == 3, record
    assert [a.get("outcome") for a in record["attempts"]] == ["cancelled", "preempted", "completed"], record
    events = [json.loads(ln) for ln in (ws / "runs" / run_id / "events.jsonl").read_text().splitlines()]
    requeues = [e for e in events if e["event"] == "requeued"]
    assert requeues and requeues[0]["slurm_job"] == job2 and requeues[0]["restarts"] == 1, events
    assert any(e["event"] == "resubmitted" and e["slurm_job"] == job2 for e in events), events
    summary = json.loads((ws / "runs" / run_id / "summary.json").read_text())
    assert summary["status"] == "completed" and summary["resumed_from_step"] > 0, summary
    res = _tk(ws, "runs", spec, "--json", timeout=120)
    row = json.loads(res.stdout)[0]
    assert (row["status"], row["attempts"]) == ("completed", 3), res.stdout
    assert _no_job_and_no_process(slurm, run_id) == ("", [])


def test_a_command_job_with_a_workdir_runs_on_every_slurm_node_with_the_job_environment(slurm, tmp_path):
    """A `command:` job: its workdir ships to the run folder on the shared storage, setup runs once
    per node, and the command runs on both nodes in that folder with the environment hosts give a
    job (NODE_RANK, WORLD_SIZE, RANK, MASTER_ADDR, TRAINKIT_*) and its `env:` as literal values."""
    shared, ws = tmp_path / "shared", tmp_path / "ws"
    spec = str(_cli_spec(slurm, shared, tmp_path / "lab.yaml"))
    assert _tk(ws, "apply", spec, "--yes", timeout=120).returncode == 0
    code = tmp_path / "code"
    code.mkdir()
    (code / "show.py").write_text(
        "import os, pathlib\n"
        "keys = ('NODE_RANK', 'WORLD_SIZE', 'RANK', 'MASTER_ADDR', 'TRAINKIT_NUM_NODES', 'MY_VAR', 'TRAINKIT_CODE_DIR')\n"
        "out = pathlib.Path(os.environ['TRAINKIT_RUN_DIR'], 'env-' + os.environ['NODE_RANK'] + '.txt')\n"
        "out.write_text('\\n'.join(f'{k}={os.environ.get(k)}' for k in keys) + '\\ncwd=' + os.getcwd() + '\\n')\n")
    literal = "a b;$(touch /tmp/pwned) `x`"
    (tmp_path / "job.yaml").write_text(yaml.safe_dump({
        "name": "show", "workdir": str(code), "setup": 'echo "set up on $SLURMD_NODENAME"',
        "env": {"MY_VAR": literal}, "command": '"$TRAINKIT_PYTHON" show.py'}))
    res = _tk(ws, "train", spec, "--config", str(tmp_path / "job.yaml"), "--json")
    assert res.returncode == 0, f"{res.stdout}\n{slurm.logs()}"
    result, _ = json.JSONDecoder().raw_decode(res.stdout[res.stdout.index("{"):])   # the next steps follow
    run_dir = ws / "runs" / result["run_id"]
    remote_code = f"{shared}/.trainkit/lab/runs/{run_dir.name}/code"
    for rank, host in enumerate(slurm.hosts):
        env = dict(ln.split("=", 1) for ln in (run_dir / f"env-{rank}.txt").read_text().splitlines())
        assert env == {"NODE_RANK": str(rank), "WORLD_SIZE": "2", "RANK": str(rank), "MASTER_ADDR": slurm.hosts[0].address,
                       "TRAINKIT_NUM_NODES": "2", "MY_VAR": literal, "TRAINKIT_CODE_DIR": remote_code,
                       "cwd": remote_code}, env
        assert f"set up on {host.name}" in (run_dir / "logs" / f"node-{rank}.log").read_text()
    assert not Path("/tmp/pwned").exists()
    assert json.loads((run_dir / "run.json").read_text())["status"] == "completed"
