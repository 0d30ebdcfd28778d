"""The only module that runs Ansible (through ansible-runner).

    run_site(cluster, workspace)                      -> PlaybookResult   (site.yml: make nodes ready)
    run_cleanup(cluster, workspace)                   -> PlaybookResult   (cleanup.yml: unmount storage)
    run_playbook(playbook, cluster, workspace, ...)   -> PlaybookResult   (any of ansible/, e.g. stage.yml)

Each writes workspace/inventory.yml (trainkit.provision.inventory), runs the playbook from the repo's
ansible/ folder with workspace/ansible/ as ansible-runner's private data dir, streams every task
result to a progress display, and on failure raises TrainkitError with one line per failed host
and task (exit code PROVISION=5 for site, DESTROY=7 for cleanup, the caller's for the rest: TRAIN=6
when `trainkit train` stages data through stage.yml). MissingToolError (9) when ansible-playbook
or ansible-runner is not installed. Runs are not started here: trainkit/runs/launch.py does that.
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import threading
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

from trainkit.clouds.base import NODES_TERRAFORM
from trainkit.errors import DESTROY, PROVISION, MissingToolError, TrainkitError
from trainkit.provision.inventory import inventory_for
from trainkit.provision.wheel import node_wheel
from trainkit.spec.resolve import Cluster
from trainkit.util import resources
from trainkit.util.dist import pip_install
from trainkit.util.progress import ProgressDisplay  # the playbook display; re-exported for callers
from trainkit.workspace import Workspace

KEEP_ARTIFACTS = 10  # ansible-runner artifact folders kept in workspace/ansible/artifacts


@dataclass
class PlaybookResult:
    """What a playbook run did: ansible-runner's status and rc, counts per host, failures."""

    playbook: str
    status: str
    rc: int
    hosts: dict[str, dict[str, int]] = field(default_factory=dict)   # host -> {ok, changed, ...}
    failures: list[tuple[str, str, str]] = field(default_factory=list)  # (host, task, message)
    results: dict[str, dict[str, dict]] = field(default_factory=dict)  # task -> host -> module result
    error: str = ""                     # ansible-playbook's own error when no task ran or failed

    @property
    def changed(self) -> int:
        return sum(h.get("changed", 0) for h in self.hosts.values())

    @property
    def ok(self) -> bool:
        return self.status == "successful" and self.rc == 0


def find_ansible_playbook() -> str:
    """ansible-playbook on PATH, else next to this Python (an un-activated venv)."""
    found = shutil.which("ansible-playbook")
    beside = Path(sys.executable).parent / "ansible-playbook"
    if not found and beside.is_file() and os.access(beside, os.X_OK):
        found = str(beside)
    if not found:
        raise MissingToolError("ansible-playbook is not installed (not on PATH, nor next to "
                               f"{sys.executable})",
                               fix=f"{pip_install('control')} (ansible-core, ansible-runner "
                                   "and the community.general / ansible.posix collections)")
    return found


def prepare_inventory(cluster: Cluster, workspace: Workspace) -> Path:
    """Write workspace/inventory.yml from the spec and (cloud targets) outputs.json."""
    outputs = None
    if cluster.room.node_source == NODES_TERRAFORM:
        if not workspace.outputs_json.is_file():
            raise TrainkitError(f"{workspace.outputs_json} is missing: the cluster was not applied",
                                fix=f"run `trainkit apply {cluster.source}` first",
                                exit_code=PROVISION)
        outputs = workspace.read_outputs()
    return workspace.write_inventory(inventory_for(cluster, outputs, workspace))


def run_playbook(playbook: str, cluster: Cluster, workspace: Workspace, extravars: dict | None = None,
                 *, exit_code: int = PROVISION, display: Callable[[dict], bool] | None = None,
                 cmdline: str | None = None, inventory: Path | None = None) -> PlaybookResult:
    """Run ansible/<playbook> against the cluster's inventory (or the file `inventory`: the
    controller instance's); TrainkitError(exit_code) on failure."""
    binary = find_ansible_playbook()
    try:
        import ansible_runner  # ansible-runner: imported only when a playbook runs
    except ImportError:
        raise MissingToolError("ansible-runner is not installed",
                               fix=pip_install("control")) from None
    inventory = inventory or prepare_inventory(cluster, workspace)
    private = workspace.ansible_dir
    private.mkdir(parents=True, exist_ok=True)
    ansible_dir = resources.data_path("ansible")
    env = {"ANSIBLE_CONFIG": str(ansible_dir / "ansible.cfg"),
           "PATH": os.pathsep.join([str(Path(binary).parent), os.environ.get("PATH", "")]),
           "ANSIBLE_NOCOLOR": "1", "ANSIBLE_FORCE_COLOR": "0"}
    cancel = threading.Event()
    thread, runner = ansible_runner.run_async(
        private_data_dir=str(private), project_dir=str(ansible_dir), playbook=playbook,
        inventory=str(inventory.resolve()), extravars=extravars or {}, envvars=env,
        event_handler=display or ProgressDisplay(), quiet=True, rotate_artifacts=KEEP_ARTIFACTS,
        cmdline=cmdline, suppress_env_files=True,  # env/ files would outlive this run
        cancel_callback=cancel.is_set)
    _wait(thread, cancel)
    result = _collect(playbook, runner)
    if not result.ok and not result.failures:
        result.error = _stdout_tail(runner)
    if not result.ok:
        raise _failure_error(result, cluster, exit_code)
    return result


def _wait(thread: threading.Thread, cancel: threading.Event) -> None:
    """Wait for the runner's thread. On Ctrl-C, ask the runner to cancel: at its next check
    (pexpect_timeout, 5 s by default) it kills ansible-playbook's process group, which the
    terminal's SIGINT never reaches (its own session, on a pty), and ends with status "canceled".
    Ansible's task workers call setsid, so they are outside that group: every process below this
    one, listed when Ctrl-C came, is killed too, and nothing keeps changing the nodes after we exit."""
    try:
        while thread.is_alive():
            thread.join(0.5)
    except KeyboardInterrupt:
        below = descendants(os.getpid())
        cancel.set()
        thread.join()
        for pid in below:
            try:
                os.kill(pid, signal.SIGKILL)
            except (ProcessLookupError, PermissionError):
                pass


def descendants(root: int) -> list[int]:
    """PIDs below `root` in the process tree, from `ps -A -o pid=,ppid=` (Linux and macOS)."""
    try:
        table = subprocess.run(["ps", "-A", "-o", "pid=,ppid="], capture_output=True, text=True,
                               timeout=10).stdout
    except (OSError, subprocess.SubprocessError):
        return []
    children: dict[int, list[int]] = {}
    for line in table.splitlines():
        pid, _, ppid = line.strip().partition(" ")
        if pid.isdigit() and ppid.strip().isdigit():
            children.setdefault(int(ppid), []).append(int(pid))
    found, todo = [], [root]
    while todo:
        for pid in children.get(todo.pop(), []):
            found.append(pid)
            todo.append(pid)
    return found


def _collect(playbook: str, runner: Any) -> PlaybookResult:
    stats = runner.stats or {}
    hosts: dict[str, dict[str, int]] = {}
    for key, name in (("ok", "ok"), ("changed", "changed"), ("failures", "failed"),
                      ("dark", "unreachable"), ("skipped", "skipped"), ("ignored", "ignored")):
        for host, n in (stats.get(key) or {}).items():
            hosts.setdefault(host, {})[name] = n
    result = PlaybookResult(playbook, runner.status, runner.rc, hosts)
    for ev in runner.events:
        data = ev.get("event_data", {})
        kind = ev.get("event")
        if kind in ("runner_on_ok", "runner_on_failed", "runner_on_unreachable") and "res" in data:
            result.results.setdefault(data.get("task", ""), {})[data.get("host", "")] = data["res"]
        if kind in ("runner_on_failed", "runner_on_unreachable") and not data.get("ignore_errors"):
            result.failures.append((data.get("host", "?"), data.get("task", "?"),
                                    _message(data.get("res") or {})))
    return result


def _stdout_tail(runner: Any) -> str:
    """The last lines of ansible-playbook's output that say ERROR (or just the last line)."""
    try:
        lines = [ln.strip() for ln in runner.stdout.read().splitlines() if ln.strip()]
    except Exception:  # noqa: BLE001 - the artifact may be gone; the status still tells
        return ""
    errors = [ln for ln in lines if "ERROR" in ln or "error:" in ln]
    return " ".join((errors or lines)[-3:])[:800]


def _message(res: dict) -> str:
    """The module's own words: msg, else the tail of stderr/stdout."""
    parts = [str(res.get("msg") or "").strip()]
    for key in ("stderr", "module_stderr", "stdout"):
        text = str(res.get(key) or "").strip()
        if text and text not in parts[0]:
            parts.append(text.splitlines()[-1][:400])
            break
    return " | ".join(p for p in parts if p) or "failed (no message)"


def _failure_error(result: PlaybookResult, cluster: Cluster, exit_code: int) -> TrainkitError:
    if result.status == "canceled":  # Ctrl-C reached ansible-runner: nothing to fix, just interrupted
        return TrainkitError(f"{result.playbook} was interrupted on {cluster.name} (Ctrl-C); the nodes "
                             "may be half set up", exit_code=130,
                             fix=f"run the command again: {result.playbook} is idempotent and finishes the job")
    lines = [f"{result.playbook} failed on {cluster.name} (ansible-runner: {result.status}, rc {result.rc})"]
    lines += [f"  {host}: {task}: {msg}" for host, task, msg in result.failures]
    if not result.failures:
        lines.append(f"  ansible-playbook: {result.error or 'no task failed; see the log'}")
    fix = (f"fix the cause above and run the command again ({result.playbook} is idempotent); "
           "the full log is under workspace/ansible/artifacts/")
    return TrainkitError("\n".join(lines), fix=fix, exit_code=exit_code)


def run_site(cluster: Cluster, workspace: Workspace, *, job_config: str | Path | None = None,
             extravars: dict | None = None, display: Callable[[dict], bool] | None = None,
             limit: list[str] | None = None) -> PlaybookResult:
    """Make every node ready (site.yml), or only the inventory hosts in `limit` (a replaced
    node). Builds the wheel unless the target reuses its Python (trainkit_venv_mode: reuse,
    the `local` default). Raises TrainkitError(PROVISION)."""
    extra = dict(extravars or {})
    if job_config:
        extra["trainkit_job_config"] = str(Path(job_config).resolve())
    if _venv_mode(cluster, workspace, extra) != "reuse" and "trainkit_wheel" not in extra:
        extra["trainkit_wheel"] = str(node_wheel(workspace.ansible_dir / "wheels").resolve())
    return run_playbook("site.yml", cluster, workspace, extra, exit_code=PROVISION, display=display,
                        cmdline=f"--limit {','.join(limit)}" if limit else None)


def _venv_mode(cluster: Cluster, workspace: Workspace, extra: dict) -> str:
    if "trainkit_venv_mode" in extra:
        return extra["trainkit_venv_mode"]
    return cluster.room.venv_mode


def run_cleanup(cluster: Cluster, workspace: Workspace, *, extravars: dict | None = None,
                display: Callable[[dict], bool] | None = None) -> PlaybookResult:
    """Unmount the NAS and the data disk and drop their fstab entries (cleanup.yml); a failure is
    TrainkitError(DESTROY), Ctrl-C exit 130."""
    return run_playbook("cleanup.yml", cluster, workspace, extravars, exit_code=DESTROY,
                        display=display)
