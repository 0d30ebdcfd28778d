"""Alibaba offers adapter against a local stand-in for the ECS API (the real one cannot be reached).

The stand-in answers DescribeAvailableResource with the response shape from Alibaba's ECS API
reference (AvailableZones.AvailableZone[]{RegionId, ZoneId, Status, StatusCategory,
AvailableResources.AvailableResource[]{Type, SupportedResources.SupportedResource[]{Value, Status,
StatusCategory}}}; RequestId), and errors the ECS way (an HTTP 4xx with {RequestId, HostId, Code,
Message}). The official SDK reaches it through Config(endpoint, protocol).
"""

from __future__ import annotations

import pytest

from trainkit.clouds.base import OFFER_AVAILABLE, OFFER_LISTED, OFFER_SOLD_OUT
from trainkit.clouds.offers_alicloud import _status, offers
from trainkit.errors import InputError

pytestmark = pytest.mark.unit

GPU, OTHER = "ecs.gn7i-c8g1.2xlarge", "ecs.g7.large"


def zone(zone_id: str, kind: str, status: str, category: str) -> dict:
    supported = [{"Value": kind, "Status": status, "StatusCategory": category}]
    return {"RegionId": "cn-hangzhou", "ZoneId": zone_id, "Status": "Available", "StatusCategory": "WithStock",
            "AvailableResources": {"AvailableResource": [
                {"Type": "InstanceType", "SupportedResources": {"SupportedResource": supported}}]}}


def params(req: dict) -> dict:
    return {**req["query"], **(req["body"] if isinstance(req["body"], dict) else {})}


def answer(req: dict) -> dict:
    kind = params(req)["InstanceType"]
    zones = [zone("cn-hangzhou-i", kind, "Available", "WithStock"),
             zone("cn-hangzhou-j", kind, "Available", "ClosedWithStock"),
             zone("cn-hangzhou-k", kind, "SoldOut", "WithoutStock"),
             zone("cn-hangzhou-h", "ecs.other.type", "Available", "WithStock")]  # lists another type only
    return {"RequestId": "F3CD6886-D8D0-4FEE-B93E-1B732396****", "AvailableZones": {"AvailableZone": zones}}


@pytest.fixture
def creds(monkeypatch):
    monkeypatch.setenv("ALIBABA_CLOUD_ACCESS_KEY_ID", "LTAItest")
    monkeypatch.setenv("ALIBABA_CLOUD_ACCESS_KEY_SECRET", "test-secret")


@pytest.mark.parametrize("spot, strategy", [(False, "NoSpot"), (True, "SpotAsPriceGo")])
def test_offers_reads_stock_per_zone_one_call_per_type(creds, price_stub, spot, strategy):
    with price_stub(answer) as (url, seen):
        got = offers("cn-hangzhou", [GPU, OTHER], spot, endpoint=url)
    assert [r["headers"].get("x-acs-action") for r in seen] == ["DescribeAvailableResource"] * 2
    assert seen[0]["headers"]["authorization"].startswith("ACS3-HMAC-SHA256 Credential=LTAItest")
    asked = [params(r) for r in seen]
    assert [p["InstanceType"] for p in asked] == [GPU, OTHER]
    for p in asked:
        assert p["RegionId"] == "cn-hangzhou" and p["DestinationResource"] == "InstanceType"
        assert p["InstanceChargeType"] == "PostPaid" and p["SpotStrategy"] == strategy
    # WithStock and ClosedWithStock are in stock; zone h, which lists another type only, is left out
    assert got == {(z, kind): status for kind in (GPU, OTHER) for z, status in [
        ("cn-hangzhou-i", OFFER_AVAILABLE), ("cn-hangzhou-j", OFFER_AVAILABLE), ("cn-hangzhou-k", OFFER_SOLD_OUT)]}


def test_api_error_is_an_input_error_naming_the_code(creds, price_stub):
    refusal = {"RequestId": "7A5E2A9C-0000-0000-0000-000000000000", "HostId": "ecs.aliyuncs.com",
               "Code": "InvalidAccessKeyId.NotFound", "Message": "Specified access key is not found."}
    with price_stub(lambda req: (404, refusal)) as (url, _), pytest.raises(InputError) as exc:
        offers("cn-hangzhou", [GPU], False, endpoint=url)
    text = str(exc.value)
    assert "DescribeAvailableResource" in text and "InvalidAccessKeyId.NotFound" in text
    assert "Specified access key is not found." in text and "Traceback" not in text


def test_status_reads_the_type_row_else_the_zone():
    assert _status(zone("z", GPU, "Available", "ClosedWithStock"), GPU) == OFFER_AVAILABLE
    assert _status(zone("z", GPU, "Available", "ClosedWithoutStock"), GPU) == OFFER_SOLD_OUT
    assert _status(zone("z", GPU, "Available", "SomethingNew"), GPU) == OFFER_LISTED
    assert _status(zone("z", OTHER, "Available", "WithStock"), GPU) is None
    bare = {"ZoneId": "z", "Status": "SoldOut", "StatusCategory": "WithoutStock"}  # lists no resource
    assert _status(bare, GPU) == OFFER_SOLD_OUT
    assert _status({**bare, "Status": "Available", "StatusCategory": "WithStock"}, GPU) == OFFER_AVAILABLE
