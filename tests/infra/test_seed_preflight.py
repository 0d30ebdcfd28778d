"""The placement preflight on the three seed clouds (tests/infra/test_aws_failover.py is AWS's):
trainkit asks each cloud's own offers API (Alibaba ECS DescribeAvailableResource, Tencent CVM
DescribeZoneInstanceConfigInfos, Huawei ECS ListFlavorSellPolicies) through the spec's
`endpoints:`, answered by the stand-in APIs (tests/standin/api_offers.py) from the same stand-in
cloud the provider stand-ins create in.

Per cloud, the example's type in two zones of its region: sold out in the first (the store's
`capacity` fault, which the provider stand-in also refuses a create for), offered in the second
(the `offers` fault). The plan review's placement rows say so and choose the second; apply goes
straight there: the first is skipped, no attempt is refused (a refused attempt would create the
network in the first zone and destroy it again), and every node runs in the second zone.
"""

from __future__ import annotations

import json

import pytest
import yaml
from seed_clouds import CLOUDS, trainkit, write_spec

pytestmark = pytest.mark.usefixtures("tf_cli_config")

NODES = {"alicloud": "alicloud_instance", "tencentcloud": "tencentcloud_instance",
         "huaweicloud": "huaweicloud_compute_instance"}
# Two zones of each example's region (examples/clusters/<cloud>.yaml): the example's own first.
ZONES = {"alicloud": ("cn-hangzhou-i", "cn-hangzhou-j"), "tencentcloud": ("ap-guangzhou-4", "ap-guangzhou-3"),
         "huaweicloud": ("cn-north-4a", "cn-north-4b")}
ASKED = {"alicloud": "DescribeAvailableResource", "tencentcloud": "DescribeZoneInstanceConfigInfos",
         "huaweicloud": "cloudservers/flavor-sell-policies"}


def _asked(calls: list[list[str]], cloud: str) -> int:
    return sum(1 for c in calls if c[0] == "api" and c[2] == cloud and ASKED[cloud] in c[1])


@pytest.mark.parametrize("cloud", CLOUDS)
def test_sold_out_zone_is_skipped_before_apply(repo, tmp_path, seed_cloud, cloud):
    sold_out, offered = ZONES[cloud]
    spec = write_spec(repo, tmp_path, cloud, zone=[sold_out, offered])
    example = yaml.safe_load(spec.read_text())
    kind, billing = example["instance"]["type"], "spot" if example.get("spot", {}).get("enabled") else "on_demand"
    seed_cloud.set_faults(capacity=[{"zone": sold_out, "type": kind}], offers={offered: [kind]})
    ws = tmp_path / "ws"

    review = json.loads(trainkit("plan", spec, "--workdir", ws, "--format", "json").stdout)
    rows = review["placement"]["candidates"]
    assert [(r["zone"], r["type"], r["billing"], r["status"]) for r in rows] == [
        (sold_out, kind, billing, "sold out"), (offered, kind, billing, "available")], rows
    assert review["placement"]["chosen"] == {"zone": offered, "type": kind, "billing": billing}
    text = trainkit("plan", spec, "--workdir", ws).stdout
    label = "spot" if billing == "spot" else "on-demand"
    assert f"-> 2. {kind} in {offered} ({label}): available" in text, text
    assert _asked(seed_cloud.read()["calls"], cloud) >= 2   # each plan asked the cloud's offers API

    before = len(seed_cloud.read()["calls"])
    applied = trainkit("apply", spec, "--workdir", ws, "--no-provision", "--yes")
    assert f"preflight: {kind} in {sold_out} ({label}): sold out; skipped" in applied.stderr, applied.stderr
    assert f"placement 1/1: {kind} in {offered}" in applied.stderr and "no capacity" not in applied.stderr
    calls = seed_cloud.read()["calls"][before:]
    assert _asked(calls, cloud) >= 1
    assert not [c for c in calls if c[0] in ("delete", "refused")], calls   # no attempt refused or rolled back
    nodes = seed_cloud.objects(NODES[cloud])
    assert len(nodes) == 2 and {a.get("availability_zone") for a in nodes.values()} == {offered}, nodes
