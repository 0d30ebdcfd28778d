"""The modules' lifecycle rules that keep running nodes from being replaced or reinstalled by
surprise, read from every module's HCL (three of the four providers cannot be installed here; the
aws module is also planned for real in tests/infra/test_aws_node_changes.py)."""

from __future__ import annotations

from pathlib import Path

import hcl2
import pytest

MODULES = Path(__file__).resolve().parents[3] / "terraform" / "modules"
# The argument each module's instance takes its image in (the module's main.tf).
IMAGE_ARGUMENT = {"aws": "ami", "alicloud": "image_id", "tencentcloud": "image_id", "huaweicloud": "image_id"}


def instance(cloud: str) -> tuple[str, dict]:
    for block in hcl2.loads((MODULES / cloud / "main.tf").read_text()).get("resource", []):
        for rtype, named in block.items():
            body = named.get("node") or named.get('"node"')
            if rtype.strip('"').endswith("instance") and body:
                return rtype.strip('"'), body
    raise AssertionError(f"{cloud}: no <type>.node instance")


def lifecycle(body: dict) -> dict:
    out: dict = {}
    for block in body.get("lifecycle", []):
        out.update(block)
    return out


@pytest.mark.parametrize("cloud", sorted(IMAGE_ARGUMENT))
def test_a_node_keeps_the_image_it_was_created_with(cloud):
    _, body = instance(cloud)
    image = IMAGE_ARGUMENT[cloud]
    assert image in body, f"{cloud}: the instance sets no `{image}`"
    ignored = [str(x).strip("${}") for x in lifecycle(body).get("ignore_changes", [])]
    assert image in ignored, f"{cloud}: a newer image would replace or reinstall every node"


@pytest.mark.parametrize("cloud", ["aws", "huaweicloud"])
def test_a_spot_toggle_replaces_the_nodes_where_the_cloud_cannot_change_billing_in_place(cloud):
    """EC2 cannot move a running instance to or from the spot market; Huawei ECS refuses to change
    charging_mode to or from spot in place: each instance is replaced with its own billing record,
    terraform_data.node[i], which holds its spot and, only while it is spot, its max_price (a
    max_price edit with spot off replaces nothing: issue 37 item 10)."""
    _, body = instance(cloud)
    triggers = [str(x).strip("${}") for x in lifecycle(body).get("replace_triggered_by", [])]
    assert triggers == ["terraform_data.node[count.index]"]
    text = (MODULES / cloud / "main.tf").read_text()
    assert 'resource "terraform_data" "node"' in text and 'resource "terraform_data" "billing"' not in text
    assert ("input = { spot = local.node_spot[count.index], max_price = local.node_spot[count.index] ? "
            "var.spot.max_price : null }") in text
