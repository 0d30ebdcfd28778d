"""Tencent offers adapter against a local stand-in for the CVM API (the real one cannot be reached).

The stand-in answers DescribeZoneInstanceConfigInfos with the response shape from Tencent's API doc
(Response.InstanceTypeQuotaSet[] of InstanceTypeQuotaItem: Zone, InstanceType, InstanceChargeType,
Status SELL/SOLD_OUT, SoldOutReason, StatusCategory; RequestId), and errors the API 3.0 way (HTTP
200 with Response.Error). The official SDK reaches it through HttpProfile(endpoint, protocol).
"""

from __future__ import annotations

import pytest

from trainkit.clouds.base import OFFER_AVAILABLE, OFFER_LISTED, OFFER_SOLD_OUT
from trainkit.clouds.offers_tencentcloud import offers, parse
from trainkit.errors import InputError

pytestmark = pytest.mark.unit

REQUEST_ID = "6ef60bec-0242-43af-bb20-270359fb54a7"


def row(zone: str, kind: str, charge: str, status: str) -> dict:
    return {"Zone": zone, "InstanceType": kind, "InstanceChargeType": charge, "Status": status,
            "SoldOutReason": "" if status == "SELL" else "out of stock", "Cpu": 8, "Memory": 32,
            "StatusCategory": "EnoughStock" if status == "SELL" else "WithoutStock"}


def answer(req: dict) -> dict:
    charge = next(f["Values"][0] for f in req["body"]["Filters"] if f["Name"] == "instance-charge-type")
    rows = [row("ap-guangzhou-3", "GN7.2XLARGE32", charge, "SELL"),
            row("ap-guangzhou-4", "GN7.2XLARGE32", charge, "SOLD_OUT"),
            row("ap-guangzhou-6", "GN7.2XLARGE32", "PREPAID", "SELL")]  # another charge type
    return {"Response": {"InstanceTypeQuotaSet": rows, "RequestId": REQUEST_ID}}


@pytest.fixture
def creds(monkeypatch):
    monkeypatch.setenv("TENCENTCLOUD_SECRET_ID", "AKIDtest")
    monkeypatch.setenv("TENCENTCLOUD_SECRET_KEY", "test-secret")


@pytest.mark.parametrize("spot, charge", [(False, "POSTPAID_BY_HOUR"), (True, "SPOTPAID")])
def test_offers_reads_sell_and_sold_out_per_zone(creds, price_stub, spot, charge):
    with price_stub(answer) as (url, seen):
        got = offers("ap-guangzhou", ["GN7.2XLARGE32"], spot, endpoint=url)
    assert [r["headers"]["x-tc-action"] for r in seen] == ["DescribeZoneInstanceConfigInfos"]
    assert seen[0]["headers"]["x-tc-region"] == "ap-guangzhou"
    auth = seen[0]["headers"]["authorization"]
    assert "TC3-HMAC-SHA256" in auth and "Credential=AKIDtest/" in auth  # signed by the SDK
    assert seen[0]["body"]["Filters"] == [{"Name": "instance-type", "Values": ["GN7.2XLARGE32"]},
                                          {"Name": "instance-charge-type", "Values": [charge]}]
    # the PREPAID row is ignored; ap-guangzhou-7, not in the answer, is not offered
    assert got == {("ap-guangzhou-3", "GN7.2XLARGE32"): OFFER_AVAILABLE,
                   ("ap-guangzhou-4", "GN7.2XLARGE32"): OFFER_SOLD_OUT}


def test_api_error_is_an_input_error_naming_the_code(creds, price_stub):
    def refuse(req: dict) -> dict:
        return {"Response": {"Error": {"Code": "AuthFailure.SecretIdNotFound",
                                       "Message": "The SecretId is not found"},
                             "RequestId": REQUEST_ID}}

    with price_stub(refuse) as (url, _), pytest.raises(InputError) as exc:
        offers("ap-guangzhou", ["GN7.2XLARGE32"], False, endpoint=url)
    text = str(exc.value)
    assert "DescribeZoneInstanceConfigInfos" in text and "AuthFailure.SecretIdNotFound" in text
    assert "The SecretId is not found" in text and "Traceback" not in text


def test_parse_keeps_only_asked_types_and_charge():
    rows = [row("z-1", "A", "SPOTPAID", "SELL"), row("z-1", "B", "SPOTPAID", "SELL"),
            row("z-2", "A", "SPOTPAID", "NEW_STATUS"), row("z-3", "A", "POSTPAID_BY_HOUR", "SELL")]
    assert parse(rows, ["A"], "SPOTPAID") == {("z-1", "A"): OFFER_AVAILABLE, ("z-2", "A"): OFFER_LISTED}
    assert parse([], ["A"], "SPOTPAID") == {}
