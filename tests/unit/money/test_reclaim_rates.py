"""Reclaim rates from each cloud's published figure (trainkit/catalog/reclaims.yaml), per node and per cluster."""

from __future__ import annotations

import math

import pytest

from trainkit.errors import InputError
from trainkit.money import reclaims


def test_every_cloud_with_a_module_has_a_cited_figure_of_a_known_kind():
    rates = reclaims.load_rates()
    assert set(rates["clouds"]) == {"aws", "alicloud", "tencentcloud", "huaweicloud"}
    for row in rates["clouds"].values():
        assert row["kind"] in reclaims.KINDS and "http" in row["source"]
        assert 0 < row["assumed"] < 1 and row["assumption"]
    assert rates["clouds"]["tencentcloud"]["kind"] == rates["clouds"]["huaweicloud"]["kind"] == "none"
    assert rates["clouds"]["alicloud"]["kind"] == "per_type"
    assert list(rates["clouds"]["aws"]["bands"]) == ["<5%", "5-10%", "10-15%", "15-20%", ">20%"]


def test_a_monthly_share_becomes_a_poisson_rate_per_node_day():
    # A node survives the 730 h month with probability 1 - share: exp(-lambda * 730/24) = 1 - share.
    lam = reclaims.node_reclaims_per_day(0.075)
    assert math.exp(-lam * 730 / 24) == pytest.approx(0.925)
    assert lam == pytest.approx(0.077962 / 30.41667, rel=1e-4)   # -ln(0.925) / (730/24)
    assert reclaims.node_reclaims_per_day(0) == 0
    with pytest.raises(ValueError):
        reclaims.node_reclaims_per_day(1.0)


def test_a_cluster_is_reclaimed_nodes_times_as_often_and_a_band_picks_its_midpoint():
    one = reclaims.cluster_reclaims_per_day("aws", 1, band="10-15%")
    four = reclaims.cluster_reclaims_per_day("aws", 4, band="10-15%")
    assert one["share_per_month"] == 0.125 and "10-15%" in one["basis"]
    assert four["reclaims_per_day"] == pytest.approx(4 * one["reclaims_per_day"])
    default = reclaims.cluster_reclaims_per_day("tencentcloud", 2)
    assert default["kind"] == "none" and default["basis"].startswith("assumed 7.5%")


def test_a_band_the_cloud_does_not_publish_is_refused_naming_the_option():
    with pytest.raises(InputError) as err:
        reclaims.cloud_rate("aws", band="30%")
    assert "--band" in str(err.value) and "5-10%" in err.value.fix
    with pytest.raises(InputError) as err:
        reclaims.cloud_rate("huaweicloud", band="<5%")
    assert "publishes no bands" in err.value.fix
    with pytest.raises(InputError) as err:
        reclaims.cloud_rate("hosts")
    assert "--reclaims-per-day" in err.value.fix


@pytest.mark.parametrize("row,field", [({"kind": "guess", "source": "x", "assumed": 0.1}, "kind"),
                                        ({"kind": "none", "assumed": 0.1}, "source"),
                                        ({"kind": "none", "source": "x", "assumed": 1.5}, "assumed"),
                                        ({"kind": "band", "source": "x", "assumed": 0.1,
                                          "bands": {"<5%": "low"}}, "bands.<5%")])
def test_a_rates_file_with_a_bad_row_names_the_field(tmp_path, row, field):
    path = tmp_path / "reclaims.yaml"
    import yaml

    path.write_text(yaml.safe_dump({"date": "2026-12", "clouds": {"aws": row}}))
    with pytest.raises(InputError) as err:
        reclaims.load_rates(path)
    assert f"clouds.aws.{field}" in str(err.value)
