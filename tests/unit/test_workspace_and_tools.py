"""Workspace lock, per-cluster SSH key, and the clear message when terraform is missing."""

from __future__ import annotations

import os
import shutil
import stat
import subprocess
import sys

import pytest

from trainkit.errors import LockedError
from trainkit.workspace import Workspace


def test_a_second_command_on_the_same_cluster_is_refused_with_exit_8(tmp_path, repo):
    ws = Workspace.for_cluster("demo", tmp_path / "ws")
    with ws.lock("apply"):
        with pytest.raises(LockedError, match="in use by `trainkit apply`"):
            with ws.lock("destroy"):
                pass
        # and from another process, through the real CLI
        proc = subprocess.run([sys.executable, "-m", "trainkit", "plan", str(repo / "examples/clusters/local.yaml"),
                               "--workdir", str(ws.root)], capture_output=True, text=True)
        assert proc.returncode == 8, proc.stderr
        assert "in use by `trainkit apply`" in proc.stderr
    with ws.lock("destroy"):  # released when the holder is done
        pass


def test_cluster_key_is_generated_once_and_private(tmp_path):
    ws = Workspace.for_cluster("demo", tmp_path / "ws")
    first = ws.ensure_ssh_key()
    assert first.startswith("ssh-ed25519 ")
    assert ws.ensure_ssh_key() == first
    assert stat.S_IMODE(ws.ssh_private_key.stat().st_mode) == 0o600


def test_missing_terraform_is_a_clear_error_with_exit_9(tmp_path, repo):
    bin_dir = tmp_path / "bin"  # everything a plan needs except terraform
    bin_dir.mkdir()
    for tool in ("ssh-keygen", "ssh"):
        (bin_dir / tool).symlink_to(shutil.which(tool))
    env = {**os.environ, "PATH": f"{os.path.dirname(sys.executable)}:{bin_dir}"}
    env.pop("TRAINKIT_TERRAFORM", None)
    proc = subprocess.run([sys.executable, "-m", "trainkit", "plan", str(repo / "examples/clusters/aws.yaml"),
                           "--workdir", str(tmp_path / "ws")], capture_output=True, text=True, env=env)
    assert proc.returncode == 9, proc.stderr
    assert "terraform is not installed" in proc.stderr and "install Terraform" in proc.stderr
    assert "Traceback" not in proc.stderr


def test_ssh_to_a_worker_goes_through_the_head_node():
    from trainkit.commands.ops import ssh_argv

    host = {"ansible_host": "10.0.1.6", "ansible_user": "ubuntu", "ansible_port": 22,
            "ansible_ssh_private_key_file": "/ws/ssh/id_ed25519",
            "ansible_ssh_common_args": "-o IdentitiesOnly=yes -o ProxyCommand='ssh -W %h:%p -q "
                                       "-i /ws/ssh/id_ed25519 ubuntu@203.0.113.9'"}
    argv = ssh_argv(host)
    assert argv[-1] == "ubuntu@10.0.1.6"
    assert "ProxyCommand=ssh -W %h:%p -q -i /ws/ssh/id_ed25519 ubuntu@203.0.113.9" in argv
    assert argv[argv.index("-i") + 1] == "/ws/ssh/id_ed25519"


def test_follow_prints_whole_new_lines_of_a_growing_log(tmp_path, capsys):
    from trainkit.progress import follow

    log = tmp_path / "logs" / "rank-0.log"
    with follow(log, prefix="rank 0 | ", poll_s=0.05):
        log.parent.mkdir()
        log.write_text("epoch 0 step 10 loss 2.1\nepoch 0 step 2")  # second line still being written
        import time
        time.sleep(0.3)
        with open(log, "a") as fh:
            fh.write("0 loss 1.7\n")
    err = capsys.readouterr().err
    assert err.splitlines() == ["rank 0 | epoch 0 step 10 loss 2.1", "rank 0 | epoch 0 step 20 loss 1.7"]
