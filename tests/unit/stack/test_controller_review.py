"""The controller's policy in the review (stack/controller_review.py) and its price in the cost
(money/cost.py controller_item): read from the plan's controller_policy output, one line per
statement with its conditions; priced on demand from the catalog's controllers, never as a node."""

from __future__ import annotations

import json

from trainkit.money.cost import resources_cost
from trainkit.spec.resolve import resolve
from trainkit.spec.schema import ClusterSpec
from trainkit.stack.controller_review import policy_lines, policy_statements

AWS = {"name": "lab", "cloud": "aws", "region": "us-east-1", "zone": "us-east-1a", "spot": {"enabled": True},
       "instance": {"type": "g5.xlarge"}, "network": {"admin_cidrs": ["203.0.113.0/24"]},
       "controller": {"enabled": True}}
POLICY = {"Version": "2012-10-17", "Statement": [
    {"Sid": "Read", "Effect": "Allow", "Action": ["ec2:Describe*"], "Resource": "*"},
    {"Sid": "Stop", "Effect": "Allow", "Action": ["ec2:TerminateInstances"], "Resource": ["arn:aws:ec2:*:*:instance/*"],
     "Condition": {"StringEquals": {"aws:ResourceTag/trainkit-cluster": "lab"}}}]}


def _plan(policy) -> dict:
    return {"planned_values": {"outputs": {"controller_policy": {"value": policy}}}}


def test_each_statement_is_one_line_with_its_condition():
    assert policy_lines(_plan(json.dumps(POLICY))) == [
        "Allow ec2:Describe* on *",
        "Allow ec2:TerminateInstances on arn:aws:ec2:*:*:instance/* if StringEquals "
        "aws:ResourceTag/trainkit-cluster = lab"]


def test_tencent_lower_case_keys_read_alike_and_no_policy_gives_nothing():
    cam = {"version": "2.0", "statement": [{"effect": "allow", "action": ["cvm:RunInstances"], "resource": ["*"]}]}
    assert policy_lines(_plan(json.dumps(cam))) == ["allow cvm:RunInstances on *"]
    assert policy_statements(_plan(None)) is None and policy_lines({}) == []
    assert policy_lines(_plan("{not json")) == []


def test_the_controller_is_priced_on_demand_apart_from_the_spot_nodes():
    cluster = resolve(ClusterSpec.model_validate(AWS))
    node = {"type": "aws_instance", "index": 0, "address": "module.cluster.aws_instance.node[0]",
            "values": {"instance_type": "g5.xlarge", "instance_market_options": [{"market_type": "spot"}]}}
    ctl = {"type": "aws_instance", "index": 0, "address": "module.cluster.aws_instance.controller[0]",
           "values": {"instance_type": "t3a.small"}}
    items = {i["item"]: i for i in resources_cost(cluster, [node, ctl])["items"]}
    assert items["controller t3a.small (on-demand)"]["per_hour"] == 0.0188
    assert [k for k in items if k.startswith("g5.xlarge")] == ["g5.xlarge (spot)"]
    assert items["g5.xlarge (spot)"]["quantity"] == 1


def test_the_controller_is_no_node_where_the_placement_is_read_from_the_state():
    """cluster/placement.py held / held_apart: the controller's instance (another type, on demand)
    must not make the nodes' placement look mixed, or recovery would lose where they run."""
    from trainkit.cluster.placement import held, held_apart

    cluster = resolve(ClusterSpec.model_validate(AWS))

    def vm(name, kind):
        return {"type": "aws_instance", "index": 0, "address": f"module.cluster.aws_instance.{name}[0]",
                "values": {"availability_zone": "us-east-1a", "instance_type": kind}}
    record = {"type": "terraform_data", "index": 0, "address": "module.cluster.terraform_data.node[0]",
              "values": {"input": {"spot": True, "max_price": None}}}
    state = [vm("node", "g5.xlarge"), record, vm("controller", "t3a.small")]
    assert held(cluster, state) == ("us-east-1a", "g5.xlarge", True)
    assert held_apart(cluster, state) == (("us-east-1a", "g5.xlarge", True), {})


def test_cost_before_a_plan_prices_the_controller_once_on_demand():
    """`trainkit cost` (money/cost.py cluster_cost) adds the controller when the spec turns it on."""
    from trainkit.money.cost import cluster_cost

    on = cluster_cost(resolve(ClusterSpec.model_validate(AWS)), nodes=2)
    off = cluster_cost(resolve(ClusterSpec.model_validate({**AWS, "controller": {"enabled": False}})), nodes=2)
    added = [i for i in on["items"] if i["item"].startswith("controller ")]
    assert [(i["item"], i["quantity"], i["per_hour"]) for i in added] == [("controller t3a.small (on-demand)", 1, 0.0188)]
    assert round(on["per_hour"] - off["per_hour"], 4) == 0.0188


def test_the_pull_request_comment_lists_each_statement_as_code():
    from trainkit.stack.review import review
    from trainkit.stack.review_render import to_markdown, to_text

    rev = review({"resource_changes": [], **_plan(json.dumps(POLICY))}, resolve(ClusterSpec.model_validate(AWS)))
    md, text = to_markdown(rev), to_text(rev)
    assert "**Controller policy**" in md and "- `Allow ec2:Describe* on *`" in md
    assert "  Allow ec2:TerminateInstances on arn:aws:ec2:*:*:instance/* if StringEquals " \
        "aws:ResourceTag/trainkit-cluster = lab" in text
    assert "Controller policy" not in to_text(review({"resource_changes": []}, resolve(ClusterSpec.model_validate(AWS))))
