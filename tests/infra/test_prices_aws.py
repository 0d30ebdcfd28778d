"""`trainkit prices refresh --cloud aws`: spot history from the real moto server, on-demand from a
local stand-in for the AWS Price List API.

moto implements EC2 DescribeSpotPriceHistory (one row per zone offering the type, SpotPrice
"0.00001") but not the Pricing service, so GetProducts is answered by a small HTTP server on
127.0.0.1 with the response shape from the AWS Price List Query API reference (GetProducts:
FormatVersion "aws_v1", PriceList = JSON strings with product and terms.OnDemand...pricePerUnit.USD).
boto3 reaches both through its standard endpoint settings (AWS_ENDPOINT_URL_PRICING/_EC2).
"""

from __future__ import annotations

import json
import threading
from http.server import BaseHTTPRequestHandler, HTTPServer

import boto3
import pytest
import yaml

from trainkit.spec.resolve import load_cluster

ON_DEMAND = {"g5.xlarge": "1.0060000000", "g5.12xlarge": "5.6720000000"}


def price_list_item(instance_type: str, usd: str) -> str:
    """One GetProducts PriceList entry, as the API returns it (a JSON string)."""
    return json.dumps({
        "product": {"productFamily": "Compute Instance",
                    "attributes": {"instanceType": instance_type, "regionCode": "us-east-1",
                                   "operatingSystem": "Linux", "tenancy": "Shared"}},
        "serviceCode": "AmazonEC2",
        "terms": {"OnDemand": {"SKU.JRTCKXETXF": {
            "priceDimensions": {"SKU.JRTCKXETXF.6YS6EN2CT7": {
                "unit": "Hrs", "pricePerUnit": {"USD": usd},
                "description": f"${usd} per On Demand Linux {instance_type} Instance Hour"}},
            "sku": "SKU", "effectiveDate": "2026-11-01T00:00:00Z"}}},
        "version": "20261101000000", "publicationDate": "2026-11-01T00:00:00Z"})


class PricingHandler(BaseHTTPRequestHandler):
    requests: list[dict] = []

    def do_POST(self):  # noqa: N802 (http.server's name)
        body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        PricingHandler.requests.append({"target": self.headers.get("X-Amz-Target"), "body": body})
        filters = {f["Field"]: f["Value"] for f in body.get("Filters", [])}
        usd = ON_DEMAND.get(filters.get("instanceType"))
        out = {"FormatVersion": "aws_v1", "PriceList": [price_list_item(filters["instanceType"], usd)] if usd else []}
        data = json.dumps(out).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/x-amz-json-1.1")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def log_message(self, *args):
        pass


@pytest.fixture
def pricing_server():
    server = HTTPServer(("127.0.0.1", 0), PricingHandler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    PricingHandler.requests = []
    yield f"http://127.0.0.1:{server.server_port}"
    server.shutdown()


def test_refresh_writes_a_dated_price_file_that_plan_and_cost_use(moto, pricing_server, tmp_path,
                                                                   monkeypatch, repo, capsys):
    from trainkit.cli import main

    for key, value in {"AWS_ACCESS_KEY_ID": "testing", "AWS_SECRET_ACCESS_KEY": "testing",
                       "AWS_ENDPOINT_URL_PRICING": pricing_server, "AWS_ENDPOINT_URL_EC2": moto,
                       "TRAINKIT_PRICES_DIR": str(tmp_path / "prices")}.items():
        monkeypatch.setenv(key, value)
    with pytest.raises(SystemExit) as exc:
        main(["prices", "refresh", "--cloud", "aws", "--region", "us-east-1",
              "--types", "g5.xlarge,g5.12xlarge,p5.48xlarge"])
    assert exc.value.code == 0, capsys.readouterr()
    data = yaml.safe_load((tmp_path / "prices" / "aws-us-east-1.yaml").read_text())
    assert data["region"] == "us-east-1" and data["currency"] == "USD" and data["date"].endswith("Z")
    assert "GetProducts" in data["source"] and "fetched" in data["source"]
    assert data["prices"]["g5.xlarge"]["on_demand"] == 1.006
    assert data["prices"]["g5.12xlarge"] == {"on_demand": 5.672, "spot": 1e-05}  # moto's spot price
    target = PricingHandler.requests[0]
    assert target["target"] == "AWSPriceListService.GetProducts"
    assert {"Type": "TERM_MATCH", "Field": "regionCode", "Value": "us-east-1"} in target["body"]["Filters"]
    # plan and cost now price g5.12xlarge spot from the refreshed file, saying where from and when
    cluster = load_cluster(repo / "examples" / "clusters" / "aws.yaml")
    assert cluster.instance.type == "g5.12xlarge" and cluster.instance.spot == 1e-05
    assert cluster.catalog.price_date == data["date"] and cluster.catalog.price_region == "us-east-1"
    with pytest.raises(SystemExit):
        main(["cost", str(repo / "examples" / "clusters" / "aws.yaml"), "--hours", "10",
              "--workdir", str(tmp_path / "ws")])
    assert "spot price (AWS Price List API" in capsys.readouterr().out


def test_refresh_refuses_unknown_types_and_clouds(tmp_path, monkeypatch, capsys):
    from trainkit.cli import main

    monkeypatch.setenv("TRAINKIT_PRICES_DIR", str(tmp_path))
    for argv, words in ((["--cloud", "aws", "--region", "us-east-1", "--types", "g5.huge"], "g5.huge"),
                        (["--cloud", "moon", "--region", "x"], "moon")):
        with pytest.raises(SystemExit) as exc:
            main(["prices", "refresh", *argv])
        assert exc.value.code == 2 and words in capsys.readouterr().err
    assert not list(tmp_path.iterdir())


def test_spot_prices_per_zone_come_from_the_real_moto_server(moto, monkeypatch):
    # `zone: auto` on spot orders the zones by these (cluster/failover.py)
    from trainkit.clouds import prices_aws

    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "testing")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "testing")
    found = prices_aws.spot_by_zone("us-east-1", ["g5.12xlarge"], {"ec2": moto})
    assert found and all(kind == "g5.12xlarge" and zone.startswith("us-east-1") for zone, kind in found)
    assert min(found.values()) == prices_aws.spot(boto3.client(
        "ec2", region_name="us-east-1", endpoint_url=moto), ["g5.12xlarge"])["g5.12xlarge"]
