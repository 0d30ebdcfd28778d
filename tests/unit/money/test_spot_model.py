"""The spot vs on-demand model (money/spot.py) on figures computed by hand, and `trainkit cost` saying
what spot saves at a checkpoint interval."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from trainkit.catalog import load_catalog
from trainkit.clouds import get as get_cloud
from trainkit.money import spot

REPO = Path(__file__).resolve().parents[3]
AWS = REPO / "examples/clusters/aws.yaml"


def test_each_reclaim_loses_half_an_interval_plus_the_restart():
    # 2 reclaims/day, c = 3600 s, r = 600 s: lost (1800 + 600)/3600 = 2/3 h per reclaim;
    # T = 100 / (1 - (2/24)(2/3)) = 100 / (17/18) = 105.882 h; reclaims = 2 x T / 24.
    out = spot.spot_wall(100, 2, 3600, 600)
    assert out["wall_hours"] == pytest.approx(1800 / 17, abs=1e-5)
    assert out["reclaims"] == pytest.approx(2 * 1800 / 17 / 24, abs=1e-5)
    assert out["lost_work_hours"] == pytest.approx(out["reclaims"] * 0.5, abs=1e-5)
    assert out["restart_hours"] == pytest.approx(out["reclaims"] / 6, abs=1e-5)
    assert out["wall_hours"] == pytest.approx(100 + out["lost_work_hours"] + out["restart_hours"], abs=1e-4)


def test_checkpoint_writes_count_on_spot_and_young_picks_the_interval_when_none_is_given():
    assert spot.young_interval_s(54, 2) == pytest.approx(2160)
    out = spot.spot_wall(100, 2, None, 300, checkpoint_write_s=54)
    assert out["interval_s"] == 2160 and out["checkpoint_overhead"] == pytest.approx(0.025)
    assert spot.spot_wall(100, 0, None, 600)["wall_hours"] == 100     # no reclaims: no overhead
    assert spot.spot_wall(10, 200, 3600, 3600)["wall_hours"] is None   # reclaimed faster than it restarts
    with pytest.raises(ValueError):
        spot.spot_wall(10, 1, 0, 60)


def test_the_ratio_counts_every_spot_node_hour_and_the_controller():
    # 2 nodes, 100 h on-demand at 1.0 = 200; spot 110 h x 2 x 0.3 = 66 + controller 110 x 0.02 = 2.2.
    out = spot.price_ratio(2, 100, 110, 1.0, 0.3, 0.02)
    assert out["on_demand_total"] == 200 and out["spot_total"] == pytest.approx(68.2)
    assert out["ratio"] == pytest.approx(0.341) and out["saving"] == pytest.approx(131.8)
    unknown = spot.price_ratio(2, 100, 110, 1.0, 0.3, None)
    assert unknown["unknown"] == ["controller"] and unknown["spot_total"] == pytest.approx(66)
    assert spot.price_ratio(2, 100, 110, 1.0, None, 0.02)["ratio"] is None
    # Break-even: (0.30 - 2.2/200) x 100/110 = 0.26272...
    assert spot.break_even_price_ratio(0.30, 2, 100, 110, 0.02, 1.0) == pytest.approx(0.2627, abs=1e-4)


def test_the_controller_is_the_cheapest_cpu_type_with_two_vcpus_and_two_gib():
    aws = spot.controller_price(load_catalog(get_cloud("aws")))
    assert aws["type"] == "t3a.small" and aws["per_hour"] == 0.0188
    ali = spot.controller_price(load_catalog(get_cloud("alicloud")))
    assert ali["per_hour"] is None and "price unknown" in ali["basis"]
    assert spot.controller_price(None)["type"] is None


def test_cost_prices_the_controller_the_spec_names_as_the_module_renders_it():
    aws = load_catalog(get_cloud("aws"))
    named = spot.controller_price(aws, "t3.small")
    assert named["type"] == "t3.small" and named["per_hour"] != spot.controller_price(aws)["per_hour"]
    unknown = spot.controller_price(aws, "t3.nope")
    assert unknown["per_hour"] is None and "t3.nope not in the catalog" in unknown["basis"]


def _cost(capsys, monkeypatch, tmp_path, *args) -> tuple[int, str]:
    from trainkit.cli import main

    monkeypatch.setenv("TRAINKIT_PRICES_DIR", str(tmp_path / "none"))
    with pytest.raises(SystemExit) as exc:
        main(["cost", str(AWS), "--hours", "100", "--workdir", str(tmp_path), *args])
    captured = capsys.readouterr()
    return exc.value.code, captured.out + captured.err


def test_cost_says_what_spot_saves_at_the_given_checkpoint_interval(capsys, monkeypatch, tmp_path):
    code, text = _cost(capsys, monkeypatch, tmp_path, "--checkpoint-every", "1800", "--band", ">20%", "--json")
    assert code == 0
    out = json.loads(text)
    s = next(p for p in out["plans"] if p["plan"] == "spot")
    assert s["interval_s"] == 1800 and s["controller"]["type"] == "t3a.small"
    assert out["reclaims"]["share_per_month"] == 0.25 and "instance-advisor" in out["reclaims"]["source"]
    by = {p["plan"]: p["total"] for p in out["plans"]}
    assert out["spot_vs_on_demand"]["ratio"] == pytest.approx(by["spot"] / by["on_demand"], abs=1e-4)
    # The plan's hours are the model's at the given interval, the 60 s default write and 600 s restart.
    rate = out["reclaims"]["reclaims_per_day"]
    assert s["hours_billed"] == spot.spot_wall(100, rate, 1800, 600, 60)["wall_hours"]
    # At 4 reclaims a day a 10 h interval loses more than its fewer writes save: spot costs more.
    _, text = _cost(capsys, monkeypatch, tmp_path, "--checkpoint-every", "36000", "--reclaims-per-day", "4", "--json")
    _, short = _cost(capsys, monkeypatch, tmp_path, "--checkpoint-every", "1800", "--reclaims-per-day", "4", "--json")
    assert json.loads(text)["spot_vs_on_demand"]["ratio"] > json.loads(short)["spot_vs_on_demand"]["ratio"]
    code, text = _cost(capsys, monkeypatch, tmp_path, "--checkpoint-every", "1800")
    assert code == 0 and "checkpoint every 1800 s (given)" in text and "spot / on-demand for the same work" in text


def test_cost_takes_the_interval_from_the_train_config(capsys, monkeypatch, tmp_path):
    config = tmp_path / "train.yaml"
    config.write_text("checkpoint: {interval: 900}\n")
    code, text = _cost(capsys, monkeypatch, tmp_path, "--config", str(config), "--json")
    out = json.loads(text)
    assert code == 0 and out["checkpoint_every"] == 900 and "train.yaml" in out["checkpoint_every_source"]
    assert next(p for p in out["plans"] if p["plan"] == "spot")["interval_s"] == 900
    code, text = _cost(capsys, monkeypatch, tmp_path, "--config", str(REPO / "examples/train/digits.yaml"), "--json")
    assert code == 0 and json.loads(text)["checkpoint_every"] is None    # interval: auto -> Young's


@pytest.mark.parametrize("args,option", [(["--checkpoint-every", "0"], "--checkpoint-every"),
                                         (["--checkpoint-every", "60", "--config", "{steps}"], "--config"),
                                         (["--config", "{steps}"], "checkpoint.every_n_steps"),
                                         (["--checkpoint-every", "nan"], "--checkpoint-every"),
                                         (["--band", "7%"], "--band"),
                                         (["--band", "<5%", "--reclaims-per-day", "1"], "--band")])
def test_cost_refuses_bad_spot_options_naming_them(capsys, monkeypatch, tmp_path, args, option):
    steps = tmp_path / "steps.yaml"
    steps.write_text("checkpoint: {every_n_steps: 50}\n")
    code, text = _cost(capsys, monkeypatch, tmp_path, *(a.replace("{steps}", str(steps)) for a in args))
    assert code == 2 and option in text and "Traceback" not in text
