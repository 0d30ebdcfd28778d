"""The seed clouds' stand-in APIs (tests/standin/api.py) refuse what the services refuse: unsigned or
foreign-key requests, unknown actions, deletes of objects something depends on; they throttle as the
services do. Driven through trainkit's own sweepers and SDKs, as the infra tests drive them."""

from __future__ import annotations

from types import SimpleNamespace

import pytest
from standin.api import running_api
from standin.cloud import Store

KEYS = {"alicloud": "ak", "tencentcloud": "tid", "huaweicloud": "hak", "huaweicloud-project": {"p0": "cn-north-4"}}
TAG = {"trainkit-cluster": "demo"}


@pytest.fixture
def api(tmp_path, monkeypatch):
    """(store, url): an Alibaba VPC with a vSwitch, behind the stand-in APIs; the keys in the environment."""
    for name, value in {"ALICLOUD_ACCESS_KEY": "ak", "ALICLOUD_SECRET_KEY": "sk", "TENCENTCLOUD_SECRET_ID": "tid",
                        "TENCENTCLOUD_SECRET_KEY": "tk", "HW_ACCESS_KEY": "hak", "HW_SECRET_KEY": "hsk",
                        "HW_PROJECT_ID": "p0"}.items():
        monkeypatch.setenv(name, value)
    store = Store(tmp_path / "store")
    with store.edit() as data:
        for seq, (rtype, attrs) in enumerate([("alicloud_vpc", {"id": "vpc-1", "tags": TAG}),
                                              ("alicloud_vswitch", {"id": "vsw-1", "vpc_id": "vpc-1", "tags": TAG})]):
            data["objects"][f"{rtype} {attrs['id']}"] = {"type": rtype, "attrs": attrs, "region": "cn-hangzhou",
                                                         "seq": seq}
    with running_api(store, KEYS) as url:
        yield store, url


def _cluster(url: str, region: str, keys: tuple[str, ...]):
    return SimpleNamespace(name="demo", spec=SimpleNamespace(region=region, endpoints={k: url for k in keys}))


def test_alibaba_finds_by_tag_and_refuses_a_vpc_delete_while_a_vswitch_is_in_it(api):
    from alibabacloud_tea_openapi.exceptions import ClientException

    from trainkit.clouds import alicloud_sweep as sweep

    store, url = api
    cluster = _cluster(url, "cn-hangzhou", ("tag", "vpc"))
    found = sweep.find(cluster)
    assert [(r["type"], r["id"], r["arn"].split(":")[2]) for r in found] == [("vswitch", "vsw-1", "vpc"),
                                                                             ("vpc", "vpc-1", "vpc")]
    assert sweep.find(_cluster(url, "cn-beijing", ("tag",))) == []  # another region's objects are not there
    with pytest.raises(ClientException) as err:
        sweep.delete(cluster, [r for r in found if r["type"] == "vpc"])
    assert err.value.code == "DependencyViolation.VSwitch" and len(store.objects()) == 2
    sweep.delete(cluster, found)
    assert store.objects() == {}


def test_a_foreign_key_or_an_unknown_action_is_refused_with_the_clouds_error(api, monkeypatch):
    from alibabacloud_tea_openapi.exceptions import ClientException
    from tencentcloud.common.exception.tencent_cloud_sdk_exception import TencentCloudSDKException

    from trainkit.clouds import alicloud_sweep, huaweicloud_sweep, tencentcloud_sweep

    store, url = api
    with pytest.raises(ClientException) as err:
        alicloud_sweep._Api(_cluster(url, "cn-hangzhou", ("ecs",)), "ecs", "2014-05-26").call("RunInstances", {})
    assert err.value.code == "InvalidAction.NotFound"
    with pytest.raises(TencentCloudSDKException) as err:
        tencentcloud_sweep._client(_cluster(url, "ap-guangzhou", ("cvm",)), "cvm", "2017-03-12").call_json(
            "DescribeInstances", {"Limit": 100, "Bogus": 1})
    assert err.value.code == "UnknownParameter"
    monkeypatch.setenv("HW_ACCESS_KEY", "someone-else")
    with pytest.raises(RuntimeError, match="HTTP 401.*APIGW.0301"):
        huaweicloud_sweep.find(_cluster(url, "cn-north-4", ("tms",)))
    monkeypatch.setenv("TENCENTCLOUD_SECRET_ID", "someone-else")
    with pytest.raises(TencentCloudSDKException) as err:
        tencentcloud_sweep.find(_cluster(url, "ap-guangzhou", ("tag",)))
    assert err.value.code == "AuthFailure.SecretIdNotFound"
    assert len(store.objects()) == 2


def test_throttling_is_answered_as_the_cloud_does_and_counted(api, monkeypatch):
    from trainkit.clouds import huaweicloud_sweep, sweep_common

    store, url = api
    monkeypatch.setattr(sweep_common.time, "sleep", lambda s: None)
    store.set_faults(throttle=sweep_common.THROTTLE_ATTEMPTS)
    with pytest.raises(RuntimeError, match="HTTP 429.*APIGW.0308"):
        huaweicloud_sweep.find(_cluster(url, "cn-north-4", ("tms",)))
    calls = store.read()["calls"]
    assert calls == [["throttled", "api", "POST /v2.0/resources/filter"]] * sweep_common.THROTTLE_ATTEMPTS
