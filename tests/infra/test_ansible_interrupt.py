"""Ctrl-C during a playbook stops Ansible entirely: nothing keeps changing the node afterwards.

Real processes: `trainkit apply` on the local target (site.yml through ansible-runner) gets SIGINT
once its first task runs. ansible-playbook runs in its own session on a pty and Ansible's task
workers call setsid, so neither sees the terminal's SIGINT; before the fix a worker went on alone
(parent PID 1) after trainkit had exited.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]


def ansible_processes(marker: str) -> list[str]:
    table = subprocess.run(["ps", "-A", "-ww", "-o", "pid=,args="], capture_output=True, text=True).stdout
    return [line for line in table.splitlines() if "ansible" in line and marker in line]


def test_ctrl_c_during_site_yml_exits_130_and_leaves_no_ansible_process(tmp_path):
    ws = tmp_path / "ws-interrupt"
    proc = subprocess.Popen([sys.executable, "-m", "trainkit", "apply", str(REPO / "examples/clusters/local.yaml"),
                             "--workdir", str(ws), "--yes"], cwd=tmp_path, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, start_new_session=True)
    seen = ""
    try:
        while "Gathering Facts" not in seen:  # the first task is running: workers exist
            line = proc.stderr.readline()
            assert line, f"apply ended before its first task: {seen[-2000:]}"
            seen += line
        os.killpg(proc.pid, signal.SIGINT)  # what a terminal's Ctrl-C does to the foreground group
        _, err = proc.communicate(timeout=120)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
    assert proc.returncode == 130, err[-2000:]
    assert "site.yml was interrupted" in err and "Traceback" not in err
    time.sleep(2)  # a surviving worker would still be running its task now
    left = ansible_processes(str(ws))
    for line in left:  # tear down what the test made, by PID, before failing
        os.kill(int(line.split()[0]), signal.SIGKILL)
    assert left == []
