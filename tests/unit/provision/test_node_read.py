"""read_nodes: the inventory trainkit writes for Ansible, read back as typed Nodes (every target
kind), with Ansible's precedence, and an inventory edited into something ssh or the launch would
misread refused with the file, the host and the key named."""

from __future__ import annotations

import shlex
from pathlib import Path

import pytest
import yaml

from trainkit.errors import InputError
from trainkit.provision.inventory import inventory_for, inventory_hosts
from trainkit.provision.node import read_nodes
from trainkit.spec.resolve import load_cluster
from trainkit.workspace import Workspace

OUTPUTS = {"nodes": [{"name": "demo-node-0", "private_ip": "10.42.1.10", "public_ip": "203.0.113.7"},
                     {"name": "demo-node-1", "private_ip": "10.42.1.11", "public_ip": None}],
           "nas": {"server": "fs-1.nas.example.internal", "export_path": "/"}, "data_disk_device": "/dev/vdb"}


def applied(repo: Path, tmp_path: Path, example: str) -> tuple[Workspace, dict]:
    """The inventory `apply` writes for examples/clusters/<example> (the cloud one from OUTPUTS)."""
    cluster = load_cluster(str(repo / "examples/clusters" / example))
    ws = Workspace(tmp_path / "ws", cluster.name).ensure()
    inv = inventory_for(cluster, OUTPUTS, ws)
    ws.write_inventory(inv)
    return ws, inv


@pytest.mark.parametrize("example", ["aws.yaml", "hosts.yaml", "local.yaml"])
def test_every_node_reads_back_what_the_inventory_says_of_it(repo, tmp_path, example):
    ws, inv = applied(repo, tmp_path, example)
    group = inv["all"]["vars"]
    nodes, paths = read_nodes(ws.inventory_yml)
    hosts = inventory_hosts(inv)
    assert [n.name for n in nodes] == list(hosts) and [n.rank for n in nodes] == list(range(len(hosts)))
    for node in nodes:
        h = {**group, **hosts[node.name]}
        assert node.local == (h.get("ansible_connection") == "local")
        assert (node.address, node.port, node.user) == (h["ansible_host"], h.get("ansible_port"),
                                                        h.get("ansible_user", "root"))
        assert node.key_file == h.get("ansible_ssh_private_key_file")
        assert list(node.ssh_options) == shlex.split(h.get("ansible_ssh_common_args", ""))
        assert (node.private_ip, node.python, node.nproc, node.rdzv_port) == (
            h["trainkit_private_ip"], h["trainkit_node_python"], h["trainkit_nproc_per_node"], h["trainkit_rdzv_port"])
        assert node.paths == paths
    assert (paths.root, paths.work_dir, paths.shared_work_dir) == (
        group["trainkit_root"], group["trainkit_work_dir"], group["trainkit_shared_work_dir"])
    assert paths.disk == (group["disks_mount_point"] if group["disks_enabled"] else None)
    assert paths.data_roots == group["trainkit_data_roots"] and paths.data_root == group["trainkit_data_root"]


def test_group_vars_all_yml_overrides_the_inventorys_group_and_a_host_var_overrides_both(repo, tmp_path):
    """Ansible's precedence: inventory group vars < group_vars/all.yml < inventory host vars."""
    ws, inv = applied(repo, tmp_path, "hosts.yaml")
    (ws.root / "group_vars").mkdir()
    (ws.root / "group_vars" / "all.yml").write_text("trainkit_work_dir: /srv/work\ntrainkit_node_python: /g/python\n")
    inv["all"]["children"]["workers"]["hosts"]["gpu-b"]["trainkit_node_python"] = "/h/python"
    ws.write_inventory(inv)
    (a, b), paths = read_nodes(ws.inventory_yml)
    assert paths.work_dir == a.paths.work_dir == b.paths.work_dir == "/srv/work"
    assert (a.python, b.python) == ("/g/python", "/h/python")


@pytest.mark.parametrize("key,value,said", [
    ("ansible_user", "-oProxyCommand=touch /tmp/x", "is not a POSIX login name"),
    ("ansible_host", "gpu-a.lab; reboot", "not an IPv4/IPv6 address"),
    ("ansible_host", "-oProxyCommand=x", "starts with '-'"),
    ("ansible_port", "22 -oProxyCommand=x", "is not a whole number"),
    ("ansible_port", 70000, "is not a TCP port (1-65535)"),
    ("ansible_ssh_common_args", "-o 'ProxyCommand=x", "No closing quotation"),
    ("trainkit_nproc_per_node", "eight", "is not a whole number"),
    ("trainkit_node_rank", True, "is not a whole number"),
])
def test_an_inventory_edited_into_what_ssh_or_the_launch_would_misread_is_refused(repo, tmp_path, key, value, said):
    ws, inv = applied(repo, tmp_path, "hosts.yaml")
    inv["all"]["children"]["workers"]["hosts"]["gpu-b"][key] = value
    ws.write_inventory(inv)
    with pytest.raises(InputError) as err:
        read_nodes(ws.inventory_yml)
    assert f"{ws.inventory_yml}: host gpu-b: {key}: " in err.value.message and said in err.value.message
    assert "trainkit apply" in err.value.fix


@pytest.mark.parametrize("edit", [{"all": {"vars": [1], "children": {"head": {"hosts": {}}, "workers": {}}}},
                                  {"all": {"children": {"head": {"hosts": {"n0": "10.0.0.1"}}, "workers": {}}}}])
def test_variables_that_are_not_a_mapping_are_named(tmp_path, edit):
    path = tmp_path / "inventory.yml"
    path.write_text(yaml.safe_dump(edit))
    with pytest.raises(InputError) as err:
        read_nodes(path)
    assert str(path) in err.value.message and "not a mapping of variables" in err.value.message


def test_a_host_without_ansible_host_is_dialled_by_its_name_as_ansible_does(tmp_path):
    path = tmp_path / "inventory.yml"
    path.write_text(yaml.safe_dump({"all": {"children": {"head": {"hosts": {"gpu-a.lab": None}}, "workers": {}}}}))
    (node,), _ = read_nodes(path)
    assert node.ssh_argv()[-2:] == ["--", "root@gpu-a.lab"] and node.rank == 0
