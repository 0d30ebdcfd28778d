"""The fault matrix of `train --recover` on the `hosts` target: four SSH machines in network
namespaces (two active, two spares), one cluster for every row (applied once per module), the
digits job checkpointing every CKPT_EVERY steps on the shared folder.

One table, one row per fault. Each row starts a run with `--recover`, injects its fault once the
job passed KILL_AT, and must end with: the run completed (exit 0, run.json and summary.json say
so), exactly one recovery in events.jsonl (`resumed`, losing at most one checkpoint interval:
lost_steps = the last step logged before the relaunch minus the step it resumed from), final
weights equal, bit for bit, to an uninterrupted run's (the engine's resume is exact), and no
process of the run left on any machine (counted in every namespace). Killed machines are booted
again between rows (fresh, like a replacement from the cloud) and serve as spares for the next.

- worker: every process of the rank-1 machine is killed (sshd too: the machine is gone);
- head: the rank-0 machine is killed; the rendezvous must form around a new head that the
  survivor's /etc/hosts has never heard of (torchrun --local-addr: the head's IP, not its name);
- spare_dies: the worker is killed, and the spare put in its place (hosts.json names it) is
  killed while it is being provisioned: recovery goes on with the next spare;
- controller: the controller (`trainkit train --recover`) is SIGKILLed, then the worker; a new
  `train --resume RUN --recover` finds the dead node by probing, stops the survivor's stuck job,
  replaces the node and resumes (and records `resumed`);
- two_nodes: both active machines are killed at once; both spares take over.

Also here (same machines): a launch that fails on one node is rolled back on the others (no
supervisor or torchrun of it left, the rendezvous port free) and recorded.
"""

from __future__ import annotations

import json
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

import pytest
import yaml
from netns import NetnsCluster, missing_tools, names_for
from test_hosts_multinode import SITE_VARS, _env, _kill_group
from test_recover_hosts import _assert_same_weights, _runs, _wait_step

PREFIX, SUBNET = names_for(__name__)  # this module's own namespace names and /24

REPO = Path(__file__).resolve().parents[2]
TRAINKIT = Path(sys.executable).parent / "trainkit"
CLUSTER = "netns-faults"
CKPT_EVERY = 5
KILL_AT = 15
# digits: 4 epochs x 19 steps at global batch 64 over 2 ranks (a small CNN: seconds per epoch)
DIGITS = ["--config", str(REPO / "examples/train/digits.yaml"), "epochs=4", "export.onnx=false",
          "plot=false", "tensorboard=false", "checkpoint.interval=null",
          f"checkpoint.every_n_steps={CKPT_EVERY}", "log_every=1", "workers=0"]
FAST = ["--poll", "1", "--backoff", "1"]
RDZV_PORT = 29400


@dataclass(frozen=True)
class Row:
    id: str
    kill: tuple[str, ...]          # "head" / "worker": the active machines killed at KILL_AT
    kill_spare: bool = False       # also the spare hosts.json puts in, while it is provisioned
    controller: bool = False       # the controller dies first; a new one resumes with --recover


ROWS = [Row("worker", ("worker",)), Row("head", ("head",)),
        Row("spare_dies", ("worker",), kill_spare=True), Row("controller", ("worker",), controller=True),
        Row("two_nodes", ("head", "worker"))]


class Bench:
    """The module's cluster: four namespace machines, the spec, the workspace, the reference run."""

    def __init__(self, cluster: NetnsCluster, base: Path):
        self.cluster, self.base = cluster, base
        self.shared = base / "shared"
        self.shared.mkdir()
        self.ws = base / "ws"
        (self.ws / "group_vars").mkdir(parents=True)
        (self.ws / "group_vars" / "all.yml").write_text(yaml.safe_dump(SITE_VARS))
        hosts = [{"name": h.name, "address": h.address, "port": h.port, "user": "root"} for h in cluster.hosts]
        for h in hosts[2:]:
            h["spare"] = True
        spec = {"name": CLUSTER, "cloud": "hosts", "hosts": hosts,
                "ssh": {"user": "root", "private_key": str(cluster.key)},
                "storage": {"data_disk": {"enabled": False}, "nas": {"enabled": True, "mount_point": str(self.shared)}},
                "launch": {"nproc_per_node": 1, "rdzv_port": RDZV_PORT, "python": sys.executable,
                           "root": str(cluster.local_root / "trainkit")}}
        self.spec = base / "cluster.yaml"
        self.spec.write_text(yaml.safe_dump(spec, sort_keys=False))
        self.common = [str(self.spec), "--workdir", str(self.ws)]
        self.ref: Path | None = None

    def tk(self, *args, timeout=600) -> subprocess.CompletedProcess:
        proc = self.start(*args)
        try:
            out, _ = proc.communicate(timeout=timeout)
        finally:
            _kill_group(proc)
        return subprocess.CompletedProcess(proc.args, proc.returncode, out, "")

    def start(self, *args) -> subprocess.Popen:
        return subprocess.Popen([str(TRAINKIT), *args], cwd=REPO, env=_env(self.cluster), text=True,
                                stdout=subprocess.PIPE, stderr=subprocess.STDOUT, start_new_session=True)

    def host(self, name: str):
        return next(h for h in self.cluster.hosts if h.name == name)

    def active(self) -> list[str]:
        path = self.ws / "hosts.json"
        return json.loads(path.read_text())["active"] if path.is_file() else [h.name for h in self.cluster.hosts[:2]]

    def revive_all(self) -> None:
        for h in self.cluster.hosts:
            if not h.pids():
                self.cluster.revive(h)

    def leftovers(self, run_id: str) -> dict[str, list[str]]:
        """Processes of the run (supervisor, launch.sh, torchrun, ranks) on each live machine."""
        found = {}
        for h in self.cluster.hosts:
            for pid in h.pids():
                try:
                    cmd = Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
                except OSError:
                    continue
                if run_id in cmd or "supervise.py" in cmd or "torch.distributed.run" in cmd:
                    found.setdefault(h.name, []).append(f"{pid} {cmd[:160]}")
        return found

    def no_leftovers(self, run_id: str, timeout_s: float = 60) -> None:
        """Waits for the run's processes to be gone everywhere (a supervisor exits just after it
        writes its final state); fails naming what is left."""
        deadline = time.monotonic() + timeout_s
        while (left := self.leftovers(run_id)) and time.monotonic() < deadline:
            time.sleep(0.5)
        assert not left, left


@pytest.fixture(scope="module")
def bench(request, tmp_path_factory) -> Bench:
    missing = missing_tools()
    if missing:
        pytest.fail("namespace hosts need: " + ", ".join(missing))
    base = tmp_path_factory.mktemp("fm")   # short: ssh control sockets must fit in 108 bytes
    cluster = NetnsCluster(base, count=4, prefix=PREFIX, local_root=base / "node-local",
                           subnet=SUBNET)
    request.addfinalizer(cluster.stop)
    cluster.start()
    b = Bench(cluster, base)
    applied = b.tk("apply", *b.common, "--yes")
    assert applied.returncode == 0, applied.stdout
    ref = b.tk("train", *b.common, *DIGITS, *FAST)          # the uninterrupted reference
    assert ref.returncode == 0, ref.stdout
    b.ref = _runs(b.ws)[-1]
    return b


@pytest.mark.parametrize("row", ROWS, ids=[r.id for r in ROWS])
def test_fault_matrix_every_row_ends_complete_with_one_interval_lost_and_nothing_left(bench, row):
    b = bench
    b.revive_all()
    head, worker = b.active()
    before = set(_runs(b.ws))
    proc = b.start("train", *b.common, *DIGITS, *FAST, "--recover")
    try:
        run = _newest_after(b, before, proc)
        _wait_step(b.shared / CLUSTER / "runs" / run.name / "metrics.jsonl", KILL_AT, proc)
        if row.controller:
            _kill_group(proc)
        for who in row.kill:
            b.cluster.kill(b.host(head if who == "head" else worker))
        dead_spare = _kill_the_spare_put_in(b, {head, worker}, proc) if row.kill_spare else None
        if row.controller:
            proc = b.start("train", *b.common, "--resume", run.name, *FAST, "--recover")
        out, _ = proc.communicate(timeout=600)
    finally:
        _kill_group(proc)
    assert proc.returncode == 0, out

    record = json.loads((run / "run.json").read_text())
    summary = json.loads((run / "summary.json").read_text())
    events = [json.loads(x) for x in (run / "events.jsonl").read_text().splitlines()]
    kinds = [e["event"] for e in events]
    assert record["status"] == summary["status"] == "completed" and kinds[-1] == "completed", kinds
    assert all(a["ended_at"] for a in record["attempts"]), record["attempts"]
    assert len(record["attempts"]) == summary["cost"]["attempts"] == 2 and summary["world_size"] == 2
    resumed = [e for e in events if e["event"] == "resumed"]
    assert len(resumed) == 1, kinds
    assert resumed[0]["step"] > 0 and 0 <= resumed[0]["lost_steps"] <= CKPT_EVERY, resumed
    lost_hosts = {head if who == "head" else worker for who in row.kill}
    assert sorted(e["node"] for e in events if e["event"] == "replaced") == sorted(
        lost_hosts | ({dead_spare} if dead_spare else set())), events
    assert not set(b.active()) & (lost_hosts | {dead_spare}), b.active()
    if dead_spare:
        assert [e["node"] for e in events if e["event"] == "spare_failed"] == [dead_spare], events
    _assert_same_weights(b.shared / CLUSTER / "checkpoints", b.ref.name, run.name)
    b.no_leftovers(run.name)


def _newest_after(b: Bench, before: set, proc) -> Path:
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        assert proc.poll() is None, proc.stdout.read()
        new = [p for p in _runs(b.ws) if p not in before]
        if new:
            return new[-1]
        time.sleep(0.3)
    raise AssertionError("no new run")


def _kill_the_spare_put_in(b: Bench, active: set, proc, timeout_s: float = 300) -> str:
    """Once hosts.json puts a spare in (recovery writes it, then provisions the spare), kill it."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        assert proc.poll() is None, proc.stdout.read()
        new = [n for n in b.active() if n not in active]
        if new:
            b.cluster.kill(b.host(new[0]))
            return new[0]
        time.sleep(0.1)
    raise AssertionError("no spare was put in")


CUSTOM = ["--config", str(REPO / "examples/custom/train.yaml")]


def test_a_launch_that_fails_on_one_node_is_rolled_back_on_the_others_and_recorded(bench):
    """The worker's node-local launch root is unusable (a file where the code folder goes): the
    launch fails there after the head's supervisor and torchrun started. Nothing of the attempt
    may be left on the head (the rendezvous port free), and run.json/events.jsonl record it."""
    b = bench
    b.revive_all()
    head, worker = b.active()
    blocker = b.host(worker).dir / "local" / "trainkit" / "code"
    blocker.parent.mkdir(parents=True, exist_ok=True)
    saved = blocker.with_name("code.saved")
    if blocker.is_dir():
        blocker.rename(saved)
    blocker.write_text("not a folder\n")
    try:
        failed = b.tk("train", *b.common, *CUSTOM, *FAST)
    finally:
        blocker.unlink()
        if saved.exists():
            saved.rename(blocker)
    assert failed.returncode == 6 and "launch failed on" in failed.stdout and worker in failed.stdout, failed.stdout
    run = _runs(b.ws)[-1]
    record = json.loads((run / "run.json").read_text())
    assert record["status"] == "failed", record
    assert [(a["outcome"], a["failed"]) for a in record["attempts"]] == [("launch_failed", [worker])]
    [ev] = [e for e in map(json.loads, (run / "events.jsonl").read_text().splitlines())
            if e["event"] == "launch_failed"]
    assert ev["failed"] == [worker] and ev["stopped"][head] >= 1, ev
    b.no_leftovers(run.name, timeout_s=5)
    listening = subprocess.run(["ip", "netns", "exec", head, "ss", "-Hltn", f"sport = :{RDZV_PORT}"],
                               capture_output=True, text=True, check=True).stdout
    assert not listening.strip(), listening


def test_a_second_workspace_on_the_same_hosts_is_locked_out_and_its_destroy_stops_and_fetches_the_run(bench):
    """The run lock lives on the nodes (launch.root/run.lock): a second workspace on the same
    machines gets exit 8 while a run of the first is live, and its destroy stops that run and
    fetches it before removing launch.root. Last in the module: the cluster is gone after it."""
    b = bench
    b.revive_all()
    ws2 = b.base / "ws2"
    (ws2 / "group_vars").mkdir(parents=True)
    (ws2 / "group_vars" / "all.yml").write_text(yaml.safe_dump(SITE_VARS))
    spec = yaml.safe_load(b.spec.read_text())            # the same machines, the first's active ones first
    active = b.active()
    spec["hosts"] = sorted(({**h, "spare": h["name"] not in active} for h in spec["hosts"]),
                           key=lambda h: active.index(h["name"]) if h["name"] in active else 9)
    (b.base / "cluster2.yaml").write_text(yaml.safe_dump(spec, sort_keys=False))
    other = [str(b.base / "cluster2.yaml"), "--workdir", str(ws2)]
    assert b.tk("apply", *other, "--yes").returncode == 0
    started = b.tk("train", *b.common, *DIGITS, "epochs=40", "--detach")
    assert started.returncode == 0, started.stdout
    run_id = started.stdout.split()[0]
    metrics = b.shared / CLUSTER / "runs" / run_id / "metrics.jsonl"
    deadline = time.monotonic() + 180
    while not (metrics.is_file() and '"kind": "step"' in metrics.read_text()) and time.monotonic() < deadline:
        time.sleep(0.5)

    second = b.tk("train", *other, *DIGITS, *FAST, timeout=180)
    assert second.returncode == 8 and run_id in second.stdout, second.stdout
    assert not (ws2 / "runs").is_dir() or not list((ws2 / "runs").iterdir())   # no run was started

    gone = b.tk("destroy", *other, "--yes")
    assert gone.returncode == 0, gone.stdout
    fetched = ws2 / "runs" / run_id
    assert json.loads((fetched / "run.json").read_text())["status"] == "cancelled"
    assert (fetched / "metrics.jsonl").is_file() and (fetched / "logs").is_dir()
    b.no_leftovers(run_id, timeout_s=30)
