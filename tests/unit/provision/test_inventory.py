"""inventory_for: the Ansible inventory from module outputs (cloud), a host list, or this machine."""

from __future__ import annotations

import json
import shlex
import sys
from pathlib import Path

import pytest
import yaml

from trainkit.errors import InputError
from trainkit.provision.inventory import inventory_for, inventory_hosts
from trainkit.spec.resolve import Cluster
from trainkit.spec.schema import ClusterSpec
from trainkit.workspace import Workspace

# What `terraform output -json` writes for a 3-node cluster with a NAS (the module interface).
OUTPUTS_JSON = {
    "nodes": {"sensitive": False, "type": ["list", ["object", {}]], "value": [
        {"name": "demo-node-0", "id": "i-0a1", "private_ip": "10.42.1.10", "public_ip": "203.0.113.7"},
        {"name": "demo-node-1", "id": "i-0a2", "private_ip": "10.42.1.11", "public_ip": None},
        {"name": "demo-node-2", "id": "i-0a3", "private_ip": "10.42.1.12", "public_ip": None},
    ]},
    "nas": {"sensitive": False, "type": "object", "value": {
        "server": "fs-1234.nas.example.internal", "export_path": "/",
        "mount_options": "vers=3,nolock,proto=tcp,noresvport"}},
    "data_disk_device": {"sensitive": False, "type": "string", "value": "/dev/vdb"},
    "ssh_user": {"sensitive": False, "type": "string", "value": "ubuntu"},
}


def cluster(**spec) -> Cluster:
    s = ClusterSpec.model_validate(spec)
    return Cluster(spec=s, source="cluster.yaml", ssh_user=s.ssh.user or "root",
                   data_disk=s.storage.data_disk.model_dump(), nas=s.storage.nas.model_dump())


@pytest.fixture
def ws(tmp_path) -> Workspace:
    w = Workspace(tmp_path / ".trainkit" / "demo").ensure()
    w.outputs_json.write_text(json.dumps(OUTPUTS_JSON))
    return w


def cloud_cluster(**more) -> Cluster:
    spec = {"name": "demo", "cloud": "aws", "region": "us-east-1", "zone": "us-east-1a", "nodes": 3,
            "instance": {"type": "g5.12xlarge"}, "network": {"admin_cidrs": ["203.0.113.0/24"]},
            "storage": {"nas": {"enabled": True}}, "launch": {"nproc_per_node": 4}, **more}
    return cluster(**spec)


def hosts_of(inv: dict) -> dict[str, dict]:
    hosts = inventory_hosts(inv)
    assert list(hosts) == sorted(hosts, key=lambda n: hosts[n]["trainkit_node_rank"])  # head first
    return hosts


def test_cloud_inventory_from_outputs_json_ranks_nodes_and_points_rendezvous_at_head(ws):
    inv = inventory_for(cloud_cluster(), ws.read_outputs(), ws)
    v = inv["all"]["vars"]
    assert list(inv["all"]["children"]["head"]["hosts"]) == ["demo-node-0"]
    assert list(inv["all"]["children"]["workers"]["hosts"]) == ["demo-node-1", "demo-node-2"]
    hosts = hosts_of(inv)
    assert [h["trainkit_node_rank"] for h in hosts.values()] == [0, 1, 2]
    assert v["trainkit_nnodes"] == 3
    assert v["trainkit_rdzv_endpoint"] == "10.42.1.10:29400"
    assert all(h["trainkit_nproc_per_node"] == 4 for h in hosts.values())
    assert all(h["ansible_user"] == "ubuntu" for h in hosts.values())
    assert v["ansible_python_interpreter"] == "/usr/bin/python3"
    assert v["base_cluster_hosts"] == [{"name": f"demo-node-{i}", "ip": f"10.42.1.1{i}"} for i in range(3)]


def test_workers_without_public_ip_are_reached_through_the_head_with_the_cluster_key(ws):
    hosts = hosts_of(inventory_for(cloud_cluster(), ws.read_outputs(), ws))
    head, w1 = hosts["demo-node-0"], hosts["demo-node-1"]
    key = str(ws.ssh_private_key)
    assert head["ansible_host"] == "203.0.113.7" and "ProxyCommand" not in head["ansible_ssh_common_args"]
    assert w1["ansible_host"] == "10.42.1.11"
    assert w1["ansible_ssh_private_key_file"] == key
    args = shlex.split(w1["ansible_ssh_common_args"])
    proxy = next(a for a in args if a.startswith("ProxyCommand="))
    hop = shlex.split(proxy.removeprefix("ProxyCommand="))
    assert hop[:3] == ["ssh", "-W", "%h:%p"] and hop[-1] == "ubuntu@203.0.113.7"
    assert hop[hop.index("-i") + 1] == key
    assert f'UserKnownHostsFile="{ws.ssh_dir / "known_hosts"}"' in args  # one word, quoted for ssh


def test_storage_vars_come_from_the_module_outputs(ws):
    v = inventory_for(cloud_cluster(), ws.read_outputs(), ws)["all"]["vars"]
    assert v["disks_enabled"] is True and v["disks_device"] == "/dev/vdb"
    assert v["disks_mount_point"] == "/data" and v["disks_expected_size_gb"] == 500
    assert v["nas_enabled"] is True and v["nas_server"] == "fs-1234.nas.example.internal"
    assert v["nas_mount_options"] == "vers=3,nolock,proto=tcp,noresvport"
    assert v["trainkit_work_dir"] == "/mnt/shared/demo" and v["trainkit_shared_work_dir"] is True
    assert v["trainkit_node_python"] == "/opt/trainkit/venv/bin/python"


def test_a_null_data_disk_device_leaves_the_role_to_find_the_disk(ws):
    outputs = {**ws.read_outputs(), "data_disk_device": None, "nas": None}
    v = inventory_for(cloud_cluster(storage={}), outputs, ws)["all"]["vars"]
    assert v["disks_device"] == "" and v["disks_enabled"] is True
    assert v["nas_enabled"] is False and v["trainkit_work_dir"] == "/data/trainkit"


def test_missing_outputs_name_the_file_and_the_fix(ws):
    with pytest.raises(InputError) as err:
        inventory_for(cloud_cluster(), None, ws)
    assert "outputs.json" in err.value.message and "trainkit apply" in err.value.fix
    with pytest.raises(InputError) as err:
        inventory_for(cloud_cluster(), {"nodes": [{"name": "x"}]}, ws)
    assert "nodes[0].private_ip" in err.value.message
    with pytest.raises(InputError) as err:
        inventory_for(cloud_cluster(), {**ws.read_outputs(), "nas": None}, ws)
    assert "nas" in err.value.message


def hosts_cluster() -> Cluster:
    return cluster(name="onprem", cloud="hosts", ssh={"user": "ops", "private_key": "/keys/id"},
                   hosts=[{"name": "gpu-a", "address": "192.0.2.10", "private_ip": "10.0.0.10", "gpus": 8},
                          {"name": "gpu-b", "address": "192.0.2.11", "port": 2222, "user": "admin",
                           "gpus": 8}],
                   launch={"rdzv_port": 29500})


def test_hosts_inventory_uses_the_host_list_ranks_and_private_ips(tmp_path):
    inv = inventory_for(hosts_cluster(), None, Workspace(tmp_path))
    v, hosts = inv["all"]["vars"], hosts_of(inv)
    assert list(inv["all"]["children"]["head"]["hosts"]) == ["gpu-a"]
    assert hosts["gpu-a"]["trainkit_node_rank"] == 0 and hosts["gpu-b"]["trainkit_node_rank"] == 1
    assert v["trainkit_rdzv_endpoint"] == "10.0.0.10:29500"
    assert hosts["gpu-b"]["trainkit_private_ip"] == "192.0.2.11"  # no private_ip: the address
    assert hosts["gpu-b"]["ansible_port"] == 2222 and hosts["gpu-b"]["ansible_user"] == "admin"
    assert hosts["gpu-a"]["ansible_user"] == "ops"
    assert hosts["gpu-a"]["trainkit_nproc_per_node"] == 8
    assert hosts["gpu-a"]["ansible_ssh_private_key_file"] == "/keys/id"
    assert all("ProxyCommand" not in h["ansible_ssh_common_args"] for h in hosts.values())
    assert v["ansible_python_interpreter"] == "/usr/bin/python3"
    assert v["nas_enabled"] is False and v["disks_device"] == ""


def test_local_inventory_runs_here_with_this_python_and_keeps_paths_in_the_workspace(tmp_path):
    ws = Workspace(tmp_path / "ws")
    c = cluster(name="local-demo", cloud="local", launch={"nproc_per_node": 2},
                storage={"data_disk": {"enabled": False}})
    inv = inventory_for(c, None, ws)
    v, (node,) = inv["all"]["vars"], hosts_of(inv).values()
    assert node["ansible_connection"] == "local" and node["trainkit_nproc_per_node"] == 2
    assert v["ansible_python_interpreter"] == sys.executable == v["trainkit_node_python"]
    assert v["trainkit_venv_mode"] == "reuse"
    root = str((tmp_path / "ws").resolve())
    for key in ("trainkit_root", "trainkit_work_dir", "trainkit_venv"):
        assert v[key].startswith(root + "/node"), key
    assert v["base_manage_kernel"] is False and v["base_manage_etc_hosts"] is False
    assert v["trainkit_rdzv_endpoint"] == "127.0.0.1:29400"


def test_written_inventory_is_yaml_ansible_reads_back(ws):
    path = ws.write_inventory(inventory_for(cloud_cluster(), ws.read_outputs(), ws))
    assert path == ws.inventory_yml
    data = yaml.safe_load(Path(path).read_text())
    assert data["all"]["children"]["workers"]["hosts"]["demo-node-2"]["trainkit_node_rank"] == 2


@pytest.mark.parametrize("kind, erdma", [("ecs.gn8is-2x.8xlarge", True), ("ecs.ebmgn8v.48xlarge", True),
                                         ("ecs.gn7i-c32g1.8xlarge", False)])
def test_the_network_role_sets_up_erdma_only_on_the_families_alibaba_lists(kind, erdma):
    from trainkit.catalog import InstanceType
    from trainkit.provision.inventory import network_vars

    c = cluster(name="demo", cloud="alicloud", region="cn-shanghai", zone="cn-shanghai-b",
                instance={"type": kind}, network={"admin_cidrs": ["203.0.113.0/24"]})
    c = Cluster(spec=c.spec, source=c.source, instance=InstanceType(type=kind, gpu="L20"))
    assert network_vars(c) == {"network_erdma_enabled": erdma, "network_tencent_rdma_enabled": False}
    assert network_vars(cluster(name="hosts-demo", cloud="hosts", hosts=[{"name": "a", "address": "10.0.0.1"}])) == {
        "network_erdma_enabled": False, "network_tencent_rdma_enabled": False}


def _tencent_catalog_type(prefix: str) -> str:
    """A type from the shipped Tencent catalog whose name starts with prefix (not hard-coded here)."""
    from trainkit import clouds

    data = yaml.safe_load(clouds.get("tencentcloud").catalog_file.read_text())
    return next(i["type"] for i in data["instances"] if i["type"].startswith(prefix))


# HCCPNV4sn / HCCPNV4sne: the GPU HCC families with an RDMA network in Tencent's "Installation
# Instructions of TCCL on GPU Instances"; the size part after the dot is only an example.
@pytest.mark.parametrize("kind, rdma", [("HCCPNV4sn.32XLARGE512", True), ("HCCPNV4sne.32XLARGE512", True),
                                        ("HCCPNV4snx.32XLARGE512", False), ("HCCPNV4s.32XLARGE512", False),
                                        ("HCCPNV4sn", False), ("GT4.", False), ("PNV4.", False)])
def test_the_network_role_checks_rdma_agent_only_on_tencent_hcc_gpu_families(kind, rdma):
    from trainkit.catalog import InstanceType
    from trainkit.provision.inventory import network_vars

    if kind.endswith("."):  # a non-HCC GPU type, as the catalog lists it
        kind = _tencent_catalog_type(kind)
    c = cluster(name="demo", cloud="tencentcloud", region="ap-guangzhou", zone="ap-guangzhou-3",
                instance={"type": kind}, network={"admin_cidrs": ["203.0.113.0/24"]})
    c = Cluster(spec=c.spec, source=c.source, instance=InstanceType(type=kind, gpu="unread"))  # only the type is read
    assert network_vars(c) == {"network_erdma_enabled": False, "network_tencent_rdma_enabled": rdma}


def test_an_hcc_family_name_on_another_cloud_sets_up_nothing():
    from trainkit.catalog import InstanceType
    from trainkit.provision.inventory import network_vars

    c = cluster(name="demo", cloud="alicloud", region="cn-shanghai", zone="cn-shanghai-b",
                instance={"type": "HCCPNV4sn.32XLARGE512"}, network={"admin_cidrs": ["203.0.113.0/24"]})
    c = Cluster(spec=c.spec, source=c.source, instance=InstanceType(type="HCCPNV4sn.32XLARGE512", gpu="unread"))
    assert network_vars(c) == {"network_erdma_enabled": False, "network_tencent_rdma_enabled": False}
