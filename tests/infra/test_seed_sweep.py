"""A create whose answer was lost, on the three seed clouds: the stand-in cloud carries the create out
and the provider reports a timeout (Store.set_faults(lose=...), tests/standin/cloud.py), so the cloud
holds a tagged object the state does not. trainkit's own leftover sweep (trainkit/clouds/<cloud>_sweep.py)
finds it through the clouds' tag APIs and deletes it through their product APIs, here the stand-in APIs
on the same store (tests/standin/api.py). The AWS version is test_aws_lost_response.py.

Two kinds per cloud:
- in the network (an Alibaba vSwitch, a Tencent or Huawei subnet): it sits in the VPC the state holds,
  whose delete the cloud refuses while it is there, so a plain `destroy` deletes it first, and leaves
  nothing;
- outside it (a data disk): a plain `destroy` deletes what the state holds, names the copy and fails;
  `destroy --sweep` deletes it, and leaves nothing, through throttled calls it retries.
"""

from __future__ import annotations

import json

import pytest
from seed_clouds import CLOUDS, trainkit, write_spec

from trainkit import errors

pytestmark = pytest.mark.usefixtures("tf_cli_config")

IN_NETWORK = {"alicloud": "alicloud_vswitch", "tencentcloud": "tencentcloud_subnet",
              "huaweicloud": "huaweicloud_vpc_subnet"}
OUTSIDE = {"alicloud": "alicloud_ecs_disk", "tencentcloud": "tencentcloud_cbs_storage",
           "huaweicloud": "huaweicloud_evs_volume"}
# How the sweepers name each (trainkit/clouds/<cloud>_sweep.py TYPES)
SWEPT_AS = {"alicloud_vswitch": "vswitch", "tencentcloud_subnet": "subnet", "huaweicloud_vpc_subnet": "subnet",
            "alicloud_ecs_disk": "disk", "tencentcloud_cbs_storage": "disk", "huaweicloud_evs_volume": "disk"}


def _lost_copy(seed_cloud, ws, rtype: str) -> str:
    """The id of the one object of `rtype` the cloud holds and the state does not."""
    state = json.loads((ws / "terraform" / "terraform.tfstate").read_text())
    tracked = {i["attributes"]["id"] for r in state["resources"] if r["type"] == rtype for i in r["instances"]}
    copies = set(seed_cloud.objects(rtype)) - tracked
    assert len(copies) == 1, (copies, tracked)
    return copies.pop()


def _apply_losing(repo, tmp_path, seed_cloud, cloud: str, rtype: str):
    """(spec, workspace, id of the lost copy): an apply whose create of one `rtype` lost its answer."""
    spec, ws = write_spec(repo, tmp_path, cloud), tmp_path / "ws"
    seed_cloud.set_faults(lose={rtype: 1})
    applied = trainkit("apply", spec, "--workdir", ws, "--no-provision", "--yes", check_rc=None)
    assert applied.returncode != 0 and "Traceback" not in applied.stderr, applied.stderr
    assert seed_cloud.read()["faults"]["lose"][rtype] == 0, applied.stderr  # the fault was used
    return spec, ws, _lost_copy(seed_cloud, ws, rtype)


@pytest.mark.parametrize("cloud", CLOUDS)
def test_a_lost_copy_in_the_network_is_deleted_before_terraform_destroy(repo, tmp_path, seed_cloud, cloud):
    rtype = IN_NETWORK[cloud]
    spec, ws, copy = _apply_losing(repo, tmp_path, seed_cloud, cloud, rtype)

    plain = trainkit("destroy", spec, "--workdir", ws, "--yes")
    assert "in the cluster's network that the state does not hold" in plain.stderr, plain.stderr
    assert f"{SWEPT_AS[rtype]} {copy}" in plain.stderr
    assert seed_cloud.objects() == {}
    deleted = [c for c in seed_cloud.read()["calls"] if c[0] == "delete" and c[2] == copy]
    assert deleted == [["delete", rtype, copy]]  # once, by the sweep, before terraform's DeleteVpc


@pytest.mark.parametrize("cloud", CLOUDS)
def test_a_lost_copy_outside_the_network_is_named_then_swept(repo, tmp_path, seed_cloud, cloud):
    rtype = OUTSIDE[cloud]
    spec, ws, copy = _apply_losing(repo, tmp_path, seed_cloud, cloud, rtype)

    plain = trainkit("destroy", spec, "--workdir", ws, "--yes", check_rc=errors.DESTROY)
    assert f"{SWEPT_AS[rtype]} {copy}" in plain.stderr and "--sweep" in plain.stderr, plain.stderr
    assert "Traceback" not in plain.stderr
    assert list(seed_cloud.objects()) == [f"{rtype} {copy}"]  # all the state held is gone; the copy is named

    # The clouds throttle a burst of calls; the sweepers retry that (sweep_common.retry_throttled), as the
    # SDKs do not. The state is empty: only the sweep's API calls meet the fault.
    seed_cloud.set_faults(throttle=2)
    swept = trainkit("destroy", spec, "--workdir", ws, "--yes", "--sweep")
    assert copy in swept.stdout + swept.stderr
    assert seed_cloud.objects() == {}
    assert [c[:2] for c in seed_cloud.read()["calls"] if c[0] == "throttled"] == [["throttled", "api"]] * 2
