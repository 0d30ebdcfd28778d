"""AWS prices through boto3: Pricing GetProducts (on-demand, Linux, shared tenancy) and EC2
DescribeSpotPriceHistory (the current spot price; the lowest over the region's zones).

Sources: AWS Price List Query API ("GetProducts", filters on instanceType/regionCode/
operatingSystem/tenancy/preInstalledSw/capacitystatus; PriceList items are JSON strings with
terms.OnDemand.*.priceDimensions.*.pricePerUnit.USD) and EC2 API "DescribeSpotPriceHistory".
The Pricing API is served from us-east-1. Endpoints follow boto3's settings
(AWS_ENDPOINT_URL_PRICING / AWS_ENDPOINT_URL_EC2), which is how the tests reach their stand-ins.
"""

from __future__ import annotations

import datetime as dt
import json
from typing import Any

import boto3

PRICING_REGION = "us-east-1"
SOURCE = "AWS Price List API GetProducts (on-demand) + EC2 DescribeSpotPriceHistory (spot, lowest zone)"


def fetch(region: str, types: list[str], endpoint: str | None = None, **_: Any) -> dict[str, Any]:
    pricing = boto3.client("pricing", region_name=PRICING_REGION)
    ec2 = boto3.client("ec2", region_name=region, endpoint_url=endpoint)
    prices = {t: {"on_demand": on_demand(pricing, region, t), "spot": None} for t in types}
    for t, price in spot(ec2, types).items():
        prices[t]["spot"] = price
    return {"currency": "USD", "source": SOURCE, "prices": prices}


def on_demand(pricing, region: str, instance_type: str) -> float | None:
    filters = [("instanceType", instance_type), ("regionCode", region), ("operatingSystem", "Linux"),
               ("tenancy", "Shared"), ("preInstalledSw", "NA"), ("capacitystatus", "Used")]
    resp = pricing.get_products(ServiceCode="AmazonEC2", MaxResults=10, Filters=[
        {"Type": "TERM_MATCH", "Field": f, "Value": v} for f, v in filters])
    for item in resp.get("PriceList", []):
        product = json.loads(item) if isinstance(item, str) else item
        for term in product.get("terms", {}).get("OnDemand", {}).values():
            for dim in term.get("priceDimensions", {}).values():
                usd = dim.get("pricePerUnit", {}).get("USD")
                if usd is not None and float(usd) > 0:
                    return float(usd)
    return None


def spot(ec2, types: list[str]) -> dict[str, float]:
    """The lowest current Linux spot price per type over the region's zones."""
    out: dict[str, float] = {}
    for (_, t), price in _spot_rows(ec2, types).items():
        out[t] = min(price, out.get(t, price))
    return out


def spot_by_zone(region: str, types: list[str], endpoints: dict[str, str] | None = None
                 ) -> dict[tuple[str, str], float]:
    """{(zone, type): the current Linux spot price} (for `zone: auto` on spot, cluster/failover.py);
    `endpoints`: the spec's (an emulator's `ec2`), else boto3's own settings."""
    return _spot_rows(boto3.client("ec2", region_name=region, endpoint_url=(endpoints or {}).get("ec2")), types)


def _spot_rows(ec2, types: list[str]) -> dict[tuple[str, str], float]:
    """DescribeSpotPriceHistory from now on: the current price of each (zone, type)."""
    out: dict[tuple[str, str], float] = {}
    pages = ec2.get_paginator("describe_spot_price_history").paginate(
        InstanceTypes=types, ProductDescriptions=["Linux/UNIX"],
        StartTime=dt.datetime.now(dt.timezone.utc))
    for page in pages:
        for row in page.get("SpotPriceHistory", []):
            key = (row.get("AvailabilityZone", ""), row["InstanceType"])
            price = float(row["SpotPrice"])
            out[key] = min(price, out.get(key, price))
    return out
