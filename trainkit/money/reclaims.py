"""How often spot nodes are reclaimed, from each cloud's published figure. Pure.

The data is `trainkit/catalog/reclaims.yaml` (each cloud's figure, its kind and its source). A
figure is a share of spot capacity reclaimed per month; per node it is a Poisson rate:
a node survives a month with probability 1 - share, so per node-day
`-ln(1 - share) / (HOURS_PER_MONTH / 24)`. A cluster of N spot nodes is reclaimed N times as
often (each node on its own; a reclaim of any one stops the run).
"""

from __future__ import annotations

import math
from functools import lru_cache
from pathlib import Path
from typing import Any

from trainkit.catalog import CATALOG_DIR
from trainkit.errors import InputError
from trainkit.money.cost import HOURS_PER_DAY, HOURS_PER_MONTH
from trainkit.util import yamlload

RATES_FILE = CATALOG_DIR / "reclaims.yaml"
KINDS = ("band", "per_type", "none")


@lru_cache(maxsize=4)
def load_rates(path: Path = RATES_FILE) -> dict[str, Any]:
    """The rates file as {date, clouds: {cloud: {kind, source, assumed, assumption, bands?}}}.

    InputError naming the file and the field when a cloud lacks a source, has an unknown kind, or
    a share outside [0, 1)."""
    data = yamlload.load_file(path, "reclaim rates")
    for cloud, row in (data.get("clouds") or {}).items():
        where = f"{path.name}: clouds.{cloud}"
        if row.get("kind") not in KINDS:
            raise InputError(f"{where}.kind: {row.get('kind')!r} is not one of {', '.join(KINDS)}",
                             fix="say how the cloud publishes its figure")
        if not row.get("source"):
            raise InputError(f"{where}.source: missing", fix="cite the page the figure comes from")
        for name, share in {"assumed": row.get("assumed"), **{f"bands.{k}": v for k, v in
                                                              (row.get("bands") or {}).items()}}.items():
            _check_share(share, f"{where}.{name}")
    return data


def _check_share(share: Any, where: str) -> None:
    if not isinstance(share, (int, float)) or isinstance(share, bool) or not 0 <= share < 1:
        raise InputError(f"{where}: {share!r} is not a share of capacity per month in [0, 1)",
                         fix="write e.g. 0.075 for 7.5% a month")


def node_reclaims_per_day(monthly_share: float) -> float:
    """Expected reclaims per node-day of a node whose capacity pool loses `monthly_share` a month
    (module docstring). 0 for 0; ValueError outside [0, 1)."""
    if not 0 <= monthly_share < 1:
        raise ValueError(f"monthly share {monthly_share!r} is not in [0, 1)")
    return -math.log1p(-monthly_share) / (HOURS_PER_MONTH / HOURS_PER_DAY)


def cloud_rate(cloud: str, band: str | None = None, rates: dict | None = None) -> dict[str, Any]:
    """{cloud, share, kind, basis, source} for `cloud`: the share of `band` where the cloud
    publishes bands and one is named, else the stated assumption. InputError naming --band when
    the band is not one of the cloud's, or the cloud has no bands; and naming the cloud when the
    data has no row for it (hosts and local are not billed)."""
    rates = rates or load_rates()
    row = (rates.get("clouds") or {}).get(cloud)
    if row is None:
        raise InputError(f"cloud {cloud}: no published reclaim figure or assumption in {RATES_FILE.name}",
                         fix="pass --reclaims-per-day")
    bands = row.get("bands") or {}
    if band is not None:
        if band not in bands:
            known = ", ".join(bands) or "none (it publishes no bands)"
            raise InputError(f"--band: {band!r} is not one of {cloud}'s interruption bands",
                             fix=f"use one of: {known}")
        share, basis = bands[band], f"band {band} (modelled as {bands[band]:.1%} a month)"
    else:
        share, basis = row["assumed"], f"assumed {row['assumed']:.1%} a month: {row['assumption']}"
    return {"cloud": cloud, "share_per_month": share, "kind": row["kind"], "basis": basis,
            "source": " ".join(row["source"].split()), "date": rates.get("date")}


def cluster_reclaims_per_day(cloud: str, nodes: int, band: str | None = None,
                             rates: dict | None = None) -> dict[str, Any]:
    """`cloud_rate` plus `per_node_day` and `reclaims_per_day` for `nodes` spot nodes (nodes x per node)."""
    if nodes < 1:
        raise ValueError(f"nodes {nodes!r} < 1")
    rate = cloud_rate(cloud, band, rates)
    per_node = node_reclaims_per_day(rate["share_per_month"])
    return {**rate, "nodes": nodes, "per_node_day": per_node, "reclaims_per_day": per_node * nodes}
