"""Issue 37's pure parts: each node's release time counted from its creation (the review of a ttl
edit, the creation record replaced with its node) and an AWS replacement made by the module's
layout named as such. Plans in `terraform show -json` shape."""

from __future__ import annotations

import calendar

from trainkit import clouds
from trainkit.cluster.replace import replace_addresses
from trainkit.spec.resolve import resolve
from trainkit.spec.schema import ClusterSpec
from trainkit.stack.plan_rules import disruptions, with_born
from trainkit.stack.review import release_review, review

M = "module.cluster."
NOW = calendar.timegm((2026, 12, 4, 12, 0, 0))


def cluster(**over):
    base = {"name": "demo", "cloud": "alicloud", "region": "cn-hangzhou", "zone": "cn-hangzhou-i", "nodes": 2,
            "instance": {"type": "ecs.gn7i-c8g1.2xlarge"}, "network": {"admin_cidrs": ["203.0.113.0/24"]},
            "ttl": "14h"}
    return resolve(ClusterSpec.model_validate({**base, **over}))


def node(i: int, before: str, after: str, actions=("update",)) -> dict:
    values = {"instance_type": "ecs.gn7i-c8g1.2xlarge", "spot_strategy": "NoSpot"}
    return {"address": f"{M}alicloud_instance.node[{i}]", "type": "alicloud_instance", "mode": "managed",
            "index": i, "change": {"actions": list(actions), "before": {**values, "auto_release_time": before},
                                   "after": {**values, "auto_release_time": after}}}


def test_a_ttl_edit_is_described_as_moving_each_running_node_and_an_untouched_one_as_keeping_it():
    plan = {"resource_changes": [node(0, "2026-12-05T00:01:00Z", "2026-12-05T02:01:00Z"),
                                 node(1, "2026-12-05T00:03:00Z", "2026-12-05T00:03:00Z", ("no-op",))]}
    lines, found = release_review(cluster(), plan, now=NOW)
    assert found == []
    assert lines == ["ttl: 1 running node(s) get a new release time in place, counted from each one's creation "
                     "(no restart): alicloud_instance.node[0] 2026-12-05T00:01:00Z -> 2026-12-05T02:01:00Z",
                     "ttl: 1 running node(s) keep their release time (the first at 2026-12-05T00:03:00Z); "
                     "`trainkit status` shows the deadline"]


def test_nodes_applied_before_the_creation_record_are_said_to_count_from_this_apply():
    born = {"address": f"{M}terraform_data.born[0]", "type": "terraform_data", "name": "born", "mode": "managed",
            "index": 0, "change": {"actions": ["create"], "before": None, "after": {"input": "2026-12-04T12:00:00Z"}}}
    plan = {"resource_changes": [node(0, "2026-12-04T20:01:00Z", "2026-12-05T02:01:00Z"), born]}
    lines, _ = release_review(cluster(), plan, now=NOW)
    assert lines[-1].startswith("ttl: nodes applied before trainkit recorded each node's creation")
    assert len(release_review(cluster(), {"resource_changes": plan["resource_changes"][:1]}, now=NOW)[0]) == 1


def test_a_new_release_time_under_30_minutes_ahead_blocks_the_review_naming_ttl():
    plan = {"resource_changes": [node(0, "2026-12-05T00:01:00Z", "2026-12-04T12:29:00Z"),
                                 node(1, "2026-12-05T00:01:00Z", "2026-12-04T12:31:00Z")]}
    _, found = release_review(cluster(ttl="1h"), plan, now=NOW)
    assert [(f["code"], f["severity"]) for f in found] == [("ttl-too-soon", "block")]
    assert found[0]["message"].startswith(f"ttl 1h: counted from their creation, {M}alicloud_instance.node[0] ")
    assert "node[1]" not in found[0]["message"]


def test_a_replaced_node_takes_its_creation_record_with_it():
    held = [f"{M}alicloud_instance.node[0]", f"{M}alicloud_instance.node[1]", f"{M}terraform_data.born[1]"]
    assert with_born([f"{M}alicloud_instance.node[0]", f"{M}alicloud_instance.node[1]"], held) == [
        f"{M}alicloud_instance.node[0]", f"{M}alicloud_instance.node[1]", f"{M}terraform_data.born[1]"]
    state = {"values": {"root_module": {"child_modules": [{"resources": [
        {"address": f"{M}alicloud_instance.node[1]", "mode": "managed", "values": {"id": "i-1"}},
        {"address": f"{M}terraform_data.born[1]", "mode": "managed", "values": {"id": "x"}},
        {"address": f"{M}terraform_data.born[0]", "mode": "managed", "values": {"id": "y"}},
        {"address": f"{M}terraform_data.node[1]", "mode": "managed", "values": {"id": "z"}}]}]}}}
    assert replace_addresses(state, 1, "i-1") == [f"{M}alicloud_instance.node[1]", f"{M}terraform_data.born[1]"]


def _aws_head_moved(with_public_subnet: bool) -> dict:
    head = {"address": f"{M}aws_instance.node[0]", "type": "aws_instance", "mode": "managed", "index": 0,
            "name": "node", "module_address": "module.cluster",
            "change": {"actions": ["delete", "create"], "before": {"subnet_id": "subnet-nodes"},
                       "after": {}, "after_unknown": {"subnet_id": True}, "replace_paths": [["subnet_id"]]}}
    public = {"address": f"{M}aws_subnet.public[0]", "type": "aws_subnet", "mode": "managed", "index": 0,
              "name": "public", "module_address": "module.cluster",
              "change": {"actions": ["create"], "before": None, "after": {"cidr_block": "10.0.255.240/28"}}}
    return {"resource_changes": [head] + ([public] if with_public_subnet else [])}


def test_an_aws_head_moved_to_the_new_public_subnet_is_named_and_warned_about():
    """Defect 11: a head applied before the module kept it in a public subnet of its own is
    replaced once; the review says why instead of blaming a spec field, and warns."""
    plan = _aws_head_moved(True)
    found = disruptions(clouds.get("aws"), plan)
    assert found[f"{M}aws_instance.node[0]"][0] == "moves"
    c = cluster(cloud="aws", region="us-east-1", zone="us-east-1a", instance={"type": "g5.xlarge"}, ttl=None)
    rev = review(plan, c, disrupted=found)
    head, = [a for a in rev["changes"]["addresses"] if a["address"] == f"{M}aws_instance.node[0]"]
    assert head["reason"].startswith("the head node moves to the cluster's public subnet")
    assert [f["severity"] for f in rev["findings"] if f["code"] == "layout-move"] == ["warn"]
    assert disruptions(clouds.get("aws"), _aws_head_moved(False)) == {}
