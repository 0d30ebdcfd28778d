"""Placement preflight (issue 21): before planning, ask the cloud which of the spec's candidates
it offers and has in stock, and skip the others instead of learning it from a failed apply.

    ask(cluster, order) -> answers | None         the cloud room's offers adapter (its SDK)
    screen(cluster, order, answers, keep) -> (the candidates worth trying, one row per candidate)
    judge(cluster, order, answers) -> rows        pure: a status and a price per candidate

A row is {zone, type, billing, status, price, basis}; status is the adapter's word (available,
offered = listed without stock figures, sold out), "not offered" for a zone the answer leaves out,
or "not asked" when there is no answer (no adapter, no SDK, no credentials, an API error: the
preflight only saves failed attempts, so the candidates then go as the spec orders them and
apply's failover still decides). Sold-out and not-offered candidates are skipped, never the one
the nodes run on now. The plan review shows the rows (stack/review_render.py).
"""

from __future__ import annotations

import importlib
from typing import Any

from trainkit.clouds.base import OFFER_SOLD_OUT, CapacityProblem
from trainkit.clouds.capacity import CapacityError
from trainkit.errors import APPLY
from trainkit.money.cost import node_price
from trainkit.util import progress
from trainkit.util.dist import pip_install

Placement = tuple["str | None", str, bool]  # (zone, instance type, spot), as cluster/failover.py
NOT_OFFERED, NOT_ASKED = "not offered", "not asked"
SKIPPED = (OFFER_SOLD_OUT, NOT_OFFERED)


def ask(cluster, order: list[Placement]) -> dict[bool, dict[tuple[str, str], str]] | None:
    """{spot: {(zone, type): status}} from the room's offers adapter, one call per billing the
    candidates use; a billing the cloud could not be asked about is left out (and one line says
    why: Huawei answers for spot only); None when it could be asked about none."""
    room = cluster.room
    if not room.offers_adapter:
        return None
    types = list(dict.fromkeys(kind for _, kind, _ in order))
    try:
        adapter = importlib.import_module(room.offers_adapter)
    except ImportError as err:
        _not_asked(room.title, types, f"the {room.title} SDK is not installed ({err.name}): "
                                      + pip_install(cluster.spec.cloud))
        return None
    endpoint = (cluster.spec.endpoints or {}).get(getattr(adapter, "ENDPOINT_KEY", ""))
    answers = {}
    for spot in sorted({spot for _, _, spot in order}):
        try:
            answers[spot] = adapter.offers(cluster.spec.region, types, spot, endpoint)
        except Exception as err:  # noqa: BLE001 - credentials, network, API errors: apply still decides
            _not_asked(room.title, types, f"{type(err).__name__}: {' '.join(str(err).split())[:160]}",
                       "spot" if spot else "on-demand")
    return answers or None


def _not_asked(title: str, types: list[str], why: str, billing: str = "") -> None:
    progress.info(f"preflight: {title} was not asked which zones offer {', '.join(types)}"
                  f"{' ' + billing if billing else ''} ({why}); those candidates go in the spec's order")


def judge(cluster, order: list[Placement], answers: dict[bool, dict] | None) -> list[dict[str, Any]]:
    """One row per candidate, in order: the cloud's status and the catalog's price per node-hour."""
    rows = []
    for zone, kind, spot in order:
        said = answers.get(spot) if answers else None
        billing = "spot" if spot else "on_demand"
        price, basis = node_price(cluster, billing, cluster.catalog.get(kind))
        rows.append({"zone": zone, "type": kind, "billing": billing,
                     "status": NOT_ASKED if said is None else said.get((zone, kind), NOT_OFFERED),
                     "price": price, "basis": basis})
    return rows


def screen(cluster, order: list[Placement], answers: dict[bool, dict] | None, keep: Placement | None = None
           ) -> tuple[list[Placement], list[dict[str, Any]]]:
    """The candidates of `order` the cloud may fill by `answers` (`ask`'s; same order) and the rows
    for the review; each skipped one is said in a line. `keep` (where the nodes run now) is never
    skipped. CapacityError (exit 4, nothing created) when the cloud offers none of them."""
    rows = judge(cluster, order, answers)
    kept = [c for c, row in zip(order, rows) if row["status"] not in SKIPPED or c == keep]
    for row in rows:
        if row["status"] in SKIPPED and (row["zone"], row["type"], row["billing"] == "spot") != keep:
            progress.info(f"preflight: {label(row)}: {row['status']}; skipped")
    if not kept:
        lines = "\n".join(f"  {i}. {label(row)}: {row['status']}" for i, row in enumerate(rows, 1))
        first = rows[0]
        raise CapacityError(
            f"{cluster.room.title} offers none of the candidates now:\n{lines}",
            CapacityProblem(kind="capacity", code="preflight", zone=first["zone"], instance_type=first["type"]),
            fix="add zones (`zone:` takes a list, or `auto`) or instance types (`instance.type:` takes a list), "
                "or try again later; nothing was created", exit_code=APPLY)
    return kept, rows


def label(row: dict[str, Any]) -> str:
    return f"{row['type']} in {row['zone']} ({'spot' if row['billing'] == 'spot' else 'on-demand'})"
