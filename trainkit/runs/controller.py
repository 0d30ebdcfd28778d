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

from trainkit.errors import (
    BAD_INPUT,
    CREDENTIALS,
    DESTROY,
    DOCTOR,
    LOCKED,
    MISSING_TOOL,
    OK,
    PLAN_BLOCKED,
    PREEMPTED,
    PROVISION,
    STORAGE,
    TRAIN,
)

UNIT_PREFIX = "trainkit-controller-"
# Seconds between a death and the restart. systemd's own default RestartSec is 100 ms
# (systemd.service(5)); a loop that dies at once (a broken install) would then spin, so 5 s.
RESTART_S = 5
# Exits that END the loop (the run ended, or it cannot go on: restarting would change nothing):
# completed, a refused attach (the run is over), failed, destroy failed, busy (another controller),
# doctor, storage, preempted past max recoveries (trainkit/errors.py); and the failures a restart
# repeats as they were, where each try would cost: a node's setup that failed (a restart would
# replace and set up a new node again, billed each time), a missing tool, a plan blocked for
# review, credentials refused. Anything else (a crash, a signal: SIGKILL, OOM; a plan or apply
# error, the cloud's transient answers) restarts it.
FINAL_EXITS = (OK, BAD_INPUT, PROVISION, TRAIN, DESTROY, LOCKED, MISSING_TOOL, PLAN_BLOCKED, DOCTOR, CREDENTIALS,
               STORAGE, PREEMPTED)
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

    def record(self, service: str, down: bool = False, public_key: str | None = None) -> dict[str, Any]:
        """What run.json's `controller` says (a workspace that never saw the run finds it from this);
        `down`: it destroys the cluster when the run ends; `public_key`: the line authorized on
        every host (not a secret: `cancel` takes that exact line off again, its host gone or not)."""
        return {"host": self.host, "dir": self.dir, "service": service, "unit": self.unit, "down": down,
                "public_key": public_key}


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
    and prints which one: `systemd` (a transient unit restarted on failure: unit_properties)
    where systemd is PID 1 and we are root, else `loop` (setsid: a new session that outlives the
    ssh connection). Every word is quoted: paths and the run id are data."""
    q = shlex.quote
    props = [w for k, v in unit_properties(plan) for w in ("-p", f"{k}={v}")]
    # systemd-run: the service manager expands `${VAR}` and `$$` in the command (systemd-run(1),
    # --expand-environment, on by default): every `$` doubled reaches sh as one `$`
    unit = ["systemd-run", "--quiet", "--collect", "--unit", plan.unit, *props, "sh", "-c",
            unit_command(plan, argv).replace("$", "$$")]
    return (f"cd {q(plan.dir)} && if {SYSTEMD_TEST}; then {shlex.join(unit)} && echo systemd; "
            f"else setsid sh -c {q(loop_script(plan, argv))} </dev/null >/dev/null 2>&1 & echo loop; fi")


# sd_booted(3): systemd is PID 1 when /run/systemd/system exists; transient units need root.
SYSTEMD_TEST = '[ -d /run/systemd/system ] && [ "$(id -u)" = 0 ] && command -v systemd-run >/dev/null'


def unit_properties(plan: HandOff) -> list[tuple[str, str]]:
    """The transient unit's [Service] settings (systemd.service(5), systemd.exec(5)): restarted
    RESTART_S after a failure, never after one of FINAL_EXITS; its output appended to the log.
    systemd-run's `-p` words and a unit file (unit_file) are made from this one list."""
    return [("Restart", "on-failure"), ("RestartSec", str(RESTART_S)),
            ("RestartPreventExitStatus", " ".join(str(c) for c in FINAL_EXITS)),
            ("WorkingDirectory", plan.dir), ("StandardOutput", f"append:{plan.log}"),
            ("StandardError", f"append:{plan.log}")]


def unit_command(plan: HandOff, argv: list[str]) -> str:
    """The unit's `sh -c` script: `argv`, its exit logged, end_script, and its exit status
    passed on, so that systemd restarts it or not by that status (a SIGKILLed train process: 137,
    restarted; sh is the unit's main process and stays, as the loop's shell does)."""
    return f"{shlex.join(argv)}; rc=$?; echo \"controller: exit $rc\" >>{shlex.quote(plan.log)}; {end_script(plan)}; exit $rc"


def unit_file(plan: HandOff, argv: list[str]) -> str:
    """The unit as a file (systemd.unit(5)) with the settings and the command of the transient
    one start_script makes, for `systemd-analyze verify`: the command is one double-quoted word
    for /bin/sh -c, backslash and `"` escaped, `%` as `%%` (specifiers, in every value) and `$` as
    `$$` (systemd.service(5), "Command lines"; systemd.unit(5), "Specifiers")."""
    script = unit_command(plan, argv).replace("\\", "\\\\").replace('"', '\\"').replace("%", "%%").replace("$", "$$")
    lines = ["[Unit]", f"Description=trainkit controller of run {plan.run_id}", "", "[Service]",
             f'ExecStart=/bin/sh -c "{script}"', *(f"{k}={v.replace('%', '%%')}" for k, v in unit_properties(plan))]
    return "\n".join(lines) + "\n"


def end_script(plan: HandOff) -> str:
    """What runs after the controller's train process exited with `$rc`, in the loop and in the
    unit alike: when that exit ends the run for good (FINAL_EXITS: nothing starts it again) the
    controller's key pair is removed (the train process took its key off the hosts before it
    exited: controller_keys.at_the_end). Any other exit keeps it: train starts again and needs it."""
    finals = " ".join(str(c) for c in FINAL_EXITS)
    return f"case \" {finals} \" in *\" $rc \"*) rm -rf {shlex.quote(plan.path('ssh'))};; esac"


def ends_for_good(code: int) -> bool:
    """Whether the controller's train process exiting with `code` is not started again."""
    return code in FINAL_EXITS


def loop_script(plan: HandOff, argv: list[str], restart_s: float = RESTART_S) -> str:
    """The restart loop (no systemd): records its pid, runs `argv` (its pid in child.pid, output
    appended to the log), and starts it again RESTART_S later unless it exited with one of
    FINAL_EXITS or the stop file exists (`cancel`: stop_script; cancel ends the controller's
    access itself). Then end_script."""
    q = shlex.quote
    finals = " ".join(str(c) for c in FINAL_EXITS)
    return (f"echo $$ > {q(plan.loop_pid)}; rm -f {q(plan.path('stop'))}; while :; do {shlex.join(argv)} >>{q(plan.log)} 2>&1 & "
            f"echo $! > {q(plan.child_pid)}; wait $!; rc=$?; echo \"controller: exit $rc\" >>{q(plan.log)}; "
            f"case \" {finals} \" in *\" $rc \"*) break;; esac; [ -e {q(plan.path('stop'))} ] && break; "
            f"sleep {restart_s}; done; rm -f {q(plan.loop_pid)}; {end_script(plan)}")


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


def authorize_script(path: str, public: str) -> str:
    """Appends the line `public` once to the authorized_keys file `path` (a shell word: quoted by
    the caller, or `"$HOME"/...`), made 0600 with its folder if missing."""
    q = shlex.quote
    return (f"f={path}; mkdir -p \"$(dirname \"$f\")\" && touch \"$f\" && chmod 600 \"$f\" && "
            f"{{ grep -qxF {q(public)} \"$f\" || printf '%s\\n' {q(public)} >> \"$f\"; }}")


def revoke_script(path: str, public: str) -> str:
    """Takes every line that is exactly `public` out of the authorized_keys file `path` (a shell
    word, as authorize_script's); the other lines, the file's inode and mode stay (rewritten in
    place through a temp file beside it). A missing file is left missing."""
    q = shlex.quote
    # the temp file is this shell's own ($$): the controller and a cancel may revoke at once
    return (f"f={path}; t=\"$f.trainkit.$$\"; [ -f \"$f\" ] || exit 0; {{ grep -vxF {q(public)} \"$f\" || true; }} > \"$t\" "
            f"&& cat \"$t\" > \"$f\" && rm -f \"$t\"")


def key_dir(record: dict[str, Any], run_id: str) -> str | None:
    """The key pair's folder of the controller `record` of run `run_id` (<dir>/ssh), or None when
    the record's dir is not a controller folder of that run (<root>-controller/<run-id>, absolute):
    a record copied from a node is data, never a path to remove elsewhere."""
    d = PurePosixPath(str(record.get("dir") or ""))
    if d.is_absolute() and d.name == run_id and d.parent.name.endswith("-controller") and ".." not in d.parts:
        return str(d / "ssh")
    return None


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
