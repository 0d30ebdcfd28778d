"""Tencent price adapter against a local stand-in for the CVM API (the real one cannot be reached).

The stand-in answers InquiryPriceRunInstances with the response shape from Tencent's API doc
(Response.Price.InstancePrice: UnitPrice, UnitPriceDiscount, ChargeUnit, Discount; RequestId).
The official SDK (tencentcloud-sdk-python-cvm) reaches it through HttpProfile(endpoint, protocol).
"""

from __future__ import annotations

import pytest
import yaml


def answer(req: dict) -> dict:
    spot = req["body"]["InstanceChargeType"] == "SPOTPAID"
    price = {"UnitPrice": 10.0, "ChargeUnit": "HOUR", "UnitPriceDiscount": 2.5 if spot else 8.8,
             "Discount": 25 if spot else 88}
    return {"Response": {"Price": {"InstancePrice": price, "BandwidthPrice": {}},
                         "RequestId": "6ef60bec-0242-43af-bb20-270359fb54a7"}}


def test_refresh_quotes_on_demand_and_spotpaid_with_the_account_discount(tmp_path, monkeypatch, capsys,
                                                                          price_stub):
    from trainkit.cli import main

    monkeypatch.setenv("TRAINKIT_PRICES_DIR", str(tmp_path))
    monkeypatch.setenv("TENCENTCLOUD_SECRET_ID", "AKIDtest")
    monkeypatch.setenv("TENCENTCLOUD_SECRET_KEY", "test-secret")
    with price_stub(answer) as (url, seen), pytest.raises(SystemExit) as exc:
        main(["prices", "refresh", "--cloud", "tencentcloud", "--region", "ap-guangzhou",
              "--zone", "ap-guangzhou-3", "--types", "GN7.2XLARGE32", "--endpoint", url])
    assert exc.value.code == 0, capsys.readouterr().err
    assert [r["headers"]["x-tc-action"] for r in seen] == ["InquiryPriceRunInstances"] * 2
    assert seen[0]["headers"]["x-tc-region"] == "ap-guangzhou"
    assert "TC3-HMAC-SHA256" in seen[0]["headers"]["authorization"]  # signed by the SDK
    assert seen[1]["body"]["InstanceMarketOptions"]["MarketType"] == "spot"
    assert seen[0]["body"]["Placement"] == {"Zone": "ap-guangzhou-3"}
    data = yaml.safe_load((tmp_path / "tencentcloud-ap-guangzhou.yaml").read_text())
    assert data["prices"] == {"GN7.2XLARGE32": {"on_demand": 8.8, "spot": 2.5}}
    assert data["currency"] == "CNY" and "InquiryPriceRunInstances" in data["source"]


def test_tencent_needs_a_zone(tmp_path, monkeypatch, capsys):
    from trainkit.cli import main

    monkeypatch.setenv("TRAINKIT_PRICES_DIR", str(tmp_path))
    monkeypatch.setenv("TENCENTCLOUD_SECRET_ID", "id")  # the credentials are checked first (exit 13)
    monkeypatch.setenv("TENCENTCLOUD_SECRET_KEY", "key")
    with pytest.raises(SystemExit) as exc:
        main(["prices", "refresh", "--cloud", "tencentcloud", "--region", "ap-guangzhou"])
    assert exc.value.code == 2 and "--zone" in capsys.readouterr().err
