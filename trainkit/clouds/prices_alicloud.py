"""Alibaba Cloud prices through the official SDK (alibabacloud-ecs20140526):

- ECS DescribePrice (ResourceType=instance, PriceUnit=Hour, pay-as-you-go): `TradePrice` is the
  price after the account's discounts; the `instanceType` line of DetailInfos is the instance
  alone (the total also holds the system disk);
- ECS DescribeSpotPriceHistory (NetworkType=vpc): the newest SpotPrice per zone, lowest zone.

Credentials: the provider's variables (ALIBABA_CLOUD_ACCESS_KEY_ID / _SECRET, or ALICLOUD_*).
"""

from __future__ import annotations

import datetime as dt
import os
from typing import Any

from alibabacloud_ecs20140526 import models
from alibabacloud_ecs20140526.client import Client
from alibabacloud_tea_openapi import models as api_models

SOURCE = "Alibaba ECS DescribePrice (TradePrice, pay-as-you-go) + DescribeSpotPriceHistory (lowest zone)"


def fetch(region: str, types: list[str], endpoint: str | None = None, **_: Any) -> dict[str, Any]:
    client = api_client(region, endpoint)
    prices = {t: {"on_demand": on_demand(client, region, t), "spot": spot(client, region, t)} for t in types}
    return {"currency": "CNY", "source": SOURCE, "prices": prices}


def env_value(*names: str) -> str | None:
    """The first of the environment variables `names` that is set and not empty, else None."""
    return next((os.environ[n] for n in names if os.environ.get(n)), None)


def api_client(region: str, endpoint: str | None) -> Client:
    """An ECS API client for `region` with the keys from the environment (`endpoint`: an emulator's
    scheme://host, else the SDK's own). Shared with offers_alicloud.py."""
    config = api_models.Config(
        access_key_id=env_value("ALIBABA_CLOUD_ACCESS_KEY_ID", "ALICLOUD_ACCESS_KEY", "ALIBABACLOUD_ACCESS_KEY_ID"),
        access_key_secret=env_value("ALIBABA_CLOUD_ACCESS_KEY_SECRET", "ALICLOUD_SECRET_KEY",
                                    "ALIBABACLOUD_ACCESS_KEY_SECRET"),
        region_id=region)
    if endpoint:
        scheme, _, host = endpoint.rpartition("://")
        config.endpoint, config.protocol = host, scheme or "https"
    return Client(config)


def on_demand(client: Client, region: str, instance_type: str) -> float | None:
    resp = client.describe_price(models.DescribePriceRequest(
        region_id=region, resource_type="instance", instance_type=instance_type, price_unit="Hour"))
    price = resp.body.price_info.price
    for detail in (price.detail_infos.detail_info if price.detail_infos else None) or []:
        if detail.resource == "instanceType" and detail.trade_price is not None:
            return float(detail.trade_price)
    return float(price.trade_price) if price.trade_price is not None else None


def spot(client: Client, region: str, instance_type: str) -> float | None:
    start = (dt.datetime.now(dt.timezone.utc) - dt.timedelta(hours=1)).strftime("%Y-%m-%dT%H:%M:%SZ")
    resp = client.describe_spot_price_history(models.DescribeSpotPriceHistoryRequest(
        region_id=region, network_type="vpc", instance_type=instance_type, start_time=start))
    newest: dict[str, tuple[str, float]] = {}
    for row in (resp.body.spot_prices.spot_price_type if resp.body.spot_prices else None) or []:
        if row.zone_id not in newest or row.timestamp > newest[row.zone_id][0]:
            newest[row.zone_id] = (row.timestamp, float(row.spot_price))
    return min((p for _, p in newest.values()), default=None)
