"""The network role on this machine (local connection): the job's NCCL environment file names the
interface holding the private IP, adds IB/RDMA variables only where the kernel lists RDMA devices,
and a second run changes nothing (geerlingguy-style idempotence)."""

from __future__ import annotations

import os
import shlex
import subprocess
import sys
from pathlib import Path

import ansible_runner
import pytest
import yaml

pytestmark = pytest.mark.infra

REPO = Path(__file__).resolve().parents[2]


@pytest.fixture(autouse=True)
def venv_on_path(monkeypatch):
    """ansible-runner finds ansible-playbook on PATH: the one beside this Python."""
    monkeypatch.setenv("PATH", f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}")


def private_address() -> tuple[str, str]:
    """(interface, IPv4) of this machine's first non-loopback address."""
    for line in subprocess.run(["ip", "-o", "-4", "addr", "show"], capture_output=True, text=True).stdout.splitlines():
        parts = line.split()
        if parts[1] != "lo":
            return parts[1], parts[3].split("/")[0]
    pytest.fail("this machine has no IPv4 address besides loopback")


def run_role(tmp: Path, **variables) -> ansible_runner.Runner:
    (tmp / "project").mkdir(parents=True, exist_ok=True)
    (tmp / "project" / "net.yml").write_text(yaml.safe_dump(
        [{"name": "Network", "hosts": "all", "gather_facts": True, "roles": ["network"]}]))
    inventory = {"all": {"hosts": {"localhost": {"ansible_connection": "local",
                                                 "ansible_python_interpreter": sys.executable}}}}
    return ansible_runner.run(private_data_dir=str(tmp), playbook="net.yml", inventory=inventory,
                              extravars=variables, quiet=True,
                              envvars={"ANSIBLE_ROLES_PATH": str(REPO / "ansible" / "roles")})


def changed(result) -> int:
    return sum((result.stats or {}).get("changed", {}).values())


def tencent_tasks_run(result) -> list[str]:
    """Tasks from the role's tencent_rdma.yml that ran (ok, changed or failed) in this run."""
    return [e["event_data"].get("task", "") for e in result.events
            if e.get("event") in ("runner_on_ok", "runner_on_failed")
            and "tencent_rdma.yml" in (e.get("event_data", {}).get("task_path") or "")]


def read_env(path: Path) -> dict[str, str]:
    out = {}
    for line in path.read_text().splitlines():
        if line and not line.startswith("#"):
            key, _, value = line.partition("=")
            out[key] = shlex.split(value)[0]
    return out


def test_the_env_file_names_the_private_interface_and_a_second_run_changes_nothing(tmp_path):
    ifname, address = private_address()
    env_file = tmp_path / "root" / "nccl.env"
    rdma = tmp_path / "no-rdma"
    rdma.mkdir()
    variables = {"network_env_file": str(env_file), "network_private_ip": address,
                 "network_rdma_class_dir": str(rdma)}
    first = run_role(tmp_path / "r1", **variables)
    assert first.rc == 0, first.stdout.read()[-3000:]
    assert changed(first) >= 1
    assert read_env(env_file) == {"NCCL_SOCKET_IFNAME": ifname, "GLOO_SOCKET_IFNAME": ifname}
    second = run_role(tmp_path / "r2", **variables)
    assert second.rc == 0 and changed(second) == 0, second.stdout.read()[-3000:]
    assert not tencent_tasks_run(first) and not tencent_tasks_run(second)


def test_rdma_devices_become_nccl_ib_hca_and_extra_names_are_checked(tmp_path):
    _, address = private_address()
    env_file = tmp_path / "nccl.env"
    rdma = tmp_path / "infiniband"
    for dev in ("mlx5_1", "mlx5_0"):
        (rdma / dev).mkdir(parents=True)
    result = run_role(tmp_path / "r1", network_env_file=str(env_file), network_private_ip=address,
                      network_rdma_class_dir=str(rdma), network_nccl_extra_env={"NCCL_DEBUG": "INFO x"})
    assert result.rc == 0, result.stdout.read()[-3000:]
    env = read_env(env_file)
    assert env["NCCL_IB_HCA"] == "mlx5_0,mlx5_1" and env["NCCL_DEBUG"] == "INFO x"
    bad = run_role(tmp_path / "r2", network_env_file=str(env_file), network_private_ip=address,
                   network_rdma_class_dir=str(rdma), network_nccl_extra_env={"X; rm -rf /": "1"})
    assert bad.rc != 0 and "network_nccl_extra_env" in bad.stdout.read()


def test_tencent_rdma_without_the_rdma_agent_service_stops_and_says_how_to_fix_it(tmp_path):
    """This machine has no rdma-agent service (and no systemd): the role stops before it starts
    anything or writes the env file, with a message that names the service, the cause and the fix."""
    _, address = private_address()
    env_file = tmp_path / "nccl.env"
    rdma = tmp_path / "infiniband"
    (rdma / "mlx5_0").mkdir(parents=True)
    result = run_role(tmp_path / "r1", network_env_file=str(env_file), network_private_ip=address,
                      network_rdma_class_dir=str(rdma), network_tencent_rdma_enabled=True)
    out = result.stdout.read()
    assert result.rc != 0, out[-3000:]
    assert "no rdma-agent service" in out, out[-3000:]
    for words in ("shared custom image", "public image", "install rdma-agent",
                  "RDMA Network Configuration Component rdma-agent Description",
                  "https://www.tencentcloud.com/document/product/1236/77056"):
        assert words in out, (words, out[-3000:])
    assert "Traceback" not in out and "MODULE FAILURE" not in out, out[-3000:]
    ran = tencent_tasks_run(result)
    assert ran and not any("Start rdma-agent" in task or "Wait for" in task for task in ran), ran
    assert not env_file.exists()
