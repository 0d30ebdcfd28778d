"""Huawei Cloud offers through the official SDK (huaweicloudsdkecs), Huawei ECS API: Querying the
Sales Policies of Flavors (ListFlavorSellPolicies), GET /v1/{project_id}/cloudservers/flavor-sell-policies
with flavor_id and sell_mode (spot, or postPaid on demand). Each sell policy is one
(availability_zone_id, flavor_id, sell_mode); its sell_status is available or sellout (sold out).
An AZ with no policy for a flavor does not sell it. flavor_id is a prefix match: rows of other
flavors are dropped. Pages hold at most `limit` rows (default 1000); the next page starts after
`marker`, the id of the last row. Huawei's reference marks postPaid "not supported currently"
(the API is documented for spot and IES flavors): an on-demand answer with no policy at all is an
InputError (the preflight then says "not asked"), never "sold nowhere".

Credentials: HW_ACCESS_KEY / HW_SECRET_KEY (the provider's variables) and HW_PROJECT_ID, the
project of the region. Endpoint: the spec's `endpoints: {ecs:}` (ENDPOINT_KEY; an emulator's
URL, http://host:port), else https://ecs.<region>.myhuaweicloud.com.
"""

from __future__ import annotations

from typing import Any

from huaweicloudsdkcore.auth.credentials import BasicCredentials
from huaweicloudsdkcore.exceptions.exceptions import SdkException
from huaweicloudsdkecs.v2 import EcsClient, ListFlavorSellPoliciesRequest

from trainkit.clouds.base import OFFER_AVAILABLE, OFFER_LISTED, OFFER_SOLD_OUT
from trainkit.clouds.prices_huaweicloud import required_env
from trainkit.errors import InputError

ENDPOINT_KEY = "ecs"   # the spec's `endpoints:` entry this API is reached through (cluster/preflight.py)
PAGE = 1000  # the API's default and documented page size
_STATUS = {"available": OFFER_AVAILABLE, "sellout": OFFER_SOLD_OUT, "sold_out": OFFER_SOLD_OUT}


def offers(region: str, types: list[str], spot: bool, endpoint: str | None = None, **_: Any
           ) -> dict[tuple[str, str], str]:
    env = required_env(("HW_ACCESS_KEY", "HW_SECRET_KEY", "HW_PROJECT_ID"), "Huawei ListFlavorSellPolicies",
                       "export the access key and the project id of the region")
    client = EcsClient.new_builder().with_credentials(
        BasicCredentials(env["HW_ACCESS_KEY"], env["HW_SECRET_KEY"], env["HW_PROJECT_ID"])) \
        .with_endpoint(endpoint or f"https://ecs.{region}.myhuaweicloud.com").build()
    mode = "spot" if spot else "postPaid"
    found: dict[tuple[str, str], str] = {}
    for flavor in types:
        rows: list[dict[str, Any]] = []
        marker = None
        while True:
            req = ListFlavorSellPoliciesRequest(flavor_id=flavor, sell_mode=mode, limit=PAGE, marker=marker)
            try:
                page = [p.to_dict() for p in client.list_flavor_sell_policies(req).sell_policies or []]
            except SdkException as err:
                raise InputError(f"Huawei ListFlavorSellPolicies in {region} failed: {err}") from None
            rows += page
            if len(page) < PAGE or page[-1].get("id") is None:
                break
            marker = str(page[-1]["id"])
        found.update(parse(rows, [flavor], mode))
    if not found and not spot:
        raise InputError(f"Huawei ListFlavorSellPolicies in {region} lists no postPaid policy for "
                         f"{', '.join(types)} (documented as spot only): on-demand stock unknown")
    return found


def parse(rows: list[dict[str, Any]], types: list[str], mode: str) -> dict[tuple[str, str], str]:
    """Sell policies -> {(zone, flavor): status}, only `types` sold as `mode`; a sell_status other
    than available/sellout counts as listed with no stock reported. Pure."""
    found: dict[tuple[str, str], str] = {}
    for row in rows:
        zone, flavor = row.get("availability_zone_id"), row.get("flavor_id")
        if not zone or flavor not in types or row.get("sell_mode") not in (None, mode):
            continue
        if found.get((zone, flavor)) != OFFER_AVAILABLE:  # two policies for one pair: in stock wins
            found[(zone, flavor)] = _STATUS.get(str(row.get("sell_status")), OFFER_LISTED)
    return found
