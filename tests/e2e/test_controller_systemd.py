"""The controller's systemd path (trainkit/runs/controller.py) under a real systemd as PID 1
(systemd_box.py: this machine's systemd booted in namespaces of its own, everything shared read-only).

start_script, as handoff.py runs it over ssh on the controller host, finds systemd and starts the
transient unit with systemd-run; three stand-ins for the loop's train process (`sh -c`, each
counting its starts) show what the unit does with its exits: SIGKILLed, then exit 0 (restarted
once, then ended, the key pair gone); exit 6, a failed run (never restarted, the key pair gone);
a process that runs until `cancel`'s stop_script (alive, then gone, not restarted, the key pair
left to cancel). The train process itself is tested on the restart loop (test_controller_hosts.py);
the paths carry a `$` and a quote, which systemd would expand or split if they reached it as syntax.
"""

from __future__ import annotations

import shlex
import time
from pathlib import Path

import pytest
from systemd_box import Box, missing

from trainkit.runs import controller as ctl


@pytest.fixture
def box(request, tmp_path) -> Box:
    lacks = missing()
    if lacks:
        pytest.fail("a systemd box needs: " + ", ".join(lacks))
    b = Box(tmp_path)
    request.addfinalizer(b.stop)
    return b.start()


def _until(what, check, timeout_s=120.0):
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if check():
            return
        time.sleep(0.5)
    raise AssertionError(f"never: {what}")


def _controller(box: Box, name: str, body: str) -> ctl.HandOff:
    """A controller folder (with a key pair stand-in) whose train process is `sh -c body`,
    started by start_script; its starts counted in <dir>/count."""
    plan = ctl.HandOff(f"{name}-20260101-120000", "n0", str(box.box / f"my root's $HOME {name}"), "/bin/true", "c.yaml")
    Path(plan.path("ssh")).mkdir(parents=True)
    Path(plan.key).write_text("key")
    count = shlex.quote(plan.path("count"))
    argv = ["sh", "-c", f"n=$(cat {count} 2>/dev/null || echo 0); n=$((n+1)); echo $n > {count}; {body}"]
    started = box.sh(ctl.start_script(plan, argv))
    assert started.returncode == 0 and started.stdout.split() == ["systemd"], started
    return plan


def _state(box: Box, plan: ctl.HandOff) -> str:
    return box.sh(ctl.alive_script(plan.record("systemd"))).stdout.strip()


def _starts(plan: ctl.HandOff) -> int:
    return int(Path(plan.path("count")).read_text())


def test_the_systemd_unit_restarts_a_killed_controller_ends_with_the_run_and_stops_for_cancel(box):
    killed = _controller(box, "killed", '[ "$n" -ge 2 ] && exit 0; kill -9 $$')
    failed = _controller(box, "failed", "exit 6")
    cancelled = _controller(box, "cancelled", "sleep 600")
    _until("the cancelled one runs", lambda: Path(cancelled.path("count")).is_file())
    assert _state(box, cancelled) == "alive"
    stopped = box.sh(ctl.stop_script(cancelled.record("systemd")))
    assert stopped.returncode == 0, stopped.stderr
    assert _state(box, cancelled) == "gone"

    # SIGKILLed: restarted RESTART_S later, then its exit 0 ends it for good and takes the key pair
    _until("the killed one ends", lambda: "controller: exit 0" in Path(killed.log).read_text()
           if Path(killed.log).is_file() else False)
    said = [x for x in Path(killed.log).read_text().splitlines() if x.startswith("controller: ")]
    assert said == ["controller: exit 137", "controller: exit 0"]   # (sh also writes "Killed" there)
    _until("its unit is gone", lambda: _state(box, killed) == "gone")
    assert _starts(killed) == 2 and not Path(killed.path("ssh")).exists()

    # a failed run (exit 6, in RestartPreventExitStatus): one start, the key pair gone
    assert _state(box, failed) == "gone" and _starts(failed) == 1
    assert Path(failed.log).read_text().splitlines() == ["controller: exit 6"]
    assert not Path(failed.path("ssh")).exists()

    # stopped by cancel: not started again (the killed one's restart came and went meanwhile), and
    # its key pair is cancel's to remove (controller_keys.end_access), or --down's to use
    assert _starts(cancelled) == 1 and Path(cancelled.path("ssh", "id_ed25519")).is_file()
    units = box.sh("systemctl list-units --all --no-legend --plain 'trainkit-controller-*'").stdout
    assert units.strip() == "", units
