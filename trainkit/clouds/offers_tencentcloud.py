"""Tencent Cloud offers through the official SDK: CVM DescribeZoneInstanceConfigInfos, filtered by
`instance-type` and `instance-charge-type` (POSTPAID_BY_HOUR, or SPOTPAID for spot). Each row of
InstanceTypeQuotaSet is one (Zone, InstanceType, InstanceChargeType); its Status is SELL (can be
bought) or SOLD_OUT (sold out) (Tencent CVM API doc "DescribeZoneInstanceConfigInfos", data type
InstanceTypeQuotaItem). A zone with no row for a type does not offer it.

Credentials: TENCENTCLOUD_SECRET_ID / TENCENTCLOUD_SECRET_KEY (the provider's variables), through
the price adapter's client. Endpoint: the spec's `endpoints: {cvm:}` (ENDPOINT_KEY; an emulator's
URL, http://host:port), else the SDK's cvm.tencentcloudapi.com.
"""

from __future__ import annotations

import json
from typing import Any

from tencentcloud.common.exception.tencent_cloud_sdk_exception import TencentCloudSDKException
from tencentcloud.cvm.v20170312 import models

from trainkit.clouds.base import OFFER_AVAILABLE, OFFER_LISTED, OFFER_SOLD_OUT
from trainkit.clouds.prices_tencentcloud import api_client
from trainkit.errors import InputError

ENDPOINT_KEY = "cvm"   # the spec's `endpoints:` entry this API is reached through (cluster/preflight.py)
_STATUS = {"SELL": OFFER_AVAILABLE, "SOLD_OUT": OFFER_SOLD_OUT}


def offers(region: str, types: list[str], spot: bool, endpoint: str | None = None
           ) -> dict[tuple[str, str], str]:
    charge = _charge_type(spot)
    req = models.DescribeZoneInstanceConfigInfosRequest()
    req.from_json_string(json.dumps({"Filters": [
        {"Name": "instance-type", "Values": list(types)},
        {"Name": "instance-charge-type", "Values": [charge]}]}))
    try:
        resp = api_client(region, endpoint).DescribeZoneInstanceConfigInfos(req)
    except TencentCloudSDKException as err:
        raise InputError(f"Tencent DescribeZoneInstanceConfigInfos in {region} failed: "
                         f"{err.code} {err.message}") from None
    return parse(json.loads(resp.to_json_string()).get("InstanceTypeQuotaSet") or [], types, charge)


def _charge_type(spot: bool) -> str:
    return "SPOTPAID" if spot else "POSTPAID_BY_HOUR"


def parse(rows: list[dict[str, Any]], types: list[str], charge: str) -> dict[tuple[str, str], str]:
    """InstanceTypeQuotaItem rows -> {(zone, type): status}, only `types` billed as `charge`; a
    Status other than SELL/SOLD_OUT counts as listed with no stock reported. Pure."""
    found: dict[tuple[str, str], str] = {}
    for row in rows:
        zone, kind = row.get("Zone"), row.get("InstanceType")
        if not zone or kind not in types or row.get("InstanceChargeType") != charge:
            continue
        if found.get((zone, kind)) != OFFER_AVAILABLE:  # two rows for one pair: in stock wins
            found[(zone, kind)] = _STATUS.get(str(row.get("Status")), OFFER_LISTED)
    return found
