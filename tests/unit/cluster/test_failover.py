"""Zone and instance-type candidates (issue 21): the spec's lists, their validation, the order they
are tried in, and the placement a workspace remembers. The failover itself runs against moto in
tests/infra/test_aws_faults.py."""

from __future__ import annotations

import json

import pytest

from trainkit.cluster import failover
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
    assert failover.candidates(cluster) == [("us-east-1a", "g5.12xlarge"), ("us-east-1b", "g5.12xlarge"),
                                            ("us-east-1a", "g5.24xlarge"), ("us-east-1b", "g5.24xlarge")]
    assert failover.candidates(resolve(spec())) == [("us-east-1a", "g5.12xlarge")]


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
