"""One cost model for plan, status and cost; billing plans on figures computed by hand."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml

from trainkit.money import billing
from trainkit.money.cost import state_cost
from trainkit.spec.resolve import resolve
from trainkit.spec.schema import ClusterSpec
from trainkit.stack.review import review

REPO = Path(__file__).resolve().parents[3]


def aws_spec(**over) -> ClusterSpec:
    base = {"name": "demo", "cloud": "aws", "region": "us-east-1", "zone": "us-east-1a", "nodes": 2,
            "instance": {"type": "g5.12xlarge"}, "network": {"admin_cidrs": ["203.0.113.0/24"]},
            "storage": {"nas": {"enabled": True, "size_gb": 100}}}
    base.update(over)
    return ClusterSpec.model_validate(base)


def rc(address, type_, index=None):
    return {"address": address, "type": type_, "mode": "managed", "index": index,
            "change": {"actions": ["create"], "after": {}}}


def _instance(i: int, kind: str, spot: bool) -> dict:
    market = [{"market_type": "spot", "spot_options": [{"max_price": "3.5"}]}] if spot else []
    return {"instance_type": kind, "instance_market_options": market,
            "root_block_device": [{"volume_type": "gp3", "volume_size": 200}]}


def test_plan_and_status_report_the_same_cost_for_the_same_cluster():
    """status prices what the state holds; the review prices "now" from the same state, so a plan
    with no changes has now == after == status, and disks, NAS and NAT count, not node price x nodes."""
    cluster = resolve(aws_spec())  # 2 nodes, public_ip head: the module adds a NAT gateway
    state = [(f"module.c.aws_instance.node[{i}]", "aws_instance", _instance(i, "g5.12xlarge", False))
             for i in range(2)] + [(f"module.c.aws_ebs_volume.data[{i}]", "aws_ebs_volume",
                                    {"type": "gp3", "size": 500}) for i in range(2)] \
        + [("module.c.aws_nat_gateway.this[0]", "aws_nat_gateway", {}),
           ("module.c.aws_efs_file_system.this[0]", "aws_efs_file_system", {})]
    plan = {"resource_changes": [{"address": a, "type": t, "mode": "managed", "index": None,
                                  "change": {"actions": ["no-op"], "before": v, "after": v}} for a, t, v in state]}
    planned = review(plan, cluster)["cost"]
    st = state_cost(cluster, [{"type": t, "address": a, "index": None, "values": v} for a, t, v in state])
    assert st["per_hour"] == planned["per_hour"] == planned["current_per_hour"] and planned["delta_per_hour"] == 0
    assert planned["per_hour"] > 2 * 5.672
    assert [i["item"] for i in st["cost"]["items"]] == [i["item"] for i in planned["items"]]


def test_now_is_priced_from_the_state_not_the_new_spec():
    """2 x g5.12xlarge spot in the state, 2 x g5.48xlarge on-demand planned: the delta is the real
    one (it was 0.00 when "now" was priced from the new spec)."""
    cluster = resolve(aws_spec(instance={"type": "g5.48xlarge"}))
    changes = [{"address": f"module.c.aws_instance.node[{i}]", "type": "aws_instance", "mode": "managed",
                "index": i, "change": {"actions": ["delete", "create"], "before": _instance(i, "g5.12xlarge", True),
                                       "after": _instance(i, "g5.48xlarge", False)}} for i in range(2)]
    cost = review({"resource_changes": changes}, cluster)["cost"]
    assert cost["current_per_hour"] == pytest.approx(2 * 3.5 + 2 * 200 * 0.08 / 730, abs=1e-4)
    assert cost["delta_per_hour"] == pytest.approx(2 * 16.288 - 2 * 3.5, abs=1e-4)
    assert cost["currency"] == "USD"


def price_file(tmp_path, **row) -> Path:
    path = tmp_path / "prices.yaml"
    path.write_text(yaml.safe_dump({"currency": "CNY", "region": "cn-hangzhou", "date": "2026-11-30",
                                    "source": "hand-written test prices",
                                    "prices": {"ecs.gn7i-c8g1.2xlarge": row}}))
    return path


def test_billing_plans_match_figures_computed_by_hand(tmp_path):
    spec = ClusterSpec.model_validate(
        {"name": "demo", "cloud": "alicloud", "region": "cn-hangzhou", "zone": "cn-hangzhou-i", "nodes": 2,
         "instance": {"type": "ecs.gn7i-c8g1.2xlarge"}, "network": {"admin_cidrs": ["203.0.113.0/24"]}})
    cluster = resolve(spec, price_file=price_file(tmp_path, on_demand=10, spot=3, subscription_month=5000))
    out = billing.compare(cluster, hours=100, nodes=2, reclaims_per_day=2, checkpoint_s=54, restart_s=300)
    plans = {p["plan"]: p for p in out["plans"]}
    # By hand: on-demand 100 h x 2 nodes x 10 = 2000.
    assert plans["on_demand"]["total"] == 2000.0
    # Subscription: ceil(100/730) = 1 month x 2 nodes x 5000 = 10000.
    assert plans["subscription"]["total"] == 10000.0 and plans["subscription"]["months"] == 1
    # Spot: M = 86400/2 = 43200 s; tau = sqrt(2*54*43200) = 2160 s; overhead 54/2160 = 0.025;
    # lost per reclaim = (1080 + 300)/3600 h = 0.38333 h; 1 - (2/24)*0.38333 = 697/720;
    # wall = 100*1.025*720/697 = 105.8824 h; total = 105.8824 x 2 x 3 = 635.29.
    s = plans["spot"]
    assert s["interval_s"] == 2160.0 and s["checkpoint_overhead"] == 0.025
    assert s["hours_billed"] == pytest.approx(73800 / 697, abs=1e-4)
    assert s["total"] == pytest.approx(635.29, abs=0.01)
    assert out["recommendation"] == "spot"
    # Disks have no price in the shipped alicloud catalog: every plan says so.
    assert all("system disk cloud_essd" in p["unknown"] for p in plans.values())


def test_too_many_reclaims_never_finish_and_unknown_spot_is_not_compared(tmp_path):
    assert billing.spot_wall_hours(10, 200, 60, 3600)["wall_hours"] is None
    spec = ClusterSpec.model_validate(
        {"name": "demo", "cloud": "alicloud", "region": "cn-hangzhou", "zone": "cn-hangzhou-i",
         "instance": {"type": "ecs.gn7i-c8g1.2xlarge"}, "network": {"admin_cidrs": ["203.0.113.0/24"]}})
    out = billing.compare(resolve(spec), hours=10, nodes=1)
    plans = {p["plan"]: p for p in out["plans"]}
    assert plans["spot"]["total"] is None and plans["subscription"]["total"] is None
    assert out["recommendation"] == "on_demand" and "spot" in out["reason"]


CLOUD_EXAMPLES = sorted(p for p in (REPO / "examples/clusters").glob("*.yaml")
                        if yaml.safe_load(p.read_text())["cloud"] not in ("local", "hosts"))


@pytest.mark.parametrize("spec_path", CLOUD_EXAMPLES, ids=lambda p: p.stem)
def test_cost_gives_the_three_plans_for_every_example(spec_path, tmp_path, capsys, monkeypatch):
    from trainkit.cli import main

    monkeypatch.setenv("TRAINKIT_PRICES_DIR", str(tmp_path / "none"))
    with pytest.raises(SystemExit) as exc:
        main(["cost", str(spec_path), "--hours", "50", "--json", "--workdir", str(tmp_path)])
    assert exc.value.code == 0
    out = json.loads(capsys.readouterr().out)
    assert [p["plan"] for p in out["plans"]] == ["on_demand", "subscription", "spot"]
    assert out["checkpoint_source"] == "default" and out["reason"]
    for p in out["plans"]:
        assert p["total"] is None or p["total"] > 0


def test_cost_uses_the_checkpoint_time_a_run_measured(tmp_path, capsys):
    from trainkit.cli import main

    run = tmp_path / "runs" / "20261130-120000"
    run.mkdir(parents=True)
    (run / "summary.json").write_text(json.dumps({"checkpoint_write_s": 12.5}))
    with pytest.raises(SystemExit):
        main(["cost", str(REPO / "examples/clusters/aws.yaml"), "--hours", "5", "--workdir", str(tmp_path)])
    text = capsys.readouterr().out
    assert "checkpoint 12.5 s (measured by the newest run)" in text and "recommendation:" in text


def test_the_modules_billing_record_decides_where_the_instance_does_not_say_spot():
    """An API that omits the market type (the AWS emulator): the module's terraform_data.billing
    input says how the nodes were created."""
    cluster = resolve(aws_spec(spot={"enabled": True, "max_price": 3.5}))
    node = {"type": "aws_instance", "address": "module.c.aws_instance.node[0]", "index": 0,
            "values": {"instance_type": "g5.12xlarge", "instance_market_options": [], "instance_lifecycle": ""}}
    record = {"type": "terraform_data", "address": "module.c.terraform_data.billing", "index": None,
              "values": {"input": {"spot": True, "max_price": 3.5}}}
    assert state_cost(cluster, [node])["cost"]["items"][0]["item"] == "g5.12xlarge (on-demand)"
    item = state_cost(cluster, [node, record])["cost"]["items"][0]
    assert item["item"] == "g5.12xlarge (spot)" and item["per_hour"] == 3.5 and item["upper_bound"]
