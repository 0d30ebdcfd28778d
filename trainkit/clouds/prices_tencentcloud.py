"""Tencent Cloud prices through the official SDK: CVM InquiryPriceRunInstances, once on-demand
(POSTPAID_BY_HOUR) and once spot (SPOTPAID). `UnitPriceDiscount` is the per-hour price after the
account's discounts (Tencent CVM API doc "InquiryPriceRunInstances", data type ItemPrice).

Credentials: TENCENTCLOUD_SECRET_ID / TENCENTCLOUD_SECRET_KEY (the provider's variables). The
inquiry needs a zone and an image; the image defaults to the catalog's.
"""

from __future__ import annotations

import json
import os
from typing import Any

from tencentcloud.common import credential
from tencentcloud.common.exception.tencent_cloud_sdk_exception import TencentCloudSDKException
from tencentcloud.common.profile.client_profile import ClientProfile
from tencentcloud.common.profile.http_profile import HttpProfile
from tencentcloud.cvm.v20170312 import cvm_client, models

from trainkit.errors import InputError

SOURCE = "Tencent CVM InquiryPriceRunInstances (UnitPriceDiscount; POSTPAID_BY_HOUR and SPOTPAID)"
# A SPOTPAID inquiry needs a max price; this is only a ceiling for the quote, not a bid.
_QUOTE_CEILING = "100000"


def fetch(region: str, types: list[str], endpoint: str | None = None, zone: str | None = None,
          image: str | None = None) -> dict[str, Any]:
    if not zone:
        raise InputError("--zone: Tencent prices are quoted per zone", fix="add --zone, e.g. ap-guangzhou-3")
    client = api_client(region, endpoint)
    prices = {}
    for t in types:
        prices[t] = {"on_demand": _quote(client, zone, image, t, spot=False),
                     "spot": _quote(client, zone, image, t, spot=True)}
    return {"currency": "CNY", "source": SOURCE, "prices": prices}


def api_client(region: str, endpoint: str | None):
    """A CVM API client for `region` with the keys from the environment (`endpoint`: an emulator's
    scheme://host, else the SDK's own). Shared with offers_tencentcloud.py."""
    cred = credential.Credential(os.environ.get("TENCENTCLOUD_SECRET_ID", ""),
                                 os.environ.get("TENCENTCLOUD_SECRET_KEY", ""))
    http = HttpProfile(endpoint=endpoint.split("://", 1)[-1], protocol=endpoint.split("://")[0]) \
        if endpoint else HttpProfile()
    return cvm_client.CvmClient(cred, region, ClientProfile(httpProfile=http))


def _quote(client, zone: str, image: str | None, instance_type: str, spot: bool) -> float | None:
    req = models.InquiryPriceRunInstancesRequest()
    params: dict[str, Any] = {"Placement": {"Zone": zone}, "InstanceType": instance_type,
                              "ImageId": image, "InstanceCount": 1,
                              "InstanceChargeType": "SPOTPAID" if spot else "POSTPAID_BY_HOUR"}
    if spot:
        params["InstanceMarketOptions"] = {"MarketType": "spot",
                                           "SpotOptions": {"MaxPrice": _QUOTE_CEILING}}
    req.from_json_string(json.dumps(params))
    try:
        price = client.InquiryPriceRunInstances(req).Price.InstancePrice
    except TencentCloudSDKException as err:
        if "Unsupported" in str(err.code) or "NotSupported" in str(err.code) or "NoStock" in str(err.code):
            return None  # the type is not sold this way in this zone: unknown, not zero
        raise InputError(f"Tencent price inquiry for {instance_type} failed: {err.code} {err.message}") from None
    value = price.UnitPriceDiscount if price.UnitPriceDiscount is not None else price.UnitPrice
    return float(value) if value is not None else None
