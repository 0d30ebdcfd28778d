"""site.yml, stage.yml and cleanup.yml: lint, syntax, and a real site.yml run on the local target.

The real run goes through trainkit.provision.playbook (ansible-runner) exactly as `trainkit apply` does;
the second run must report no changes.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from trainkit.errors import MISSING_TOOL, PROVISION, MissingToolError, TrainkitError
from trainkit.provision import playbook as provision
from trainkit.provision.inventory import inventory_for
from trainkit.spec.resolve import load_cluster
from trainkit.workspace import Workspace

REPO = Path(__file__).resolve().parents[2]
ANSIBLE = REPO / "ansible"
BIN = Path(sys.executable).parent
PLAYBOOKS = ("site.yml", "stage.yml", "cleanup.yml", "controller.yml")  # runs start through trainkit/runs/launch.py
LOCAL_SPEC = """\
name: local-ansible
cloud: local
storage:
  data_disk: {enabled: false}
  nas: {enabled: false}
launch:
  nproc_per_node: 2
"""


def _tool(name: str) -> str:
    path = shutil.which(name) or (str(BIN / name) if (BIN / name).exists() else None)
    assert path, f"{name} is not installed (pip install -e '.[control,dev]')"
    return path


def _env() -> dict:
    return {**os.environ, "PATH": f"{BIN}{os.pathsep}{os.environ.get('PATH', '')}",
            "ANSIBLE_CONFIG": str(ANSIBLE / "ansible.cfg")}


@pytest.fixture(scope="module")
def local(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("local")
    spec = tmp / "cluster.yaml"
    spec.write_text(LOCAL_SPEC)
    return load_cluster(spec), Workspace(tmp / "ws")


def test_ansible_lint_is_clean_with_the_production_profile():
    proc = subprocess.run([_tool("ansible-lint"), "--offline", "--profile", "production", "--nocolor",
                           "."], cwd=ANSIBLE, capture_output=True, text=True, env=_env())
    assert proc.returncode == 0, proc.stdout[-4000:] + proc.stderr[-2000:]


@pytest.mark.parametrize("playbook", PLAYBOOKS)
def test_playbook_passes_syntax_check(playbook, local):
    cluster, ws = local
    inventory = ws.write_inventory(inventory_for(cluster, None, ws))
    proc = subprocess.run([_tool("ansible-playbook"), "--syntax-check", "-i", str(inventory), playbook],
                          cwd=ANSIBLE, capture_output=True, text=True, env=_env())
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-2000:]


def test_ansible_reads_the_generated_cloud_inventory_with_the_jump_host(tmp_path):
    spec = tmp_path / "aws.yaml"
    spec.write_text("name: demo\ncloud: aws\nregion: us-east-1\nzone: us-east-1a\nnodes: 2\n"
                    "instance: {type: g5.12xlarge}\nnetwork: {admin_cidrs: [203.0.113.0/24]}\n")
    ws = Workspace(tmp_path / "ws").ensure()
    outputs = {"nodes": {"value": [
        {"name": "demo-0", "id": "i-1", "private_ip": "10.42.1.10", "public_ip": "203.0.113.7"},
        {"name": "demo-1", "id": "i-2", "private_ip": "10.42.1.11", "public_ip": None}]},
        "nas": {"value": None}, "data_disk_device": {"value": "/dev/nvme1n1"},
        "ssh_user": {"value": "ubuntu"}}
    ws.outputs_json.write_text(json.dumps(outputs))
    path = provision.prepare_inventory(load_cluster(spec), ws)
    proc = subprocess.run([_tool("ansible-inventory"), "-i", str(path), "--list"],
                          capture_output=True, text=True, env=_env())
    assert proc.returncode == 0, proc.stderr
    hostvars = json.loads(proc.stdout)["_meta"]["hostvars"]
    assert hostvars["demo-1"]["ansible_host"] == "10.42.1.11"
    assert "ubuntu@203.0.113.7" in hostvars["demo-1"]["ansible_ssh_common_args"]
    assert hostvars["demo-1"]["trainkit_rdzv_endpoint"] == "10.42.1.10:29400"
    assert hostvars["demo-0"]["disks_device"] == "/dev/nvme1n1"


def test_site_runs_for_real_on_the_local_target_and_a_second_run_changes_nothing(local):
    cluster, ws = local
    lines: list[dict] = []
    display = provision.ProgressDisplay(quiet=True)

    def record(event: dict) -> bool:
        lines.append(event)
        return display(event)

    first = provision.run_site(cluster, ws, job_config=REPO / "examples" / "train" / "digits.yaml",
                               display=record)
    assert first.ok and not first.failures
    node = ws.root.resolve() / "node"
    assert (node / "configs" / "digits.yaml").is_file() and (node / "work").is_dir()
    assert first.changed > 0
    skipped = {e["event_data"]["task"] for e in lines if e.get("event") == "runner_on_skipped"}
    assert "Install the NVIDIA driver, CUDA, cuDNN and NCCL" in skipped
    assert "Install the Ascend driver, firmware and CANN" in skipped
    assert "Find, format and mount the data disk" in skipped
    assert display.counts.get("ok", 0) > 0

    second = provision.run_site(cluster, ws, job_config=REPO / "examples" / "train" / "digits.yaml",
                                display=provision.ProgressDisplay(quiet=True))
    assert second.ok
    assert second.changed == 0, second.hosts


def test_a_failing_task_raises_a_provision_error_naming_host_task_and_message(local):
    cluster, ws = local
    with pytest.raises(TrainkitError) as err:
        provision.run_site(cluster, ws, extravars={"trainkit_venv_mode": "bogus"},
                           display=provision.ProgressDisplay(quiet=True))
    assert err.value.exit_code == PROVISION
    assert "local-ansible: Check the venv mode is one trainkit knows" in err.value.message
    assert "must be venv, venv_system_site or reuse" in err.value.message


def test_missing_ansible_playbook_is_a_missing_tool_error(monkeypatch, tmp_path):
    monkeypatch.setattr(shutil, "which", lambda name: None)
    monkeypatch.setattr(sys, "executable", str(tmp_path / "python"))
    with pytest.raises(MissingToolError) as err:
        provision.find_ansible_playbook()
    assert err.value.exit_code == MISSING_TOOL and "trainkit-clusters[control]" in err.value.fix
