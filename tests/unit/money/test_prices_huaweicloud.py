"""Huawei price adapter against a local stand-in for the BSS API (the real one cannot be reached).

The stand-in answers ListOnDemandResourceRatings (POST /v2/bills/ratings/on-demand-resources)
with the response shape from Huawei's BSS API reference (amount, discount_amount,
official_website_amount, measure_id, currency, product_rating_results[{id, product_id, amount,
...}]). The official SDK (huaweicloudsdkbss) reaches it through with_endpoint.
"""

from __future__ import annotations

import pytest
import yaml


def answer(req: dict) -> dict:
    results = [{"id": p["id"], "product_id": f"OFFI{p['id']}", "amount": 20.5 if p["id"] == "0" else None,
                "discount_amount": 4.5, "official_website_amount": 25.0, "measure_id": 1}
               for p in req["body"]["product_infos"]]
    return {"amount": 20.5, "discount_amount": 4.5, "official_website_amount": 25.0, "measure_id": 1,
            "currency": "CNY", "product_rating_results": results}


def test_refresh_asks_bss_for_each_flavor_by_the_hour(tmp_path, monkeypatch, capsys, price_stub):
    from trainkit.cli import main

    for k, v in {"TRAINKIT_PRICES_DIR": str(tmp_path), "HW_ACCESS_KEY": "AKtest", "HW_SECRET_KEY": "sk",
                 "HW_DOMAIN_ID": "d0", "HW_PROJECT_ID": "p0"}.items():
        monkeypatch.setenv(k, v)
    with price_stub(answer) as (url, seen), pytest.raises(SystemExit) as exc:
        main(["prices", "refresh", "--cloud", "huaweicloud", "--region", "cn-north-4",
              "--types", "p2s.2xlarge.8,p2s.4xlarge.8", "--endpoint", url])
    assert exc.value.code == 0, capsys.readouterr().err
    assert seen[0]["path"] == "/v2/bills/ratings/on-demand-resources" and seen[0]["method"] == "POST"
    assert "SDK-HMAC-SHA256" in seen[0]["headers"]["authorization"]
    first = seen[0]["body"]["product_infos"][0]
    assert first["resource_spec"] == "p2s.2xlarge.8.linux" and first["usage_measure_id"] == 4
    assert seen[0]["body"]["project_id"] == "p0"
    data = yaml.safe_load((tmp_path / "huaweicloud-cn-north-4.yaml").read_text())
    assert data["prices"] == {"p2s.2xlarge.8": {"on_demand": 20.5}}  # the other stays unknown


def test_huawei_says_which_variables_are_missing(tmp_path, monkeypatch, capsys):
    from trainkit.cli import main

    monkeypatch.setenv("TRAINKIT_PRICES_DIR", str(tmp_path))
    for k in ("HW_ACCESS_KEY", "HW_SECRET_KEY", "HW_DOMAIN_ID", "HW_PROJECT_ID"):
        monkeypatch.delenv(k, raising=False)
    with pytest.raises(SystemExit) as exc:
        main(["prices", "refresh", "--cloud", "huaweicloud", "--region", "cn-north-4"])
    assert exc.value.code == 13 and "HW_ACCESS_KEY" in capsys.readouterr().err  # no credentials: exit 13
    monkeypatch.setenv("HW_ACCESS_KEY", "ak")
    monkeypatch.setenv("HW_SECRET_KEY", "sk")
    with pytest.raises(SystemExit) as exc:
        main(["prices", "refresh", "--cloud", "huaweicloud", "--region", "cn-north-4"])
    assert exc.value.code == 2 and "HW_PROJECT_ID" in capsys.readouterr().err
