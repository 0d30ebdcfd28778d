"""Replacements that cannot vanish or collide (issue 39, items 4 and 5): the subnet blocks of refused
tries, the one record of a `hosts` cluster's active nodes (hosts.json) across destroy and apply, and a
lost node that stays in the record. Pure pieces and the workspace's files; no cloud."""

from __future__ import annotations

import pytest

from trainkit.clouds.base import CapacityProblem
from trainkit.clouds.capacity import CapacityError
from trainkit.cluster import failover
from trainkit.spec.resolve import resolve
from trainkit.spec.schema import ClusterSpec
from trainkit.workspace import Workspace


def aws_spec(**over) -> ClusterSpec:
    base = {"name": "demo", "cloud": "aws", "region": "us-east-1", "zone": "us-east-1a",
            "instance": {"type": "g5.12xlarge"}, "network": {"admin_cidrs": ["203.0.113.0/24"]}}
    return ClusterSpec.model_validate({**base, **over})


def test_a_third_zone_never_gets_the_block_a_refused_try_still_holds(tmp_path):
    """Refused in 1a (home) and 1b, up in 1c: 1b's try made subnet 10.42.0.0/24, still in the state
    when 1c's is created (InvalidSubnet.Conflict on AWS), so 1c gets another block; a later try
    back in 1b (the next type) reuses 1b's own block."""
    cluster = resolve(aws_spec(nodes=2, zone=["us-east-1a", "us-east-1b", "us-east-1c"],
                               instance={"type": ["g5.12xlarge", "g5.24xlarge"]}))
    ws = Workspace.for_cluster("demo", tmp_path).ensure()
    seen: list[dict] = []

    def attempt(placed):
        entry = dict(placed.node_placement.get("1") or {})
        seen.append(entry)
        if (entry.get("zone", "us-east-1a"), entry.get("instance_type")) != ("us-east-1b", "g5.24xlarge"):
            raise CapacityError("no capacity", CapacityProblem("capacity", "InsufficientInstanceCapacity"), fix="")
    failover.replace_in_order(cluster, ws, [1], attempt, lambda ev: None)
    blocks = {(e["zone"], e.get("instance_type")): e["subnet_cidr"] for e in seen if e.get("zone")}
    assert blocks[("us-east-1b", None)] != blocks[("us-east-1c", None)]
    assert blocks[("us-east-1b", "g5.24xlarge")] == blocks[("us-east-1b", None)]
    assert len(seen) == 5 and ws.node_placement()["1"]["zone"] == "us-east-1b"


def test_only_tagged_instances_the_state_does_not_hold_are_strays():
    from trainkit.cluster.strays import untracked_instances
    values = {"root_module": {"child_modules": [{"resources": [
        {"type": "aws_instance", "address": "module.c.aws_instance.node[0]", "mode": "managed",
         "values": {"id": "i-kept"}},
        {"type": "aws_subnet", "address": "module.c.aws_subnet.this", "mode": "managed", "values": {"id": "subnet-1"}}]}]}}
    found = [{"type": "instance", "id": "i-kept"}, {"type": "instance", "id": "i-copy"},
             {"type": "subnet", "id": "subnet-2"}]
    assert untracked_instances(found, values) == [{"type": "instance", "id": "i-copy"}]


def test_the_sweep_runs_after_every_try_and_what_it_leaves_is_named_on_the_refusal(tmp_path):
    """replace_in_order sweeps after each try, refused or up: its events reach the run's record; a
    sweep that could not terminate a copy after a failed try adds the ids to that try's error."""
    from trainkit.cluster.strays import StraysLeft
    cluster = resolve(aws_spec(nodes=2, zone=["us-east-1a", "us-east-1b"]))
    ws = Workspace.for_cluster("demo", tmp_path).ensure()
    events: list[dict] = []
    swept: list[str] = []

    def sweep(placed, w):
        zone = (placed.node_placement.get("1") or {}).get("zone", placed.spec.zone)
        swept.append(zone)
        return [{"kind": "strays_removed", "ids": [f"i-{zone}"]}]

    def attempt(placed):
        if not placed.node_placement:
            raise CapacityError("no capacity", CapacityProblem("capacity", "InsufficientInstanceCapacity"), fix="")
    failover.replace_in_order(cluster, ws, [1], attempt, events.append, sweep=sweep)
    assert swept == ["us-east-1a", "us-east-1b"]
    assert [e["kind"] for e in events] == ["strays_removed", "placement_refused", "strays_removed"]

    def stuck(placed, w):
        raise StraysLeft("1 instance(s) ... could not be terminated and bill: i-9", fix="terminate i-9")
    single = resolve(aws_spec(nodes=2))
    with pytest.raises(CapacityError) as caught:
        failover.replace_in_order(single, Workspace.for_cluster("demo", tmp_path / "b").ensure(), [1],
                                  attempt, events.append, sweep=stuck)
    assert any("i-9" in n and "terminate i-9" in n for n in caught.value.notes)


def _hosts_cluster():
    return resolve(ClusterSpec.model_validate({
        "name": "lab", "cloud": "hosts", "hosts": [
            {"name": "h1", "address": "127.0.0.1", "port": 9}, {"name": "h2", "address": "127.0.0.2", "port": 9},
            {"name": "s1", "address": "127.0.0.3", "port": 9, "spare": True}]}))


def test_apply_launch_and_spare_choice_read_one_list_and_destroy_ends_it(tmp_path):
    """Defect 6: a recovery put spare s1 in h1's place (hosts.json); apply's inventory, launch and the
    next spare choice read that one list; destroy removes the record, so destroy + apply starts from
    the spec; a lost node the list does not hold is named with the fix, never a ValueError."""
    from trainkit import records
    from trainkit.cluster.replace import _swap_spares, effective_cluster
    from trainkit.errors import PREEMPTED, TrainkitError
    from trainkit.provision.inventory import inventory_for

    cluster, ws = _hosts_cluster(), Workspace.for_cluster("lab", tmp_path).ensure()
    (ws.root / "hosts.json").write_text(records.dump({"active": ["s1", "h2"], "replaced": {"h1": "s1"}}))
    effective = effective_cluster(cluster, ws)
    inventory = str(inventory_for(effective, None, ws))
    assert "s1" in inventory and "h1" not in inventory        # apply's inventory = the active list
    with pytest.raises(TrainkitError) as caught:               # h1 is no node of this cluster now
        _swap_spares(effective, ws, ["h1"], "trainkit train lab.yaml --resume R --recover")
    assert caught.value.exit_code == PREEMPTED and "h1" in caught.value.message
    assert "trainkit apply" in caught.value.fix

    assert "hosts.json" in Workspace.CLUSTER_FILES            # destroy removes it with the inventory
    ws.remove_cluster_files()
    assert not (ws.root / "hosts.json").exists()
    assert [h.name for h in effective_cluster(cluster, ws).spec.hosts if not h.spare] == ["h1", "h2"]


def test_a_node_refused_everywhere_stays_lost_in_status_and_the_run_with_the_fix(tmp_path, monkeypatch):
    """Defect 5: the next sync writes outputs.json with the survivor only; `status` still names the
    node as lost with `trainkit apply`, the recovery's event says so, and the next recovery finds
    the node by its index instead of stopping "not in outputs.json"."""
    from trainkit.cluster import lifecycle, lost, replace

    cluster = resolve(aws_spec(nodes=2))
    ws = Workspace.for_cluster("demo", tmp_path).ensure()
    ws.write_outputs({"nodes": [{"name": "demo-node-1", "id": "i-1", "private_ip": "10.42.1.5", "public_ip": None}]})
    out = lifecycle.status(cluster, ws, live=False)
    assert out["lost"] == ["demo-node-0"] and "trainkit apply" in out["lost_fix"]
    assert lost.indexes(cluster, ws.read_outputs()["nodes"]) == {"demo-node-1": 1, "demo-node-0": 0}
    assert lost.missing(cluster, []) == {}                          # destroyed: nothing is lost

    def refused(c, w, names):
        raise CapacityError("every candidate was refused (2 tried)",
                            CapacityProblem("capacity", "InsufficientInstanceCapacity"), fix="try later")
    monkeypatch.setattr(replace, "replace_instances", refused)
    events: list[dict] = []
    with pytest.raises(CapacityError) as caught:
        replace.replace_lost(cluster, ws, ["demo-node-0"], "trainkit train --resume R", events.append)
    assert events == [{"kind": "node_lost", "nodes": ["demo-node-0"], "fix": lost.fix(cluster)}]
    assert "stay lost" in caught.value.fix and "trainkit apply" in caught.value.fix


def test_destroy_names_each_host_it_could_not_clean_with_the_command_that_does(tmp_path):
    """Defect 9: h1 was replaced by s1 (it held launch.root when it went), h2 and s1 are active; none
    answers here (closed ports): nothing is cleaned and each of the three is named with its fix;
    the spare never put in (s2) is not."""
    from trainkit import records
    from trainkit.cluster.host_cleanup import clean_hosts

    spec = ClusterSpec.model_validate({
        "name": "lab", "cloud": "hosts", "launch": {"root": "/opt/tk"}, "hosts": [
            {"name": "h1", "address": "127.0.0.1", "port": 9}, {"name": "h2", "address": "127.0.0.2", "port": 9},
            {"name": "s1", "address": "127.0.0.3", "port": 9, "spare": True},
            {"name": "s2", "address": "127.0.0.4", "port": 9, "spare": True}]})
    cluster, ws = resolve(spec), Workspace.for_cluster("lab", tmp_path).ensure()
    (ws.root / "hosts.json").write_text(records.dump({"active": ["s1", "h2"], "replaced": {"h1": "s1"}}))
    left = clean_hosts(cluster, ws)
    assert sorted(h["host"] for h in left) == ["h1", "h2", "s1"]
    h1 = next(h for h in left if h["host"] == "h1")
    assert "ssh -p 9" in h1["fix"] and "rm -rf /opt/tk" in h1["fix"]


def test_the_next_recovery_recreates_only_the_nodes_its_run_lost(tmp_path):
    from trainkit.cluster import lost
    cluster = resolve(aws_spec(nodes=3))
    ws = Workspace.for_cluster("demo", tmp_path).ensure()
    ws.write_outputs({"nodes": [{"name": "demo-node-1", "id": "i-1", "private_ip": "10.42.1.5", "public_ip": None}]})
    events = [{"event": "node_lost", "nodes": ["demo-node-0"]}]
    assert lost.lost_in(cluster, ws, events) == ["demo-node-0"]   # node 2: added to the spec, apply's to make
    assert lost.lost_in(cluster, ws, []) == []
