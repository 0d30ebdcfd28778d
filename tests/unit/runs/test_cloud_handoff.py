"""The cloud controller's hand-off (issue 42, trainkit/runs/controller_host.py, handoff_cloud.py):
what `train --recover --detach` refuses on a Terraform target before anything starts, what the
loop's environment carries, how the controller instance is reached, and that no credential leaves
in the files shipped to it."""

from __future__ import annotations

import json
import shlex
from pathlib import Path

import pytest
import yaml

from trainkit.errors import InputError
from trainkit.provision.inventory import inventory_for, inventory_hosts
from trainkit.runs import controller as ctl
from trainkit.runs import controller_host as ch
from trainkit.runs import handoff, handoff_cloud, recover, start
from trainkit.spec.resolve import resolve
from trainkit.spec.schema import ClusterSpec
from trainkit.workspace import Workspace

REPO = Path(__file__).resolve().parents[3]
DETACHED = recover.Options(recover=True, detach=True)
S3 = {"type": "s3", "bucket": "tfstate", "region": "us-east-1"}
NO_NAS = {"system_disk": {"size_gb": 30}, "data_disk": {"enabled": False}, "nas": {"enabled": False}}
CTL = {"id": "i-0c", "private_ip": "10.0.1.9", "public_ip": "54.0.0.9", "role": "aws-moto-controller"}


def _cluster(tmp_path: Path, **changes):
    data = {**yaml.safe_load((REPO / "examples/clusters/aws-moto.yaml").read_text()), "storage": NO_NAS, **changes}
    path = tmp_path / "cluster.yaml"
    path.write_text(yaml.safe_dump(data))
    return resolve(ClusterSpec.model_validate(data), str(path))


def _ws(tmp_path: Path, outputs: dict | None) -> Workspace:
    ws = Workspace.for_cluster("aws-moto", tmp_path / "ws").ensure()
    if outputs is not None:
        ws.write_outputs(outputs)
    return ws


def _checked(cluster, ws):
    return start.checked(cluster, ws, start.Request(str(cluster.source), opts=DETACHED))


def _nodes(public_head: bool = True) -> list[dict]:
    return [{"name": "aws-moto-node-0", "id": "i-0", "private_ip": "10.0.1.10",
             "public_ip": "54.0.0.10" if public_head else None},
            {"name": "aws-moto-node-1", "id": "i-1", "private_ip": "10.0.1.11", "public_ip": None}]


def test_a_local_backend_is_refused_naming_the_field_and_the_remote_backend(tmp_path):
    cluster = _cluster(tmp_path, controller={"enabled": True})
    with pytest.raises(InputError) as err:
        _checked(cluster, _ws(tmp_path, {"nodes": _nodes(), "controller": CTL}))
    assert err.value.message.startswith("backend.type: local")
    assert "type: s3" in err.value.fix and "trainkit apply" in err.value.fix


@pytest.mark.parametrize("controller", [{"enabled": True}, None])   # None: unset, on for --recover --detach on spot
def test_a_state_without_the_controller_is_refused_with_the_reviewed_apply(tmp_path, controller):
    cluster = _cluster(tmp_path, backend=S3, **({"controller": controller} if controller else {}))
    assert handoff.wanted(cluster, DETACHED)
    with pytest.raises(InputError) as err:
        _checked(cluster, _ws(tmp_path, {"nodes": _nodes(), "controller": None}))
    assert err.value.message.startswith("controller.enabled:") and "null" in err.value.message
    assert "controller.enabled: true" in err.value.fix and f"trainkit apply {cluster.source}" in err.value.fix


def test_a_switched_off_controller_keeps_the_old_refusal_and_a_rendered_one_passes(tmp_path):
    off = _cluster(tmp_path, backend=S3, controller={"enabled": False})
    assert not handoff.wanted(off, DETACHED)
    with pytest.raises(InputError, match="controller that stays"):
        _checked(off, _ws(tmp_path, {"nodes": _nodes(), "controller": None}))
    on = _cluster(tmp_path, backend=S3, controller={"enabled": True})
    assert _checked(on, _ws(tmp_path, {"nodes": _nodes(), "controller": CTL})).config_path is not None


def test_down_is_refused_for_a_cloud_controller_before_anything_starts(tmp_path):
    """--down (or the spec's `down: true`) with a cloud's controller: its destroy would terminate the
    instance it runs on part-way, and its role may not delete the network: refused, naming `down`
    and the destroy to run from the user's machine; the same spec without it passes."""
    cluster = _cluster(tmp_path, backend=S3, controller={"enabled": True})
    ws = _ws(tmp_path, {"nodes": _nodes(), "controller": CTL})
    with pytest.raises(InputError) as err:
        start.checked(cluster, ws, start.Request(str(cluster.source), opts=DETACHED, down=True))
    assert err.value.message.startswith("down: a cloud's controller cannot yet destroy")
    assert f"trainkit destroy {cluster.source}" in err.value.fix
    assert _checked(cluster, ws).config_path is not None


def test_the_loop_environment_carries_regions_and_endpoints_never_keys():
    environ = {"AWS_ACCESS_KEY_ID": "AKIAEXAMPLE", "AWS_SECRET_ACCESS_KEY": "s", "AWS_SESSION_TOKEN": "t",
               "ALICLOUD_ACCESS_KEY": "a", "TENCENTCLOUD_SECRET_ID": "b", "HW_SECRET_KEY": "c",
               "AWS_REGION": "us-east-1", "AWS_ENDPOINT_URL": "http://10.0.0.1:5000",
               "AWS_ENDPOINT_URL_S3": "http://10.0.0.1:5000", "AWS_PROFILE": "me", "HOME": "/root",
               "NO_PROXY": "10.0.0.1"}
    room = ClusterSpec.model_validate(yaml.safe_load((REPO / "examples/clusters/aws-moto.yaml").read_text())).room
    assert ch.loop_env(environ, room) == {"AWS_ENDPOINT_URL": "http://10.0.0.1:5000",
                                          "AWS_ENDPOINT_URL_S3": "http://10.0.0.1:5000",
                                          "AWS_REGION": "us-east-1", "NO_PROXY": "10.0.0.1"}
    plan = ctl.HandOff("digits-20260101-120000", "controller", "/opt/trainkit", "/opt/trainkit/venv/bin/python", "d.yaml")
    argv = handoff_cloud.clean_argv(plan, plan.argv([]), room, environ, mirror=True)
    assert argv[:2] == ["env", "-i"] and "AWS_ACCESS_KEY_ID=AKIAEXAMPLE" not in argv
    words = dict(w.split("=", 1) for w in argv[2:] if "=" in w and not w.startswith("/"))
    assert words["TRAINKIT_TERRAFORM"] == "/opt/trainkit-controller/bin/terraform"
    assert words["TF_CLI_CONFIG_FILE"] == f"{plan.dir}/terraformrc" and not {"AWS_SESSION_TOKEN", "AWS_PROFILE"} & set(words)
    # what start_script runs is that argv, each word quoted
    assert shlex.join(argv) in ctl.loop_script(plan, argv)


def _inventory(ws: Workspace, cluster, outputs: dict) -> None:
    ws.write_inventory(inventory_for(cluster, outputs, ws))


@pytest.mark.parametrize("public", [True, False])
def test_the_controller_is_reached_at_its_public_ip_else_through_the_head(tmp_path, public):
    cluster = _cluster(tmp_path, backend=S3, controller={"enabled": True})
    out = {"nodes": _nodes(), "controller": {**CTL, "public_ip": CTL["public_ip"] if public else None},
           "ssh_user": "ubuntu"}
    ws = _ws(tmp_path, out)
    _inventory(ws, cluster, out)
    node = ch.node(ws)
    assert node.name == "controller" and node.user == "ubuntu" and node.key_file
    assert node.address == ("54.0.0.9" if public else "10.0.1.9")
    assert ("ProxyCommand" in " ".join(node.ssh_options)) is not public   # through the head's public IP
    assert node.python.endswith("/venv/bin/python")


def test_the_shipped_workspace_has_the_stack_but_no_state_plan_or_provider_and_no_key(tmp_path, monkeypatch):
    cluster = _cluster(tmp_path, backend=S3, controller={"enabled": True})
    out = {"nodes": _nodes(), "controller": CTL, "ssh_user": "ubuntu"}
    ws = _ws(tmp_path, out)
    _inventory(ws, cluster, out)
    tf = ws.root / "terraform"
    for rel in ("main.tf", ".terraform.lock.hcl", "modules/aws/main.tf", ".terraform/providers/x", "terraform.tfstate"):
        (tf / rel).parent.mkdir(parents=True, exist_ok=True)
        (tf / rel).write_text(rel)
    (tf / ".trainkit-rendered").write_text("main.tf\nmodules/aws/main.tf\n")   # render's manifest
    run_dir = ws.runs_dir / "digits-20260101-120000"
    run_dir.mkdir(parents=True)
    (run_dir / "run.json").write_text(json.dumps({"status": "running", "config": str(tmp_path / "d.yaml"), "attempts": [1]}))
    (tmp_path / "d.yaml").write_text("epochs: 1\n")
    plan = ctl.HandOff(run_dir.name, "controller", "/opt/trainkit", "/opt/trainkit/venv/bin/python", "d.yaml")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "not-in-any-file-0123456789")
    files = handoff_cloud.bundle(cluster, ws, run_dir, plan, tmp_path / "d.yaml", False, None)
    assert {"ws/terraform/main.tf", "ws/terraform/.terraform.lock.hcl", "ws/terraform/modules/aws/main.tf",
            "ws/outputs.json", "ws/inventory.yml", "cluster.yaml", "ssh/cluster.pub", "config/d.yaml"} <= set(files)
    assert not [n for n in files if ".terraform/" in n or "tfstate" in n]
    spec = yaml.safe_load(files["cluster.yaml"])
    assert spec["ssh"] == {"private_key": plan.key, "public_key": f"{plan.dir}/ssh/cluster.pub"}
    inv = yaml.safe_load(files["ws/inventory.yml"])
    assert {h["ansible_ssh_private_key_file"] for h in inventory_hosts(inv).values()} == {plan.key}
    assert json.loads(files[f"ws/runs/{run_dir.name}/run.json"])["controller"]["dir"] == plan.dir
    # a key value in a file of the workspace: nothing is shipped, and the file is named
    (tf / "main.tf").write_text('access_key = "not-in-any-file-0123456789"\n')
    with pytest.raises(Exception, match="ws/terraform/main.tf would carry a credential"):
        handoff_cloud.bundle(cluster, ws, run_dir, plan, tmp_path / "d.yaml", False, None)


def test_a_stack_rendered_on_the_controller_keeps_the_metadata_lookup_custom_endpoints_turn_off(tmp_path, monkeypatch):
    from trainkit.stack import render
    cluster = _cluster(tmp_path, backend=S3, controller={"enabled": True})
    pub = "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIFakeKeyForTheRenderTestOnly0000000000000000 t"
    here = render.render_stack(cluster, pub)
    assert "skip_metadata_api_check     = true" in here["providers.tf"]
    assert render.backend_config(cluster)[1]["skip_metadata_api_check"] is True
    monkeypatch.setenv(render.INSTANCE_IDENTITY, "1")   # as the hand-off sets it in the loop's environment
    there = render.render_stack(cluster, pub)
    assert "skip_metadata_api_check" not in there["providers.tf"] + there["versions.tf"]
    assert "skip_metadata_api_check" not in render.backend_config(cluster)[1]
    assert {k: v for k, v in there.items() if k not in ("providers.tf", "versions.tf")} == \
        {k: v for k, v in here.items() if k not in ("providers.tf", "versions.tf")}


def test_on_the_controller_the_instance_identity_counts_as_credentials(tmp_path):
    from trainkit.clouds.credentials import INSTANCE_IDENTITY, presence
    room = _cluster(tmp_path).room
    assert not presence(room, {}, tmp_path)["provider"]["ok"]   # no key, no profile: the leftover check refuses
    there = presence(room, {INSTANCE_IDENTITY: "1"}, tmp_path)
    assert there["provider"]["ok"] and there["backend"]["ok"]
    assert [s["label"] for s in there["provider"]["sets"] if s["ok"]] == ["instance identity"]


def test_a_cloud_has_no_spec_hosts_to_revoke_the_key_on_after_its_destroy(tmp_path):
    cluster = _cluster(tmp_path, backend=S3, controller={"enabled": True})
    ws = _ws(tmp_path, None)   # after --down: no outputs.json (target hosts' list would need it here)
    assert handoff.all_hosts(cluster, ws) == []
