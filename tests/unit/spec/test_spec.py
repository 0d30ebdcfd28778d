"""Cluster spec validation through the real CLI entry point: exit codes and field-named messages."""

from __future__ import annotations

import textwrap

import pytest

from trainkit.cli import main

GOOD_ALICLOUD = """
name: demo
cloud: alicloud
region: cn-hangzhou
zone: cn-hangzhou-i
nodes: 2
instance: {type: ecs.gn7i-c8g1.2xlarge}
network: {admin_cidrs: [203.0.113.0/24]}
"""


def run_validate(tmp_path, capsys, text: str, *extra: str) -> tuple[int, str, str]:
    path = tmp_path / "cluster.yaml"
    path.write_text(textwrap.dedent(text))
    with pytest.raises(SystemExit) as exc:
        main(["validate", str(path), *extra])
    out, err = capsys.readouterr()
    return exc.value.code, out, err


def test_good_spec_exits_zero_and_names_the_instance(tmp_path, capsys):
    code, out, _ = run_validate(tmp_path, capsys, GOOD_ALICLOUD)
    assert code == 0
    assert "2 x ecs.gn7i-c8g1.2xlarge" in out


def test_requirements_pick_the_cheapest_feasible_type(tmp_path, capsys):
    spec = GOOD_ALICLOUD.replace("{type: ecs.gn7i-c8g1.2xlarge}", "{gpu: a100, min_gpu_memory_gb: 80}")
    code, out, _ = run_validate(tmp_path, capsys, spec, "--json")
    assert code == 0
    assert '"instance_type": "ecs.gn7e-c16g1.4xlarge"' in out


def test_sizing_advice_is_a_warning_not_an_error(tmp_path, capsys):
    code, _, err = run_validate(tmp_path, capsys, GOOD_ALICLOUD)
    assert code == 0
    # gn7i-c8g1.2xlarge: 1 x A10 24 GB, 8 vCPU, 30 GB RAM, 16 Gbit/s, 2 nodes
    assert "RAM" in err and "Gbit/s" in err and ">= 32 GB" in err


BAD_SPECS = [
    # (what is wrong, YAML, text that must appear in stderr)
    ("unknown cloud with suggestion", "name: demo\ncloud: alicoud\n", "did you mean 'alicloud'"),
    ("unknown top-level field", GOOD_ALICLOUD + "nodse: 3\n", "nodse: unknown field (did you mean 'nodes'?)"),
    ("unknown nested field", GOOD_ALICLOUD + "spot: {enabled: true, max_prize: 3}\n",
     "spot.max_prize: unknown field (did you mean 'max_price'?)"),
    ("unknown instance type", GOOD_ALICLOUD.replace("gn7i-c8g1.2xlarge", "gn7i-c8g1.2xlarg"),
     "instance.type: 'ecs.gn7i-c8g1.2xlarg' is not a known alicloud GPU type (did you mean ecs.gn7i-c8g1.2xlarge"),
    ("ssh open to the world", GOOD_ALICLOUD.replace("203.0.113.0/24", "0.0.0.0/0"),
     "network.admin_cidrs: 0.0.0.0/0 opens SSH to the whole internet"),
    ("no admin cidrs", GOOD_ALICLOUD.replace("network: {admin_cidrs: [203.0.113.0/24]}", ""),
     "network.admin_cidrs: required for cloud targets"),
    ("bad cidr", GOOD_ALICLOUD.replace("203.0.113.0/24", "203.0.113.0/33"), "network.admin_cidrs: '203.0.113.0/33' is not a valid CIDR"),
    ("host bits set", GOOD_ALICLOUD.replace("203.0.113.0/24", "203.0.113.7/24"), "has host bits set"),
    ("subnet outside vpc", GOOD_ALICLOUD.replace(
        "network: {admin_cidrs: [203.0.113.0/24]}",
        "network: {admin_cidrs: [203.0.113.0/24], vpc_cidr: 10.0.0.0/16, subnet_cidr: 10.1.0.0/24}"),
     "network.subnet_cidr: subnet_cidr 10.1.0.0/24 is not inside vpc_cidr 10.0.0.0/16"),
    ("negative spot price", GOOD_ALICLOUD + "spot: {enabled: true, max_price: -1}\n",
     "spot.max_price: Input should be greater than 0"),
    ("nodes zero", GOOD_ALICLOUD.replace("nodes: 2", "nodes: 0"), "nodes: Input should be greater than or equal to 1"),
    ("nodes not a number", GOOD_ALICLOUD.replace("nodes: 2", "nodes: two"), "nodes: expected a whole number, got 'two'"),
    ("bad name", GOOD_ALICLOUD.replace("name: demo", "name: My_Cluster"), "name: 'My_Cluster' is not a valid name (3-30 lowercase letters"),
    ("missing zone", GOOD_ALICLOUD.replace("zone: cn-hangzhou-i\n", ""), "zone: required for cloud alicloud"),
    ("missing name", GOOD_ALICLOUD.replace("name: demo\n", ""), "name: required field is missing"),
    ("type and requirements", GOOD_ALICLOUD.replace("{type: ecs.gn7i-c8g1.2xlarge}",
                                                    "{type: ecs.gn7i-c8g1.2xlarge, gpu: A10}"),
     "instance: give either `type` or requirements"),
    ("unknown gpu model", GOOD_ALICLOUD.replace("{type: ecs.gn7i-c8g1.2xlarge}", "{gpu: A1000}"),
     "instance.gpu: no alicloud type has GPU 'A1000'"),
    ("infeasible requirements", GOOD_ALICLOUD.replace("{type: ecs.gn7i-c8g1.2xlarge}",
                                                      "{gpu: A10, min_gpu_memory_gb: 80}"),
     "instance: no alicloud type has gpu=A10"),
    ("wrong disk category for the cloud", GOOD_ALICLOUD + "storage: {data_disk: {category: CLOUD_HSSD}}\n",
     "storage.data_disk.category: 'CLOUD_HSSD' is not valid for alicloud (alicloud accepts: cloud_essd"),
    ("essd level too small", GOOD_ALICLOUD + "storage: {data_disk: {performance_level: PL3, size_gb: 500}}\n",
     "storage.data_disk.size_gb: 500 GB; Alibaba Cloud cloud_essd PL3 disks are 1261-65536 GB"),
    ("relative mount point", GOOD_ALICLOUD + "storage: {nas: {enabled: true, mount_point: shared}}\n",
     "storage.nas.mount_point: 'shared' must be an absolute path"),
    ("backend for another cloud", GOOD_ALICLOUD + "backend: {type: cos, bucket: tf-1250000000}\n",
     "backend.type: 'cos' does not fit cloud alicloud; use 'oss'"),
    ("remote backend without bucket", GOOD_ALICLOUD + "backend: {type: oss}\n", "backend: backend type 'oss' needs `bucket`"),
    ("reserved tag", GOOD_ALICLOUD + "tags: {trainkit-cluster: other}\n", "tags.trainkit-cluster: reserved"),
    ("spot on local", "name: demo\ncloud: local\nspot: {enabled: true}\n", "spot.enabled: spot instances need a cloud target"),
    ("local with two nodes", "name: demo\ncloud: local\nnodes: 2\n", "nodes: the local target is this one machine"),
    ("hosts without hosts", "name: demo\ncloud: hosts\n", "hosts: list at least one host"),
    ("duplicate hosts", "name: demo\ncloud: hosts\nhosts: [{name: a, address: 10.0.0.1}, {name: a, address: 10.0.0.2}]\n",
     "hosts: duplicate host names ['a']"),
    ("host without address", "name: demo\ncloud: hosts\nhosts: [{name: a}]\n", "hosts[0].address: required field is missing"),
    ("an endpoint alicloud has no API for", GOOD_ALICLOUD + "endpoints: {ec2: 'http://127.0.0.1:1'}\n",
     "endpoints.ec2: trainkit calls no Alibaba Cloud API by that name; the keys are tag, ecs, vpc, nas"),
    ("tencent spot without a price", GOOD_ALICLOUD.replace("alicloud", "tencentcloud").replace(
        "ecs.gn7i-c8g1.2xlarge", "GN7.2XLARGE32") + "spot: {enabled: true}\n",
     "spot.max_price: Tencent Cloud spot instances need a max price per hour"),
    ("not a mapping", "- just\n- a list\n", "must be a YAML mapping"),
    ("broken yaml", "name: [demo\n", "not valid YAML"),
]


@pytest.mark.parametrize("what,text,expected", BAD_SPECS, ids=[b[0] for b in BAD_SPECS])
def test_bad_spec_exits_2_naming_the_field(tmp_path, capsys, what, text, expected):
    code, _, err = run_validate(tmp_path, capsys, text)
    assert code == 2, err
    assert expected in err, err
    assert "Traceback" not in err
    assert str(tmp_path / "cluster.yaml") in err  # the file is named


def test_missing_file_exits_2(tmp_path, capsys):
    with pytest.raises(SystemExit) as exc:
        main(["validate", str(tmp_path / "nope.yaml")])
    assert exc.value.code == 2
    assert "file not found" in capsys.readouterr().err


def test_ssh_from_anywhere_needs_the_explicit_flag(tmp_path, capsys):
    spec = GOOD_ALICLOUD.replace("network: {admin_cidrs: [203.0.113.0/24]}",
                                 "network: {admin_cidrs: [0.0.0.0/0], allow_ssh_from_anywhere: true}")
    code, _, err = run_validate(tmp_path, capsys, spec)
    assert code == 0, err


def test_every_example_cluster_spec_validates(repo, capsys, tmp_path, monkeypatch):
    # examples/clusters/hosts.yaml logs in with ~/.ssh/lab_ed25519; key files must exist.
    monkeypatch.setenv("HOME", str(tmp_path))
    (tmp_path / ".ssh").mkdir()
    (tmp_path / ".ssh" / "lab_ed25519").write_text("not read by validate\n")
    specs = sorted((repo / "examples" / "clusters").glob("*.yaml"))
    assert specs
    for path in specs:
        with pytest.raises(SystemExit) as exc:
            main(["validate", str(path)])
        assert exc.value.code == 0, (path, capsys.readouterr().err)
