"""Catalog data and selection: cheapest feasible type, checked against brute force over the data."""

from __future__ import annotations

import itertools
import json

import pytest

from trainkit import clouds
from trainkit.catalog import catalog_clouds, load_catalog, select, with_prices
from trainkit.cli import main
from trainkit.errors import InputError


def brute_force(catalog, gpu, gpus, mem, spot):
    """Independent reference: scan every row, keep the feasible ones, take the minimum."""
    best = None
    for inst in catalog.instances:
        if gpu and inst.gpu.lower() != gpu.lower():
            continue
        if gpus and (inst.gpus or 0) < gpus:
            continue
        if mem and (inst.gpu_memory_gb or 0) < mem:
            continue
        price = inst.spot if spot and inst.spot is not None else inst.on_demand
        key = (price is None, price if price is not None else 0, inst.gpus or 0, inst.vcpus or 0, inst.type)
        if best is None or key < best[0]:
            best = (key, inst.type)
    return best and best[1]


@pytest.mark.parametrize("cloud", catalog_clouds())
def test_select_matches_brute_force_for_every_requirement_combination(cloud):
    cat = load_catalog(clouds.get(cloud))
    models = sorted({i.gpu for i in cat.instances}) + [None]
    for gpu, gpus, mem, spot in itertools.product(models, [None, 1, 2, 4, 8], [None, 16, 24, 40, 80], [False, True]):
        expected = brute_force(cat, gpu, gpus, mem, spot)
        if expected is None:
            with pytest.raises(InputError):
                select(cat, gpu, gpus, mem, spot)
        else:
            assert select(cat, gpu, gpus, mem, spot).type == expected, (gpu, gpus, mem, spot)


@pytest.mark.parametrize("cloud", catalog_clouds())
def test_catalog_rows_are_complete_and_unique(cloud):
    cat = load_catalog(clouds.get(cloud))
    names = [i.type for i in cat.instances]
    assert len(names) == len(set(names))
    for inst in cat.instances:
        assert inst.gpu
        if inst.on_demand is not None:
            assert inst.on_demand > 0 and cat.price_source and cat.price_date


def test_prices_file_overrides_and_reorders(tmp_path):
    cat = load_catalog(clouds.get("tencentcloud"))  # no shipped prices: everything unknown
    assert all(i.on_demand is None for i in cat.instances)
    prices = tmp_path / "prices.yaml"
    prices.write_text("currency: CNY\ndate: '2026-11'\nprices:\n"
                      "  GT4.8XLARGE192: {on_demand: 50}\n  GT4.4XLARGE96: {on_demand: 60, spot: 12}\n")
    priced = with_prices(cat, prices)
    assert select(priced, "A100").type == "GT4.8XLARGE192"
    assert select(priced, "A100", spot=True).type == "GT4.4XLARGE96"
    assert priced.price_source == str(prices)


def test_prices_file_with_unknown_type_names_the_key(tmp_path):
    prices = tmp_path / "prices.yaml"
    prices.write_text("prices:\n  GT4.8XLARGE19: {on_demand: 50}\n")
    with pytest.raises(InputError, match=r"prices\.GT4\.8XLARGE19: not a tencentcloud type.*") as err:
        with_prices(load_catalog(clouds.get("tencentcloud")), prices)
    assert "GT4.8XLARGE192" in err.value.fix


def test_catalog_command_lists_cheapest_first_with_unknown_prices_last(capsys):
    with pytest.raises(SystemExit) as exc:
        main(["catalog", "--cloud", "alicloud", "--gpu", "A100", "--json"])
    assert exc.value.code == 0
    rows = json.loads(capsys.readouterr().out)
    prices = [r["price_per_hour"] for r in rows]
    known = [p for p in prices if p is not None]
    assert known == sorted(known) and prices[: len(known)] == known
    assert rows[0]["type"] == "ecs.gn7-c12g1.3xlarge" and rows[0]["price_source"]
