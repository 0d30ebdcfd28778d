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
    ws = Workspace.for_cluster("local-demo", tmp_path / "ws")
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
    from trainkit.provision.node import node_from_vars

    host = {"ansible_host": "10.0.1.6", "ansible_user": "ubuntu", "ansible_port": 22,
            "ansible_ssh_private_key_file": "/ws/ssh/id_ed25519",
            "ansible_ssh_common_args": "-o IdentitiesOnly=yes -o ProxyCommand='ssh -W %h:%p -q "
                                       "-i /ws/ssh/id_ed25519 ubuntu@203.0.113.9'"}
    argv = node_from_vars("w1", 1, host).ssh_argv()
    assert argv[-1] == "ubuntu@10.0.1.6"
    assert "ProxyCommand=ssh -W %h:%p -q -i /ws/ssh/id_ed25519 ubuntu@203.0.113.9" in argv
    assert argv[argv.index("-i") + 1] == "/ws/ssh/id_ed25519"


def test_follow_prints_whole_new_lines_of_a_growing_log(tmp_path, capsys):
    from trainkit.util.progress import follow

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


def test_terraform_log_is_rotated_per_command_keeping_three_and_removed_on_request(tmp_path):
    ws = Workspace.for_cluster("demo", tmp_path / "ws")
    for n in range(5):
        ws.rotate_log().write_text(f"command {n}\n")
    logs = sorted(p.name for p in ws.root.glob("terraform.log*"))
    assert logs == ["terraform.log", "terraform.log.1", "terraform.log.2"]
    assert [(ws.root / name).read_text() for name in logs] == ["command 4\n", "command 3\n", "command 2\n"]
    ws.remove_logs()
    assert not list(ws.root.glob("terraform.log*"))


def test_the_users_public_key_is_read_as_given_and_a_private_key_is_refused(tmp_path):
    from trainkit.errors import InputError
    from trainkit.workspace import read_public_key

    ws = Workspace.for_cluster("demo", tmp_path / "ws")
    key = ws.ensure_ssh_key()
    assert read_public_key(ws.ssh_public_key) == key
    with pytest.raises(InputError, match="ssh.public_key: .* is not an OpenSSH public key"):
        read_public_key(ws.ssh_private_key)
    with pytest.raises(InputError, match="ssh.public_key: cannot read"):
        read_public_key(tmp_path / "missing.pub")


def test_a_workspace_without_the_clusters_private_key_is_told_where_to_put_it(tmp_path, repo):
    from trainkit.cluster.lifecycle import require_private_key
    from trainkit.errors import InputError
    from trainkit.spec.resolve import load_cluster

    cluster = load_cluster(repo / "examples/clusters/aws.yaml")
    ws = Workspace.for_cluster("demo", tmp_path / "ws")
    with pytest.raises(InputError, match=f"{ws.ssh_private_key} does not exist") as err:
        require_private_key(cluster, ws, "ssh-ed25519 AAAAthecluster")
    assert err.value.exit_code == 2 and "copy the cluster's private key" in err.value.fix
    ws.ensure_ssh_key()  # a key of its own is not the cluster's
    with pytest.raises(InputError, match="is not the cluster's key"):
        require_private_key(cluster, ws, "ssh-ed25519 AAAAthecluster")
    require_private_key(cluster, ws, ws.generated_public_key())


def test_the_key_pair_of_a_state_applied_before_the_key_output_is_found():
    from trainkit.stack.state import _key_in_state, change_set, drifted

    state = {"values": {"root_module": {"child_modules": [{"resources": [
        {"mode": "managed", "values": {"public_key": "ssh-ed25519 AAAAx c"}},
        {"mode": "data", "values": {"public_key": "ssh-rsa no"}}]}]}}}
    assert _key_in_state(state) == "ssh-ed25519 AAAAx c" and _key_in_state({}) is None
    plan = {"resource_changes": [
        {"address": "a", "change": {"actions": ["no-op"]}},
        {"address": "b", "change": {"actions": ["create"]}}],
        "resource_drift": [{"address": "c", "change": {"actions": ["delete"]}},
                           {"address": "d", "change": {"actions": ["update"]}}]}
    assert change_set(plan) == {("b", ("create",))} and drifted(plan) == ["c"]


def test_status_while_another_command_holds_the_workspace_shows_the_cache_and_says_so(tmp_path, repo):
    import json

    ws = Workspace.for_cluster("aws-demo", tmp_path / "ws")
    ws.ensure()
    node = {"name": "aws-demo-node-0", "id": "i-1", "private_ip": "10.0.0.5", "public_ip": "203.0.113.5"}
    ws.outputs_json.write_text(json.dumps({"nodes": [node]}))
    with ws.lock("train"):
        proc = subprocess.run([sys.executable, "-m", "trainkit", "status", str(repo / "examples/clusters/aws.yaml"),
                               "--workdir", str(ws.root), "--json"], capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr
    out = json.loads(proc.stdout)
    assert out["nodes"] == [node] and out["cached"] == str(ws.outputs_json)
    assert "in use by `trainkit train`" in proc.stderr and "not asking the cloud" in proc.stderr
