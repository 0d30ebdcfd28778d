"""The placement preflight's questions (trainkit/clouds/offers_<cloud>.py: which zones of a region
offer an instance type, and is it in stock), answered from the store's catalog-like facts, a fault
a test sets (Store.set_faults) beside cloud.py's:

    offers: {"<zone>": ["<type>", ...]}   the types each zone offers, in stock
    capacity: [{"zone", "type"}]          cloud.py's sold-out entries: listed in that zone as sold
                                          out (a create there is refused, rules_<cloud>.py)

With `offers` set, nothing else is offered anywhere. Without it the stand-in holds no catalog and
answers these calls with its cloud's "no such API" error (Alibaba 404 InvalidAction.NotFound,
Tencent InvalidAction, Huawei 404 APIGW.0101, cited in each module): the preflight then says "not
asked" and apply's failover decides, as a test that sets only `capacity` expects. A zone is in a
region when its id is the region's and a zone suffix (cn-hangzhou-i, ap-guangzhou-4, cn-north-4a).
Both billings are offered alike (the facts name none).

One handler per cloud, registered in its module (api_alicloud.HANDLERS, api_tencentcloud.HANDLERS,
api_huaweicloud.ROUTES), so authentication, throttling and the call log are its module's; each
answers in its API reference's shape and cites it.
"""

from __future__ import annotations

import re

from .api import ApiError, Objects, Request

ALI_SPOT = ("NoSpot", "SpotWithPriceLimit", "SpotAsPriceGo")    # DescribeAvailableResource SpotStrategy
TC_CHARGES = ("POSTPAID_BY_HOUR", "SPOTPAID")                    # the charge types the stand-in sells
TC_FILTERS = ("zone", "instance-family", "instance-type", "instance-charge-type")
HW_PAGE_MAX = 1000                                               # ListFlavorSellPolicies limit (default 1000)


NO_CATALOG = {"alicloud": ApiError(404, "InvalidAction.NotFound", "Specified api is not found, please check your "
                                                                 "url and method."),
              "tencentcloud": ApiError(200, "InvalidAction", "The API does not exist."),
              "huaweicloud": ApiError(404, "APIGW.0101", "The API does not exist or has not been published in the "
                                                         "environment")}


def offered(data: dict, region: str, cloud: str) -> dict[tuple[str, str], bool]:
    """{(zone, type): sold out} for every zone of `region` the faults list, in zone then type order;
    a pair both offered and sold out is sold out. Raises `cloud`'s NO_CATALOG error without the
    `offers` fault."""
    faults = data["faults"]
    if "offers" not in faults:
        raise NO_CATALOG[cloud]
    rows = {(z, t): False for z, types in (faults.get("offers") or {}).items() for t in types}
    rows.update({(c["zone"], c["type"]): True for c in faults.get("capacity") or []})
    return {pair: rows[pair] for pair in sorted(rows)
            if re.fullmatch(re.escape(region) + r"-?[a-z0-9]{1,2}", pair[0])}


# ------------------------------------------------------------------------------------- Alibaba
def _ali_param(params: dict, name: str, allowed: tuple[str, ...], default: str) -> str:
    value = params.get(name) or default
    if value not in allowed:  # the OpenAPI gateway's form (api_alicloud._page_size)
        raise ApiError(400, f"InvalidParameter.{name}", f"The specified parameter {name} is not valid.")
    return value


def describe_available_resource(params: dict, objects: Objects) -> dict:
    """ECS 2014-05-26 "DescribeAvailableResource" (Alibaba ECS API reference): RegionId,
    DestinationResource (required; the stand-in answers InstanceType only), InstanceType and ZoneId
    filters, InstanceChargeType PrePaid/PostPaid, SpotStrategy NoSpot/SpotWithPriceLimit/
    SpotAsPriceGo. Answers {AvailableZones: {AvailableZone: [{RegionId, ZoneId, Status,
    StatusCategory, AvailableResources: {AvailableResource: [{Type: InstanceType,
    SupportedResources: {SupportedResource: [{Value, Status, StatusCategory}]}}]}}]}}: a type in
    stock is Available/WithStock, a sold-out one SoldOut/WithoutStock, and a zone is SoldOut/
    WithoutStock when none of its rows is in stock. Zones offering none of the asked types are left
    out. Missing DestinationResource: 400 MissingParameter ("Common error codes")."""
    if not params.get("DestinationResource"):
        raise ApiError(400, "MissingParameter", 'The input parameter "DestinationResource" that is mandatory '
                                                "for processing this request is not supplied.")
    _ali_param(params, "DestinationResource", ("InstanceType",), "InstanceType")
    _ali_param(params, "InstanceChargeType", ("PrePaid", "PostPaid"), "PostPaid")
    _ali_param(params, "SpotStrategy", ALI_SPOT, "NoSpot")
    zones: dict[str, list[dict]] = {}
    for (zone, kind), sold_out in offered(objects.data, objects.region, "alicloud").items():
        if params.get("InstanceType") in (None, kind) and params.get("ZoneId") in (None, zone):
            zones.setdefault(zone, []).append({"Value": kind, "Status": "SoldOut" if sold_out else "Available",
                                               "StatusCategory": "WithoutStock" if sold_out else "WithStock"})
    out = []
    for zone, rows in zones.items():
        stock = any(r["Status"] == "Available" for r in rows)
        out.append({"RegionId": objects.region, "ZoneId": zone, "Status": "Available" if stock else "SoldOut",
                    "StatusCategory": "WithStock" if stock else "WithoutStock",
                    "AvailableResources": {"AvailableResource": [
                        {"Type": "InstanceType", "SupportedResources": {"SupportedResource": rows}}]}})
    return {"AvailableZones": {"AvailableZone": out}}


# ------------------------------------------------------------------------------------- Tencent
def _tc_filters(body: dict) -> dict[str, list[str]]:
    """Filters [{Name, Values}] -> {name: values}; a name the API does not list: InvalidFilter (the
    API page's error codes), a malformed one: InvalidParameterValue ("Common Error Codes")."""
    out: dict[str, list[str]] = {}
    for f in body.get("Filters") or []:
        if not isinstance(f, dict) or not isinstance(f.get("Values"), list):
            raise ApiError(200, "InvalidParameterValue", "The value of `Filters` is invalid.")
        if f.get("Name") not in TC_FILTERS:
            raise ApiError(200, "InvalidFilter", f"The filter `{f.get('Name')}` is not supported.")
        out[f["Name"]] = [str(v) for v in f["Values"]]
    return out


def describe_zone_instance_config_infos(body: dict, objects: Objects) -> dict:
    """CVM 2017-03-12 "DescribeZoneInstanceConfigInfos" (Tencent CVM API doc): Filters zone,
    instance-family, instance-type, instance-charge-type (every row matches each filter given).
    Answers {InstanceTypeQuotaSet: [InstanceTypeQuotaItem {Zone, InstanceType, InstanceChargeType,
    InstanceFamily, TypeName, Status, StatusCategory, SoldOutReason}]}, one row per (zone, type,
    charge type POSTPAID_BY_HOUR or SPOTPAID): Status SELL with StatusCategory EnoughStock, or
    SOLD_OUT with WithoutStock (data type InstanceTypeQuotaItem). The item's hardware and Price
    fields are left out: the stand-in holds no catalog."""
    wanted = _tc_filters(body)
    rows = []
    for (zone, kind), sold_out in offered(objects.data, objects.region, "tencentcloud").items():
        for charge in TC_CHARGES:
            family = kind.split(".", 1)[0]
            facts = {"zone": zone, "instance-type": kind, "instance-charge-type": charge, "instance-family": family}
            if all(facts[name] in values for name, values in wanted.items()):
                rows.append({"Zone": zone, "InstanceType": kind, "InstanceChargeType": charge,
                             "InstanceFamily": family, "TypeName": kind,
                             "Status": "SOLD_OUT" if sold_out else "SELL",
                             "StatusCategory": "WithoutStock" if sold_out else "EnoughStock",
                             "SoldOutReason": "Insufficient resources." if sold_out else ""})
    return {"InstanceTypeQuotaSet": rows}


# ------------------------------------------------------------------------------------- Huawei
def list_flavor_sell_policies(req: Request, objects: Objects) -> tuple[int, dict]:
    """ECS "Querying the Sales Policies of Flavors" (ListFlavorSellPolicies, GET
    /v1/{project_id}/cloudservers/flavor-sell-policies): query flavor_id (prefix match),
    sell_status, sell_mode, availability_zone_id, limit (default 1000), marker (the id of the last
    row of the page before). Answers {count, sell_policies: [{id, flavor_id, sell_status (available
    or sellout), availability_zone_id, sell_mode, spot_options}]}. The reference documents the API
    for spot (postPaid, prePaid, ri "not supported currently"): only spot policies are listed. A bad
    limit or marker: 400 Ecs.0005 (ECS "Error Codes": invalid parameter)."""
    q = req.query
    try:
        limit, marker = int(q.get("limit") or HW_PAGE_MAX), int(q.get("marker") or 0)
    except ValueError:
        limit = marker = -1
    if not 1 <= limit <= HW_PAGE_MAX or marker < 0:
        return 400, {"error": {"code": "Ecs.0005", "message": "Invalid parameter: limit or marker"}}
    rows = []
    for n, ((zone, kind), sold_out) in enumerate(offered(objects.data, objects.region, "huaweicloud").items(), 1):
        row = {"id": n, "flavor_id": kind, "sell_status": "sellout" if sold_out else "available",
               "availability_zone_id": zone, "sell_mode": "spot",
               "spot_options": {"longest_spot_duration_hours": 6, "largest_spot_duration_count": 1,
                                "interruption_policy": "immediate"}}
        if n > marker and kind.startswith(q.get("flavor_id") or "") and all(
                q.get(k) in (None, row[k]) for k in ("sell_status", "sell_mode", "availability_zone_id")):
            rows.append(row)
    return 200, {"count": len(rows[:limit]), "sell_policies": rows[:limit]}
