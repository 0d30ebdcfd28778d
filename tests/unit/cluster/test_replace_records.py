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
