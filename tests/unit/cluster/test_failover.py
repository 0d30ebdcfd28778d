"""Zone and instance-type candidates (issue 21): the spec's lists, their validation, the order they
are tried in, and the placement a workspace remembers. The failover itself runs against moto in
tests/infra/test_aws_faults.py."""

from __future__ import annotations

import json
import time

import pytest

from trainkit.cluster import failover, placement
from trainkit.errors import InputError
from trainkit.spec.resolve import check, resolve
from trainkit.spec.schema import ClusterSpec
from trainkit.workspace import Workspace


def spec(**over) -> ClusterSpec:
    base = {"name": "demo", "cloud": "aws", "region": "us-east-1", "zone": "us-east-1a",
            "instance": {"type": "g5.12xlarge"}, "network": {"admin_cidrs": ["203.0.113.0/24"]}}
    return ClusterSpec.model_validate({**base, **over})


def test_lists_of_zones_and_types_are_tried_each_type_in_every_zone_first():
    cluster = resolve(spec(zone=["us-east-1a", "us-east-1b"], instance={"type": ["g5.12xlarge", "g5.24xlarge"]}))
    assert cluster.spec.zone == "us-east-1a" and cluster.instance.type == "g5.12xlarge"  # the preferred one
    assert failover.candidates(cluster) == [("us-east-1a", "g5.12xlarge", False), ("us-east-1b", "g5.12xlarge", False),
                                            ("us-east-1a", "g5.24xlarge", False), ("us-east-1b", "g5.24xlarge", False)]
    assert failover.candidates(resolve(spec())) == [("us-east-1a", "g5.12xlarge", False)]


def test_spot_fallback_tries_every_spot_candidate_then_the_same_on_demand():
    cluster = resolve(spec(zone=["us-east-1a", "us-east-1b"],
                           spot={"enabled": True, "max_price": 3.5, "fallback": "on_demand"}))
    assert failover.candidates(cluster) == [("us-east-1a", "g5.12xlarge", True), ("us-east-1b", "g5.12xlarge", True),
                                            ("us-east-1a", "g5.12xlarge", False), ("us-east-1b", "g5.12xlarge", False)]
    on_demand = failover.placed(cluster, "us-east-1b", "g5.12xlarge", False)
    assert not on_demand.spec.spot.enabled and on_demand.spec.zone == "us-east-1b"
    assert cluster.spec.spot.enabled  # the spec itself is not changed
    # without the fallback, spot is only tried as spot; a fallback without spot is a spec error
    assert [c[2] for c in failover.candidates(resolve(spec(spot={"enabled": True, "max_price": 3.5})))] == [True]
    with pytest.raises(Exception, match="spot.fallback: a fallback from spot needs spot.enabled: true"):
        spec(spot={"fallback": "on_demand"})
    with pytest.raises(Exception, match="spot.fallback"):
        spec(spot={"enabled": True, "fallback": "reserved"})


def test_a_spot_quota_refusal_moves_on_to_on_demand_and_any_other_quota_stops(tmp_path, monkeypatch):
    from trainkit.clouds.base import CapacityProblem
    from trainkit.clouds.capacity import CapacityError

    cluster = resolve(spec(zone=["us-east-1a", "us-east-1b"],
                           spot={"enabled": True, "max_price": 3.5, "fallback": "on_demand"}))
    ws = Workspace.for_cluster("demo", tmp_path)
    ws.ensure()
    seen = []
    monkeypatch.setattr(failover, "held_resources", lambda cluster, ws: [])   # an empty state

    def attempt(here):
        seen.append((here.spec.zone, here.spec.spot.enabled))
        if here.spec.spot.enabled:  # the account's spot quota is used up
            raise CapacityError("quota", CapacityProblem("quota", "MaxSpotInstanceCountExceeded"), fix="")
        return "up"

    placed, result = failover.apply_in_order(cluster, ws, attempt)
    assert result == "up" and seen == [("us-east-1a", True), ("us-east-1a", False)]
    assert not placed.spec.spot.enabled
    assert json.loads((ws.root / failover.PLACEMENT_FILE).read_text()) == {
        "zone": "us-east-1a", "type": "g5.12xlarge", "spot": False, "version": 1}
    assert failover.remembered(cluster, ws).spec.spot.enabled is False   # the next plan keeps on-demand

    def on_demand_quota(here):
        raise CapacityError("quota", CapacityProblem("quota", "VcpuLimitExceeded"), fix="")
    with pytest.raises(CapacityError, match="a quota is used up"):
        failover.apply_in_order(resolve(spec(zone=["us-east-1a", "us-east-1b"])), ws, on_demand_quota)


def test_every_candidate_is_validated_like_one():
    found = check(resolve(spec(zone=["us-east-1a", "eu-west-1a"])))
    assert [f for f, _, _ in found] == ["zone"] and "eu-west-1a" in found[0][1]
    with pytest.raises(InputError, match="instance.type: 'g5.13xlarge'"):
        resolve(spec(instance={"type": ["g5.12xlarge", "g5.13xlarge"]}))
    for bad in ([], ["us-east-1a", "us-east-1a"], ["us-east-1a", 3]):
        with pytest.raises(Exception, match="list of distinct names"):
            spec(zone=bad)


def test_the_workspace_remembers_where_the_cluster_came_up(tmp_path):
    cluster = resolve(spec(zone=["us-east-1a", "us-east-1b"]))
    ws = Workspace.for_cluster("demo", tmp_path)
    ws.ensure()
    assert failover.remembered(cluster, ws) is cluster  # nothing applied: the first candidate
    (ws.root / failover.PLACEMENT_FILE).write_text(json.dumps({"zone": "us-east-1b", "type": "g5.12xlarge"}))
    placed = failover.remembered(cluster, ws)
    assert (placed.spec.zone, placed.instance.type) == ("us-east-1b", "g5.12xlarge")
    assert placed.spec.zone_candidates == ("us-east-1a", "us-east-1b")
    # a placement the spec no longer lists is not used
    (ws.root / failover.PLACEMENT_FILE).write_text(json.dumps({"zone": "us-east-1c", "type": "g5.12xlarge"}))
    assert failover.remembered(cluster, ws) is cluster


def _node(zone, kind, market=None):
    """An aws_instance as `terraform show -json` holds it (moto leaves out the market type)."""
    values = {"availability_zone": zone, "instance_type": kind, "root_block_device": [{"volume_type": "gp3",
                                                                                        "volume_size": 200}]}
    if market:
        values["instance_market_options"] = [{"market_type": market}]
    return {"type": "aws_instance", "address": "module.cluster.aws_instance.node[0]", "values": values}


def _billing(spot):
    return {"type": "terraform_data", "address": "module.cluster.terraform_data.billing",
            "values": {"input": {"spot": spot, "max_price": 3.5 if spot else None}}}


def test_the_placement_comes_from_the_state_where_the_workspace_keeps_none(tmp_path, monkeypatch):
    # Another workspace on the same remote state (a CI job, a colleague's machine) has no
    # placement.json: the nodes' zone, type and billing come from the state, so its plan leaves
    # them where failover put them instead of moving them back to the first candidate.
    cluster = resolve(spec(zone=["us-east-1a", "us-east-1b"], instance={"type": ["g5.12xlarge", "g5.24xlarge"]},
                           spot={"enabled": True, "max_price": 3.5, "fallback": "on_demand"}))
    state = [_node("us-east-1b", "g5.24xlarge"), _node("us-east-1b", "g5.24xlarge"), _billing(False)]
    assert failover.held(cluster, state) == ("us-east-1b", "g5.24xlarge", False)
    assert failover.held(cluster, [_node("us-east-1b", "g5.24xlarge"), _billing(True)])[2] is True
    assert failover.held(cluster, [_node("us-east-1a", "g5.12xlarge"), _node("us-east-1b", "g5.12xlarge")]) is None
    assert failover.held(cluster, [_billing(True)]) is None

    ws = Workspace.for_cluster("demo", tmp_path / "elsewhere").ensure()
    reads = []
    monkeypatch.setattr(failover, "held_resources", lambda c, w: reads.append(1) or state)
    settled, existed = failover.settle(cluster, ws)
    assert (settled.spec.zone, settled.instance.type, settled.spec.spot.enabled) == ("us-east-1b", "g5.24xlarge", False)
    assert existed and json.loads((ws.root / failover.PLACEMENT_FILE).read_text())["zone"] == "us-east-1b"
    failover.settle(cluster, ws)
    assert len(reads) == 1   # kept in placement.json: the state is read once

    # A placement the spec no longer lists: the spec's first candidate (the plan shows the move).
    monkeypatch.setattr(failover, "held_resources", lambda c, w: [_node("us-east-1c", "g5.12xlarge"), _billing(True)])
    other = Workspace.for_cluster("demo", tmp_path / "third").ensure()
    settled, existed = failover.settle(cluster, other)
    assert settled.spec.zone == "us-east-1a" and existed


def test_every_candidate_refused_destroys_nothing_that_existed_before_from_another_workspace(tmp_path, monkeypatch):
    # The state (remote) holds a running cluster applied from elsewhere: when every candidate is
    # refused here, nothing is destroyed (a cluster this workspace never applied is not "fresh").
    from trainkit.clouds.base import CapacityProblem
    from trainkit.clouds.capacity import CapacityError

    cluster = resolve(spec(zone=["us-east-1a", "us-east-1b"]))
    ws = Workspace.for_cluster("demo", tmp_path / "ci").ensure()
    monkeypatch.setattr(failover, "held_resources", lambda c, w: [_node("us-east-1a", "g5.12xlarge")])
    removed = []
    monkeypatch.setattr(failover, "_remove_attempts", lambda c, w: removed.append(1))

    def refused(here):
        raise CapacityError("no capacity", CapacityProblem("capacity", "InsufficientInstanceCapacity"), fix="")
    with pytest.raises(CapacityError, match="every candidate was refused") as caught:
        failover.apply_in_order(cluster, ws, refused)
    assert not removed and "destroyed again" not in caught.value.message

    monkeypatch.setattr(failover, "held_resources", lambda c, w: [])   # nothing before: the attempts go
    with pytest.raises(CapacityError, match="destroyed again"):
        failover.apply_in_order(cluster, Workspace.for_cluster("demo", tmp_path / "new").ensure(), refused)
    assert removed == [1]


def test_zone_auto_is_every_zone_the_room_lists_for_the_region_in_order():
    cluster = resolve(spec(zone="auto"))
    assert cluster.spec.zone == "us-east-1a"
    assert [z for z, _, _ in failover.candidates(cluster)] == [
        "us-east-1a", "us-east-1b", "us-east-1c", "us-east-1d", "us-east-1e", "us-east-1f"]
    # a region whose zones trainkit does not list: the error says how to give them
    with pytest.raises(Exception, match=r"zone: auto: trainkit lists no zones for region 'us-west-1'.*zone: \[us-west-1a"):
        spec(region="us-west-1", zone="auto")
    with pytest.raises(Exception, match="zone: auto needs a cloud target"):
        ClusterSpec.model_validate({"name": "demo", "cloud": "local", "zone": "auto"})


def test_zone_auto_orders_by_spot_price_with_zones_refused_within_the_hour_last(tmp_path, monkeypatch):
    cluster = resolve(spec(zone="auto", spot={"enabled": True, "max_price": 3.5, "fallback": "on_demand"}))
    order = failover.candidates(cluster)
    prices = {("us-east-1c", "g5.12xlarge"): 1.1, ("us-east-1a", "g5.12xlarge"): 1.9,
              ("us-east-1b", "g5.12xlarge"): 1.2}
    ordered = failover.auto_order(order, {("us-east-1c", "g5.12xlarge", True)}, prices)
    spot = [z for z, _, s in ordered if s]
    assert spot[:3] == ["us-east-1b", "us-east-1a", "us-east-1d"] and spot[-1] == "us-east-1c"
    assert spot[3:5] == ["us-east-1e", "us-east-1f"]          # no price: as listed, after the priced
    on_demand = [z for z, _, s in ordered if not s]
    assert on_demand == ["us-east-1a", "us-east-1b", "us-east-1c", "us-east-1d", "us-east-1e", "us-east-1f"]
    assert [s for _, _, s in ordered] == [True] * 6 + [False] * 6   # spot before on-demand still

    # apply: a refusal is kept for the hour and the next apply tries that zone last
    ws = Workspace.for_cluster("demo", tmp_path).ensure()
    monkeypatch.setattr(failover, "held_resources", lambda c, w: [])
    monkeypatch.setattr(failover, "zone_spot_prices", lambda c: prices)
    from trainkit.clouds.base import CapacityProblem
    from trainkit.clouds.capacity import CapacityError
    seen = []

    def attempt(here):
        seen.append((here.spec.zone, here.spec.spot.enabled))
        if here.spec.zone == "us-east-1c":
            raise CapacityError("no capacity", CapacityProblem("capacity", "InsufficientInstanceCapacity"), fix="")
        return "up"
    failover.apply_in_order(cluster, ws, attempt)
    assert seen == [("us-east-1c", True), ("us-east-1b", True)]
    assert failover.recent_refusals(ws, time.time()) == {("us-east-1c", "g5.12xlarge", True)}

    (ws.root / failover.PLACEMENT_FILE).unlink()   # a fresh start from here: 1c goes last now
    seen.clear()
    failover.apply_in_order(cluster, Workspace.for_cluster("demo", tmp_path).ensure(), attempt)
    assert seen == [("us-east-1b", True)]


# ------------------------------------------------------------------ failover at recovery (item 4)

def test_a_subnet_for_another_zone_is_the_first_free_block_of_the_subnet_size():
    assert placement.zone_subnet_cidr("10.42.0.0/16", "10.42.1.0/24", []) == "10.42.0.0/24"
    assert placement.zone_subnet_cidr("10.42.0.0/16", "10.42.0.0/24", ["10.42.1.0/24"]) == "10.42.2.0/24"
    # a /24 VPC holds the nodes' /25 and the public /28 at its end: no second /25 is free
    with pytest.raises(InputError, match="network.vpc_cidr 10.42.0.0/24 has no free /25"):
        placement.zone_subnet_cidr("10.42.0.0/24", "10.42.0.0/25", [])
    # the last /27 holds the public subnets (the cluster's last /28, a head placed apart the one below)
    taken = [f"10.42.0.{16 * k}/28" for k in range(1, 13)]
    assert placement.zone_subnet_cidr("10.42.0.0/24", "10.42.0.0/28", taken) == "10.42.0.208/28"
    with pytest.raises(InputError, match="no free /28"):
        placement.zone_subnet_cidr("10.42.0.0/24", "10.42.0.0/28", taken + ["10.42.0.208/28"])


def test_a_node_entry_names_only_what_differs_and_a_zone_keeps_one_subnet():
    cluster = resolve(spec(zone=["us-east-1a", "us-east-1b"], instance={"type": ["g5.12xlarge", "g5.24xlarge"]},
                           network={"admin_cidrs": ["203.0.113.0/24"], "vpc_cidr": "10.42.0.0/16",
                                    "subnet_cidr": "10.42.1.0/24"}))
    assert failover.node_entry(cluster, ("us-east-1a", "g5.12xlarge", False), {}) == {}
    first = failover.node_entry(cluster, ("us-east-1b", "g5.12xlarge", False), {})
    assert first == {"zone": "us-east-1b", "subnet_cidr": "10.42.0.0/24"}
    # a second node in that zone gets the same subnet; a type change is named
    assert failover.node_entry(cluster, ("us-east-1b", "g5.24xlarge", False), {"1": first}) == {
        "zone": "us-east-1b", "subnet_cidr": "10.42.0.0/24", "instance_type": "g5.24xlarge"}


def _refusing(zones: set[str], seen: list):
    from trainkit.clouds.base import CapacityProblem
    from trainkit.clouds.capacity import CapacityError

    def attempt(placed):
        seen.append(dict(placed.node_placement))
        zone = (placed.node_placement.get("1") or {}).get("zone", placed.spec.zone)
        if zone in zones:
            raise CapacityError("no capacity", CapacityProblem("capacity", "InsufficientInstanceCapacity"), fix="")
    return attempt


def test_a_replacement_refused_in_its_zone_moves_alone_and_the_workspace_keeps_it(tmp_path):
    cluster = resolve(spec(nodes=3, zone=["us-east-1a", "us-east-1b"]))
    ws = Workspace.for_cluster("demo", tmp_path).ensure()
    seen, events = [], []
    placed = failover.replace_in_order(cluster, ws, [1], _refusing({"us-east-1a"}, seen), events.append)
    assert seen == [{}, {"1": {"zone": "us-east-1b", "subnet_cidr": "10.42.0.0/24"}}]
    assert [(e["kind"], e["nodes"], e["zone"]) for e in events] == [("placement_refused", [1], "us-east-1a")]
    assert placed.spec.zone == "us-east-1a" and placed.node_placement == seen[-1]   # the others stay
    assert ws.node_placement() == seen[-1]
    # the next render reads it from the workspace; an apply that keeps the cluster keeps it too
    from trainkit.stack.state import with_node_placement
    assert with_node_placement(cluster, ws).node_placement == seen[-1]
    failover._keep(ws, ("us-east-1a", "g5.12xlarge", False))
    assert ws.node_placement() == seen[-1]
    failover._keep(ws, ("us-east-1b", "g5.12xlarge", False))   # the cluster moved: every node with it
    assert ws.node_placement() == {}
    # a spec that no longer lists the zone moves the node back (its entry is not rendered)
    failover._keep(ws, ("us-east-1a", "g5.12xlarge", False), seen[-1])
    assert with_node_placement(resolve(spec(nodes=3)), ws).node_placement == {}


def test_a_replacement_refused_everywhere_lists_each_attempt(tmp_path):
    from trainkit.clouds.capacity import CapacityError

    cluster = resolve(spec(nodes=2, zone=["us-east-1a", "us-east-1b"]))
    ws = Workspace.for_cluster("demo", tmp_path).ensure()
    with pytest.raises(CapacityError, match=r"every candidate was refused \(2 tried\)") as err:
        failover.replace_in_order(cluster, ws, [1], _refusing({"us-east-1a", "us-east-1b"}, []), lambda ev: None)
    assert "2. g5.12xlarge in us-east-1b: no capacity" in err.value.message
    assert ws.node_placement() == {}                                  # nothing kept


def test_the_node_placement_reaches_terraform_through_the_tfvars_file():
    import dataclasses

    from trainkit.stack.render import render_stack
    cluster = resolve(spec(zone=["us-east-1a", "us-east-1b"]))
    plain = render_stack(cluster, "ssh-ed25519 AAAA k")
    moved = render_stack(dataclasses.replace(cluster, node_placement={"1": {"zone": "us-east-1b"}}), "ssh-ed25519 AAAA k")
    assert {k for k in plain if plain[k] != moved[k]} == {"terraform.tfvars.json"}   # every .tf the same
    assert json.loads(moved["terraform.tfvars.json"])["node_placement"] == {"1": {"zone": "us-east-1b"}}
    assert json.loads(plain["terraform.tfvars.json"])["node_placement"] == {}


def test_a_node_placed_apart_is_read_from_the_state_where_the_workspace_keeps_none(tmp_path, monkeypatch):
    """Another workspace of a cluster whose node 0 was replaced into us-east-1b: the cluster stays
    in us-east-1a (the zone with no subnet of its own) and node 0 keeps its zone and subnet, so
    that workspace's plan moves nothing."""
    cluster = resolve(spec(nodes=2, zone=["us-east-1a", "us-east-1b"]))
    head, worker = _node("us-east-1b", "g5.12xlarge"), _node("us-east-1a", "g5.12xlarge")
    head["index"], worker["index"] = 0, 1
    subnet = {"type": "aws_subnet", "index": "us-east-1b", "address": 'module.cluster.aws_subnet.zone["us-east-1b"]',
              "values": {"cidr_block": "10.42.0.0/24", "availability_zone": "us-east-1b"}}
    state = [head, worker, subnet, _billing(False)]
    assert failover.held(cluster, state) is None
    assert failover.held_apart(cluster, state) == (
        ("us-east-1a", "g5.12xlarge", False), {"0": {"zone": "us-east-1b", "subnet_cidr": "10.42.0.0/24"}})
    monkeypatch.setattr(failover, "held_resources", lambda c, w: state)
    ws = Workspace.for_cluster("demo", tmp_path).ensure()
    settled, existed = failover.settle(cluster, ws)
    assert existed and settled.spec.zone == "us-east-1a"
    assert ws.node_placement() == {"0": {"zone": "us-east-1b", "subnet_cidr": "10.42.0.0/24"}}
