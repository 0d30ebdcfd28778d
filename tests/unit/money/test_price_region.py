"""Prices honest about where they come from: a price taken from another region is marked with that
region on every figure and comes with a warning; the cloud pages' cost figures (docs/aws.md,
docs/alicloud.md) are what the commands they quote print."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from click.testing import CliRunner

from trainkit.cli import cli
from trainkit.money.cost import cluster_cost
from trainkit.spec.resolve import load_cluster, nat_gateway, resolve
from trainkit.spec.schema import ClusterSpec

REPO = Path(__file__).resolve().parents[3]


def aws(region: str):
    return resolve(ClusterSpec.model_validate({
        "name": "demo", "cloud": "aws", "region": region, "zone": f"{region}a", "nodes": 2,
        "instance": {"type": "g5.12xlarge"}, "network": {"admin_cidrs": ["203.0.113.0/24"]}}))


def test_a_price_from_another_region_is_marked_with_it_and_warned_about():
    cost = cluster_cost(aws("eu-west-1"), 2, 1, billing="on_demand")
    priced = [i for i in cost["items"] if i["per_hour"] is not None]
    assert priced and all("us-east-1 prices, cluster in eu-west-1" in i["basis"] for i in priced)
    assert len(cost["warnings"]) == 1 and "us-east-1" in cost["warnings"][0]
    assert "prices refresh --cloud aws --region eu-west-1" in cost["warnings"][0]
    home = cluster_cost(aws("us-east-1"), 2, 1, billing="on_demand")  # the catalog's own region
    assert home["warnings"] == [] and "cluster in" not in home["items"][0]["basis"]


def test_cost_and_catalog_print_the_warning(tmp_path):
    out = CliRunner().invoke(cli, ["cost", str(REPO / "examples/clusters/alicloud.yaml"), "--hours", "10",
                                   "--workdir", str(tmp_path)])
    assert out.exit_code == 0, out.output
    assert "cn-shanghai prices, cluster in cn-hangzhou" in out.output
    assert "warning: prices are cn-shanghai's" in out.output
    listed = CliRunner().invoke(cli, ["catalog", "--cloud", "aws", "--region", "eu-west-1"])
    assert listed.exit_code == 0 and "no prices for eu-west-1" in listed.output, listed.output


def _page_cost(page: str) -> tuple[float, str]:
    text = (REPO / "docs" / page).read_text()
    found = re.search(r"\*\*Cost\*\*: at most ([\d.,]+) ([A-Z]{3})/h", text)
    assert found, f"no cost line in docs/{page}"
    return float(found.group(1).replace(",", "")), found.group(2)


@pytest.mark.parametrize("cloud,page", [("aws", "aws.md"), ("alicloud", "alicloud.md")])
def test_the_documented_cost_of_each_example_is_what_the_cost_model_says_at_its_billing(cloud, page):
    cluster = load_cluster(REPO / "examples/clusters" / f"{cloud}.yaml")
    assert cluster.spec.spot.enabled  # a spot example is quoted at spot
    cost = cluster_cost(cluster, cluster.nodes, 1 if nat_gateway(cluster.spec) else 0)
    assert cost["billing"] == "spot" and cost["upper_bound"]
    assert _page_cost(page) == (round(cost["per_hour"], 2), cost["currency"])
