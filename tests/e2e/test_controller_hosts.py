"""Issue 42 on target `hosts`: `train --recover --detach --down` hands the recovery loop to the
controller host (`controller.host`), and the run finishes without the user's machine.

Three namespace machines (netns.py): h1 runs the controller and is the head, h2 the worker, h3 the
spare. The user's `train` returns the run id at once; the controller's train process is SIGKILLed
and its restart loop (no systemd in a namespace) starts it again; h2 is killed (sshd and all, as a
reclaim leaves it) and the controller puts the spare in; the run completes; a second workspace
(same spec, never saw the run) finds it through the lock on the hosts; `--down` leaves no trainkit
process on any host and no launch.root, and its results on the shared folder. The second test kills
the controller (loop and process): `--attach` takes the run over; then `cancel` from a workspace that
never saw the run stops the controller and the run, and the controller host goes down, its key
off every host; before that, a run handed off without --down and cancelled leaves no key behind.

The controller's key is authorized in each host's node-local authorized_keys (netns.py's second
AuthorizedKeysFile) through the `trainkit_authorized_keys_file` group var: root's ~/.ssh here is
this machine's own. Namespace choices otherwise as test_hosts_multinode.py's.
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
from test_hosts_multinode import SITE_VARS, _env, _kill_group

PREFIX, SUBNET = names_for(__name__)
REPO = Path(__file__).resolve().parents[2]
TRAINKIT = Path(sys.executable).parent / "trainkit"
CLUSTER = "netns-ctl"
# digits: 5 epochs x 19 steps over 2 ranks, a checkpoint every 5 steps on the shared folder; each
# step sleeps STEP_SLEEP_S (the engine's TRAINKIT_FAULT_STEP_SLEEP hook: digits steps take ~14 ms on
# a quiet machine, and the whole run ended before the restarted controller was back), so that the
# controller's restart (RESTART_S = 5 s and its start-up) and the reclaim come before the end
STEP_SLEEP_S = 0.3
DIGITS = ["epochs=5", "export.onnx=false",
          "plot=false", "tensorboard=false", "checkpoint.interval=null", "checkpoint.every_n_steps=5",
          "log_every=1", "workers=0"]
FAST = ["--poll", "1", "--backoff", "1", "--no-doctor"]


@pytest.fixture
def trio(request, tmp_path_factory) -> NetnsCluster:
    missing = missing_tools()
    if missing:
        pytest.fail("namespace hosts need: " + ", ".join(missing))
    base = tmp_path_factory.mktemp("nc")
    cluster = NetnsCluster(base, count=3, prefix=PREFIX, local_root=base / "node-local", subnet=SUBNET)
    request.addfinalizer(cluster.stop)
    return cluster.start()


def tk(cluster, *args, timeout=300) -> subprocess.CompletedProcess:
    proc = subprocess.Popen([str(TRAINKIT), *args], cwd=REPO, env=_env(cluster), text=True,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, start_new_session=True)
    try:
        out, err = proc.communicate(timeout=timeout)
    finally:
        _kill_group(proc)
    return subprocess.CompletedProcess(proc.args, proc.returncode, out, err)


def _until(what, check, timeout_s=240.0, why=lambda: ""):
    """check()'s first truthy answer within `timeout_s` (looked at every 0.5 s); else AssertionError
    naming `what`, with why()'s text (a log's end)."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        got = check()
        if got:
            return got
        time.sleep(0.5)
    raise AssertionError(f"never: {what}\n{why()}")


def _events(path: Path) -> list[str]:
    return [json.loads(x)["event"] for x in path.read_text().splitlines() if x.strip()] if path.is_file() else []


def _trainkit_pids(cluster: NetnsCluster) -> list[str]:
    """Processes of trainkit (its CLI, supervisors, the job) in any host's namespace."""
    out = []
    for h in cluster.hosts:
        for pid in h.pids():
            try:
                cmd = Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
            except OSError:
                continue
            if "trainkit" in cmd:
                out.append(f"{h.name}:{pid}:{cmd[:120]}")
    return out


def _config(tmp_path: Path) -> list[str]:
    """--config: the digits example with the step sleep in its env."""
    config = {**yaml.safe_load((REPO / "examples/train/digits.yaml").read_text()),
              "env": {"TRAINKIT_FAULT_STEP_SLEEP": str(STEP_SLEEP_S)}}
    (tmp_path / "digits-slow.yaml").write_text(yaml.safe_dump(config))
    return ["--config", str(tmp_path / "digits-slow.yaml")]


def _applied(trio: NetnsCluster, tmp_path: Path) -> tuple[Path, list[str], dict]:
    """The spec (h1 the controller and head, h2 the worker, h3 the spare), applied from tmp_path/ws;
    (spec, the CLI's spec and workspace words, the site's group vars)."""
    h1 = trio.hosts[0]
    shared = trio.workdir / "shared"
    shared.mkdir()
    local_root = trio.local_root
    hosts = [{"name": h.name, "address": h.address, "port": h.port, "user": "root"} for h in trio.hosts]
    hosts[-1]["spare"] = True
    spec = tmp_path / "cluster.yaml"
    spec.write_text(yaml.safe_dump({
        "name": CLUSTER, "cloud": "hosts", "hosts": hosts, "controller": {"host": h1.name},
        "ssh": {"user": "root", "private_key": str(trio.key)},
        "storage": {"data_disk": {"enabled": False}, "nas": {"enabled": True, "mount_point": str(shared)}},
        "launch": {"nproc_per_node": 1, "rdzv_port": 29400, "python": sys.executable,
                   "root": str(local_root / "trainkit")}}, sort_keys=False))
    site = {**SITE_VARS, "trainkit_authorized_keys_file": str(local_root / "authorized_keys")}
    for ws in (tmp_path / "ws", tmp_path / "ws2"):   # a colleague's workspace has the same site settings
        (ws / "group_vars").mkdir(parents=True)
        (ws / "group_vars" / "all.yml").write_text(yaml.safe_dump(site))
    common = [str(spec), "--workdir", str(tmp_path / "ws")]
    assert tk(trio, "apply", *common, "--yes").returncode == 0
    return spec, common, site


def test_detached_recovery_runs_on_the_controller_host_through_a_kill_and_a_reclaim_then_goes_down(trio, tmp_path):
    h1, h2, h3 = trio.hosts
    spec, common, _ = _applied(trio, tmp_path)
    ws, shared = tmp_path / "ws", trio.workdir / "shared"
    started = tk(trio, "train", *common, *_config(tmp_path), *DIGITS, *FAST, "--recover", "--detach", "--down",
                 timeout=180)
    assert started.returncode == 0, started.stderr
    run_id = started.stdout.strip()          # the user's process has returned: the loop is on h1
    record = json.loads((ws / "runs" / run_id / "run.json").read_text())
    assert record["controller"]["host"] == h1.name and record["controller"]["service"] == "loop"
    ctl_dir = h1.dir / "local" / "trainkit-controller" / run_id     # h1's node-local folder, seen from here
    assert not (ctl_dir / "ssh" / "id_ed25519").read_bytes() == trio.key.read_bytes()
    assert trio.key.read_text() not in "".join(p.read_text(errors="replace") for p in ctl_dir.rglob("*") if p.is_file())
    events = ctl_dir / "ws" / "runs" / run_id / "events.jsonl"
    metrics = shared / CLUSTER / "runs" / run_id / "metrics.jsonl"
    public = (ctl_dir / "ssh" / "id_ed25519.pub").read_text().strip()   # authorized on every host, spare too
    assert all(public in (h.dir / "local" / "authorized_keys").read_text().splitlines() for h in trio.hosts)

    # a second workspace that never saw the run finds it through the lock and its controller
    other = tk(trio, "runs", str(spec), "--workdir", str(tmp_path / "ws2"), "--json")
    assert other.returncode == 0, other.stderr
    assert [r["run_id"] for r in json.loads(other.stdout)] == [run_id]
    # the user's workspace may not drive it while its controller lives
    refused = tk(trio, "train", *common, "--attach", run_id, "--recover")
    assert refused.returncode == 8 and h1.name in refused.stderr, refused.stderr

    # the controller's train process dies: its restart loop starts it again
    _until("step 5", lambda: metrics.is_file() and '"step": 5,' in metrics.read_text())
    first = int((ctl_dir / "child.pid").read_text())
    os.kill(first, signal.SIGKILL)
    _until("the loop restarts the controller", lambda: (ctl_dir / "child.pid").is_file()
           and int((ctl_dir / "child.pid").read_text()) != first, 60)

    # the worker's machine is gone: the controller puts the spare in and the run resumes
    assert '"step": 95,' not in metrics.read_text()
    trio.kill(h2)
    _until("the spare replaces h2", lambda: "resumed" in _events(events), 300)
    _until("the controller ends", lambda: not (ctl_dir / "loop.pid").exists(), 400)
    log = (ctl_dir / "controller.log").read_text()
    assert "controller: exit 137" in log and "controller: exit 0" in log, log[-3000:]
    kept = shared / CLUSTER / "runs" / run_id / "controller"
    assert json.loads((kept / "run.json").read_text())["status"] == "completed"
    assert {"replaced", "resumed", "completed"} <= set(_events(kept / "events.jsonl"))
    listed = json.loads(tk(trio, "runs", str(spec), "--workdir", str(tmp_path / "ws2"), "--json").stdout)
    assert [(r["run_id"], r["status"]) for r in listed] == [(run_id, "completed")]
    # --down: nothing of trainkit on the hosts, launch.root gone, the controller's key with it
    _until("no trainkit process left", lambda: not _trainkit_pids(trio), 60)
    for h in (h1, h3):
        assert not (h.dir / "local" / "trainkit").exists()
        # its key is off the hosts that answer; the lost one is named in its log
        assert public not in (h.dir / "local" / "authorized_keys").read_text().splitlines()
    assert f"stays in the authorized_keys of {h2.name} (no answer)" in log, log[-3000:]
    assert not (ctl_dir / "ssh").exists()


def _authorized(trio: NetnsCluster, public: str) -> list[str]:
    """The hosts whose node-local authorized_keys still has the line `public`."""
    return [h.name for h in trio.hosts if public in (h.dir / "local" / "authorized_keys").read_text().splitlines()]


def test_attach_takes_over_from_a_dead_controller_and_cancel_from_a_second_workspace_goes_down(trio, tmp_path):
    h1, h2, _ = trio.hosts
    spec, common, _ = _applied(trio, tmp_path)
    shared = trio.workdir / "shared"
    long_run = [*_config(tmp_path), *DIGITS, "epochs=40"]
    # first a run handed off without --down, cancelled at once: the controller's key leaves every
    # host and its key pair goes (the user's workspace does it: no --down is left to the controller)
    plain = tk(trio, "train", *common, *long_run, *FAST, "--recover", "--detach", timeout=180)
    assert plain.returncode == 0, plain.stderr
    plain_dir = h1.dir / "local" / "trainkit-controller" / plain.stdout.strip()
    plain_key = (plain_dir / "ssh" / "id_ed25519.pub").read_text().strip()
    assert len(_authorized(trio, plain_key)) == 3
    stopped = tk(trio, "cancel", str(spec), plain.stdout.strip(), *common[1:])
    assert stopped.returncode == 0, stopped.stderr
    assert "key_revoked" in _events(tmp_path / "ws" / "runs" / plain.stdout.strip() / "events.jsonl")
    assert _authorized(trio, plain_key) == [] and not (plain_dir / "ssh").exists()

    started = tk(trio, "train", *common, *long_run, *FAST, "--recover", "--detach", "--down", timeout=180)
    assert started.returncode == 0, started.stderr
    run_id = started.stdout.strip()
    ctl_dir = h1.dir / "local" / "trainkit-controller" / run_id
    public = (ctl_dir / "ssh" / "id_ed25519.pub").read_text().strip()
    metrics = shared / CLUSTER / "runs" / run_id / "metrics.jsonl"
    _until("step 5", lambda: metrics.is_file() and '"step": 5,' in metrics.read_text())
    # the controller is gone (its loop and train process killed): --attach takes the run over
    loop = int((ctl_dir / "loop.pid").read_text())
    os.killpg(loop, signal.SIGKILL)
    attach = subprocess.Popen([str(TRAINKIT), "train", *common, "--attach", run_id, "--recover", *FAST], cwd=REPO,
                              env=_env(trio), text=True, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                              start_new_session=True)
    lines: list[str] = []
    try:
        for line in iter(attach.stderr.readline, ""):    # ends when it exits (refused: exit 8)
            lines.append(line)
            if "takes the run over" in line:
                break
        assert h1.name in lines[-1] and "is gone" in lines[-1], "".join(lines)
    finally:
        _kill_group(attach)    # the user's machine goes again; the nodes' job keeps running

    ws2 = tmp_path / "ws2"   # never saw the run: finds it through the lock on the hosts
    cancelled = tk(trio, "cancel", str(spec), run_id, "--workdir", str(ws2), "--json")
    assert cancelled.returncode == 0, cancelled.stderr
    assert json.loads(cancelled.stdout)["status"] == "cancelled"
    said = _events(ws2 / "runs" / run_id / "events.jsonl")
    assert said.index("controller_stopped") < said.index("cancelled") < said.index("down_started"), said
    # the controller host finishes the --down: results on the shared folder, nothing of trainkit left
    kept = shared / CLUSTER / "runs" / run_id / "controller"
    _until("the results kept", lambda: (kept / "run.json").is_file() and not (ctl_dir / "ssh").exists(), 180)
    _until("no trainkit process left", lambda: not _trainkit_pids(trio), 60)
    for h in (h1, h2):
        assert not (h.dir / "local" / "trainkit").exists()
    # the controller's destroy took its key off every host before its key pair went
    assert _authorized(trio, public) == [], (ctl_dir / "controller.log").read_text()[-3000:]
    assert "key_revoked" not in said
