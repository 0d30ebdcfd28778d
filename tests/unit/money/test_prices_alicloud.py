"""Alibaba price adapter against a local stand-in for the ECS API (the real one cannot be reached).

The stand-in answers DescribePrice and DescribeSpotPriceHistory with the response shapes from
Alibaba's ECS API reference (PriceInfo.Price{OriginalPrice, DiscountPrice, TradePrice, Currency,
DetailInfos.DetailInfo[]}; SpotPrices.SpotPriceType[]{ZoneId, InstanceType, SpotPrice,
OriginPrice, Timestamp, NetworkType}). The official SDK reaches it through Config(endpoint, protocol).
"""

from __future__ import annotations

import pytest
import yaml


def action(req: dict) -> str:
    """The SDK signs with ACS3-HMAC-SHA256 and names the action in the x-acs-action header."""
    return req["headers"].get("x-acs-action") or req["query"].get("Action")


def answer(req: dict) -> dict:
    action_ = action(req)
    if action_ == "DescribePrice":
        return {"RequestId": "1", "PriceInfo": {"Rules": {"Rule": []}, "Price": {
            "OriginalPrice": 12.0, "DiscountPrice": 2.4, "TradePrice": 9.6, "Currency": "CNY",
            "DetailInfos": {"DetailInfo": [
                {"Resource": "instanceType", "OriginalPrice": 11.0, "DiscountPrice": 2.2, "TradePrice": 8.8},
                {"Resource": "systemDisk", "OriginalPrice": 1.0, "DiscountPrice": 0.2, "TradePrice": 0.8}]}}}}
    rows = [{"ZoneId": "cn-hangzhou-i", "InstanceType": "ecs.gn7i-c8g1.2xlarge", "SpotPrice": 3.1,
             "OriginPrice": 11.0, "Timestamp": "2026-11-30T10:00:00Z", "NetworkType": "vpc"},
            {"ZoneId": "cn-hangzhou-i", "InstanceType": "ecs.gn7i-c8g1.2xlarge", "SpotPrice": 2.9,
             "OriginPrice": 11.0, "Timestamp": "2026-11-30T11:00:00Z", "NetworkType": "vpc"},
            {"ZoneId": "cn-hangzhou-j", "InstanceType": "ecs.gn7i-c8g1.2xlarge", "SpotPrice": 3.5,
             "OriginPrice": 11.0, "Timestamp": "2026-11-30T11:00:00Z", "NetworkType": "vpc"}]
    return {"RequestId": "2", "Currency": "CNY", "NextOffset": 0, "SpotPrices": {"SpotPriceType": rows}}


def test_refresh_takes_the_discounted_instance_price_and_the_newest_lowest_spot(
        tmp_path, monkeypatch, capsys, price_stub):
    from trainkit.cli import main

    monkeypatch.setenv("TRAINKIT_PRICES_DIR", str(tmp_path))
    monkeypatch.setenv("ALIBABA_CLOUD_ACCESS_KEY_ID", "LTAItest")
    monkeypatch.setenv("ALIBABA_CLOUD_ACCESS_KEY_SECRET", "test-secret")
    with price_stub(answer) as (url, seen), pytest.raises(SystemExit) as exc:
        main(["prices", "refresh", "--cloud", "alicloud", "--region", "cn-hangzhou",
              "--types", "ecs.gn7i-c8g1.2xlarge", "--endpoint", url])
    assert exc.value.code == 0, capsys.readouterr().err
    actions = [action(r) for r in seen]
    assert actions == ["DescribePrice", "DescribeSpotPriceHistory"]
    params = {**seen[0]["query"], **seen[0]["body"]}
    assert params["InstanceType"] == "ecs.gn7i-c8g1.2xlarge" and params["PriceUnit"] == "Hour"
    assert seen[0]["headers"]["authorization"].startswith("ACS3-HMAC-SHA256 Credential=LTAItest")
    data = yaml.safe_load((tmp_path / "alicloud-cn-hangzhou.yaml").read_text())
    # instance line of DetailInfos (not the total with the disk); spot: zone i's newest 2.9 < j's 3.5
    assert data["prices"] == {"ecs.gn7i-c8g1.2xlarge": {"on_demand": 8.8, "spot": 2.9}}
