"""Leftover sweep (`destroy` / `destroy --sweep`) for Alibaba, Tencent and Huawei.

The clouds' tag and product APIs cannot be reached here, so a local HTTP server on 127.0.0.1
(the `price_stub` fixture) plays them, answering with the response shapes from each cloud's API
reference; the official SDKs (or, for Huawei, the SDK core's request signer) reach it through the
cluster's endpoint overrides. The tests check what trainkit sends: the tag filter, a signature,
and the delete calls in dependency order.
"""

from __future__ import annotations

import json
from types import SimpleNamespace

import pytest

from trainkit import clouds


def _cluster(url: str, region: str, services: tuple[str, ...]):
    return SimpleNamespace(name="demo", spec=SimpleNamespace(region=region, endpoints={s: url for s in services}))


def _state_with_vpc(vpc_type: str, vpc_id: str) -> dict:
    """`terraform show -json` values: the VPC in a child module (the cluster module), a subnet beside it."""
    return {"root_module": {"resources": [], "child_modules": [{"address": "module.cluster", "resources": [
        {"address": "module.cluster.x.this", "type": vpc_type, "values": {"id": vpc_id}},
        {"address": "module.cluster.y.this", "type": vpc_type.replace("vpc", "subnet"), "values": {"id": "sub-s"}}]}]}}


# Where each resource of the in_network tests sits: one of each VPC-scoped type in the state's VPC, one
# in another VPC.
IN_STATE, ELSEWHERE = "vpc-state", "vpc-other"


def _vpc_of(rid: str) -> str:
    return IN_STATE if rid.endswith("-in") else ELSEWHERE


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


def tc_network_answer(req: dict) -> dict:
    """CVM DescribeInstances: {Response: {TotalCount, InstanceSet: [{InstanceId, VirtualPrivateCloud: {VpcId,
    SubnetId}}]}}; VPC DescribeSubnets: {Response: {TotalCount, SubnetSet: [{SubnetId, VpcId}]}}; CFS
    DescribeMountTargets: {Response: {NumberOfMountTargets, MountTargets: [{FileSystemId, VpcId, SubnetId}]}}.
    Anything else, or an id it does not know, gets the documented error shape."""
    action, body = req["headers"]["x-tc-action"], req["body"]
    known = {"ins-in", "ins-out", "subnet-in", "subnet-out", "cfs-in", "cfs-out"}
    if action == "DescribeInstances" and set(body) == {"InstanceIds", "Limit"} and set(body["InstanceIds"]) <= known:
        rows = [{"InstanceId": i, "InstanceState": "RUNNING",
                 "VirtualPrivateCloud": {"VpcId": _vpc_of(i), "SubnetId": "subnet-x", "AsVpcGateway": False}}
                for i in body["InstanceIds"]]
        return {"Response": {"TotalCount": len(rows), "InstanceSet": rows, "RequestId": "r"}}
    if action == "DescribeSubnets" and set(body) == {"SubnetIds", "Limit"} and set(body["SubnetIds"]) <= known:
        rows = [{"SubnetId": i, "VpcId": _vpc_of(i), "CidrBlock": "10.0.0.0/24"} for i in body["SubnetIds"]]
        return {"Response": {"TotalCount": len(rows), "SubnetSet": rows, "RequestId": "r"}}
    if action == "DescribeMountTargets" and set(body) == {"FileSystemId"} and body["FileSystemId"] in known:
        fs = body["FileSystemId"]
        rows = [{"FileSystemId": fs, "MountTargetId": f"mount-{fs}", "VpcId": _vpc_of(fs), "SubnetId": "subnet-x",
                 "NetworkInterface": "vpc", "LifeCycleState": "available"}]
        return {"Response": {"NumberOfMountTargets": 1, "MountTargets": rows, "RequestId": "r"}}
    return {"Response": {"Error": {"Code": "InvalidParameter", "Message": f"{action} {body}"}, "RequestId": "r"}}


def test_tencent_in_network_asks_where_each_vpc_scoped_resource_sits(price_stub, monkeypatch):
    from trainkit.clouds import tencentcloud_sweep as sweep

    monkeypatch.setenv("TENCENTCLOUD_SECRET_ID", "AKIDtest")
    monkeypatch.setenv("TENCENTCLOUD_SECRET_KEY", "sk")
    found = [{"type": t, "id": i, "resource": f"qcs::x:ap-guangzhou:uin/100:{t}/{i}"} for t, i in [
        ("instance", "ins-in"), ("instance", "ins-out"), ("disk", "disk-1"), ("file-system", "cfs-in"),
        ("file-system", "cfs-out"), ("security-group", "sg-1"), ("subnet", "subnet-in"), ("subnet", "subnet-out")]]
    with price_stub(tc_network_answer) as (url, seen):
        cluster = _cluster(url, "ap-guangzhou", ("cvm", "vpc", "cfs"))
        inside = sweep.in_network(cluster, found, _state_with_vpc("tencentcloud_vpc", IN_STATE))
        assert sweep.in_network(cluster, found, _state_with_vpc("tencentcloud_subnet", IN_STATE)) == []
    assert [r["id"] for r in inside] == ["ins-in", "cfs-in", "subnet-in"]
    # security groups are regional on Tencent, disks in no network: neither is asked about
    assert [(r["headers"]["x-tc-action"], r["body"]) for r in seen] == [
        ("DescribeInstances", {"InstanceIds": ["ins-in", "ins-out"], "Limit": 100}),
        ("DescribeMountTargets", {"FileSystemId": "cfs-in"}), ("DescribeMountTargets", {"FileSystemId": "cfs-out"}),
        ("DescribeSubnets", {"SubnetIds": ["subnet-in", "subnet-out"], "Limit": "100"})]
    assert all(r["headers"]["authorization"].startswith("TC3-HMAC-SHA256") for r in seen)


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


def _json_ids(params: dict, key: str) -> list | None:
    """A JSON-array id parameter (`InstanceIds='["i-1"]'`), or None when absent or not one."""
    try:
        ids = json.loads(params[key])
    except (KeyError, ValueError):
        return None
    return ids if isinstance(ids, list) and ids else None


def ali_network_answer(req: dict):
    """ECS DescribeInstances: {Instances: {Instance: [{InstanceId, VpcAttributes: {VpcId, VSwitchId}}]}};
    ECS DescribeSecurityGroups: {SecurityGroups: {SecurityGroup: [{SecurityGroupId, VpcId}]}}; VPC
    (2016-04-28) DescribeVSwitches: {VSwitches: {VSwitch: [{VSwitchId, VpcId}]}}. Anything else, or an id it
    does not know, gets HTTP 400 with the documented error body {Code, Message, RequestId}."""
    action, version, params = _ali_action(req), req["headers"].get("x-acs-version"), _ali_params(req)
    known = {"i-in", "i-out", "sg-in", "sg-out", "vsw-in", "vsw-out"}
    instances, groups = _json_ids(params, "InstanceIds"), _json_ids(params, "SecurityGroupIds")
    if (action, version) == ("DescribeInstances", "2014-05-26") and instances and set(instances) <= known:
        rows = [{"InstanceId": i, "Status": "Running", "InstanceNetworkType": "vpc",
                 "VpcAttributes": {"VpcId": _vpc_of(i), "VSwitchId": "vsw-x", "PrivateIpAddress": {"IpAddress": []}}}
                for i in instances]
        return {"RequestId": "r", "TotalCount": len(rows), "Instances": {"Instance": rows}}
    if (action, version) == ("DescribeSecurityGroups", "2014-05-26") and groups and set(groups) <= known:
        rows = [{"SecurityGroupId": i, "VpcId": _vpc_of(i), "SecurityGroupType": "normal"} for i in groups]
        return {"RequestId": "r", "TotalCount": len(rows), "RegionId": "cn-hangzhou",
                "SecurityGroups": {"SecurityGroup": rows}}
    if (action, version) == ("DescribeVSwitches", "2016-04-28") and params.get("VSwitchId") in known:
        rows = [{"VSwitchId": params["VSwitchId"], "VpcId": _vpc_of(params["VSwitchId"]), "Status": "Available"}]
        return {"RequestId": "r", "TotalCount": 1, "PageNumber": 1, "PageSize": 10, "VSwitches": {"VSwitch": rows}}
    return 400, {"RequestId": "r", "Code": "InvalidParameter", "Message": f"{action} {version} {params}"}


def test_alibaba_in_network_asks_where_each_vpc_scoped_resource_sits(price_stub, ali_env):
    from trainkit.clouds import alicloud_sweep as sweep

    found = [{"type": t, "id": i, "arn": f"arn:acs:x:cn-hangzhou:123:{t}/{i}"} for t, i in [
        ("instance", "i-in"), ("instance", "i-out"), ("disk", "d-1"), ("file-system", "nas-1"),
        ("security-group", "sg-in"), ("security-group", "sg-out"), ("vswitch", "vsw-in"), ("vswitch", "vsw-out")]]
    with price_stub(ali_network_answer) as (url, seen):
        cluster = _cluster(url, "cn-hangzhou", ("ecs", "vpc"))
        inside = sweep.in_network(cluster, found, _state_with_vpc("alicloud_vpc", IN_STATE))
        assert sweep.in_network(cluster, found, _state_with_vpc("alicloud_vswitch", IN_STATE)) == []
    assert [r["id"] for r in inside] == ["i-in", "sg-in", "vsw-in"]
    # NAS file systems are in no VPC themselves, disks in no network: neither is asked about
    asked = [(_ali_action(r), {k: v for k, v in _ali_params(r).items() if k.endswith(("Ids", "Id"))}) for r in seen]
    assert asked == [("DescribeInstances", {"InstanceIds": '["i-in", "i-out"]', "RegionId": "cn-hangzhou"}),
                     ("DescribeSecurityGroups", {"SecurityGroupIds": '["sg-in", "sg-out"]', "RegionId": "cn-hangzhou"}),
                     ("DescribeVSwitches", {"VSwitchId": "vsw-in", "RegionId": "cn-hangzhou"}),
                     ("DescribeVSwitches", {"VSwitchId": "vsw-out", "RegionId": "cn-hangzhou"})]
    assert all(_ali_params(r)["MaxResults"] == "100" for r in seen[:2])
    assert all("authorization" in r["headers"] for r in seen)


NAS_FS = "1ca404a666"  # the state's NAS file system; its mount targets: the state's, and one it lost
MT_HELD, MT_LOST = f"{NAS_FS}-wxa89.cn-hangzhou.nas.aliyuncs.com", f"{NAS_FS}-qtz12.cn-hangzhou.nas.aliyuncs.com"


def _state_with_nas() -> dict:
    """`terraform show -json` values: the file system and its tracked mount target, whose id the provider
    writes "<file_system_id>:<mount_target_domain>" (alicloud_nas_mount_target docs, "Import")."""
    return {"root_module": {"resources": [], "child_modules": [{"address": "module.cluster", "resources": [
        {"address": "module.cluster.alicloud_nas_file_system.this[0]", "type": "alicloud_nas_file_system",
         "values": {"id": NAS_FS}},
        {"address": "module.cluster.alicloud_nas_mount_target.this[0]", "type": "alicloud_nas_mount_target",
         "values": {"id": f"{NAS_FS}:{MT_HELD}", "file_system_id": NAS_FS, "mount_target_domain": MT_HELD}}]}]}}


def ali_nas_stand_in():
    """NAS (2017-06-26) for NAS_FS: DescribeMountTargets pages {TotalCount, PageSize, PageNumber, MountTargets:
    {MountTarget: [{MountTargetDomain, Status, NetworkType, VpcId, VswId, AccessGroup}]}}; DeleteMountTarget
    {RequestId}, after which the deleted one is listed once more (the delete completes asynchronously), then
    gone. Another action or version, an unknown file system: HTTP 400 InvalidParameter; an unknown mount target
    domain: 400 InvalidParam.MountTargetDomain (the documented error body {Code, Message, RequestId})."""
    live, deleted = [MT_HELD, MT_LOST], []

    def answer(req: dict):
        action, version, params = _ali_action(req), req["headers"].get("x-acs-version"), _ali_params(req)
        if version == "2017-06-26" and params.get("FileSystemId") == NAS_FS:
            if action == "DescribeMountTargets" and {"PageSize", "PageNumber"} <= set(params):
                size, number = int(params["PageSize"]), int(params["PageNumber"])
                rows = [{"MountTargetDomain": d, "Status": "Active", "NetworkType": "Vpc", "VpcId": "vpc-1",
                         "VswId": "vsw-1", "AccessGroup": "demo"} for d in live]
                for d in deleted:  # listed this once more, gone from the next answer on
                    live.remove(d)
                deleted.clear()
                return {"RequestId": "r", "TotalCount": len(rows), "PageSize": size, "PageNumber": number,
                        "MountTargets": {"MountTarget": rows[(number - 1) * size:number * size]}}
            if action == "DeleteMountTarget" and params.get("MountTargetDomain") in set(live) - set(deleted):
                deleted.append(params["MountTargetDomain"])
                return {"RequestId": "r"}
            if action == "DeleteMountTarget":
                return 400, {"RequestId": "r", "Code": "InvalidParam.MountTargetDomain",
                             "Message": "The specified mount target domain does not exist."}
        return 400, {"RequestId": "r", "Code": "InvalidParameter", "Message": f"{action} {version} {params}"}

    return answer, live


def test_alibaba_untracked_parts_finds_the_lost_nas_mount_target_and_delete_waits_it_out(
        price_stub, ali_env, monkeypatch):
    from trainkit.clouds import alicloud_sweep as sweep
    from trainkit.clouds import sweep_common

    monkeypatch.setattr(sweep_common, "POLL_S", 0)
    answer, live = ali_nas_stand_in()
    with price_stub(answer) as (url, seen):
        cluster = _cluster(url, "cn-hangzhou", ("nas",))
        parts = sweep.untracked_parts(cluster, _state_with_nas())
        assert sweep.untracked_parts(cluster, _state_with_vpc("alicloud_vpc", IN_STATE)) == []  # no file system
        assert parts == [{"type": "mount-target", "id": MT_LOST, "arn": None, "file_system": NAS_FS}]
        asked = len(seen)
        sweep.delete(cluster, parts)
    assert live == [MT_HELD]
    calls = [(_ali_action(r), {k: v for k, v in _ali_params(r).items() if k in ("FileSystemId", "MountTargetDomain")})
             for r in seen]
    assert calls[:asked] == [("DescribeMountTargets", {"FileSystemId": NAS_FS})]
    # the delete, then DescribeMountTargets until the file system no longer lists it (still there once)
    assert calls[asked:] == [("DeleteMountTarget", {"FileSystemId": NAS_FS, "MountTargetDomain": MT_LOST}),
                             ("DescribeMountTargets", {"FileSystemId": NAS_FS}),
                             ("DescribeMountTargets", {"FileSystemId": NAS_FS})]
    assert all(_ali_params(r)["PageSize"] == "100" for r in seen if _ali_action(r) == "DescribeMountTargets")
    assert all(r["headers"]["x-acs-version"] == "2017-06-26" and "authorization" in r["headers"] for r in seen)
    assert "secret-not-printed" not in str(seen)


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
        cluster = _cluster(url, "cn-north-4", ("tms", "ecs", "evs", "sfs_turbo", "vpc", "kps"))
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


HW_DETAILS = {  # GET path -> the documented answer, with the VPC id where each API puts it
    "/v1/p0/cloudservers/{}": lambda i: {"server": {"id": i, "status": "ACTIVE",
                                                    "metadata": {"vpc_id": _vpc_of(i), "charging_mode": "0"}}},
    "/v2/p0/nat_gateways/{}": lambda i: {"nat_gateway": {"id": i, "router_id": _vpc_of(i), "spec": "1",
                                                         "internal_network_id": "net-x", "status": "ACTIVE"}},
    "/v1/p0/sfs-turbo/shares/{}": lambda i: {"id": i, "vpc_id": _vpc_of(i), "subnet_id": "net-x", "status": "200"},
    "/v1/p0/subnets/{}": lambda i: {"subnet": {"id": i, "vpc_id": _vpc_of(i), "status": "ACTIVE"}},
}


def hw_network_answer(req: dict):
    """ECS ShowServer, NAT gateway details, SFS Turbo ShowShare, VPC ShowSubnet (HW_DETAILS); anything else,
    or an id it does not know, gets 404 with the documented error body {error_code, error_msg}."""
    for path, answer in HW_DETAILS.items():
        for rid in ("srv-in", "srv-out", "nat-in", "nat-out", "fs-in", "fs-out", "sub-in", "sub-out"):
            if req["method"] == "GET" and req["path"] == path.format(rid):
                return answer(rid)
    return 404, {"error_code": "Common.0404", "error_msg": f"{req['method']} {req['path']}"}


def test_huawei_in_network_asks_where_each_vpc_scoped_resource_sits(price_stub, hw_env):
    from trainkit.clouds import huaweicloud_sweep as sweep

    found = [{"type": t, "id": i, "name": f"demo-{i}", "resource_type": "x"} for t, i in [
        ("instance", "srv-in"), ("instance", "srv-out"), ("nat-gateway", "nat-in"), ("nat-gateway", "nat-out"),
        ("file-system", "fs-in"), ("file-system", "fs-out"), ("disk", "vol-1"), ("security-group", "sg-1"),
        ("subnet", "sub-in"), ("subnet", "sub-out")]]
    with price_stub(hw_network_answer) as (url, seen):
        cluster = _cluster(url, "cn-north-4", ("ecs", "nat", "sfs_turbo", "vpc"))
        inside = sweep.in_network(cluster, found, _state_with_vpc("huaweicloud_vpc", IN_STATE))
        assert sweep.in_network(cluster, found, _state_with_vpc("huaweicloud_vpc_subnet", IN_STATE)) == []
    assert [r["id"] for r in inside] == ["srv-in", "nat-in", "fs-in", "sub-in"]
    # Huawei security groups are not in a VPC, disks in no network: neither is asked about
    assert [(r["method"], r["path"]) for r in seen] == [
        ("GET", "/v1/p0/cloudservers/srv-in"), ("GET", "/v1/p0/cloudservers/srv-out"),
        ("GET", "/v2/p0/nat_gateways/nat-in"), ("GET", "/v2/p0/nat_gateways/nat-out"),
        ("GET", "/v1/p0/sfs-turbo/shares/fs-in"), ("GET", "/v1/p0/sfs-turbo/shares/fs-out"),
        ("GET", "/v1/p0/subnets/sub-in"), ("GET", "/v1/p0/subnets/sub-out")]
    assert all(r["headers"]["authorization"].startswith("SDK-HMAC-SHA256") for r in seen)


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
        cluster = _cluster(url, "cn-north-4", ("tms", "ecs", "evs", "sfs_turbo", "vpc", "kps"))
        cluster.spec.cloud = "huaweicloud"
        cluster.room = clouds.get("huaweicloud")   # a Cluster carries its room
        asked = []
        out = teardown._leftovers(cluster, sweep=True, confirm=lambda found: asked.append(found) or True)
    assert [r["id"] for r in asked[0]][:2] == ["srv-1", "fs-1"]
    assert [r["id"] for r in out["swept"]] == [r["id"] for r in asked[0]] and out["leftovers"] == []
    assert "0 left" in out["leftover_check"]
