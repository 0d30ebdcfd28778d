"""Plan review: changes by role, cost from the catalog, findings. Plans here are hand-written
`terraform show -json` shapes, because the alicloud/tencentcloud/huaweicloud providers cannot be
installed on this machine; the aws review is also checked on a real plan in tests/infra."""

from __future__ import annotations

import pytest

from trainkit.spec.resolve import resolve
from trainkit.spec.schema import ClusterSpec
from trainkit.stack.review import changes, review
from trainkit.stack.review_render import to_markdown, to_text

# A spec per cloud shape; the review reads a plan with the room of the spec's cloud.
SPEC_OF = {
    "tencentcloud": {"cloud": "tencentcloud", "region": "ap-guangzhou", "zone": "ap-guangzhou-4",
                     "instance": {"type": "GN7.2XLARGE32"}},
    "huaweicloud": {"cloud": "huaweicloud", "region": "cn-north-4", "zone": "cn-north-4a",
                    "instance": {"type": "p2s.4xlarge.8"}, "image": "img",
                    "storage": {"data_disk": {"kms_key_id": "k-1"}}},
    "aws": {"cloud": "aws", "region": "us-east-1", "zone": "us-east-1a",
            "instance": {"type": "g5.xlarge"}},
}


def spec(**over) -> ClusterSpec:
    base = {"name": "demo", "cloud": "alicloud", "region": "cn-hangzhou", "zone": "cn-hangzhou-i",
            "nodes": 2, "instance": {"type": "ecs.gn7i-c8g1.2xlarge"},
            "network": {"admin_cidrs": ["203.0.113.0/24"]}}
    base.update(over)
    return ClusterSpec.model_validate(base)


def rc(address, type_, after, actions=("create",), index=None):
    return {"address": address, "type": type_, "mode": "managed", "index": index,
            "change": {"actions": list(actions), "after": after}}


def plan_of(*changes):
    return {"resource_changes": list(changes)}


NODES = [rc(f"module.cluster.alicloud_instance.node[{i}]", "alicloud_instance",
            {"internet_max_bandwidth_out": 10 if i == 0 else 0}, index=i) for i in range(2)]
SSH_OK = rc("module.cluster.alicloud_security_group_rule.ssh[0]", "alicloud_security_group_rule",
            {"type": "ingress", "port_range": "22/22", "cidr_ip": "203.0.113.0/24"})


def test_changes_are_grouped_by_role_and_replace_counts_both_ways():
    plan = plan_of(rc("module.cluster.alicloud_vpc.this", "alicloud_vpc", {}, ("no-op",)),
                   rc("module.cluster.alicloud_ecs_disk.data[0]", "alicloud_ecs_disk", {"encrypted": True},
                      ("delete", "create"), 0),
                   rc("module.cluster.alicloud_nas_file_system.this[0]", "alicloud_nas_file_system", {}),
                   *NODES)
    ch = review(plan, resolve(spec()))["changes"]
    assert ch["by_role"] == {"network": {}, "compute": {"create": 2}, "storage": {"replace": 1},
                             "nas": {"create": 1}}
    assert (ch["add"], ch["change"], ch["destroy"]) == (4, 0, 1)
    assert ch["has_changes"]


def test_no_changes_plan_reports_no_changes():
    plan = plan_of(*(dict(n, change={"actions": ["no-op"], "after": n["change"]["after"]}) for n in NODES))
    assert not review(plan, resolve(spec()))["changes"]["has_changes"]


def test_cost_uses_catalog_price_times_planned_instances_and_lists_unknowns():
    rev = review(plan_of(*NODES), resolve(spec()))
    cost = rev["cost"]
    assert cost["currency"] == "CNY"
    assert cost["items"][0]["per_hour"] == 2 * 9.53  # ecs.gn7i-c8g1.2xlarge in alicloud.yaml
    assert cost["per_hour"] == 2 * 9.53 and cost["per_day"] == round(2 * 9.53 * 24, 2)
    # the planned instances' system disks (cloud_essd has no price in the catalog); the plan holds
    # no data disk resource, so none is priced
    assert not cost["complete"] and cost["unknown"] == ["system disk cloud_essd"]
    assert "unknown" in to_text(rev)


def test_ssh_rule_outside_admin_cidrs_is_found_and_world_open_blocks():
    wide = rc("module.cluster.alicloud_security_group_rule.extra", "alicloud_security_group_rule",
              {"type": "ingress", "port_range": "1/1024", "cidr_ip": "0.0.0.0/0"})
    other = rc("module.cluster.alicloud_security_group_rule.x", "alicloud_security_group_rule",
               {"type": "ingress", "port_range": "22/22", "cidr_ip": "198.51.100.0/24"})
    rev = review(plan_of(SSH_OK, wide, other, *NODES), resolve(spec()))
    codes = [(f["code"], f["severity"]) for f in rev["findings"] if f["code"] == "ssh-open"]
    assert codes == [("ssh-open", "block"), ("ssh-open", "warn")]
    assert rev["blocking"]


@pytest.mark.parametrize("cloud, resources, expected", [
    ("tencentcloud", [rc("a.tencentcloud_security_group_rule_set.this",
                         "tencentcloud_security_group_rule_set",
                         {"ingress": [{"cidr_block": "0.0.0.0/0", "port": "ALL", "protocol": "ALL"}]})],
     ["a.tencentcloud_security_group_rule_set.this"]),
    ("huaweicloud", [rc("a.huaweicloud_networking_secgroup_rule.ssh",
                        "huaweicloud_networking_secgroup_rule",
                        {"direction": "ingress", "ports": "22", "remote_ip_prefix": ""})],
     ["a.huaweicloud_networking_secgroup_rule.ssh"]),
    ("aws", [rc("a.aws_vpc_security_group_ingress_rule.ssh", "aws_vpc_security_group_ingress_rule",
                {"cidr_ipv4": "0.0.0.0/0", "from_port": 22, "to_port": 22}),
             rc("a.aws_security_group_rule.v6", "aws_security_group_rule",
                {"type": "ingress", "ipv6_cidr_blocks": ["::/0"], "from_port": 22, "to_port": 22}),
             rc("a.aws_security_group_rule.self", "aws_security_group_rule",
                {"type": "ingress", "cidr_blocks": ["10.42.0.0/16"], "from_port": 0,
                 "to_port": 65535})],
     ["a.aws_security_group_rule.v6", "a.aws_vpc_security_group_ingress_rule.ssh"]),
])
def test_rules_for_every_cloud_shape_are_read(cloud, resources, expected):
    rev = review(plan_of(*resources), resolve(spec(**SPEC_OF[cloud])))
    assert sorted(f["message"].split()[0] for f in rev["findings"] if f["code"] == "ssh-open") == expected


def test_a_node_replaced_by_its_own_billing_record_names_that_record_only():
    """AWS and Huawei keep a billing record per node (terraform_data.node[i]): node i's REPLACE names
    its own record's change, not every node's."""
    records = []
    for i, (old, new) in enumerate([(False, True), (True, True)]):
        r = rc(f"module.cluster.terraform_data.node[{i}]", "terraform_data",
               {"input": {"spot": new, "max_price": 3.5 if new else None}}, ("update",) if old != new else ("no-op",), i)
        r["change"]["before"] = {"input": {"spot": old, "max_price": 3.5 if old else None}}
        r["name"], r["module_address"] = "node", "module.cluster"
        records.append(r)
    node = rc("module.cluster.huaweicloud_compute_instance.node[0]", "huaweicloud_compute_instance",
              {"charging_mode": "spot"}, ("delete", "create"), 0)
    node["change"]["before"] = {"charging_mode": "postPaid"}
    node["action_reason"], node["module_address"] = "replace_by_triggers", "module.cluster"
    rev = review(plan_of(*records, node), resolve(spec(**SPEC_OF["huaweicloud"])))
    reason, = [a["reason"] for a in rev["changes"]["addresses"] if a["address"] == node["address"]]
    assert reason == ("replaced with its billing record (max_price None -> 3.5; spot False -> True) "
                      "(replace_triggered_by)")


def test_a_huawei_member_rule_whose_group_is_created_in_the_same_apply_is_not_open():
    """At create, the intra-cluster rule's remote_group_id is known only after apply: terraform's
    plan leaves it out of `after` and marks it in `after_unknown`. It is no "ssh-open" finding (it
    blocked every new Huawei cluster), while a rule that names no source at all still is."""
    member = rc("m.huaweicloud_networking_secgroup_rule.intra_cluster", "huaweicloud_networking_secgroup_rule",
                {"direction": "ingress", "ethertype": "IPv4", "remote_ip_prefix": None})
    member["change"]["after_unknown"] = {"remote_group_id": True, "id": True}
    world = rc("m.huaweicloud_networking_secgroup_rule.any", "huaweicloud_networking_secgroup_rule",
               {"direction": "ingress", "ethertype": "IPv4"})
    world["change"]["after_unknown"] = {"id": True}
    rev = review(plan_of(member, world), resolve(spec(**SPEC_OF["huaweicloud"])))
    assert [f["message"].split()[0] for f in rev["findings"] if f["code"] == "ssh-open"] == [
        "m.huaweicloud_networking_secgroup_rule.any"]


def test_huawei_evs_without_a_kms_key_is_reported_unencrypted():
    plain = rc("m.huaweicloud_evs_volume.data[0]", "huaweicloud_evs_volume", {"volume_type": "GPSSD"}, index=0)
    keyed = rc("m.huaweicloud_evs_volume.data[1]", "huaweicloud_evs_volume", {"kms_id": "k-1"}, index=1)
    found = [f["message"] for f in review(plan_of(plain, keyed),
                                          resolve(spec(**SPEC_OF["huaweicloud"])))["findings"]
             if f["code"] == "disk-unencrypted"]
    assert found == ["m.huaweicloud_evs_volume.data[0] is not encrypted"]


def test_public_ip_on_a_worker_and_unencrypted_disk_are_warnings():
    worker = rc("m.alicloud_instance.node[1]", "alicloud_instance", {"internet_max_bandwidth_out": 5}, index=1)
    disk = rc("m.alicloud_ecs_disk.data[0]", "alicloud_ecs_disk", {"encrypted": False}, index=0)
    rev = review(plan_of(NODES[0], worker, disk), resolve(spec()))
    assert {f["code"] for f in rev["findings"]} == {"worker-public-ip", "disk-unencrypted"}
    assert not rev["blocking"]


def test_budget_exceeded_blocks_and_spot_without_nas_warns():
    rev = review(plan_of(*NODES), resolve(spec(budget={"max_per_hour": 10},
                                               spot={"enabled": True, "max_price": 6})))
    codes = {f["code"]: f["severity"] for f in rev["findings"]}
    assert codes["budget-exceeded"] == "block" and codes["spot-no-shared-checkpoints"] == "warn"
    assert rev["blocking"] and "max_price" in next(f["message"] for f in rev["findings"]
                                                   if f["code"] == "budget-exceeded")
    ok = review(plan_of(*NODES), resolve(spec(budget={"max_per_hour": 100})))
    assert not ok["blocking"]


def test_markdown_is_a_pull_request_comment():
    md = to_markdown(review(plan_of(SSH_OK, *NODES), resolve(spec())))
    assert md.startswith("### trainkit plan: `demo` on alicloud")
    assert "| compute | 2 | 0 | 0 | 0 |" in md and "**Findings**: none" in md


@pytest.mark.parametrize("fmt", ["text", "markdown", "json"])
def test_plan_on_local_says_there_is_nothing_to_provision_in_every_format(repo, tmp_path, capsys, fmt):
    from trainkit.cli import main

    with pytest.raises(SystemExit) as exc:
        main(["plan", str(repo / "examples/clusters/local.yaml"), "--workdir", str(tmp_path), "--format", fmt])
    assert exc.value.code == 0
    assert "nothing to provision with terraform" in capsys.readouterr().out


def test_spot_is_priced_at_max_price_as_an_upper_bound_never_at_on_demand():
    rev = review(plan_of(*NODES), resolve(spec(spot={"enabled": True, "max_price": 3.5})))
    node = rev["cost"]["items"][0]
    assert node["per_hour"] == 7.0 and node["upper_bound"] and "upper bound" in node["basis"]
    assert "at most 7.00 CNY" in to_text(rev) and "≤ 7.0000" in to_markdown(rev)
    unknown = review(plan_of(*NODES), resolve(spec(spot={"enabled": True})))["cost"]
    assert unknown["items"][0]["per_hour"] is None and "spot price unknown" in unknown["items"][0]["basis"]
    assert unknown["per_hour"] != 2 * 9.53  # the on-demand rate is never used for spot


def test_markdown_names_replaced_and_destroyed_resources_first_with_monthly_cost_and_delta():
    old = rc("module.cluster.alicloud_instance.node[2]", "alicloud_instance", None, ("delete",), 2)
    old["change"]["before"] = {"internet_max_bandwidth_out": 0}
    disk = rc("module.cluster.alicloud_ecs_disk.data[0]", "alicloud_ecs_disk", {"encrypted": True},
              ("delete", "create"), 0)
    disk["change"]["before"] = {"encrypted": True}
    rev = review(plan_of(*NODES, old, disk), resolve(spec()))
    md = to_markdown(rev)
    caution = md.index("[!CAUTION]")
    assert caution < md.index("| role |")
    assert md.index("**DESTROY** `module.cluster.alicloud_instance.node[2]`") < \
        md.index("**REPLACE** `module.cluster.alicloud_ecs_disk.data[0]`")
    assert rev["changes"]["addresses"][0]["action"] == "delete"
    cost = rev["cost"]
    assert cost["per_month"] == round(2 * 9.53 * 730, 2) and "per month" in md
    # one node runs now, two after: the delta is one node-hour
    assert cost["current_per_hour"] == 9.53 and cost["delta_per_hour"] == 9.53
    assert "| delta | +9.53 CNY | +6,956.90 CNY |" in md and "<details><summary>All 4 change(s)" in md


def test_markdown_fits_a_github_comment_with_a_note_when_cut():
    many = [rc(f"module.cluster.alicloud_security_group_rule.r[{i}]", "alicloud_security_group_rule",
               {"type": "egress"}, index=i) for i in range(3000)]
    md = to_markdown(review(plan_of(*NODES, *many), resolve(spec())))
    assert len(md) <= 65536 and "more change(s) not shown" in md and md.rstrip().endswith("</details>")
    small = to_markdown(review(plan_of(*NODES), resolve(spec())))
    assert "not shown" not in small


def test_every_replace_says_why_and_what_is_lost():
    """terraform's plan JSON gives `replace_paths` (attributes that force a new resource) and
    `action_reason`; the review shows them next to every REPLACE."""
    node = rc("module.cluster.alicloud_instance.node[0]", "alicloud_instance",
              {"internet_max_bandwidth_out": 10}, ("delete", "create"), 0)
    node["change"]["before"] = {"internet_max_bandwidth_out": 10}
    node["change"]["replace_paths"] = [["vswitch_id"], ["system_disk", 0, "category"]]
    node["action_reason"] = "replace_because_cannot_update"
    disk = rc("module.cluster.alicloud_ecs_disk.data[0]", "alicloud_ecs_disk", {"encrypted": True},
              ("create", "delete"), 0)
    disk["change"]["before"] = {"encrypted": True}
    disk["action_reason"] = "replace_by_request"
    billing = rc("module.cluster.terraform_data.billing", "terraform_data",
                 {"input": {"spot": True, "max_price": None}}, ("update",))
    billing["change"]["before"] = {"input": {"spot": False, "max_price": None}}
    billing["module_address"] = "module.cluster"
    trig = rc("module.cluster.alicloud_instance.node[1]", "alicloud_instance",
              {"internet_max_bandwidth_out": 0}, ("delete", "create"), 1)
    trig["change"]["before"] = {"internet_max_bandwidth_out": 0}
    trig["action_reason"], trig["module_address"] = "replace_by_triggers", "module.cluster"
    rev = review(plan_of(node, disk, billing, trig), resolve(spec()))
    by = {a["address"]: a for a in rev["changes"]["addresses"]}
    assert by[node["address"]]["reason"] == ("vswitch_id, system_disk.0.category cannot change in place "
                                             "(spec: storage.system_disk, zone or network)")
    assert by[node["address"]]["replace_paths"] == ["vswitch_id", "system_disk.0.category"]
    assert "public IP" in by[node["address"]]["loses"] and "local disks" in by[node["address"]]["loses"]
    assert "--upgrade-image" in by[disk["address"]]["reason"] and by[disk["address"]]["loses"] == "the data on it"
    assert by[trig["address"]]["reason"] == "replaced with billing (spot False -> True) (replace_triggered_by)"
    text, md = to_text(rev), to_markdown(rev)
    assert "!! REPLACE module.cluster.alicloud_instance.node[0]: vswitch_id, system_disk.0.category " \
           "cannot change in place (spec: storage.system_disk, zone or network); loses its local disks" in text
    assert "**REPLACE** `module.cluster.alicloud_instance.node[1]` (compute): replaced with billing " \
           "(spot False -> True)" in md


@pytest.mark.parametrize("cloud, rtype, paths", [
    ("tencentcloud", "tencentcloud_instance", [["allocate_public_ip"], ["internet_max_bandwidth_out"]]),
    ("huaweicloud", "huaweicloud_compute_instance", [["eip_type"], ["bandwidth"]])])
def test_a_public_ip_change_on_tencent_and_huawei_says_replace_naming_network_public_ip(cloud, rtype, paths):
    """Both providers create an instance's public IP with it (ForceNew attributes): turning
    network.public_ip on or off for a node replaces it, and the review says so and why."""
    node = rc(f"module.cluster.{rtype}.node[1]", rtype, {}, ("delete", "create"), 1)
    node["change"]["before"] = {}
    node["change"]["replace_paths"] = paths
    node["action_reason"] = "replace_because_cannot_update"
    [entry] = changes(plan_of(node))["addresses"]
    assert entry["action"] == "replace" and entry["reason"].endswith("cannot change in place (spec: network.public_ip)")
    assert "public IP" in entry["loses"] and "job" in entry["loses"]
