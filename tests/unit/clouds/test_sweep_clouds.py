"""Leftover sweep (`destroy` / `destroy --sweep`) for Alibaba, Tencent and Huawei.

The clouds' tag and product APIs cannot be reached here, so a local HTTP server on 127.0.0.1
(the `price_stub` fixture) plays them, answering with the response shapes from each cloud's API
reference; the official SDKs (or, for Huawei, the SDK core's request signer) reach it through the
cluster's endpoint overrides. The tests check what trainkit sends: the tag filter, a signature,
and the delete calls in dependency order.
"""

from __future__ import annotations

from types import SimpleNamespace

import pytest


def _cluster(url: str, region: str, services: tuple[str, ...]):
    return SimpleNamespace(name="demo", spec=SimpleNamespace(region=region, endpoints={s: url for s in services}))


# --- Tencent ---------------------------------------------------------------------------------

TC_RESOURCES = ["qcs::cvm:ap-guangzhou:uin/100:instance/ins-1", "qcs::vpc:ap-guangzhou:uin/100:vpc/vpc-1",
                "qcs::vpc:ap-guangzhou:uin/100:subnet/subnet-1", "qcs::cvm:ap-guangzhou:uin/100:sg/sg-1",
                "qcs::cfs:ap-guangzhou:uin/100:filesystem/cfs-1", "qcs::cvm:ap-guangzhou:uin/100:volume/disk-1",
                "qcs::clb:ap-guangzhou:uin/100:clb/lb-1"]


def tc_answer(req: dict) -> dict:
    """Tag GetResources: {Response: {ResourceTagMappingList: [{Resource, Tags}], PaginationToken}}."""
    action = req["headers"]["x-tc-action"]
    if action == "GetResources":
        rows = [{"Resource": r, "Tags": [{"TagKey": "trainkit-cluster", "TagValue": "demo"}]} for r in TC_RESOURCES]
        return {"Response": {"ResourceTagMappingList": rows, "PaginationToken": "", "RequestId": "r"}}
    if action == "DescribeInstances":
        return {"Response": {"TotalCount": 0, "InstanceSet": [], "RequestId": "r"}}
    return {"Response": {"RequestId": "r"}}


def test_tencent_find_asks_the_tag_api_signed_and_with_the_tag_filter(price_stub, monkeypatch):
    from trainkit.clouds import tencentcloud_sweep as sweep

    monkeypatch.setenv("TENCENTCLOUD_SECRET_ID", "AKIDtest")
    monkeypatch.setenv("TENCENTCLOUD_SECRET_KEY", "secret-not-printed")
    with price_stub(tc_answer) as (url, seen):
        found = sweep.find(_cluster(url, "ap-guangzhou", ("tag",)))
    assert [(r["type"], r["id"]) for r in found] == [
        ("instance", "ins-1"), ("disk", "disk-1"), ("file-system", "cfs-1"), ("security-group", "sg-1"),
        ("subnet", "subnet-1"), ("vpc", "vpc-1"), ("clb", "lb-1")]
    assert seen[0]["body"]["TagFilters"] == [{"TagKey": "trainkit-cluster", "TagValue": ["demo"]}]
    assert seen[0]["headers"]["authorization"].startswith("TC3-HMAC-SHA256")
    assert "secret-not-printed" not in str(seen)


def test_tencent_delete_goes_in_dependency_order_and_reports_what_it_cannot(price_stub, monkeypatch, capsys):
    from trainkit.clouds import tencentcloud_sweep as sweep

    monkeypatch.setenv("TENCENTCLOUD_SECRET_ID", "AKIDtest")
    monkeypatch.setenv("TENCENTCLOUD_SECRET_KEY", "sk")
    with price_stub(tc_answer) as (url, seen):
        cluster = _cluster(url, "ap-guangzhou", ("tag", "cvm", "cbs", "cfs", "vpc"))
        sweep.delete(cluster, sweep.find(cluster))
    calls = [(r["headers"]["x-tc-action"], r["body"]) for r in seen[1:]]
    assert calls == [("TerminateInstances", {"InstanceIds": ["ins-1"]}),
                     ("DescribeInstances", {"InstanceIds": ["ins-1"]}),
                     ("TerminateDisks", {"DiskIds": ["disk-1"]}), ("DeleteCfsFileSystem", {"FileSystemId": "cfs-1"}),
                     ("DeleteSecurityGroup", {"SecurityGroupId": "sg-1"}), ("DeleteSubnet", {"SubnetId": "subnet-1"}),
                     ("DeleteVpc", {"VpcId": "vpc-1"})]
    assert "cannot delete clb lb-1" in capsys.readouterr().err


def test_tencent_delete_treats_not_found_as_gone_but_raises_other_errors(price_stub, monkeypatch):
    from tencentcloud.common.exception.tencent_cloud_sdk_exception import TencentCloudSDKException

    from trainkit.clouds import tencentcloud_sweep as sweep

    monkeypatch.setenv("TENCENTCLOUD_SECRET_ID", "AKIDtest")
    monkeypatch.setenv("TENCENTCLOUD_SECRET_KEY", "sk")
    code = {"TerminateDisks": "InvalidDisk.NotFound", "DeleteVpc": "ResourceInUse"}

    def answer(req):
        action = req["headers"]["x-tc-action"]
        if action in code:  # the documented error shape: {Response: {Error: {Code, Message}, RequestId}}
            return {"Response": {"Error": {"Code": code[action], "Message": "x"}, "RequestId": "r"}}
        return tc_answer(req)

    found = [{"type": "disk", "id": "disk-1", "resource": "r"}, {"type": "vpc", "id": "vpc-1", "resource": "r"}]
    with price_stub(answer) as (url, seen), pytest.raises(TencentCloudSDKException, match="ResourceInUse"):
        sweep.delete(_cluster(url, "ap-guangzhou", ("cbs", "vpc")), found)
    assert [r["headers"]["x-tc-action"] for r in seen] == ["TerminateDisks", "DeleteVpc"]


# --- Alibaba ---------------------------------------------------------------------------------

ALI_ARNS = ["arn:acs:ecs:cn-hangzhou:123:instance/i-1", "arn:acs:vpc:cn-hangzhou:123:vpc/vpc-1",
            "arn:acs:vpc:cn-hangzhou:123:vswitch/vsw-1", "arn:acs:ecs:cn-hangzhou:123:securitygroup/sg-1",
            "arn:acs:nas:cn-hangzhou:123:filesystem/nas-1", "arn:acs:ecs:cn-hangzhou:123:disk/d-1",
            "arn:acs:ecs:cn-hangzhou:123:keypair/demo-key", "arn:acs:slb:cn-hangzhou:123:instance/lb-1"]


def _ali_action(req: dict) -> str:
    return req["query"].get("Action") or req["headers"].get("x-acs-action")


def ali_answer(req: dict) -> dict:
    """Tag ListTagResources: {NextToken, RequestId, TagResources: [{ResourceARN, Tags}]}."""
    action = _ali_action(req)
    if action == "ListTagResources":
        rows = [{"ResourceARN": a, "Tags": [{"Key": "trainkit-cluster", "Value": "demo"}]} for a in ALI_ARNS[:-1]]
        return {"RequestId": "r", "NextToken": "", "TagResources": rows}
    if action == "DescribeInstances":
        return {"RequestId": "r", "TotalCount": 0, "Instances": {"Instance": []}}
    return {"RequestId": "r"}


def _ali_params(req: dict) -> dict:
    return {**req["query"], **(req["body"] if isinstance(req["body"], dict) else {})}


@pytest.fixture
def ali_env(monkeypatch):
    monkeypatch.setenv("ALIBABA_CLOUD_ACCESS_KEY_ID", "LTAItest")
    monkeypatch.setenv("ALIBABA_CLOUD_ACCESS_KEY_SECRET", "secret-not-printed")


def test_alibaba_find_asks_the_tag_api_signed_and_with_the_tag_filter(price_stub, ali_env):
    from trainkit.clouds import alicloud_sweep as sweep

    with price_stub(ali_answer) as (url, seen):
        found = sweep.find(_cluster(url, "cn-hangzhou", ("tag",)))
    assert [(r["type"], r["id"]) for r in found] == [
        ("instance", "i-1"), ("disk", "d-1"), ("file-system", "nas-1"), ("security-group", "sg-1"),
        ("vswitch", "vsw-1"), ("vpc", "vpc-1"), ("key-pair", "demo-key")]
    params = _ali_params(seen[0])
    assert params["Tags"] == '{"trainkit-cluster": "demo"}'
    assert "Signature" in params or "authorization" in seen[0]["headers"]
    assert "secret-not-printed" not in str(seen)


def test_alibaba_delete_goes_in_dependency_order(price_stub, ali_env):
    from trainkit.clouds import alicloud_sweep as sweep

    with price_stub(ali_answer) as (url, seen):
        cluster = _cluster(url, "cn-hangzhou", ("tag", "ecs", "nas", "vpc"))
        sweep.delete(cluster, sweep.find(cluster))
    calls = [_ali_action(r) for r in seen[1:]]
    assert calls == ["DeleteInstances", "DescribeInstances", "DeleteDisk", "DeleteFileSystem", "DeleteSecurityGroup",
                     "DeleteVSwitch", "DeleteVpc", "DeleteKeyPairs"]
    assert _ali_params(seen[1])["InstanceId.1"] == "i-1" and _ali_params(seen[1])["Force"] == "true"
    assert _ali_params(seen[-1])["KeyPairNames"] == '["demo-key"]'


# --- Huawei ----------------------------------------------------------------------------------

HW_ROWS = [("ecs:cloudservers", "srv-1"), ("vpc:vpcs", "vpc-1"), ("vpc:subnets", "sub-1"),
           ("vpc:securityGroups", "sg-1"), ("sfs-turbo:sfs-turbos", "fs-1"), ("evs:volumes", "vol-1"),
           ("kps:keypairs", "kp-1"), ("dns:zones", "zone-1")]


def hw_answer(req: dict) -> dict:
    """TMS ListResource: {resources: [{resource_id, resource_name, resource_type, project_id, tags}],
    total_count}; ECS batch delete: {job_id}; ECS job: {status}; VPC subnet: {subnet: {vpc_id}}."""
    path = req["path"]
    if path == "/v2.0/resources/filter":
        rows = [{"resource_id": rid, "resource_name": f"demo-{rid}", "resource_type": t, "project_id": "p0",
                 "tags": [{"key": "trainkit-cluster", "value": "demo"}]} for t, rid in HW_ROWS]
        return {"resources": rows, "total_count": len(rows)}
    if path.endswith("/cloudservers/delete"):
        return {"job_id": "job-1"}
    if "/jobs/" in path:
        return {"job_id": "job-1", "status": "SUCCESS"}
    if path.endswith("/subnets/sub-1") and req["method"] == "GET":
        return {"subnet": {"id": "sub-1", "vpc_id": "vpc-1"}}
    return {}


@pytest.fixture
def hw_env(monkeypatch):
    """Huawei's credentials; and the stand-in also answers DELETE (the shared stub serves GET/POST)."""
    import http.server

    monkeypatch.setattr(http.server.BaseHTTPRequestHandler, "do_DELETE", lambda self: self._serve(), raising=False)
    for k, v in {"HW_ACCESS_KEY": "AKtest", "HW_SECRET_KEY": "secret-not-printed", "HW_PROJECT_ID": "p0"}.items():
        monkeypatch.setenv(k, v)


def test_huawei_find_asks_tms_signed_and_with_the_tag_filter(price_stub, hw_env):
    from trainkit.clouds import huaweicloud_sweep as sweep

    with price_stub(hw_answer) as (url, seen):
        found = sweep.find(_cluster(url, "cn-north-4", ("tms",)))
    assert [(r["type"], r["id"]) for r in found] == [
        ("instance", "srv-1"), ("file-system", "fs-1"), ("disk", "vol-1"), ("security-group", "sg-1"),
        ("subnet", "sub-1"), ("vpc", "vpc-1"), ("key-pair", "kp-1"), ("dns:zones", "zone-1")]
    body = seen[0]["body"]
    assert body["tags"] == [{"key": "trainkit-cluster", "values": ["demo"]}] and body["project_id"] == "p0"
    assert seen[0]["headers"]["authorization"].startswith("SDK-HMAC-SHA256")
    assert "secret-not-printed" not in str(seen)


def test_huawei_delete_goes_in_dependency_order_and_reports_what_it_cannot(price_stub, hw_env, capsys):
    from trainkit.clouds import huaweicloud_sweep as sweep

    with price_stub(hw_answer) as (url, seen):
        cluster = _cluster(url, "cn-north-4", ("tms", "ecs", "evs", "sfs-turbo", "vpc", "kps"))
        sweep.delete(cluster, sweep.find(cluster))
    calls = [(r["method"], r["path"]) for r in seen[1:]]
    assert calls == [("POST", "/v1/p0/cloudservers/delete"), ("GET", "/v1/p0/jobs/job-1"),
                     ("DELETE", "/v1/p0/sfs-turbo/shares/fs-1"), ("DELETE", "/v2/p0/cloudvolumes/vol-1"),
                     ("DELETE", "/v1/p0/security-groups/sg-1"), ("GET", "/v1/p0/subnets/sub-1"),
                     ("DELETE", "/v1/p0/vpcs/vpc-1/subnets/sub-1"), ("DELETE", "/v1/p0/vpcs/vpc-1"),
                     ("DELETE", "/v3/p0/keypairs/demo-kp-1")]
    assert seen[1]["body"]["servers"] == [{"id": "srv-1"}] and seen[1]["body"]["delete_volume"] is True
    assert all(r["headers"]["authorization"].startswith("SDK-HMAC-SHA256") for r in seen)
    assert "cannot delete dns:zones zone-1" in capsys.readouterr().err


# --- through destroy's leftover check ---------------------------------------------------------

def test_destroy_leftover_check_uses_the_room_sweeper_and_sweeps_after_confirmation(price_stub, hw_env):
    """teardown._leftovers: the Huawei room names its sweeper; --sweep deletes, then asks again."""
    from trainkit.cluster import teardown

    state = {"deleted": False}

    def answer(req):
        if req["method"] == "DELETE":
            state["deleted"] = True
        if req["path"] == "/v2.0/resources/filter" and state["deleted"]:
            return {"resources": [], "total_count": 0}
        return hw_answer(req)

    with price_stub(answer) as (url, seen):
        cluster = _cluster(url, "cn-north-4", ("tms", "ecs", "evs", "sfs-turbo", "vpc", "kps"))
        cluster.spec.cloud = "huaweicloud"
        asked = []
        out = teardown._leftovers(cluster, sweep=True, confirm=lambda found: asked.append(found) or True)
    assert [r["id"] for r in asked[0]][:2] == ["srv-1", "fs-1"]
    assert [r["id"] for r in out["swept"]] == [r["id"] for r in asked[0]] and out["leftovers"] == []
    assert "0 left" in out["leftover_check"]
