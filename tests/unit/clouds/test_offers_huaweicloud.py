"""Huawei offers adapter against a local stand-in for the ECS API (the real one cannot be reached).

The stand-in answers ListFlavorSellPolicies (GET /v1/{project_id}/cloudservers/flavor-sell-policies)
with the response shape from Huawei's ECS API reference (count, sell_policies[{id, flavor_id,
sell_status available/sellout, availability_zone_id, sell_mode, spot_options}]); flavor_id is a
prefix match there, so a longer flavor name comes back too. The official SDK (huaweicloudsdkecs)
reaches it through with_endpoint.
"""

from __future__ import annotations

import pytest

import trainkit.clouds.offers_huaweicloud as adapter
from trainkit.clouds.base import OFFER_AVAILABLE, OFFER_LISTED, OFFER_SOLD_OUT
from trainkit.clouds.offers_huaweicloud import offers, parse
from trainkit.errors import InputError

pytestmark = pytest.mark.unit

FLAVOR = "p2s.2xlarge.8"


def policy(i: int, zone: str, status: str, mode: str, flavor: str = FLAVOR) -> dict:
    spot = {"longest_spot_duration_hours": 6, "largest_spot_duration_count": 1,
            "interruption_policy": "immediate"} if mode == "spot" else None
    return {"id": i, "flavor_id": flavor, "sell_status": status, "availability_zone_id": zone,
            "sell_mode": mode, "spot_options": spot}


def answer(req: dict) -> dict:
    mode = req["query"]["sell_mode"]
    rows = [policy(1, "cn-north-4a", "available", mode), policy(2, "cn-north-4b", "sellout", mode),
            policy(3, "cn-north-4c", "available", mode, flavor=FLAVOR + "x")]  # prefix match
    after = int(req["query"].get("marker", 0))
    rows = [r for r in rows if r["id"] > after][: int(req["query"].get("limit", 1000))]
    return {"count": len(rows), "sell_policies": rows}


@pytest.fixture
def creds(monkeypatch):
    for k, v in {"HW_ACCESS_KEY": "AKtest", "HW_SECRET_KEY": "sk", "HW_PROJECT_ID": "p0"}.items():
        monkeypatch.setenv(k, v)


@pytest.mark.parametrize("spot, mode", [(False, "postPaid"), (True, "spot")])
def test_offers_reads_available_and_sold_out_per_zone(creds, price_stub, spot, mode):
    with price_stub(answer) as (url, seen):
        got = offers("cn-north-4", [FLAVOR], spot, endpoint=url)
    assert len(seen) == 1 and seen[0]["method"] == "GET"
    assert seen[0]["path"] == "/v1/p0/cloudservers/flavor-sell-policies"
    assert seen[0]["query"]["flavor_id"] == FLAVOR and seen[0]["query"]["sell_mode"] == mode
    auth = seen[0]["headers"]["authorization"]
    assert "SDK-HMAC-SHA256" in auth and "Access=AKtest" in auth  # signed by the SDK
    # the longer flavor from the prefix match is dropped; cn-north-4c is not offered
    assert got == {("cn-north-4a", FLAVOR): OFFER_AVAILABLE, ("cn-north-4b", FLAVOR): OFFER_SOLD_OUT}


def test_offers_follow_the_marker_to_the_last_page(creds, price_stub, monkeypatch):
    monkeypatch.setattr(adapter, "PAGE", 2)
    with price_stub(answer) as (url, seen):
        got = offers("cn-north-4", [FLAVOR], True, endpoint=url)
    assert [r["query"].get("marker") for r in seen] == [None, "2"]
    assert all(r["query"]["limit"] == "2" for r in seen)
    assert got == {("cn-north-4a", FLAVOR): OFFER_AVAILABLE, ("cn-north-4b", FLAVOR): OFFER_SOLD_OUT}


def test_no_on_demand_policy_at_all_is_an_error_not_sold_nowhere(creds, price_stub):
    # Huawei documents postPaid as "not supported currently": an empty answer says nothing
    with price_stub(lambda req: {"count": 0, "sell_policies": []}) as (url, _):
        assert offers("cn-north-4", [FLAVOR], True, endpoint=url) == {}  # spot: sold nowhere
        with pytest.raises(InputError) as exc:
            offers("cn-north-4", [FLAVOR], False, endpoint=url)
    assert "ListFlavorSellPolicies" in str(exc.value) and "postPaid" in str(exc.value)


def test_missing_variables_are_named(monkeypatch):
    monkeypatch.setenv("HW_ACCESS_KEY", "AKtest")
    monkeypatch.setenv("HW_SECRET_KEY", "sk")
    monkeypatch.delenv("HW_PROJECT_ID", raising=False)
    with pytest.raises(InputError) as exc:
        offers("cn-north-4", [FLAVOR], False)
    assert "HW_PROJECT_ID" in str(exc.value) and "HW_ACCESS_KEY" not in str(exc.value)


def test_sdk_error_is_an_input_error_naming_the_api(creds, price_stub):
    with price_stub(answer) as (url, _):
        pass  # the stand-in is gone: nothing listens on its port any more
    with pytest.raises(InputError) as exc:
        offers("cn-north-4", [FLAVOR], False, endpoint=url)
    assert "ListFlavorSellPolicies" in str(exc.value) and "Traceback" not in str(exc.value)


def test_parse_keeps_only_asked_flavors_and_mode():
    rows = [policy(1, "z-1", "available", "spot"), policy(2, "z-1", "available", "spot", flavor="B"),
            policy(3, "z-2", "new_status", "spot"), policy(4, "z-3", "available", "postPaid"),
            policy(5, "z-4", "sellout", "spot"), policy(6, "z-4", "available", "spot")]
    assert parse(rows, [FLAVOR], "spot") == {("z-1", FLAVOR): OFFER_AVAILABLE, ("z-2", FLAVOR): OFFER_LISTED,
                                             ("z-4", FLAVOR): OFFER_AVAILABLE}
    assert parse([], [FLAVOR], "spot") == {}
