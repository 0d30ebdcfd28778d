"""Capacity and quota refusals: each cloud room reads its documented error codes out of the
provider's text (one row per code, the text shaped as each provider prints it), and
trainkit.clouds.capacity turns the reading into one message naming zone, type and what to try."""

from __future__ import annotations

import pytest

from trainkit import errors
from trainkit.clouds import capacity, get
from trainkit.clouds.base import CapacityProblem

AWS_ICE = ("Error: creating EC2 Instance: operation error EC2: RunInstances, https response error StatusCode: "
           "500, RequestID: x, api error InsufficientInstanceCapacity: We currently do not have sufficient "
           "p4d.24xlarge capacity in the Availability Zone you requested (us-east-1c). Our system will be "
           "working on provisioning additional capacity.")


def _ali(code: str) -> str:  # alicloud provider: the SDK's ServerError block
    return (f"Error: [ERROR] terraform-provider-alicloud/alicloud/resource_alicloud_instance.go:1000: Resource "
            f"alicloud_instance RunInstances Failed!!! [SDK alibaba-cloud-sdk-go ERROR]:\nSDK.ServerError\n"
            f"ErrorCode: {code}\nRecommend: https://api.aliyun.com/troubleshoot?q={code}\nRequestId: 1\n"
            f"Message: the request was refused")


def _tc(code: str) -> str:  # tencentcloud provider: the SDK error string
    return f"Error: [TencentCloudSDKError] Code={code}, Message=refused, RequestId=abc"


def _hw(code: str) -> str:  # huaweicloud provider: the ECS job's failure body
    return (f'Error: error creating server: Bad request with: [POST https://ecs.cn-north-4.myhuaweicloud.com/v1.1/'
            f'p/cloudservers], error message: {{"error":{{"code":"{code}","message":"refused"}}}}')


ROWS = [
    # (cloud, provider text, kind, code)
    ("aws", AWS_ICE, "capacity", "InsufficientInstanceCapacity"),
    ("aws", "api error InsufficientCapacity: Insufficient capacity.", "capacity", "InsufficientCapacity"),
    ("aws", "api error Unsupported: Your requested instance type (p5.48xlarge) is not supported in your "
            "requested Availability Zone (us-east-1e).", "capacity", "Unsupported"),
    ("aws", "api error InstanceLimitExceeded: You have requested more instances (9) than your current "
            "instance limit of 8 allows", "quota", "InstanceLimitExceeded"),
    ("aws", "api error VcpuLimitExceeded: You have requested more vCPU capacity than your current vCPU limit "
            "of 96 allows", "quota", "VcpuLimitExceeded"),
    ("aws", "api error MaxSpotInstanceCountExceeded: Max spot instance count exceeded", "quota",
     "MaxSpotInstanceCountExceeded"),
    ("alicloud", _ali("OperationDenied.NoStock"), "capacity", "OperationDenied.NoStock"),
    ("alicloud", _ali("Zone.NotOnSale"), "capacity", "Zone.NotOnSale"),
    ("alicloud", _ali("InvalidZoneId.NotOnSale"), "capacity", "InvalidZoneId.NotOnSale"),
    ("alicloud", _ali("InvalidResourceType.NotSupported"), "capacity", "InvalidResourceType.NotSupported"),
    ("alicloud", _ali("QuotaExceed.ElasticQuota"), "quota", "QuotaExceed.ElasticQuota"),
    ("alicloud", _ali("QuotaExceed.SpotInstance"), "quota", "QuotaExceed.SpotInstance"),
    ("alicloud", _ali("QuotaExceed.PreemptibleInstance"), "quota", "QuotaExceed.PreemptibleInstance"),
    ("alicloud", _ali("QuotaExceed.PostPaidDisk"), "quota", "QuotaExceed.PostPaidDisk"),
    ("alicloud", _ali("QuotaExceed.DiskCapacity"), "quota", "QuotaExceed.DiskCapacity"),
    ("tencentcloud", _tc("ResourceInsufficient.SpecifiedInstanceType"), "capacity",
     "ResourceInsufficient.SpecifiedInstanceType"),
    ("tencentcloud", _tc("ResourceInsufficient.ZoneSoldOutForSpecifiedInstance"), "capacity",
     "ResourceInsufficient.ZoneSoldOutForSpecifiedInstance"),
    ("tencentcloud", _tc("ResourceInsufficient.CloudDiskSoldOut"), "capacity", "ResourceInsufficient.CloudDiskSoldOut"),
    ("tencentcloud", _tc("ResourcesSoldOut.SpecifiedInstanceType"), "capacity", "ResourcesSoldOut.SpecifiedInstanceType"),
    ("tencentcloud", _tc("ResourcesSoldOut.PurchaseSourceHasNoStock"), "capacity",
     "ResourcesSoldOut.PurchaseSourceHasNoStock"),
    ("tencentcloud", _tc("LimitExceeded.InstanceQuota"), "quota", "LimitExceeded.InstanceQuota"),
    ("tencentcloud", _tc("LimitExceeded.SpotQuota"), "quota", "LimitExceeded.SpotQuota"),
    ("tencentcloud", _tc("LimitExceeded.UserSpotQuota"), "quota", "LimitExceeded.UserSpotQuota"),
    ("tencentcloud", _tc("LimitExceeded.PrepayQuota"), "quota", "LimitExceeded.PrepayQuota"),
    ("huaweicloud", _hw("Ecs.0319"), "capacity", "Ecs.0319"),
    ("huaweicloud", _hw("Ecs.0001"), "quota", "Ecs.0001"),
    ("huaweicloud", _hw("Ecs.0013"), "quota", "Ecs.0013"),
]


@pytest.mark.parametrize("cloud,text,kind,code", ROWS, ids=[f"{r[0]}-{r[3]}" for r in ROWS])
def test_each_documented_code_is_read_as_capacity_or_quota(cloud, text, kind, code):
    found = get(cloud).capacity_error(text)
    assert found is not None and (found.kind, found.code) == (kind, code)
    assert (found.quota is not None) == (kind == "quota")


@pytest.mark.parametrize("cloud,text", [
    ("aws", "api error InvalidAMIID.NotFound: The image id '[ami-0]' does not exist"),
    ("aws", "api error Unsupported: The requested configuration is currently not supported."),
    ("alicloud", _ali("InvalidImageId.NotFound")),
    ("alicloud", _ali("OperationDenied.NoStockXYZ")),   # a longer code is another code
    ("tencentcloud", _tc("InvalidParameterValue.Range")),
    ("huaweicloud", _hw("Ecs.0005")),
    ("huaweicloud", _hw("Ecs.03190")),
])
def test_other_errors_are_not_capacity(cloud, text):
    assert get(cloud).capacity_error(text) is None


def test_aws_names_the_zone_and_type_from_its_text():
    assert get("aws").capacity_error(AWS_ICE) == CapacityProblem(
        kind="capacity", code="InsufficientInstanceCapacity", zone="us-east-1c", instance_type="p4d.24xlarge")


def test_zone_and_type_come_from_the_spec_where_the_text_does_not_say():
    found = capacity.problem("alicloud", _ali("OperationDenied.NoStock"), "cn-hangzhou-i", "ecs.gn7i-c32g1.8xlarge")
    assert (found.zone, found.instance_type) == ("cn-hangzhou-i", "ecs.gn7i-c32g1.8xlarge")
    # the provider's own words win over the spec
    found = capacity.problem("aws", AWS_ICE, "us-east-1a", "g5.12xlarge")
    assert (found.zone, found.instance_type) == ("us-east-1c", "p4d.24xlarge")
    assert capacity.problem("no-such-cloud", AWS_ICE) is None


def test_the_message_names_zone_type_and_what_to_try_and_not_the_raw_text():
    err = capacity.explain("aws", capacity.problem("aws", AWS_ICE), "/ws/terraform.log")
    text = f"{err.message}\n{err.fix}"
    assert err.exit_code == errors.APPLY and err.problem.kind == "capacity"
    assert "p4d.24xlarge" in err.message and "us-east-1c" in err.message
    assert "another zone" in err.fix and "another instance type" in err.fix and "spot.enabled: false" in err.fix
    assert "/ws/terraform.log" in err.fix and "trainkit status" in err.fix
    assert "Our system will be working" not in text and "RequestID" not in text


def test_a_quota_message_names_the_quota_and_asks_for_an_increase():
    found = capacity.problem("alicloud", _ali("QuotaExceed.ElasticQuota"), "cn-hangzhou-i", "ecs.gn7i-c32g1.8xlarge")
    err = capacity.explain("alicloud", found, "terraform.log")
    assert "quota" in err.message and "vCPUs of pay-as-you-go instances" in err.message
    assert "request a quota increase" in err.fix and "Alibaba Cloud console" in err.fix
