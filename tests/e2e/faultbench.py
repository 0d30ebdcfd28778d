"""The fault matrix's bench (tests/e2e/test_fault_matrix*.py): four SSH machines in network
namespaces (two active, two spares), one cluster per test module (applied once), the digits job
checkpointing every CKPT_EVERY steps on the shared folder, an uninterrupted reference run, and
`check_row`, which runs one row of the matrix and asserts what every row must end with.

Not a test module. The matrix is split over two modules so that xdist runs them side by side
(a module runs whole on one worker): test_fault_matrix.py has the node faults,
test_fault_matrix_control.py the controller's and the run lock's.

Every row starts a run with `--recover`, injects its fault once the job passed KILL_AT, and must
end with: the run completed (exit 0, run.json and summary.json say so), exactly one recovery in
events.jsonl (`resumed`, losing at most one checkpoint interval: lost_steps = the last step
logged before the relaunch minus the step it resumed from), final weights equal, bit for bit, to
the uninterrupted run's (the engine's resume is exact), and no process of the run left on any
machine (counted in every namespace). Killed machines are booted again between rows (fresh, like
a replacement from the cloud) and serve as spares for the next.
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
# The during_write row: how long step KILL_AT's save is held in flight before its commit
# (TRAINKIT_FAULT_SLOW_SAVE, trainkit/train/sharded.py KillFault), so that the worker is killed
# while that checkpoint is incomplete (its folder there, no COMPLETE marker).
SLOW_SAVE_S = 6
RDZV_PORT = 29400


# The recovery phases the controller can die in, after the fault, and the event that starts each
# (trainkit/runs/recover.py drive): "stop" (the attempt ended, the survivors' jobs being stopped),
# "provision" (the spare put in, site.yml running on it), "backoff" (replaced and provisioned,
# waiting before the relaunch).
CONTROLLER_PHASES = {"stop": "preempted", "provision": "replaced", "backoff": "backoff"}


@dataclass(frozen=True)
class Row:
    id: str
    kill: tuple[str, ...]          # "head" / "worker": the active machines killed at KILL_AT
    kill_spare: bool = False       # also the spare hosts.json puts in, while it is provisioned
    controller: bool = False       # the controller is SIGKILLed; a new one resumes with --recover
    controller_at: str = "step"    # when it dies: "step" (at KILL_AT, before the fault), or after the
                                   # fault at the event CONTROLLER_PHASES names for the phase
    bad_spare: bool = False        # the first spare's shared folder is its own tmpfs (a NAS mount that
                                   # failed): doctor fails it once it is put in, the next spare follows
    partition: bool = False        # the worker is cut off the network instead of killed, and healed once
                                   # a spare replaced it: its old job must be fenced (stopped) there
    during_write: bool = False     # the fault comes while step KILL_AT's checkpoint is in flight (held
                                   # SLOW_SAVE_S before its commit by the engine's test hook)




class Bench:
    """The module's cluster: four namespace machines, the spec, the workspace, the reference run."""

    def __init__(self, cluster: NetnsCluster, base: Path):
        self.cluster, self.base = cluster, base
        self.shared = base / "shared"
        self.shared.mkdir(exist_ok=True)   # test_fault_matrix_node.py mounts a tmpfs there first
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


def build_bench(request, tmp_path_factory) -> Bench:
    """The requesting test module's bench (its own namespace names and /24: netns.names_for),
    stopped when the module ends. Each module wraps it in a module-scoped `bench` fixture."""
    prefix, subnet = names_for(request.module.__name__)
    missing = missing_tools()
    if missing:
        pytest.fail("namespace hosts need: " + ", ".join(missing))
    base = tmp_path_factory.mktemp("fm")   # short: ssh control sockets must fit in 108 bytes
    cluster = NetnsCluster(base, count=4, prefix=prefix, local_root=base / "node-local",
                           subnet=subnet)
    request.addfinalizer(cluster.stop)
    cluster.start()
    b = Bench(cluster, base)
    applied = b.tk("apply", *b.common, "--yes")
    assert applied.returncode == 0, applied.stdout
    ref = b.tk("train", *b.common, *DIGITS, *FAST)          # the uninterrupted reference
    assert ref.returncode == 0, ref.stdout
    b.ref = _runs(b.ws)[-1]
    return b


def check_row(bench: Bench, row: Row) -> None:
    """One row: start, inject the fault at KILL_AT, and assert what every row ends with."""
    b = bench
    b.revive_all()
    head, worker = b.active()
    before = set(_runs(b.ws))
    bad = next(h for h in b.cluster.hosts if h.name not in (head, worker)) if row.bad_spare else None
    if bad:  # only in its own mount namespace: the others keep seeing the shared folder
        b.cluster.ssh(bad, f"mount -t tmpfs -o size=8m tmpfs {b.shared}")
    config = DIGITS
    if row.during_write:   # the digits config with the slow-save hook in the job's environment
        slow = {**yaml.safe_load(Path(DIGITS[1]).read_text()), "env": {"TRAINKIT_FAULT_SLOW_SAVE": f"{KILL_AT}:{SLOW_SAVE_S}"}}
        (b.base / "digits-slow-save.yaml").write_text(yaml.safe_dump(slow))
        config = ["--config", str(b.base / "digits-slow-save.yaml"), *DIGITS[2:]]
    proc = b.start("train", *b.common, *config, *FAST, "--recover")
    try:
        run = newest_run(b, before, proc)
        if row.during_write:
            _wait_file(b.shared / CLUSTER / "checkpoints" / run.name / f"step-{KILL_AT:08d}", proc)
        else:
            _wait_step(b.shared / CLUSTER / "runs" / run.name / "metrics.jsonl", KILL_AT, proc)
        if row.controller and row.controller_at == "step":
            _kill_group(proc)
        for who in row.kill:
            if row.partition:
                b.cluster.partition(b.host(head if who == "head" else worker))
            else:
                b.cluster.kill(b.host(head if who == "head" else worker))
        if row.partition:  # healed once recovery gave up on it: its old job is still there, stuck
            _wait_event(run, "replaced", proc)
            for who in row.kill:
                b.cluster.partition(b.host(head if who == "head" else worker), cut=False)
        dead_spare = _kill_the_spare_put_in(b, {head, worker}, proc) if row.kill_spare else None
        if row.controller and row.controller_at in CONTROLLER_PHASES:
            _wait_event(run, CONTROLLER_PHASES[row.controller_at], proc)
            _kill_group(proc)
        if row.controller:
            proc = b.start("train", *b.common, "--resume", run.name, *FAST, "--recover")
        out, _ = proc.communicate(timeout=600)
    finally:
        _kill_group(proc)
        if bad:
            b.cluster.ssh(bad, f"umount {b.shared}", check=False)
    assert proc.returncode == 0, out

    record, summary, events = completed_run(run)
    kinds = [e["event"] for e in events]
    assert all(a["ended_at"] for a in record["attempts"]), record["attempts"]
    assert len(record["attempts"]) == summary["cost"]["attempts"] == 2 and summary["world_size"] == 2
    resumed = [e for e in events if e["event"] == "resumed"]
    assert len(resumed) == 1, kinds
    assert resumed[0]["step"] > 0 and 0 <= resumed[0]["lost_steps"] <= CKPT_EVERY, resumed
    if row.during_write:   # the incomplete checkpoint was skipped (or committed by the survivor)
        assert resumed[0]["step"] in (KILL_AT - CKPT_EVERY, KILL_AT), resumed
    lost_hosts = {head if who == "head" else worker for who in row.kill}
    given_up = {dead_spare or (bad.name if bad else None)} - {None}
    assert sorted(e["node"] for e in events if e["event"] == "replaced") == sorted(lost_hosts | given_up), events
    assert not set(b.active()) & (lost_hosts | given_up), b.active()
    if dead_spare:
        assert [e["node"] for e in events if e["event"] == "spare_failed"] == [dead_spare], events
    if row.partition:  # the healed host's old job was stopped by the controller, not left to run
        assert sorted(e["node"] for e in events if e["event"] == "fenced") == sorted(lost_hosts), events
        assert not [e for e in events if e["event"] == "unfenced"], events
    if bad:  # doctor ran on the replacement, failed it, and its replacement passed
        assert [e["nodes"] for e in events if e["event"] == "doctor_failed"] == [[bad.name]], events
        assert "shared" in out and bad.name in out, out
    _assert_same_weights(b.shared / CLUSTER / "checkpoints", b.ref.name, run.name)
    b.no_leftovers(run.name)


def completed_run(run: Path) -> tuple[dict, dict, list[dict]]:
    """run.json, summary.json and events.jsonl of a run that must have completed (all three say so)."""
    record = json.loads((run / "run.json").read_text())
    summary = json.loads((run / "summary.json").read_text())
    events = [json.loads(x) for x in (run / "events.jsonl").read_text().splitlines()]
    assert record["status"] == summary["status"] == "completed" and events[-1]["event"] == "completed", \
        [e["event"] for e in events]
    return record, summary, events


def _wait_event(run: Path, kind: str, proc, timeout_s: float = 300) -> None:
    """Until the run's events.jsonl has an event of `kind` (the controller writes it)."""
    deadline = time.monotonic() + timeout_s
    path = run / "events.jsonl"
    while time.monotonic() < deadline:
        assert proc.poll() is None, proc.stdout.read()
        if path.is_file() and f'"event": "{kind}"' in path.read_text():
            return
        time.sleep(0.2)
    raise AssertionError(f"no {kind} event")


def _wait_file(path: Path, proc, timeout_s: float = 240) -> None:
    deadline = time.monotonic() + timeout_s
    while not path.exists():
        assert proc.poll() is None, proc.stdout.read()
        assert time.monotonic() < deadline, f"{path} never appeared"
        time.sleep(0.05)


def newest_run(b: Bench, before: set, proc) -> Path:
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




# recover.elastic rows: each step sleeps this long (the engine's TRAINKIT_FAULT_STEP_SLEEP hook), so
# that the spare is provisioned while the survivor still trains: digits steps take milliseconds
# here, the spare's site.yml run 43 s on a quiet machine (docs/runs.md, "Measured"); the ~60 steps
# after the fault then take ~90 s.
ELASTIC_STEP_SLEEP_S = 1.5
# Final test accuracy of an elastic run vs the uninterrupted one: the same samples make every
# global batch, but the survivor sums them in another order (float), and dropout masks follow the
# sample, not the rank (trainkit/train/rng.py); digits ends near 0.95.
ELASTIC_ACC_TOLERANCE = 0.02


def check_elastic_row(bench: Bench, who: str) -> None:
    """recover.elastic: `who` ("head" or "worker") is killed at KILL_AT; the survivor resumes
    alone (world 1, the same global batch) while the spare is provisioned, then is stopped at a
    checkpoint and the run grows back to 2 ranks. Ends complete, losing at most one interval at
    the fault and nothing at the grow, with the reference run's accuracy, and nothing left."""
    b = bench
    b.revive_all()
    head, worker = b.active()
    gone, survivor = (head, worker) if who == "head" else (worker, head)
    before = set(_runs(b.ws))
    config = {**yaml.safe_load(Path(DIGITS[1]).read_text()), "recover": {"elastic": True},
              "env": {"TRAINKIT_FAULT_STEP_SLEEP": str(ELASTIC_STEP_SLEEP_S)}}
    (b.base / "digits-elastic.yaml").write_text(yaml.safe_dump(config))
    proc = b.start("train", *b.common, "--config", str(b.base / "digits-elastic.yaml"), *DIGITS[2:], *FAST,
                   "--recover")
    try:
        run = newest_run(b, before, proc)
        _wait_step(b.shared / CLUSTER / "runs" / run.name / "metrics.jsonl", KILL_AT, proc)
        b.cluster.kill(b.host(gone))
        out, _ = proc.communicate(timeout=600)
    finally:
        _kill_group(proc)
    assert proc.returncode == 0, out

    record, summary, events = completed_run(run)
    kinds = [e["event"] for e in events]
    for kind in ("shrunk", "resumed", "grown", "rejoined"):
        assert kind in kinds, (kind, kinds)
    assert kinds.index("shrunk") < kinds.index("resumed") < kinds.index("grown") < kinds.index("rejoined"), kinds
    shrunk = next(e for e in events if e["event"] == "shrunk")
    assert shrunk["nodes"] == [survivor] and shrunk["world"] == 1 and shrunk["lost"] == [gone], shrunk
    attempts = record["attempts"]
    assert [a["nodes"] for a in attempts][1] == [survivor] and len(attempts[2]["nodes"]) == 2, attempts
    assert attempts[1]["outcome"] == "grown", attempts
    resumed = next(e for e in events if e["event"] == "resumed")
    rejoined = next(e for e in events if e["event"] == "rejoined")
    assert resumed["step"] > 0 and 0 <= resumed["lost_steps"] <= CKPT_EVERY, resumed
    assert rejoined["lost_steps"] == 0 and rejoined["step"] > resumed["step"], rejoined  # it trained alone
    assert summary["recoveries"] == 1 and summary["world_size"] == 2, summary
    worlds = [json.loads(x)["world_size"] for x in (b.shared / CLUSTER / "runs" / run.name / "metrics.jsonl")
              .read_text().splitlines() if '"kind": "run"' in x]
    assert worlds == [2, 1, 2], worlds
    ref = json.loads((b.ref / "summary.json").read_text())
    assert abs(summary["test_acc"] - ref["test_acc"]) <= ELASTIC_ACC_TOLERANCE, (summary["test_acc"], ref["test_acc"])
    assert [e["node"] for e in events if e["event"] == "replaced"] == [gone], events
    b.no_leftovers(run.name)
