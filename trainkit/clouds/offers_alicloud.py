"""Alibaba Cloud offers through the official SDK (alibabacloud-ecs20140526):

- ECS DescribeAvailableResource (DestinationResource=InstanceType, InstanceChargeType=PostPaid,
  SpotStrategy=SpotAsPriceGo for spot else NoSpot), one call per instance type: every zone of the
  region that offers the type, AvailableZones.AvailableZone[]{ZoneId, Status, StatusCategory,
  AvailableResources.AvailableResource[].SupportedResources.SupportedResource[]{Value, Status,
  StatusCategory}} (Alibaba ECS API reference, "DescribeAvailableResource"). Status Available with
  StatusCategory WithStock or ClosedWithStock is in stock; Status SoldOut, or StatusCategory
  WithoutStock / ClosedWithoutStock, is sold out. A zone the answer leaves out does not offer it.

Credentials: the provider's variables (ALIBABA_CLOUD_ACCESS_KEY_ID / _SECRET, or ALICLOUD_*),
through the price adapter's client. Endpoint: the spec's `endpoints: {ecs:}` (ENDPOINT_KEY; an
emulator's URL, http://host:port), else the SDK's ecs.<region>.aliyuncs.com.
"""

from __future__ import annotations

from typing import Any

from alibabacloud_ecs20140526 import models
from Tea.exceptions import TeaException  # base of the SDK's errors (darabonba, tea-openapi)

from trainkit.clouds.base import OFFER_AVAILABLE, OFFER_LISTED, OFFER_SOLD_OUT
from trainkit.clouds.prices_alicloud import api_client
from trainkit.errors import InputError

ENDPOINT_KEY = "ecs"   # the spec's `endpoints:` entry this API is reached through (cluster/preflight.py)
IN_STOCK, NO_STOCK = ("WithStock", "ClosedWithStock"), ("WithoutStock", "ClosedWithoutStock")


def offers(region: str, types: list[str], spot: bool, endpoint: str | None = None, **_: Any
           ) -> dict[tuple[str, str], str]:
    client, found = api_client(region, endpoint), {}
    for kind in dict.fromkeys(types):
        try:
            body = client.describe_available_resource(models.DescribeAvailableResourceRequest(
                region_id=region, destination_resource="InstanceType", instance_type=kind,
                instance_charge_type="PostPaid", spot_strategy="SpotAsPriceGo" if spot else "NoSpot",
            )).body.to_map()
        except TeaException as err:
            raise InputError(f"Alibaba ECS DescribeAvailableResource ({kind} in {region}) failed: "
                             f"{err.code or 'no code'}: {err.message}") from None
        for zone in (body.get("AvailableZones") or {}).get("AvailableZone") or []:
            status = _status(zone, kind)
            if zone.get("ZoneId") and status:
                found[(zone["ZoneId"], kind)] = status
    return found


def _status(zone: dict[str, Any], kind: str) -> str | None:
    """One AvailableZone -> the offer status of `kind` there, None when the zone lists other
    resources but not `kind`; a zone listing no resource at all is read from its own Status. Pure."""
    listed = [r for res in (zone.get("AvailableResources") or {}).get("AvailableResource") or []
              if res.get("Type", "InstanceType") == "InstanceType"
              for r in (res.get("SupportedResources") or {}).get("SupportedResource") or []]
    row = next((r for r in listed if r.get("Value") == kind), None if listed else zone)
    if row is None:
        return None
    status, category = row.get("Status"), row.get("StatusCategory")
    if status == "SoldOut" or category in NO_STOCK:
        return OFFER_SOLD_OUT
    if status == "Available" and category in (None, *IN_STOCK):
        return OFFER_AVAILABLE
    return OFFER_LISTED  # a value the reference does not list: offered, stock unknown
