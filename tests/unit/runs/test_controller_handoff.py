"""The controller of a handed-off run (trainkit/runs/controller.py, handoff.wanted): what the
hand-off runs and where, which service manager, the restart loop run for real in sh, and who may
drive a run on `train --attach`."""

from __future__ import annotations

import os
import re
import shlex
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from trainkit.errors import APPLY, CREDENTIALS, LOCKED, PREEMPTED, PROVISION, TRAIN
from trainkit.runs import controller as ctl
from trainkit.runs import handoff, recover
from trainkit.runs import record as runs
from trainkit.spec.resolve import resolve
from trainkit.spec.schema import ClusterSpec

HOSTS = {"name": "lab", "cloud": "hosts",
         "hosts": [{"name": "n0", "address": "10.0.0.10"}, {"name": "n1", "address": "10.0.0.11"},
                   {"name": "sp", "address": "10.0.0.12", "spare": True}]}


def _plan(root: str = "/opt/trainkit") -> ctl.HandOff:
    return ctl.HandOff("digits-20260101-120000", "n0", root, "/opt/trainkit/venv/bin/python", "digits.yaml")


def test_the_controller_lives_beside_launch_root_and_re_attaches_with_recover():
    plan = _plan("/opt/trainkit/")
    assert plan.dir == "/opt/trainkit-controller/digits-20260101-120000"   # the destroy removes launch.root
    assert plan.unit == "trainkit-controller-digits-20260101-120000"
    argv = plan.argv(["--poll", "1.0", "--down"])
    assert argv[:3] == ["env", f"TRAINKIT_STATE_DIR={plan.dir}/state", "/opt/trainkit/venv/bin/python"]
    assert argv[3:] == ["-m", "trainkit", "train", f"{plan.dir}/cluster.yaml", "--workdir", f"{plan.dir}/ws",
                        "--attach", plan.run_id, "--recover", "--poll", "1.0", "--down"]
    assert plan.record("loop", down=True, public_key="ssh-ed25519 AAAA c") == {
        "host": "n0", "dir": plan.dir, "service": "loop", "unit": plan.unit, "down": True, "public_key": "ssh-ed25519 AAAA c"}


def test_the_loop_keeps_trains_options_and_down():
    opts = recover.Options(recover=True, detach=True, max_recoveries=5, backoff_s=2, poll_s=1, doctor=False,
                           notice_url="http://169.254.169.254/latest/meta-data/spot/instance-action")
    words = ctl.loop_options(opts, down=True)
    assert words[:8] == ["--max-recoveries", "5", "--max-restarts-on-errors", "0", "--backoff", "2.0", "--poll", "1.0"]
    assert words[8:] == ["--notice-url", opts.notice_url, "--notice-poll", "5.0", "--no-doctor", "--down"]
    assert "--down" not in ctl.loop_options(recover.Options(), down=False)


@pytest.mark.parametrize("controller, opts, expected", [
    ({"host": "n0"}, {"recover": True, "detach": True}, True),
    ({"host": "n0", "enabled": True}, {"recover": True, "detach": True}, True),
    ({"host": "n0", "enabled": False}, {"recover": True, "detach": True}, False),   # switched off
    ({"host": "n0"}, {"recover": True, "detach": False}, False),                    # the loop stays here
    ({"host": "n0"}, {"recover": False, "detach": True}, False),                    # nothing to recover
    (None, {"recover": True, "detach": True}, False),                               # no host named
])
def test_which_runs_are_handed_off(controller, opts, expected):
    spec = ClusterSpec.model_validate({**HOSTS, **({"controller": controller} if controller else {})})
    assert handoff.wanted(resolve(spec, "lab.yaml"), recover.Options(**opts)) is expected


def test_systemd_where_it_is_pid_1_else_a_setsid_loop_every_word_quoted():
    plan = _plan("/opt/my root's $HOME")
    script = ctl.start_script(plan, plan.argv([]))
    assert script.startswith(f"cd {shlex.quote(plan.dir)} && if [ -d /run/systemd/system ]")
    systemd, loop = script.split("; else ", 1)
    unit = shlex.split(systemd.split("then ", 1)[1].rsplit(" && echo systemd", 1)[0])
    assert unit[:5] == ["systemd-run", "--quiet", "--collect", "--unit", plan.unit]
    assert "Restart=on-failure" in unit and f"RestartSec={ctl.RESTART_S}" in unit
    prevent = next(w for w in unit if w.startswith("RestartPreventExitStatus="))
    assert {"0", str(TRAIN), str(LOCKED), str(PREEMPTED)} <= set(prevent.split("=", 1)[1].split())
    # the unit runs sh -c <the train, then its end>; systemd turns each `$$` into `$` (--expand-environment)
    assert unit[-3:-1] == ["sh", "-c"] and unit[-1].replace("$$", "$") == ctl.unit_command(plan, plan.argv([]))
    assert "$" not in unit[-1].replace("$$", "")   # a `$` in a path is data: doubled, never expanded by systemd
    assert shlex.split(ctl.unit_command(plan, plan.argv([])).split("; rc=$?")[0]) == plan.argv([])
    assert loop.startswith("setsid sh -c ") and loop.endswith("& echo loop; fi")
    assert shlex.split(loop.split(" </dev/null")[0])[3] == ctl.loop_script(plan, plan.argv([]))


@pytest.mark.parametrize("body, code, key_kept", [
    ("exit 0", 0, False),                 # completed: the run ends for good, the key pair goes
    (f"exit {TRAIN}", TRAIN, False),      # failed past its restarts: the same
    ("kill -9 $$", 137, True),            # SIGKILLed: systemd starts it again, which needs the key
    ("exit 1", 1, True),                  # a crash: the same
])
def test_the_units_command_passes_the_exit_on_and_ends_with_the_run(tmp_path, body, code, key_kept):
    """The systemd unit's `sh -c` script, run for real: its exit status is the train process's (systemd's
    Restart=on-failure and RestartPreventExitStatus decide by it), the key pair goes only with a final exit."""
    plan = ctl.HandOff("r1", "n0", str(tmp_path / "my root"), sys.executable, "c.yaml")
    Path(plan.path("ssh")).mkdir(parents=True)
    Path(plan.key).write_text("key")
    done = subprocess.run(["sh", "-c", ctl.unit_command(plan, ["sh", "-c", body])], timeout=60)
    assert done.returncode == code
    assert Path(plan.path("ssh")).exists() is key_kept and Path(plan.dir).is_dir()
    assert Path(plan.log).read_text().splitlines() == [f"controller: exit {code}"]


def test_the_unit_file_made_from_the_same_settings_passes_systemd_analyze_verify(tmp_path):
    """systemd-analyze verify (systemd's own parser of unit files, no manager needed) reads the unit
    made from unit_properties and unit_command: the settings are ones systemd knows, their values
    valid (exit statuses, absolute paths, append:), the command line quoted as systemd parses it."""
    plan = ctl.HandOff("digits-20260101-120000", "n0", str(tmp_path / "my root's 100% $HOME"), "/bin/true", "c.yaml")
    Path(plan.dir).mkdir(parents=True)
    text = ctl.unit_file(plan, plan.argv(["--poll", "1.0"]))
    unit = tmp_path / f"{plan.unit}.service"
    unit.write_text(text)
    done = subprocess.run(["systemd-analyze", "verify", "--man=no", str(unit)], capture_output=True, text=True,
                          timeout=120, env={**os.environ, "SYSTEMD_LOG_LEVEL": "notice"})
    assert done.returncode == 0 and plan.unit not in done.stderr, done.stderr
    assert f"RestartPreventExitStatus={' '.join(str(c) for c in ctl.FINAL_EXITS)}" in text.splitlines()
    bad = tmp_path / "bad.service"     # the check can fail: a value systemd refuses
    bad.write_text("\n".join("WorkingDirectory=relative/dir" if x.startswith("WorkingDirectory=") else x
                             for x in text.splitlines()))
    done = subprocess.run(["systemd-analyze", "verify", "--man=no", str(bad)], capture_output=True, text=True, timeout=120)
    assert "WorkingDirectory" in done.stderr, done.stderr


def _run_loop(tmp_path: Path, body: str) -> tuple[list[str], ctl.HandOff]:
    """The restart loop, for real, around `sh -c body` (its runs counted in `count`)."""
    plan = ctl.HandOff("r1", "n0", str(tmp_path / "root"), sys.executable, "c.yaml")
    Path(plan.dir).mkdir(parents=True)
    argv = ["sh", "-c", f"n=$(cat {tmp_path}/count 2>/dev/null || echo 0); echo $((n+1)) > {tmp_path}/count; {body}"]
    subprocess.run(["sh", "-c", ctl.loop_script(plan, argv, restart_s=0)], timeout=60, check=True)
    return [x for x in Path(plan.log).read_text().splitlines() if x.startswith("controller: exit")], plan


def test_the_loop_restarts_a_killed_controller_and_stops_at_a_final_exit(tmp_path):
    exits, plan = _run_loop(tmp_path, '[ "$n" -ge 2 ] && exit 0; kill -9 $$')
    assert exits == ["controller: exit 137", "controller: exit 137", "controller: exit 0"]
    assert not Path(plan.loop_pid).exists() and Path(plan.child_pid).is_file()


def test_a_run_that_ended_is_not_restarted(tmp_path):
    assert _run_loop(tmp_path, f"exit {TRAIN}")[0] == [f"controller: exit {TRAIN}"]


@pytest.mark.parametrize("code", [PROVISION, CREDENTIALS])
def test_a_failure_a_restart_would_repeat_is_not_restarted(tmp_path, code):
    """A node's setup that failed (a restart would replace and set up a new node again, billed each
    try) or credentials refused: the loop ends there, as a completed run does; a plan or apply
    error (the cloud's transient answers) and a crash are restarted."""
    assert _run_loop(tmp_path, f"exit {code}")[0] == [f"controller: exit {code}"]
    assert _run_loop(tmp_path / "apply", f'[ "$n" -ge 2 ] && exit 0; exit {APPLY}')[0] == \
        [f"controller: exit {APPLY}", f"controller: exit {APPLY}", "controller: exit 0"]


def test_a_crash_after_a_stop_does_not_start_it_again(tmp_path):
    plan = ctl.HandOff("r1", "n0", str(tmp_path / "root"), sys.executable, "c.yaml")
    Path(plan.dir).mkdir(parents=True)
    argv = ["sh", "-c", f"touch {shlex.quote(plan.path('stop'))}; exit 1"]   # cancel's stop file, then a crash
    subprocess.run(["sh", "-c", ctl.loop_script(plan, argv, restart_s=0)], timeout=60, check=True)
    assert Path(plan.log).read_text().count("controller: exit") == 1


@pytest.mark.parametrize("down", [True, False])
def test_the_loop_takes_the_controllers_key_pair_with_it_when_the_run_ends_for_good(tmp_path, down):
    plan = ctl.HandOff("r1", "n0", str(tmp_path / "root"), sys.executable, "c.yaml")
    Path(plan.path("ssh")).mkdir(parents=True)
    Path(plan.key).write_text("key")
    if down:
        Path(plan.path("down")).touch()
    subprocess.run(["sh", "-c", ctl.loop_script(plan, ["sh", "-c", f"exit {TRAIN}"], restart_s=0)], timeout=60, check=True)
    assert not Path(plan.path("ssh")).exists() and Path(plan.dir).is_dir()


def test_a_loop_stopped_by_cancel_leaves_the_key_pair_to_cancel(tmp_path):
    """A stop (cancel's stop file) is no end of the run: with --down, cancel restarts the controller
    to destroy the cluster with that key; without, cancel removes it itself."""
    plan = ctl.HandOff("r1", "n0", str(tmp_path / "root"), sys.executable, "c.yaml")
    Path(plan.path("ssh")).mkdir(parents=True)
    argv = ["sh", "-c", f"touch {shlex.quote(plan.path('stop'))}; exit 1"]
    subprocess.run(["sh", "-c", ctl.loop_script(plan, argv, restart_s=0)], timeout=60, check=True)
    assert Path(plan.path("ssh")).is_dir()


def test_alive_while_the_loop_runs_gone_after(tmp_path):
    record = {"host": "n0", "dir": str(tmp_path / "r1"), "service": "loop"}
    (tmp_path / "r1").mkdir()
    sleeper = subprocess.Popen(["sleep", "60"], start_new_session=True)   # a loop leads its own session
    try:
        (tmp_path / "r1" / "loop.pid").write_text(str(sleeper.pid))
        said = subprocess.run(["sh", "-c", ctl.alive_script(record)], capture_output=True, text=True).stdout
        assert said.strip() == "alive"
        subprocess.run(["sh", "-c", ctl.stop_script(record)], check=True)   # TERM to its process group
        assert sleeper.wait(timeout=30) == -15
    finally:
        sleeper.kill()
        sleeper.wait()
    assert (tmp_path / "r1" / "stop").is_file()
    said = subprocess.run(["sh", "-c", ctl.alive_script(record)], capture_output=True, text=True).stdout
    assert said.strip() == "gone"
    zombie = subprocess.Popen(["true"])      # exited, not reaped yet: a loop killed under an init that does not reap
    try:
        while Path(f"/proc/{zombie.pid}/stat").read_text().rsplit(") ", 1)[1][0] != "Z":
            pass
        (tmp_path / "r1" / "loop.pid").write_text(str(zombie.pid))
        said = subprocess.run(["sh", "-c", ctl.alive_script(record)], capture_output=True, text=True).stdout
        assert said.strip() == "gone"
    finally:
        zombie.wait()
    os.unlink(tmp_path / "r1" / "loop.pid")
    assert subprocess.run(["sh", "-c", ctl.alive_script(record)], capture_output=True, text=True).stdout.strip() == "gone"


@pytest.mark.parametrize("controller, own, state, rule", [
    (None, None, None, "follow"),                                    # never handed off
    ({"host": "n0", "dir": "/c/r1"}, "/c/r1", None, "follow"),        # the controller itself
    ({"host": "n0", "dir": "/c/r1"}, None, "alive", "refuse"),        # two controllers must not act
    ({"host": "n0", "dir": "/c/r1"}, None, "gone", "take_over"),      # dead and not restarting
    ({"host": "n0", "dir": "/c/r1"}, None, "unreachable", "take_over"),   # its host is gone
    ({"host": "n0", "dir": "/c/r1"}, "/c/r2", "alive", "refuse"),     # another run's controller
])
def test_who_may_drive_a_handed_off_run(controller, own, state, rule):
    assert ctl.attach_rule(controller, own, state) == rule


@pytest.mark.parametrize("run_id, ok", [
    ("digits-20261205-053148", True), ("digits-20261205-053148-2", True),
    ("../ws-20261205-053148", False), ("a/b-20261205-053148", False), ("digits", False),
])
def test_a_run_id_read_from_a_nodes_lock_is_checked_before_it_names_a_folder(run_id, ok):
    assert bool(runs.RUN_ID.fullmatch(run_id)) is ok


def test_the_node_guard_counts_a_controllers_loop_as_busy():
    """The guard role (spec `idle:`) shuts a node down when no process matches its training pattern:
    a controller's loop waiting out a backoff (no job running) keeps its host up; without one, a
    host whose controller is gone or was never used is as idle as any node."""
    defaults = Path(__file__).resolve().parents[3] / "ansible/roles/guard/defaults/main.yml"
    pattern = re.compile(yaml.safe_load(defaults.read_text())["guard_training_pattern"])
    plan = _plan()
    argv = plan.argv(ctl.loop_options(recover.Options(recover=True, detach=True), down=True))
    shown = " ".join(argv[argv.index("env") + 2:])       # /proc/PID/cmdline once env has exec'd python
    assert pattern.search(shown)
    assert pattern.search("/home/me/.venv/bin/python /home/me/.venv/bin/trainkit train c.yaml --recover --poll 2")
    for other in ("/usr/bin/python3 /usr/local/lib/trainkit-guard/guard.py --daemon /etc/trainkit-guard.json",
                  "/usr/sbin/sshd -D", "python -m trainkit train c.yaml --attach digits-20260101-120000",
                  f"sleep 5 {plan.dir}/ws"):
        assert not pattern.search(other), other
