"""The controller of a handed-off run (`train --recover --detach` with `controller:`): pure decisions.

On target `hosts` the recovery loop moves to the host `controller.host` names, into its own folder
beside launch.root (node-local, like trainkit's files there):

    <launch.root>-controller/<run-id>/
        cluster.yaml        the user's spec, ssh.private_key pointing at the key below
        ssh/id_ed25519      a key pair generated there (the user's private key never travels);
                            its public half is authorized on every host of the cluster
        config/<file>       the run's train config
        ws/                 the loop's workspace: inventory.yml, hosts.json, group_vars, runs/<id>/
        loop.pid            the service loop's pid (no systemd), child.pid the loop's train process
        controller.log      what the loop printed

It runs `<node python> -m trainkit train cluster.yaml --workdir ws --attach RUN --recover` under a
service manager that restarts it when it dies (not when it ends: `FINAL_EXITS`): a transient systemd
unit where systemd is PID 1 (sd_booted(3): /run/systemd/system exists), else a restart loop
started with setsid. handoff.py does the I/O; this module decides what to run and who may act.
"""

from __future__ import annotations

import shlex
from dataclasses import dataclass
from pathlib import PurePosixPath
from typing import Any

from trainkit.errors import BAD_INPUT, DESTROY, DOCTOR, LOCKED, OK, PREEMPTED, STORAGE, TRAIN

UNIT_PREFIX = "trainkit-controller-"
# Seconds between a death and the restart. systemd's own default RestartSec is 100 ms
# (systemd.service(5)); a loop that dies at once (a broken install) would then spin, so 5 s.
RESTART_S = 5
# Exits that END the loop (the run ended, or it cannot go on: restarting would change nothing):
# completed, a refused attach (the run is over), failed, destroy failed, busy (another controller),
# doctor, storage, preempted past max recoveries (trainkit/errors.py). Anything else (a crash, a
# signal: SIGKILL, OOM) restarts it.
FINAL_EXITS = (OK, BAD_INPUT, TRAIN, DESTROY, LOCKED, DOCTOR, STORAGE, PREEMPTED)
SERVICES = ("systemd", "loop")


@dataclass(frozen=True)
class HandOff:
    """Where a run's controller lives on its host and how it is started (module doc)."""

    run_id: str
    host: str            # the spec's controller.host
    root: str            # launch.root on that host
    python: str          # the host's trainkit interpreter (trainkit_node_python)
    config_name: str     # the train config's file name

    @property
    def dir(self) -> str:
        """Beside launch.root, not in it: `--down`'s destroy removes launch.root while the loop
        still runs from here (its workspace, ansible-runner's files)."""
        return str(PurePosixPath(self.root.rstrip("/") + "-controller") / self.run_id)

    def path(self, *parts: str) -> str:
        return str(PurePosixPath(self.dir, *parts))

    spec = property(lambda self: self.path("cluster.yaml"))
    key = property(lambda self: self.path("ssh", "id_ed25519"))
    config = property(lambda self: self.path("config", self.config_name))
    ws = property(lambda self: self.path("ws"))
    log = property(lambda self: self.path("controller.log"))
    loop_pid = property(lambda self: self.path("loop.pid"))
    child_pid = property(lambda self: self.path("child.pid"))
    unit = property(lambda self: UNIT_PREFIX + self.run_id)

    def argv(self, options: list[str]) -> list[str]:
        """The loop's command: re-attach to the run with --recover, `options` (poll, backoff, --down...) after;
        its own registry of workspaces (cluster/registry.py), not the host user's."""
        return ["env", f"TRAINKIT_STATE_DIR={self.path('state')}", self.python, "-m", "trainkit", "train", self.spec, "--workdir", self.ws, "--attach", self.run_id,
                "--recover", *options]

    def record(self, service: str, down: bool = False) -> dict[str, Any]:
        """What run.json's `controller` says (a workspace that never saw the run finds it from this);
        `down`: it destroys the cluster when the run ends."""
        return {"host": self.host, "dir": self.dir, "service": service, "unit": self.unit, "down": down}


def loop_options(opts: Any, down: bool) -> list[str]:
    """train's options the controller's loop keeps (recover.Options `opts`), as argv words."""
    out = ["--max-recoveries", str(opts.max_recoveries), "--max-restarts-on-errors", str(opts.max_restarts_on_errors),
           "--backoff", repr(float(opts.backoff_s)), "--poll", repr(float(opts.poll_s))]
    if opts.notice_url:
        out += ["--notice-url", opts.notice_url, "--notice-poll", repr(float(opts.notice_poll_s))]
    if not opts.doctor:
        out.append("--no-doctor")
    return out + (["--down"] if down else [])


def start_script(plan: HandOff, argv: list[str]) -> str:
    """A POSIX sh script, run on the controller host, that starts `argv` under a service manager
    and prints which one: `systemd` (a transient unit restarted on failure) where systemd is PID 1
    and we are root, else `loop` (setsid: a new session that outlives the ssh connection). Every
    word is quoted: paths and the run id are data."""
    q = shlex.quote
    finals = " ".join(str(c) for c in FINAL_EXITS)
    unit = ["systemd-run", "--quiet", "--collect", "--unit", plan.unit, "-p", "Restart=on-failure",
            "-p", f"RestartSec={RESTART_S}", "-p", f"RestartPreventExitStatus={finals}",
            "-p", f"WorkingDirectory={plan.dir}", "-p", f"StandardOutput=append:{plan.log}",
            "-p", f"StandardError=append:{plan.log}", *argv]
    return (f"cd {q(plan.dir)} && if {SYSTEMD_TEST}; then {shlex.join(unit)} && echo systemd; "
            f"else setsid sh -c {q(loop_script(plan, argv))} </dev/null >/dev/null 2>&1 & echo loop; fi")


# sd_booted(3): systemd is PID 1 when /run/systemd/system exists; transient units need root.
SYSTEMD_TEST = '[ -d /run/systemd/system ] && [ "$(id -u)" = 0 ] && command -v systemd-run >/dev/null'


def loop_script(plan: HandOff, argv: list[str], restart_s: float = RESTART_S) -> str:
    """The restart loop (no systemd): records its pid, runs `argv` (its pid in child.pid, output
    appended to the log), and starts it again RESTART_S later unless it exited with one of
    FINAL_EXITS or the stop file exists (`cancel`: stop_script). A run that ended well with
    `--down` (the `down` file) takes the controller's key pair with it: the controller goes last."""
    q = shlex.quote
    finals = " ".join(str(c) for c in FINAL_EXITS)
    return (f"echo $$ > {q(plan.loop_pid)}; rm -f {q(plan.path('stop'))}; while :; do {shlex.join(argv)} >>{q(plan.log)} 2>&1 & "
            f"echo $! > {q(plan.child_pid)}; wait $!; rc=$?; echo \"controller: exit $rc\" >>{q(plan.log)}; "
            f"case \" {finals} \" in *\" $rc \"*) break;; esac; [ -e {q(plan.path('stop'))} ] && break; "
            f"sleep {restart_s}; done; rm -f {q(plan.loop_pid)}; "
            f"if [ \"$rc\" = 0 ] && [ -e {q(plan.path('down'))} ]; then rm -rf {q(plan.path('ssh'))}; fi")


def alive_script(record: dict[str, Any]) -> str:
    """Prints `alive` while the controller `record` (run.json's `controller`) runs or waits to
    restart (its unit active or activating, or its loop's pid alive and not a zombie), else `gone`. Both managers
    are asked: a workspace that copied the record before the start knows neither."""
    q = shlex.quote
    pid = q(str(PurePosixPath(record["dir"]) / "loop.pid"))
    return (f"case \"$(systemctl show -p ActiveState --value {q(UNIT_PREFIX + _run(record))} 2>/dev/null)\" in "
            "active|activating|reloading) echo alive; exit 0;; esac; "
            f"p=$(cat {pid} 2>/dev/null) && [ -n \"$p\" ] && "
            # proc(5): the state after the last ')' of /proc/PID/stat; Z (a zombie nobody reaped:
            # an orphan's parent may be an init that does not reap) is as dead as gone
            "s=$(sed 's/.*) //' /proc/\"$p\"/stat 2>/dev/null | cut -d' ' -f1) && [ -n \"$s\" ] && "
            "[ \"$s\" != Z ] && echo alive || echo gone")


def stop_script(record: dict[str, Any]) -> str:
    """Stops the controller `record` for good: its stop file first (the loop does not start it
    again), the unit, and the loop's whole session (the loop, its train process, their ssh)."""
    q = shlex.quote
    d = PurePosixPath(record["dir"])
    return (f"touch {q(str(d / 'stop'))}; systemctl stop {q(UNIT_PREFIX + _run(record))} 2>/dev/null; "
            f"p=$(cat {q(str(d / 'loop.pid'))} 2>/dev/null); [ -n \"$p\" ] && kill -TERM \"-$p\" 2>/dev/null; true")  # dash's kill takes no --


def _run(record: dict[str, Any]) -> str:
    """The run id a controller record belongs to (its folder's name)."""
    return PurePosixPath(record["dir"]).name


def attach_rule(controller: dict[str, Any] | None, own_dir: str | None, state: str | None) -> str:
    """Who may drive a run on `train --attach`: `follow` (no controller holds it, or this process
    IS its controller: `own_dir` = the controller folder this workspace is in), `refuse` while
    its controller is alive (`state` from alive_script: alive), `take_over` when it is gone (its
    process dead and not restarting: `gone`; its host not answering: `unreachable`)."""
    if not controller:
        return "follow"
    if own_dir is not None and own_dir == controller.get("dir"):
        return "follow"
    return "refuse" if state == "alive" else "take_over"
