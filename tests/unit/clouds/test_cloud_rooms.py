"""One room per cloud: no Python outside trainkit/clouds/ names a cloud, every room is complete,
the cloud-dependent checks fire with the field named, and a fifth cloud can be added from files
alone (TRAINKIT_CLOUD_PATH) and rendered."""

from __future__ import annotations

import ast
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from trainkit import clouds
from trainkit.spec.resolve import check, load_cluster, resolve
from trainkit.spec.schema import ClusterSpec
from trainkit.stack.render import render_stack

REPO = Path(__file__).resolve().parents[3]
PACKAGE = REPO / "trainkit"
# The catalog loader may name the clouds whose catalogs it ships (issue 9).
ALLOWED = {PACKAGE / "catalog" / "__init__.py"}
FIXTURE = Path(__file__).resolve().parents[1] / "fixtures" / "fifth-cloud"


def _docstrings(tree: ast.AST) -> set[int]:
    """ids of the constant nodes that are docstrings (help text, examples with file paths)."""
    out = set()
    for node in ast.walk(tree):
        if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)):
            body = node.body
            if body and isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant):
                out.add(id(body[0].value))
    return out


def cloud_literals(path: Path) -> list[tuple[int, str]]:
    """(line, text) of every string constant outside docstrings that names a cloud as a word."""
    tree = ast.parse(path.read_text())
    skip = _docstrings(tree)
    names = clouds.TERRAFORM_TARGETS
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Constant) and isinstance(node.value, str) and id(node) not in skip:
            words = set(node.value.replace("/", " ").replace(".", " ").replace("-", " ")
                        .replace("_", " ").replace(":", " ").replace("'", " ").split())
            if words & set(names):
                found.append((node.lineno, node.value))
    return found


def test_no_python_outside_the_rooms_names_a_cloud():
    offenders = {}
    for path in sorted(PACKAGE.rglob("*.py")):
        if PACKAGE / "clouds" in path.parents or path in ALLOWED:
            continue
        hits = cloud_literals(path)
        if hits:
            offenders[str(path.relative_to(REPO))] = hits
    assert not offenders, offenders


def test_the_literal_finder_sees_what_it_must():
    sample = PACKAGE / "clouds" / "aws.py"
    assert any(text == "aws" for _, text in cloud_literals(sample))


@pytest.mark.parametrize("name", clouds.TERRAFORM_TARGETS)
def test_every_room_is_complete(name):
    room = clouds.get(name)
    assert room.name == name
    assert room.regions, "regions come from data/<cloud>-regions.yaml"
    assert "undated" not in room.regions_source
    assert room.backend is not None and room.backend_type
    assert room.catalog_file.is_file() and room.provider_template.is_file()
    assert (room.module_dir / "main.tf").is_file()
    assert room.nfs_mount_options and room.tags.max_count > 2


def spec_of(cloud: str, **over) -> ClusterSpec:
    base = {"aws": {"region": "us-east-1", "zone": "us-east-1a", "instance": {"type": "g5.xlarge"}},
            "alicloud": {"region": "cn-hangzhou", "zone": "cn-hangzhou-i",
                         "instance": {"type": "ecs.gn7i-c8g1.2xlarge"}},
            "tencentcloud": {"region": "ap-guangzhou", "zone": "ap-guangzhou-4",
                             "instance": {"type": "GN7.2XLARGE32"}},
            "huaweicloud": {"region": "cn-north-4", "zone": "cn-north-4a", "image": "img",
                            "instance": {"type": "p2s.4xlarge.8"},
                            "storage": {"data_disk": {"kms_key_id": "k"}}}}[cloud]
    data = {"name": "demo", "cloud": cloud, "network": {"admin_cidrs": ["203.0.113.0/24"]},
            **base, **over}
    return ClusterSpec.model_validate(data)


def fields(cloud: str, **over) -> dict[str, str]:
    return {f: (msg, fix) for f, msg, fix in check(resolve(spec_of(cloud, **over)))}


@pytest.mark.parametrize("cloud, over, field, words", [
    ("aws", {"region": "cn-hangzhou", "zone": "cn-hangzhou-i"}, "region", "not a region of AWS"),
    ("aws", {"region": "us-east1", "zone": "us-east-1a"}, "region", "us-east-1"),
    ("aws", {"zone": "us-west-2a"}, "zone", "not a zone of region us-east-1"),
    ("alicloud", {"zone": "cn-shanghai-b"}, "zone", "cn-hangzhou"),
    ("aws", {"tags": {"aws:owner": "me"}}, "tags.aws:owner", "reserved"),
    ("alicloud", {"tags": {"acs:x": "1"}}, "tags.acs:x", "reserved"),
    ("alicloud", {"tags": {"Aliyun-x": "1"}}, "tags.Aliyun-x", "reserved"),
    ("aws", {"tags": {"k": "v" * 300}}, "tags.k", "300 characters"),
    ("aws", {"tags": {f"t{i}": "v" for i in range(200)}}, "tags", "200 tags"),
    ("alicloud", {"tags": {f"t{i}": "v" for i in range(19)}}, "tags", "19 tags"),
    ("aws", {"tags": {"k": "${x}"}}, "tags.k", "refuses"),
    ("alicloud", {"tags": {"k": "see https://x"}}, "tags.k", "refuses"),
    ("tencentcloud", {"name": "a-cluster-name-of-26-chars"}, "name", "key pair"),
    ("alicloud", {"instance": {"type": "ecs.gn7-c12g1.3xlarge"},
                  "storage": {"data_disk": {"category": "cloud_ssd"}}},
     "storage.data_disk.category", "gn7"),
    ("alicloud", {"storage": {"data_disk": {"performance_level": "PL2", "size_gb": 460}}},
     "storage.data_disk.size_gb", "461"),
    ("alicloud", {"storage": {"data_disk": {"category": "cloud_efficiency", "size_gb": 40000}}},
     "storage.data_disk.size_gb", "32768"),
    ("huaweicloud", {"storage": {"system_disk": {"size_gb": 1500}}}, "storage.system_disk.size_gb",
     "1-1024"),
    # provider semantics (issue 20): what the cloud refuses only at apply, refused at validate
    ("alicloud", {"spot": {"enabled": True}}, "network.placement_group", "no spot instances in a deployment set"),
    ("alicloud", {"nodes": 21}, "nodes", "at most 20 instances"),
    ("huaweicloud", {"spot": {"enabled": True, "max_price": 20}, "ttl": "2h"}, "ttl", "pay-per-use"),
    ("aws", {"storage": {"data_disk": {"kms_key_id": "1234abcd-12ab-34cd-56ef-1234567890ab"}}},
     "storage.data_disk.kms_key_id", "not a KMS key ARN"),
    ("aws", {"storage": {"data_disk": {"kms_key_id": "alias/my-key"}}},
     "storage.data_disk.kms_key_id", "arn:aws:kms:"),
    # issue 37 item 2: EC2 reads back the key ARN, so an alias ARN replaces every volume on every plan
    ("aws", {"storage": {"data_disk": {"kms_key_id": "arn:aws:kms:us-east-1:123456789012:alias/train"}}},
     "storage.data_disk.kms_key_id", "every later plan would replace every data volume"),
    ("huaweicloud", {"name": "abc", "storage": {"data_disk": {"kms_key_id": "k"},
                                                "nas": {"enabled": True, "size_gb": 500}}},
     "name", "4-64"),
    ("huaweicloud", {"storage": {"data_disk": {"kms_key_id": "k"},
                                 "nas": {"enabled": True, "size_gb": 100}}},
     "storage.nas.size_gb", "500-32768"),
    ("aws", {"image": "e\u0301"}, "image", "NFC"),
])
def test_cloud_checks_name_the_field_and_the_fix(cloud, over, field, words):
    found = fields(cloud, **over)
    assert field in found, found
    assert words in " ".join(str(x) for x in found[field]), found[field]
    assert found[field][1], "every problem suggests a fix"


def test_huawei_data_disk_without_key_uses_the_default_evs_key_and_unencrypted_is_fine():
    for data_disk in ({"encrypted": False}, {"encrypted": True}, {}):
        spec = spec_of("huaweicloud", storage={"data_disk": data_disk})
        assert check(resolve(spec)) == [], data_disk
    rendered = (REPO / "terraform/modules/huaweicloud/main.tf").read_text()
    assert 'key_alias = "evs/default"' in rendered and "EVSAccessKMS" in rendered


def test_what_the_provider_semantics_allow_passes():
    assert check(resolve(spec_of("alicloud", spot={"enabled": True}, network={
        "admin_cidrs": ["203.0.113.0/24"], "placement_group": False}))) == []
    assert check(resolve(spec_of("alicloud", nodes=20))) == []
    assert check(resolve(spec_of("huaweicloud", ttl="2h"))) == []
    arn = "arn:aws:kms:us-east-1:111122223333:key/1234abcd-12ab-34cd-56ef-1234567890ab"
    assert check(resolve(spec_of("aws", storage={"data_disk": {"kms_key_id": arn}}))) == []


@pytest.mark.parametrize("cloud, ttl, words", [
    ("alicloud", "45m", "no sooner than 60 minutes"),   # 30 min (ECS) + 30 min plan-to-create margin
    ("huaweicloud", "30m", "no sooner than 60 minutes"),
    ("huaweicloud", "1200d", "at most 1095 days"),
])
def test_ttl_outside_the_clouds_range_is_refused(cloud, ttl, words):
    from trainkit.errors import InputError
    with pytest.raises(InputError, match=words):
        resolve(spec_of(cloud, ttl=ttl))
    resolve(spec_of(cloud, ttl="61m" if ttl.endswith("m") else "1000d"))


def test_every_example_passes_its_rooms_checks():
    for path in sorted((REPO / "examples" / "clusters").glob("*.yaml")):
        load_cluster(path)  # raises SpecError on any problem


def test_validate_exits_2_naming_the_zone(tmp_path):
    spec = tmp_path / "c.yaml"
    spec.write_text("name: demo\ncloud: aws\nregion: us-east-1\nzone: eu-west-1a\n"
                    "instance: {type: g5.xlarge}\nnetwork: {admin_cidrs: [203.0.113.0/24]}\n")
    out = subprocess.run([sys.executable, "-m", "trainkit", "validate", str(spec)],
                         capture_output=True, text=True, cwd=REPO)
    assert out.returncode == 2, out.stderr
    assert "zone: 'eu-west-1a' is not a zone of region us-east-1" in out.stdout + out.stderr
    assert "Traceback" not in out.stdout + out.stderr


def test_a_fifth_cloud_from_files_only_validates_and_renders(tmp_path, monkeypatch):
    """Module, room, catalog, provider template and regions in a temp folder; no package edit."""
    shutil.copytree(FIXTURE, tmp_path / "rooms" / "fifthcloud")
    monkeypatch.setenv(clouds.PATH_VARIABLE, str(tmp_path / "rooms"))
    assert "fifthcloud" in clouds.targets() and "fifthcloud" in clouds.terraform_targets()
    spec = tmp_path / "c.yaml"
    spec.write_text("name: five\ncloud: fifthcloud\nregion: north-1\nzone: north-1b\n"
                    "instance: {gpu: A100}\nnetwork: {admin_cidrs: [203.0.113.0/24]}\n"
                    "tags: {team: ml}\n")
    cluster = load_cluster(spec)
    assert cluster.instance.type == "f5.a100" and cluster.room.nfs_mount_options == "vers=4.1"
    files = render_stack(cluster, "ssh-ed25519 AAAA test")
    assert 'source = "./modules/fifthcloud"' in files["main.tf"]
    assert 'provider "fifthcloud"' in files["providers.tf"]
    assert '"north-1"' in files["providers.tf"]
    assert "modules/fifthcloud/main.tf" in files
    bad = tmp_path / "bad.yaml"
    bad.write_text(spec.read_text().replace("zone: north-1b", "zone: south-1a"))
    out = subprocess.run([sys.executable, "-m", "trainkit", "validate", str(bad)],
                         capture_output=True, text=True, cwd=REPO)
    assert out.returncode == 2 and "zone: 'south-1a' is not a zone of region north-1" in out.stdout + out.stderr
