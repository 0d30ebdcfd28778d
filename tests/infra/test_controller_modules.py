"""The modules with the controller on (issue 42), through the real terraform: the AWS stack (remote
s3 state with a DynamoDB lock) validates against the real hashicorp/aws provider; each seed cloud's
stack plans (validate included) against the provider stand-ins with the controller instance and
its identity (Alibaba RAM role, Tencent CAM role, Huawei agency). Apply with the controller on is in
test_aws_controller.py (moto)."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest
import yaml
from seed_clouds import CLOUDS, trainkit, write_spec

from trainkit.spec.resolve import load_cluster
from trainkit.stack.render import write_stack

REPO = Path(__file__).resolve().parents[2]
SSH_KEY = "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIBkRh4VOcYwCqMTmS1w1tJmXbH3v0xJ7lK0Zq2yC5FQK trainkit-test"
BACKEND = {"aws": {"type": "s3", "bucket": "tfstate-ctl", "dynamodb_table": "tf-locks"}}


def _stack(tmp_path: Path, cloud: str) -> Path:
    data = yaml.safe_load((REPO / f"examples/clusters/{cloud}.yaml").read_text())
    data["controller"] = {"enabled": True}
    data["backend"] = BACKEND.get(cloud, {"type": "local"})
    spec = tmp_path / f"{cloud}.yaml"
    spec.write_text(yaml.safe_dump(data))
    write_stack(load_cluster(spec), SSH_KEY, tmp_path / cloud)
    return tmp_path / cloud


def _tf(terraform_bin: str, folder: Path, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run([terraform_bin, *args, "-no-color"], cwd=folder, capture_output=True, text=True, timeout=300)


def test_the_aws_stack_with_the_controller_and_remote_state_validates(terraform_bin, tf_cli_config, tmp_path):
    folder = _stack(tmp_path, "aws")
    assert _tf(terraform_bin, folder, "init", "-backend=false", "-input=false").returncode == 0
    result = _tf(terraform_bin, folder, "validate")
    assert result.returncode == 0, result.stdout + result.stderr


# The identity each seed module gives the controller, and the instance argument that carries it.
IDENTITY = {
    "alicloud": ({"alicloud_ram_role", "alicloud_ram_policy", "alicloud_ram_role_policy_attachment",
                  "alicloud_ecs_ram_role_attachment"}, "alicloud_instance", None),
    "tencentcloud": ({"tencentcloud_cam_role", "tencentcloud_cam_policy", "tencentcloud_cam_role_policy_attachment"},
                     "tencentcloud_instance", "cam_role_name"),
    "huaweicloud": ({"huaweicloud_identity_role", "huaweicloud_identity_agency"}, "huaweicloud_compute_instance",
                    "agency_name"),
}


@pytest.mark.parametrize("cloud", CLOUDS)
def test_a_seed_cloud_plans_the_controller_on_demand_with_its_identity(repo, tmp_path, seed_cloud, cloud):
    """validate + plan through the provider stand-ins (tests/standin, schemas read from the providers'
    Go source): the controller instance, never spot, with the cloud's identity bound to it, and the
    review showing the policy."""
    spec = write_spec(repo, tmp_path, cloud, **{"controller": {"enabled": True}})
    ws = tmp_path / "ws"
    review = json.loads(trainkit("plan", spec, "--workdir", ws, "--format", "json").stdout)
    plan = json.loads((ws / "plan.json").read_text())
    made = {c["type"]: c["change"]["after"] for c in plan["resource_changes"] if c["name"] == "controller"}
    kinds, instance_type, binding = IDENTITY[cloud]
    assert kinds <= set(made) and instance_type in made, sorted(made)
    vm = made[instance_type]
    spot = {k: vm.get(k) for k in ("spot_strategy", "instance_charge_type", "charging_mode") if k in vm}
    assert spot in ({"spot_strategy": "NoSpot", "instance_charge_type": "PostPaid"},
                    {"instance_charge_type": "POSTPAID_BY_HOUR"}, {"charging_mode": "postPaid"}), spot
    if binding:  # the role/agency name is known at plan time: "<name>-controller"
        assert vm[binding].endswith("-controller"), vm[binding]
    else:
        assert made["alicloud_ecs_ram_role_attachment"]["ram_role_name"].endswith("-controller")
    assert review["controller_policy"] and all(" on " in line for line in review["controller_policy"])
    assert any(item["item"].startswith("controller ") for item in review["cost"]["items"])


# The instance argument each module gives cloud-init's user data (Tencent's user_data must be
# base64; user_data_raw takes the text: tencentcloud_instance docs).
USER_DATA = {"alicloud": ("alicloud_instance", "user_data"), "tencentcloud": ("tencentcloud_instance", "user_data_raw"),
             "huaweicloud": ("huaweicloud_compute_instance", "user_data")}


@pytest.mark.parametrize("cloud", CLOUDS)
def test_a_seed_cloud_node_planned_from_the_controllers_workspace_carries_its_key(
        repo, tmp_path, seed_cloud, cloud, monkeypatch):
    """The controller's render (its workspace `<dir>/ws` beside `<dir>/ssh/id_ed25519.pub`, with
    INSTANCE_IDENTITY set) plans each node with the key in cloud-init user data, through the
    stand-ins' schemas; the user's own render in the same test plans them with none."""
    from trainkit.clouds.credentials import INSTANCE_IDENTITY

    spec = write_spec(repo, tmp_path, cloud, **{"controller": {"enabled": True}})
    folder = tmp_path / "launch-controller" / "run-1"
    (folder / "ssh").mkdir(parents=True)
    (folder / "ssh" / "id_ed25519.pub").write_text(SSH_KEY + "\n")
    kind, argument = USER_DATA[cloud]
    found = {}
    for who, identity in (("user", None), ("controller", "1")):
        if identity:
            monkeypatch.setenv(INSTANCE_IDENTITY, identity)
        trainkit("plan", spec, "--workdir", folder / "ws")
        plan = json.loads((folder / "ws" / "plan.json").read_text())
        found[who] = [c["change"]["after"].get(argument) for c in plan["resource_changes"]
                      if c["type"] == kind and c["name"] == "node"]
    assert found["user"] and set(found["user"]) == {None}, found
    assert len(found["controller"]) == len(found["user"])
    for text in found["controller"]:
        assert text.startswith("#cloud-config\n") and yaml.safe_load(text) == {"ssh_authorized_keys": [SSH_KEY]}
