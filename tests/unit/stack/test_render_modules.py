"""The four cloud modules share one interface: same variables (names and types), same outputs."""

from __future__ import annotations

from pathlib import Path

import hcl2
import pytest
import yaml

from trainkit import clouds

REPO = Path(__file__).resolve().parents[3]
MODULES = REPO / "terraform" / "modules"
CLOUDS = clouds.TERRAFORM_TARGETS
OUTPUTS = ["nodes", "nas", "data_disk_device", "ssh_user", "ssh_public_key", "controller", "controller_policy"]


def blocks(cloud: str, filename: str, kind: str) -> dict[str, dict]:
    parsed = hcl2.loads((MODULES / cloud / filename).read_text())
    return {name.strip('"'): body for item in parsed.get(kind, []) for name, body in item.items()}


def unquote(value):
    return value.strip('"') if isinstance(value, str) else value


def test_every_module_declares_the_same_variables_with_the_same_types():
    ref = {n: b["type"] for n, b in blocks("aws", "variables.tf", "variable").items()}
    for cloud in CLOUDS:
        got = {n: b["type"] for n, b in blocks(cloud, "variables.tf", "variable").items()}
        assert got == ref, cloud


def test_every_module_has_the_same_outputs():
    for cloud in CLOUDS:
        assert list(blocks(cloud, "outputs.tf", "output")) == OUTPUTS, cloud


@pytest.mark.parametrize("cloud", CLOUDS)
def test_every_variable_is_typed_and_described(cloud):
    for name, body in blocks(cloud, "variables.tf", "variable").items():
        assert "type" in body and unquote(body.get("description", "")), f"{cloud}: {name}"


@pytest.mark.parametrize("cloud", CLOUDS)
def test_admin_cidrs_has_no_default(cloud):
    assert "default" not in blocks(cloud, "variables.tf", "variable")["admin_cidrs"]


@pytest.mark.parametrize("cloud", CLOUDS)
def test_module_defaults_match_the_catalog_and_the_room(cloud):
    defaults = yaml.safe_load((REPO / "trainkit" / "catalog" / f"{cloud}.yaml").read_text())["defaults"]
    variables = blocks(cloud, "variables.tf", "variable")
    assert unquote(variables["nfs_mount_options"]["default"]) == clouds.get(cloud).nfs_mount_options
    assert unquote(variables["ssh_user"]["default"]) == defaults["ssh_user"]


@pytest.mark.parametrize("cloud", CLOUDS)
def test_module_has_the_house_files(cloud):
    for name in ("main.tf", "variables.tf", "outputs.tf", "versions.tf", "README.md"):
        assert (MODULES / cloud / name).is_file(), f"{cloud}/{name}"
    readme = (MODULES / cloud / "README.md").read_text()
    for name in blocks(cloud, "variables.tf", "variable"):
        assert f"`{name}`" in readme, f"{cloud} README lacks input {name}"
    for name in OUTPUTS:
        assert f"`{name}`" in readme, f"{cloud} README lacks output {name}"


@pytest.mark.parametrize("cloud", CLOUDS)
def test_nat_resources_exist_only_with_nat_gateway(cloud):
    resources = blocks(cloud, "nat.tf", "resource")
    assert resources, f"{cloud}: nat.tf declares no resource"
    for rtype, named in resources.items():
        for name, body in named.items():
            if cloud == "aws" and name.strip('"') == "public":  # the head's subnet and its route: with or without NAT
                assert "local.public_subnet ? 1 : 0" in str(body.get("count"))
                continue
            assert "var.nat_gateway ? 1 : 0" in str(body.get("count")), f"{cloud}: {rtype}.{name}"
    assert any(rtype.endswith("_nat_gateway") for rtype in resources), cloud


def resource(cloud: str, filename: str, rtype: str) -> dict:
    parsed = hcl2.loads((MODULES / cloud / filename).read_text())
    for item in parsed.get("resource", []):
        for name, body in item.items():
            if name.strip('"') == rtype:
                return {k.strip('"'): v for k, v in next(iter(body.values())).items()}
    raise KeyError(rtype)


def test_tencent_key_pair_name_fits_25_characters_and_nat_toggle_goes_back_to_the_default_table():
    main = (MODULES / "tencentcloud" / "main.tf").read_text()
    assert 'key_name = substr(replace(var.name, "-", "_"), 0, 25)' in main
    subnet = resource("tencentcloud", "main.tf", "tencentcloud_subnet")
    assert "tencentcloud_vpc.this.default_route_table_id" in subnet["route_table_id"]


def test_huawei_has_no_read_only_hostname_and_sfs_turbo_adds_no_rules():
    assert "hostname" not in resource("huaweicloud", "main.tf", "huaweicloud_compute_instance")
    assert resource("huaweicloud", "nas.tf", "huaweicloud_sfs_turbo")[
        "auto_create_security_group_rules"] is False


def test_alibaba_nas_is_in_the_cluster_zone():
    assert "var.zone" in resource("alicloud", "nas.tf", "alicloud_nas_file_system")["zone_id"]


@pytest.mark.parametrize("cloud, rtype, argument", [
    ("aws", "aws_ebs_volume", "kms_key_id"), ("alicloud", "alicloud_ecs_disk", "kms_key_id"),
    ("tencentcloud", "tencentcloud_cbs_storage", "kms_key_id"),
    ("huaweicloud", "huaweicloud_evs_volume", "kms_id")])
def test_every_data_disk_takes_the_kms_key(cloud, rtype, argument):
    assert "var.data_disk.kms_key_id" in resource(cloud, "main.tf", rtype)[argument]
    assert clouds.get(cloud).disks.kms_key_argument == argument


@pytest.mark.parametrize("cloud", CLOUDS)
def test_every_node_reports_its_data_disk_serial(cloud):
    assert "data_disk_serial = try(local.data_disk_serials[i], null)" in \
        (MODULES / cloud / "outputs.tf").read_text()
