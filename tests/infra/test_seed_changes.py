"""Changes to a live cluster on the three seed clouds, through trainkit and the real terraform
against the provider stand-ins (tests/standin): each spec edit plans what the cloud allows, asserted
from the plan JSON and the review; `apply --yes` never destroys storage without its flag; recovery
with an edited spec changes nothing but stops and says why, and without one replaces the lost node
only (issue 37).
"""

from __future__ import annotations

import calendar
import json
import os
import subprocess
import time

import pytest
import yaml
from seed_clouds import CLOUDS, SEED_ENV, plan_actions, trainkit, write_spec
from standin.cloud import Store
from standin.mirror import Reattached

from trainkit import errors

pytestmark = pytest.mark.usefixtures("tf_cli_config")

NODE = {"alicloud": "alicloud_instance", "tencentcloud": "tencentcloud_instance",
        "huaweicloud": "huaweicloud_compute_instance"}
DISK = {"alicloud": "alicloud_ecs_disk", "tencentcloud": "tencentcloud_cbs_storage",
        "huaweicloud": "huaweicloud_evs_volume"}
NAS = {"alicloud": "alicloud_nas_file_system", "tencentcloud": "tencentcloud_cfs_file_system",
       "huaweicloud": "huaweicloud_sfs_turbo"}
# Another zone of the example's region and a smaller type of the example's family, from the catalogs.
OTHER = {"alicloud": ("cn-hangzhou-j", "ecs.gn7i-c16g1.4xlarge"),
         "tencentcloud": ("ap-guangzhou-6", "GN7.5XLARGE80"),
         "huaweicloud": ("cn-north-4b", "p2s.2xlarge.8")}


@pytest.fixture(scope="module")
def applied(repo, tmp_path_factory, tf_cli_config):
    """cloud -> (spec folder, workspace) of the example applied once (no provisioning), all three
    behind one reattached stand-in; the tests here only plan against it."""
    folder = tmp_path_factory.mktemp("seed-changes")
    (folder / "standin").mkdir()
    with Reattached(folder / "standin", SEED_ENV) as served:
        saved = dict(os.environ)
        os.environ.update({**SEED_ENV, **served.env})
        try:
            out = {}
            for cloud in CLOUDS:
                spec, ws = write_spec(repo, folder, cloud), folder / f"ws-{cloud}"
                trainkit("apply", spec, "--workdir", ws, "--yes", "--no-provision")
                out[cloud] = (ws, Store(served.cloud))
            yield out
        finally:
            os.environ.clear()
            os.environ.update(saved)


def _plan(repo, tmp_path, applied, cloud, check_rc=0, **edit):
    ws, _ = applied[cloud]
    spec = write_spec(repo, tmp_path, cloud, **edit)
    rev = json.loads(trainkit("plan", spec, "--workdir", ws, "--format", "json", check_rc=check_rc).stdout)
    by_address = {a["address"].removeprefix("module.cluster."): a for a in rev["changes"]["addresses"]}
    return rev, by_address, {a.removeprefix("module.cluster."): x for a, x in plan_actions(ws).items()}


def _of(actions: dict, rtype: str) -> dict:
    return {a: x for a, x in actions.items() if a.startswith(rtype + ".")}


@pytest.mark.parametrize("cloud", CLOUDS)
def test_a_type_change_replaces_nodes_the_cloud_cannot_resize_and_keeps_their_disks(repo, tmp_path, applied, cloud):
    """The examples' nodes cannot be resized in place: Alibaba and Huawei ones are spot (Huawei
    refuses, a stopped spot node loses its capacity), Tencent's boot from CLOUD_HSSD, which
    ResetInstancesType does not take. The plan replaces them, each with its cause; their data
    disks stay (only the attachments follow the new instances)."""
    rev, by_address, actions = _plan(repo, tmp_path, applied, cloud, **{"instance.type": OTHER[cloud][1]})
    nodes = _of(actions, NODE[cloud])
    assert sorted(nodes) == [f"{NODE[cloud]}.node[0]", f"{NODE[cloud]}.node[1]"]
    assert all(set(x) == {"create", "delete"} for x in nodes.values())
    assert all("cannot update it in place" in by_address[a]["reason"] for a in nodes)
    assert _of(actions, DISK[cloud]) == {} and _of(actions, NAS[cloud]) == {}
    assert not any(f["code"] == "storage-loss" for f in rev["findings"])


@pytest.mark.parametrize("cloud", CLOUDS)
def test_a_zone_change_is_named_as_storage_loss_and_apply_yes_refuses_it(repo, tmp_path, applied, cloud):
    ws, store = applied[cloud]
    rev, _, actions = _plan(repo, tmp_path, applied, cloud, zone=OTHER[cloud][0])
    loss = [f for f in rev["findings"] if f["code"] == "storage-loss"]
    assert len(loss) == 1 and f"{NAS[cloud]}.this[0]" in loss[0]["message"]
    assert set(actions[f"{NAS[cloud]}.this[0]"]) == {"create", "delete"}
    before = store.objects()
    spec = write_spec(repo, tmp_path, cloud, zone=OTHER[cloud][0])
    refused = trainkit("apply", spec, "--workdir", ws, "--yes", "--no-provision", check_rc=errors.PLAN_BLOCKED)
    assert "--allow-storage-loss" in refused.stderr and f"{DISK[cloud]}.data[0]" in refused.stderr
    assert store.objects() == before  # nothing changed


@pytest.mark.parametrize("cloud", CLOUDS)
def test_a_bigger_data_disk_is_resized_in_place(repo, tmp_path, applied, cloud):
    _, by_address, actions = _plan(repo, tmp_path, applied, cloud, **{"storage.data_disk.size_gb": 800})
    assert actions == {f"{DISK[cloud]}.data[{i}]": ["update"] for i in range(2)}


def test_a_stopping_update_is_named_in_the_review(repo, tmp_path, applied):
    """Alibaba: a worker that gets a public IP is updated in place (internet_max_bandwidth_out),
    which does not stop it; a type change on an on-demand node stops it: the review says STOPS."""
    _, by_address, actions = _plan(repo, tmp_path, applied, "alicloud", **{"network.public_ip": "all"})
    assert actions.get("alicloud_instance.node[1]") == ["update"]
    assert "disruption" not in by_address["alicloud_instance.node[1]"]
    # on-demand: spot off replaces the nodes (spot_strategy is ForceNew); compare the two plans
    _, by_address, actions = _plan(repo, tmp_path, applied, "alicloud", **{"spot.enabled": False})
    assert all(set(actions[f"alicloud_instance.node[{i}]"]) == {"create", "delete"} for i in range(2))
    assert "spot_strategy" in by_address["alicloud_instance.node[0]"]["reason"]


@pytest.mark.parametrize("cloud", CLOUDS)
def test_recovery_after_a_spec_edit_stops_naming_what_it_would_change_or_replaces_only_the_lost_node(
        repo, tmp_path, seed_cloud, monkeypatch, cloud):
    """Issue 37's fault-matrix row on the seed clouds: a node is reclaimed after the spec was
    edited. An edit that reaches what exists (a disk size, a tag) stops the recovery before any
    change (exit PREEMPTED, the addresses named: the run waits); an edit that changes nothing in
    the cloud (idle) recovers: only the lost node and its disk are new, the survivor keeps its id."""
    from trainkit.cluster.replace import replace_instances
    from trainkit.errors import TrainkitError
    from trainkit.spec.resolve import load_cluster
    from trainkit.workspace import Workspace

    monkeypatch.delenv("CHECKOV", raising=False)
    spec, ws_dir = write_spec(repo, tmp_path, cloud), tmp_path / "ws"
    trainkit("apply", spec, "--workdir", ws_dir, "--yes", "--no-provision")
    nodes = json.loads((ws_dir / "outputs.json").read_text())["nodes"]
    seed_cloud.release(NODE[cloud], nodes[1]["id"])          # the cloud reclaims node 1
    kept = {k: v["id"] for k, v in seed_cloud.objects().items()}

    edited = tmp_path / "edited"
    edited.mkdir()
    changed = load_cluster(write_spec(repo, edited, cloud, **{"storage.data_disk.size_gb": 900}))
    ws = Workspace.for_cluster(changed.name, ws_dir)
    with pytest.raises(TrainkitError) as stopped:
        replace_instances(changed, ws, [nodes[1]["name"]])
    assert stopped.value.exit_code == errors.PREEMPTED
    assert "changed since the last apply" in stopped.value.message
    assert f"update module.cluster.{DISK[cloud]}.data[0]" in stopped.value.message
    tagged = load_cluster(write_spec(repo, edited, cloud, tags={"team": "edited"}))   # the example
    with pytest.raises(TrainkitError) as stopped:
        replace_instances(tagged, ws, [nodes[1]["name"]])
    assert f"update module.cluster.{NODE[cloud]}.node[0]" in stopped.value.message
    assert {k: v["id"] for k, v in seed_cloud.objects().items()} == kept   # nothing changed

    # a spec edit that changes nothing the cloud holds (idle is the node-side guard's) recovers
    events = replace_instances(load_cluster(write_spec(repo, edited, cloud, idle="2h")), ws, [nodes[1]["name"]])
    assert [e["kind"] for e in events] == ["replaced"]
    new_nodes = seed_cloud.objects(NODE[cloud])
    assert nodes[0]["id"] in new_nodes and nodes[1]["id"] not in new_nodes and len(new_nodes) == 2
    after = seed_cloud.objects()
    # everything but node 1's data disk and attachment (replaced with it) keeps its id: the survivor,
    # its disk, the NAS, the network
    gone = {k for k in kept if k not in after}
    assert all(k.startswith((f"{DISK[cloud]} ", f"{NODE[cloud]} ")) or "attach" in k for k in gone), gone
    assert sum(k.startswith(f"{DISK[cloud]} ") for k in gone) == 1
    assert any(k.startswith(f"{NAS[cloud]} ") for k in after) and all(k in after for k in kept if k.startswith(NAS[cloud]))


@pytest.mark.parametrize("cloud", CLOUDS)
def test_failover_of_an_existing_cluster_moves_the_new_node_only(repo, tmp_path, seed_cloud, cloud):
    """Two nodes up in the first zone; then a third, and the cloud has no capacity left for the
    type there (each cloud's sold-out error from the stand-in). The new node alone goes to the
    next zone (its own subnet); the cluster's subnet, its NAS and the first two nodes stay."""
    zones = [yaml_zone(repo, cloud), OTHER[cloud][0]]
    spec, ws = write_spec(repo, tmp_path, cloud, zone=zones), tmp_path / "ws"
    trainkit("apply", spec, "--workdir", ws, "--yes", "--no-provision")
    before = seed_cloud.objects()
    first = json.loads((ws / "outputs.json").read_text())["nodes"]
    kind = yaml.safe_load(spec.read_text())["instance"]["type"]
    seed_cloud.set_faults(capacity=[{"zone": zones[0], "type": kind}])

    grown = write_spec(repo, tmp_path, cloud, zone=zones, nodes=3)
    applied = trainkit("apply", grown, "--workdir", ws, "--yes", "--no-provision")
    assert "the cluster stays" in applied.stderr
    refused = [c for c in seed_cloud.read()["calls"] if c[0] == "refused"]
    assert len(refused) == 1 and refused[0][1] == NODE[cloud], refused   # the cloud said no once
    nodes = json.loads((ws / "outputs.json").read_text())["nodes"]
    assert [n["id"] for n in nodes[:2]] == [n["id"] for n in first] and len(nodes) == 3
    held = seed_cloud.objects()
    assert all(k in held for k in before), "nothing that existed was replaced"
    zone_of = {i: a["availability_zone"] for i, a in seed_cloud.objects(NODE[cloud]).items()}
    assert zone_of[nodes[2]["id"]] == zones[1] and {zone_of[n["id"]] for n in nodes[:2]} == {zones[0]}
    placement = json.loads((ws / "placement.json").read_text())
    assert placement["zone"] == zones[0] and placement["nodes"]["2"]["zone"] == zones[1]


def yaml_zone(repo, cloud: str) -> str:
    return yaml.safe_load((repo / f"examples/clusters/{cloud}.yaml").read_text())["zone"]


def test_an_erdma_type_gets_the_high_performance_nic_and_jumbo_frames(repo, tmp_path, applied):
    """Alibaba eRDMA types (the room's erdma_types): the network role points NCCL at erdma and
    asserts MTU 8500, so the module creates their nodes with the NIC in HighPerformance mode and
    jumbo frames on (issue 37 item 7); other types keep the defaults."""
    ws, _ = applied["alicloud"]
    spec = write_spec(repo, tmp_path, "alicloud", **{"instance.type": "ecs.gn8is-2x.8xlarge"})
    trainkit("plan", spec, "--workdir", ws, "--format", "json")
    plan = json.loads((ws / "plan.json").read_text())
    nodes = [c["change"]["after"] for c in plan["resource_changes"] if c["type"] == "alicloud_instance"]
    assert [(n["network_interface_traffic_mode"], n["enable_jumbo_frame"]) for n in nodes] == [
        ("HighPerformance", True)] * 2
    # the example's gn7i nodes are no eRDMA type: nothing changes for them
    trainkit("plan", write_spec(repo, tmp_path, "alicloud"), "--workdir", ws, "--detailed-exitcode")


def test_turning_the_placement_group_off_replaces_the_nodes_before_the_group_goes(repo, tmp_path, seed_cloud):
    """Tencent (issue 37 item 8): the provider refuses to unset placement_group_id in place, and the
    cloud deletes only an empty placement group. The nodes are replaced (replace_triggered_by on
    the group; the review says so), then the group goes; their data disks and the CFS stay."""
    spec, ws = write_spec(repo, tmp_path, "tencentcloud"), tmp_path / "ws"
    trainkit("apply", spec, "--workdir", ws, "--yes", "--no-provision")
    assert len(seed_cloud.objects("tencentcloud_placement_group")) == 1
    # a cluster applied before the module kept the record: the record is created, nothing replaced
    subprocess.run(["terraform", "state", "rm", "module.cluster.terraform_data.placement"], cwd=ws / "terraform",
                   check=True, capture_output=True)
    trainkit("apply", spec, "--workdir", ws, "--yes", "--no-provision")
    assert plan_actions(ws) == {"module.cluster.terraform_data.placement": ["create"]}
    disks, nas = seed_cloud.objects(DISK["tencentcloud"]), seed_cloud.objects(NAS["tencentcloud"])
    off = write_spec(repo, tmp_path, "tencentcloud", **{"network.placement_group": False})
    rev = json.loads(trainkit("plan", off, "--workdir", ws, "--format", "json").stdout)
    reasons = {a["address"]: a.get("reason", "") for a in rev["changes"]["addresses"]}
    assert "replace_triggered_by" in reasons["module.cluster.tencentcloud_instance.node[0]"], reasons
    trainkit("apply", off, "--workdir", ws, "--yes", "--no-provision")
    assert seed_cloud.objects("tencentcloud_placement_group") == {}
    assert seed_cloud.objects(DISK["tencentcloud"]).keys() == disks.keys()
    assert seed_cloud.objects(NAS["tencentcloud"]).keys() == nas.keys()


def test_huawei_billing_records_are_per_node_and_a_max_price_edit_with_spot_off_replaces_nothing(
        repo, tmp_path, seed_cloud):
    """Issue 37 items 9 and 10: each node's billing record (terraform_data.node[i]) holds its own
    spot and, only while spot, its max_price. On-demand nodes keep their ids through a max_price
    edit; a state without the records (applied before them) only gains them."""
    spec, ws = write_spec(repo, tmp_path, "huaweicloud", **{"spot.enabled": False}), tmp_path / "ws"
    trainkit("apply", spec, "--workdir", ws, "--yes", "--no-provision")
    edited = write_spec(repo, tmp_path, "huaweicloud", **{"spot.enabled": False, "spot.max_price": 30.0})
    trainkit("plan", edited, "--workdir", ws, "--detailed-exitcode")       # exit 0: no changes
    subprocess.run(["terraform", "state", "rm", "module.cluster.terraform_data.node"], cwd=ws / "terraform",
                   check=True, capture_output=True)
    trainkit("plan", spec, "--workdir", ws)
    assert plan_actions(ws) == {f"module.cluster.terraform_data.node[{i}]": ["create"] for i in range(2)}


def _plan_json(ws) -> dict:
    return {c["address"].removeprefix("module.cluster."): c["change"]
            for c in json.loads((ws / "plan.json").read_text())["resource_changes"]}


def _deadline(born: str, minutes: int, off_zero: bool) -> str:
    """born (RFC 3339, to the minute) + minutes, as the module writes it; Alibaba's moved one minute
    off a 0 minute (terraform/modules/alicloud/main.tf node_release)."""
    at = calendar.timegm(time.strptime(born, "%Y-%m-%dT%H:%M:%SZ")) + minutes * 60
    at += 60 if off_zero and time.gmtime(at).tm_min % 10 == 0 else 0
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(at))


def test_a_ttl_edit_moves_each_running_nodes_release_time_from_its_creation_in_place_alibaba(
        repo, tmp_path, applied):
    """Issue 37 item 4 (ttl is one truth): Alibaba's example (ttl 12h) edited to 14h plans an in-place
    update of auto_release_time alone on both nodes (ModifyInstanceAutoReleaseTime), each to its own
    creation (terraform_data.born[i], from the state) + 14h; the review says so. An unrelated edit (a
    tag) leaves every release time as it is, and status reads the deadline from the state."""
    ws, store = applied["alicloud"]
    rev, by_address, actions = _plan(repo, tmp_path, applied, "alicloud", ttl="14h")
    nodes = [f"{NODE['alicloud']}.node[{i}]" for i in range(2)]
    assert actions == {a: ["update"] for a in nodes}
    plan = _plan_json(ws)
    for i, a in enumerate(nodes):
        assert [x["name"] for x in by_address[a]["attributes"]] == ["auto_release_time"], by_address[a]
        born = plan[f"terraform_data.born[{i}]"]["before"]["output"]
        assert plan[a]["after"]["auto_release_time"] == _deadline(born, 14 * 60, off_zero=True)
        assert plan[a]["before"]["auto_release_time"] == _deadline(born, 12 * 60, off_zero=True)
    assert any("2 running node(s) get a new release time in place" in line for line in rev["safety"]), rev["safety"]

    _, _, actions = _plan(repo, tmp_path, applied, "alicloud", tags={"team": "another"})
    plan = _plan_json(ws)
    assert all(plan[a]["after"]["auto_release_time"] == plan[a]["before"]["auto_release_time"] for a in nodes)
    first = min(a["auto_release_time"] for a in store.objects(NODE["alicloud"]).values())
    status = json.loads(trainkit("status", write_spec(repo, tmp_path, "alicloud"), "--workdir", ws, "--json").stdout)
    assert status["ttl_deadline"] == first and status["ttl_source"] == "state"


def test_a_ttl_edit_reaches_running_huawei_nodes_and_an_unrelated_apply_leaves_it(repo, tmp_path, seed_cloud):
    """Issue 37 item 4 on Huawei (pay-per-use: auto_terminate_time is for those only): ttl 2h -> 3h
    updates each server's auto_terminate_time in place (UpdateAutoTerminateTime) to its creation +
    3h, nothing else changes, the stand-in cloud holds the new times and status shows the earliest;
    an apply of an unrelated edit (a tag) leaves them."""
    on_demand = {"spot.enabled": False, "ttl": "2h"}
    spec, ws = write_spec(repo, tmp_path, "huaweicloud", **on_demand), tmp_path / "ws"
    trainkit("apply", spec, "--workdir", ws, "--yes", "--no-provision")
    longer = write_spec(repo, tmp_path, "huaweicloud", **{**on_demand, "ttl": "3h"})
    trainkit("plan", longer, "--workdir", ws)
    nodes = [f"module.cluster.{NODE['huaweicloud']}.node[{i}]" for i in range(2)]
    assert plan_actions(ws) == {a: ["update"] for a in nodes}
    plan = _plan_json(ws)
    want = {}
    for i in range(2):
        change = plan[f"{NODE['huaweicloud']}.node[{i}]"]
        assert {k for k in change["after"] if change["after"][k] != change["before"].get(k)} == {"auto_terminate_time"}
        want[i] = _deadline(plan[f"terraform_data.born[{i}]"]["before"]["output"], 180, off_zero=False)
        assert change["after"]["auto_terminate_time"] == want[i]
    trainkit("apply", longer, "--workdir", ws, "--yes", "--no-provision")
    held = sorted(o["auto_terminate_time"] for o in seed_cloud.objects(NODE["huaweicloud"]).values())
    assert held == sorted(want.values())
    status = json.loads(trainkit("status", longer, "--workdir", ws, "--json").stdout)
    assert status["ttl_deadline"] == held[0] and status["ttl_source"] == "state"

    tagged = write_spec(repo, tmp_path, "huaweicloud", **{**on_demand, "ttl": "3h", "tags": {"team": "other"}})
    trainkit("apply", tagged, "--workdir", ws, "--yes", "--no-provision")
    assert sorted(o["auto_terminate_time"] for o in seed_cloud.objects(NODE["huaweicloud"]).values()) == held


# (cloud, spec edit, what each node's instance does in the plan: "-" nothing, "update", "replace")
NODE_EDITS = [
    ("alicloud", {"network.public_ip": "all"}, ("-", "update")),          # internet_max_bandwidth_out
    ("alicloud", {"spot.enabled": False}, ("replace", "replace")),        # spot_strategy is ForceNew
    ("alicloud", {"network.nat_gateway": False}, ("-", "-")),
    ("tencentcloud", {"network.public_ip": "all"}, ("-", "replace")),     # allocate_public_ip is ForceNew
    ("tencentcloud", {"spot.max_price": 30.0}, ("-", "-")),               # on-demand: no price to change
    ("tencentcloud", {"network.nat_gateway": False}, ("-", "-")),
    ("huaweicloud", {"spot.enabled": False}, ("replace", "replace")),     # its billing record and price
    ("huaweicloud", {"network.public_ip": "all"}, ("-", "replace")),      # eip_type/bandwidth are ForceNew
    ("huaweicloud", {"network.nat_gateway": False}, ("-", "-")),
]


@pytest.mark.parametrize("cloud, edit, nodes", NODE_EDITS,
                         ids=[f"{c}-{next(iter(e))}" for c, e, _ in NODE_EDITS])
def test_each_edit_plans_what_the_cloud_allows_for_the_nodes(repo, tmp_path, applied, cloud, edit, nodes):
    _, by_address, actions = _plan(repo, tmp_path, applied, cloud, **edit)
    seen = tuple({("create", "delete"): "replace", ("update",): "update"}.get(
        tuple(sorted(actions.get(f"{NODE[cloud]}.node[{i}]", []))), "-") for i in range(2))
    assert seen == nodes, actions
    assert _of(actions, DISK[cloud]) == {} and _of(actions, NAS[cloud]) == {}   # storage stays
    if edit.get("network.nat_gateway") is False:
        assert any("nat_gateway" in a and x == ["delete"] for a, x in actions.items()), actions
    for i, what in enumerate(nodes):
        if what == "replace":
            assert by_address[f"{NODE[cloud]}.node[{i}]"]["reason"]      # the review says why


@pytest.mark.parametrize("cloud", CLOUDS)
def test_a_new_node_refused_its_type_comes_up_on_the_next_type_and_nothing_else_moves(repo, tmp_path, seed_cloud, cloud):
    """`instance.type: [t1, t2]`: two nodes up on t1; a third, and t1 is sold out in the zone. The
    new node alone comes up on t2 (node_placement), in the cluster's zone; nothing that existed moves."""
    kind = yaml.safe_load((repo / f"examples/clusters/{cloud}.yaml").read_text())["instance"]["type"]
    types = {"instance.type": [kind, OTHER[cloud][1]]}
    spec, ws = write_spec(repo, tmp_path, cloud, **types), tmp_path / "ws"
    trainkit("apply", spec, "--workdir", ws, "--yes", "--no-provision")
    before = seed_cloud.objects()
    seed_cloud.set_faults(capacity=[{"zone": yaml_zone(repo, cloud), "type": kind}])
    trainkit("apply", write_spec(repo, tmp_path, cloud, nodes=3, **types), "--workdir", ws, "--yes", "--no-provision")
    assert all(k in seed_cloud.objects() for k in before), "nothing that existed was replaced"
    nodes = json.loads((ws / "outputs.json").read_text())["nodes"]
    held = seed_cloud.objects(NODE[cloud])
    type_key = "flavor_id" if cloud == "huaweicloud" else "instance_type"
    assert [held[n["id"]][type_key] for n in nodes] == [kind, kind, OTHER[cloud][1]]
    assert {held[n["id"]]["availability_zone"] for n in nodes} == {yaml_zone(repo, cloud)}
