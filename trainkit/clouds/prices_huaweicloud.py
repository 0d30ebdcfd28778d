"""Huawei Cloud prices through the official SDK (huaweicloudsdkbss): BSS price inquiry API
ListOnDemandResourceRatings ("Querying Prices of Pay-per-Use Products"), one ECS flavor per
product line: cloud_service_type hws.service.type.ec2, resource_type hws.resource.type.vm,
resource_spec "<flavor>.linux", usage_factor Duration, usage_measure_id 4 (hour). `amount` is the
price after the account's discounts. Huawei documents no spot price inquiry: spot stays unknown.

Credentials: HW_ACCESS_KEY / HW_SECRET_KEY (the provider's variables); BSS is a global service
that also needs the account (domain) id HW_DOMAIN_ID and a project id HW_PROJECT_ID of the region.
"""

from __future__ import annotations

import os
from typing import Any

from huaweicloudsdkbss.v2 import BssClient
from huaweicloudsdkbss.v2.model import DemandProductInfo, ListOnDemandResourceRatingsRequest, RateOnDemandReq
from huaweicloudsdkcore.auth.credentials import GlobalCredentials
from huaweicloudsdkcore.exceptions.exceptions import SdkException

from trainkit.errors import InputError

SOURCE = "Huawei BSS ListOnDemandResourceRatings (amount after discounts)"
ENDPOINT = "https://bss.myhuaweicloud.com"
HOUR_MEASURE_ID = 4  # BSS measurement unit 4 = hour (BSS API "Querying Usage Types", measure ids)


def required_env(names: tuple[str, ...], what: str, fix: str) -> dict[str, str]:
    """{name: value} of the environment variables `names`; InputError naming the missing ones."""
    env = {n: os.environ.get(n) or "" for n in names}
    missing = [n for n, v in env.items() if not v]
    if missing:
        raise InputError(f"{what} needs {', '.join(missing)} in the environment", fix=fix)
    return env


def fetch(region: str, types: list[str], endpoint: str | None = None, **_: Any) -> dict[str, Any]:
    env = required_env(("HW_ACCESS_KEY", "HW_SECRET_KEY", "HW_DOMAIN_ID", "HW_PROJECT_ID"), "Huawei price inquiry",
                       "export the access key, account (domain) id and the region's project id")
    client = BssClient.new_builder().with_credentials(
        GlobalCredentials(env["HW_ACCESS_KEY"], env["HW_SECRET_KEY"], env["HW_DOMAIN_ID"])) \
        .with_endpoint(endpoint or ENDPOINT).build()
    products = [DemandProductInfo(id=str(i), cloud_service_type="hws.service.type.ec2",
                                  resource_type="hws.resource.type.vm", resource_spec=f"{t}.linux",
                                  region=region, usage_factor="Duration", usage_value=1,
                                  usage_measure_id=HOUR_MEASURE_ID, subscription_num=1)
                for i, t in enumerate(types)]
    req = ListOnDemandResourceRatingsRequest(body=RateOnDemandReq(
        project_id=env["HW_PROJECT_ID"], product_infos=products))
    try:
        resp = client.list_on_demand_resource_ratings(req)
    except SdkException as err:
        raise InputError(f"Huawei price inquiry failed: {err}") from None
    by_id = {r.id: r.amount for r in resp.product_rating_results or []}
    prices = {t: {"on_demand": float(by_id[str(i)]) if by_id.get(str(i)) is not None else None, "spot": None}
              for i, t in enumerate(types)}
    return {"currency": resp.currency or "CNY", "source": SOURCE, "prices": prices}
