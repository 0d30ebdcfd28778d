"""Which failed creates an apply adopts (trainkit/stack/adopt.py, the AWS room's import IDs).

The terraform output is the one hashicorp/aws 5.100 printed for a lost AuthorizeSecurityGroupIngress
answer on moto (tests/infra/test_aws_lost_response.py runs it for real).
"""

from __future__ import annotations

import pytest

from trainkit import clouds
from trainkit.stack import adopt

pytestmark = pytest.mark.unit

AWS = clouds.get("aws")

OUTPUT = """module.cluster.aws_instance.node[0]: Creation complete after 11s [id=i-2da0be423ddeb84a2]

Error: [WARN] A duplicate Security Group rule was found on (sg-980f45e133bc440ac). This may be
a side effect of a now-fixed Terraform issue causing two security groups with
identical attributes but different source_security_group_ids to overwrite each
other in the state. Error: operation error EC2: AuthorizeSecurityGroupIngress, https response error StatusCode: 400, RequestID: Iibq, api error InvalidPermission.Duplicate: The specified rule already exists

  with module.cluster.aws_security_group_rule.ssh,
  on modules/aws/main.tf line 87, in resource "aws_security_group_rule" "ssh":
  87: resource "aws_security_group_rule" "ssh" {

Error: creating EC2 Instance: operation error EC2: RunInstances, api error InsufficientInstanceCapacity: none

  with module.cluster.aws_instance.node[1],
  on modules/aws/main.tf line 140, in resource "aws_instance" "node":

Error: Invalid provider configuration

Provider "registry.terraform.io/hashicorp/aws" requires explicit configuration.
"""

SG = "sg-980f45e133bc440ac"


def _create(address: str, kind: str, after: dict) -> dict:
    return {"address": address, "type": kind, "change": {"actions": ["create"], "after": after}}


def test_failed_resources_pairs_each_error_with_its_resource():
    failed = adopt.failed_resources(OUTPUT)
    assert [a for a, _ in failed] == ["module.cluster.aws_security_group_rule.ssh", "module.cluster.aws_instance.node[1]"]
    assert "InvalidPermission.Duplicate" in failed[0][1] and "InvalidPermission.Duplicate" not in failed[1][1]
    # the same diagnostics in terraform's boxed form (a terminal without -no-color)
    boxed = "\n".join(("│ " + line) if line else "│" for line in OUTPUT.splitlines()[2:9])
    assert [a for a, _ in adopt.failed_resources(boxed)] == ["module.cluster.aws_security_group_rule.ssh"]


def test_only_duplicates_the_room_names_are_adopted():
    assert adopt.duplicates(OUTPUT, AWS.duplicate_error) == ["module.cluster.aws_security_group_rule.ssh"]
    assert adopt.duplicates(OUTPUT, None) == []  # a room that adopts nothing
    assert adopt.duplicates(OUTPUT.replace("InvalidPermission.Duplicate", "InvalidPermission.Malformed"),
                            AWS.duplicate_error) == []


@pytest.mark.parametrize("values, expected", [
    ({"type": "ingress", "protocol": "tcp", "from_port": 22, "to_port": 22,
      "cidr_blocks": ["203.0.113.0/24", "198.51.100.0/24"]},
     f"{SG}_ingress_tcp_22_22_203.0.113.0/24_198.51.100.0/24"),
    ({"type": "ingress", "protocol": "-1", "from_port": 0, "to_port": 0, "self": True, "cidr_blocks": None},
     f"{SG}_ingress_-1_0_0_self"),
    ({"type": "egress", "protocol": "-1", "from_port": 0, "to_port": 0, "cidr_blocks": ["0.0.0.0/0"],
      "ipv6_cidr_blocks": ["::/0"]}, f"{SG}_egress_-1_0_0_0.0.0.0/0_::/0"),
    ({"type": "ingress", "protocol": "tcp", "from_port": 2049, "to_port": 2049, "self": False,
      "source_security_group_id": "sg-0123"}, f"{SG}_ingress_tcp_2049_2049_sg-0123"),
])
def test_aws_rule_import_ids(values, expected):
    """SECURITYGROUPID_TYPE_PROTOCOL_FROMPORT_TOPORT_SOURCE[_SOURCE]* (hashicorp/aws's import docs)."""
    assert AWS.import_id("aws_security_group_rule", {"security_group_id": SG, **values}) == expected


def test_no_import_id_without_what_names_the_rule():
    rule = {"security_group_id": SG, "type": "ingress", "protocol": "tcp", "from_port": 22, "to_port": 22,
            "cidr_blocks": ["203.0.113.0/24"]}
    assert AWS.import_id("aws_security_group_rule", {**rule, "security_group_id": None}) is None  # unknown yet
    assert AWS.import_id("aws_security_group_rule", {**rule, "cidr_blocks": []}) is None
    assert AWS.import_id("aws_instance", rule) is None
    assert clouds.get("alicloud").import_id("aws_security_group_rule", rule) is None


def test_imports_only_what_the_new_plan_still_creates():
    rule = {"security_group_id": SG, "type": "ingress", "protocol": "tcp", "from_port": 22, "to_port": 22,
            "cidr_blocks": ["203.0.113.0/24"]}
    ssh, egress = "module.cluster.aws_security_group_rule.ssh", "module.cluster.aws_security_group_rule.egress"
    plan = {"resource_changes": [_create(ssh, "aws_security_group_rule", rule),
                                 {"address": egress, "type": "aws_security_group_rule",
                                  "change": {"actions": ["no-op"], "after": rule}}]}
    assert adopt.imports([ssh, egress], plan, AWS.import_id) == [(ssh, f"{SG}_ingress_tcp_22_22_203.0.113.0/24")]
    assert adopt.imports([ssh], {"resource_changes": []}, AWS.import_id) == []
