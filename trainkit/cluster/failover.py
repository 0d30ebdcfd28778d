"""Failover at apply (issue 21): the spec's zone and instance-type candidates, tried in order.

`zone: [a, b]` and `instance: {type: [t1, t2]}` give candidates (t1, a), (t1, b), (t2, a), (t2, b):
every zone of the preferred type first; with `spot: {enabled: true, fallback: on_demand}` the same
candidates follow on-demand once every spot one was refused. When the cloud refuses a candidate for capacity (the
room's documented codes, trainkit.clouds.capacity), apply re-renders with the next one and
applies again: terraform replaces what the refused zone holds (subnet, disks, instances), so
nothing stays behind there. A quota refusal stops at once (another zone draws on the same quota).
Each attempt is one line; the placement that came up is kept in the workspace (placement.json)
so that the next plan keeps it. A workspace without that file (another machine, a CI job on the
same remote state) reads the placement from the state: the zone, type and billing its nodes run
on (`settle`), so its plan does not move the nodes back to the first candidate. When every
candidate is refused, a cluster whose state held nothing before is destroyed again (nothing is
left), and one message lists every attempt.

Failover at recovery (`replace_in_order`): the replacement of a reclaimed node tries the
cluster's placement, then the same candidates, for that node only; the modules' `node_placement`
input places it (another zone gets a subnet of its own, `zone_subnet_cidr`), the survivors keep
their place, and placement.json keeps the node's entry (`nodes`) for the next render
(stack.state.with_node_placement).
"""

from __future__ import annotations

import dataclasses
import importlib
import time
from typing import Any, Callable

from trainkit import errors, records
from trainkit.clouds.capacity import CapacityError
from trainkit.cluster import preflight, strays
from trainkit.cluster.placement import Placement, held, held_apart, node_entry
from trainkit.errors import InputError, TrainkitError
from trainkit.spec.resolve import Cluster
from trainkit.stack.state import render_and_init, state_resources, with_node_placement
from trainkit.util import progress
from trainkit.workspace import REPLACE_PLACEMENT, Workspace, write_atomic

PLACEMENT_FILE = "placement.json"
# Capacity refusals met by apply from this workspace: `zone: auto` tries a zone refused within
# RECENT_S after the others (spot capacity comes and goes within the hour).
HISTORY_FILE = "capacity-refusals.json"
Sweep = Callable[[Cluster, Workspace], list[dict]]
RECENT_S = 3600



def candidates(cluster: Cluster) -> list[Placement]:
    """(zone, type, spot) in the order they are tried: each type's zones before the next type;
    with spot.fallback: on_demand, all of them again on-demand after the spot ones."""
    zones = cluster.spec.zone_candidates or (cluster.spec.zone,)
    types = cluster.spec.instance.type_candidates or (cluster.instance.type,)
    spot = cluster.spec.spot.enabled
    order = [(zone, kind, spot) for kind in types for zone in zones]
    if spot and cluster.spec.spot.fallback == "on_demand":
        order += [(zone, kind, False) for kind in types for zone in zones]
    return order


def placed(cluster: Cluster, zone: str | None, kind: str, spot: bool | None = None) -> Cluster:
    """The cluster with `zone`, `kind` (the catalog's entry for the type) and, when given, spot
    on or off chosen."""
    update: dict[str, Any] = {"zone": zone, "instance": cluster.spec.instance.model_copy(update={"type": kind})}
    if spot is not None and spot != cluster.spec.spot.enabled:
        update["spot"] = cluster.spec.spot.model_copy(update={"enabled": spot})
    return dataclasses.replace(cluster, spec=cluster.spec.model_copy(update=update), instance=cluster.catalog.get(kind))


def _label(cluster: Cluster, zone: str | None, kind: str, spot: bool) -> str:
    """"g5.12xlarge in us-east-1a", with the billing when the spec falls back from spot."""
    billing = f" ({'spot' if spot else 'on-demand'})" if cluster.spec.spot.fallback == "on_demand" else ""
    return f"{kind} in {zone}{billing}"


def remembered(cluster: Cluster, ws: Workspace) -> Cluster:
    """The cluster at the placement the last apply from this workspace came up on, when that is
    still one of the spec's candidates; else as the spec has it (its first candidate)."""
    kept = records.load(ws.root / PLACEMENT_FILE, records.Placement, REPLACE_PLACEMENT)  # InputError if damaged
    if kept is None or kept.zone is None or kept.type is None:
        return cluster
    where = (kept.zone, kept.type, cluster.spec.spot.enabled if kept.spot is None else kept.spot)
    return placed(cluster, *where) if len(candidates(cluster)) > 1 and where in candidates(cluster) else cluster




def settle(cluster: Cluster, ws: Workspace) -> tuple[Cluster, bool]:
    """(the cluster at the placement its nodes run on, whether the state holds anything) for a
    spec with several candidates. Reads the state (render + init) only when this workspace keeps
    no placement.json; a placement found there is kept in it. A spec with one candidate, or a
    state placement that is no longer a candidate, gives the cluster as `remembered` has it."""
    if (ws.root / PLACEMENT_FILE).exists():   # an apply from here came up there
        return remembered(cluster, ws), True
    if len(candidates(cluster)) == 1:
        return cluster, ws.applied_at() is not None
    resources = held_resources(cluster, ws)
    where, apart = held(cluster, resources), {}
    if where is None:
        where, apart = held_apart(cluster, resources)
    if where is None or where not in candidates(cluster):
        return cluster, bool(resources)
    _keep(ws, where, apart)
    return placed(cluster, *where), True




def held_resources(cluster: Cluster, ws: Workspace) -> list[dict]:
    """The state's managed resources (render + `terraform init` against the backend)."""
    runner, _ = render_and_init(cluster, ws)
    return state_resources(runner.state_json().get("values") or {})


def _keep(ws: Workspace, where: Placement, nodes: dict[str, dict] | None = None) -> None:
    """placement.json: where the cluster came up, and `nodes` placed apart from it (the ones kept
    there stay while the cluster's placement does not change; a cluster that moved takes every
    node with it)."""
    zone, kind, spot = where
    if nodes is None:
        try:  # after an apply: a damaged old record (remembered() refused it first) keeps no nodes
            old = records.load(ws.root / PLACEMENT_FILE, records.Placement, REPLACE_PLACEMENT)
        except InputError:
            old = None
        same = old is not None and (old.zone, old.type, old.spot) == (zone, kind, spot)
        nodes = {k: v.model_dump(exclude_unset=True) for k, v in old.nodes.items()} if same else None
    record: dict[str, Any] = {"zone": zone, "type": kind, "spot": spot}
    if nodes:
        record["nodes"] = nodes
    write_atomic(ws.root / PLACEMENT_FILE, records.dump(record, sort_keys=True) + "\n")






def replace_in_order(cluster: Cluster, ws: Workspace, indexes: list[int],
                     attempt: Callable[[Cluster], Any], record: Callable[[dict], None],
                     refused_here: str | None = None, sweep: Sweep | None = None) -> Cluster:
    """Recovery's failover (pure order, side effects in `attempt`): `attempt(cluster)` creates the
    replacements of node `indexes`; refused for capacity, the next candidate after the cluster's
    placement is tried for those nodes only (node_placement: the survivors keep their place and
    ids), each refusal a `placement_refused` event to `record`. Returns the cluster as placed;
    the placement is kept in placement.json. CapacityError listing every attempt when all are
    refused, at once on a quota refusal (spot quota with an on-demand fallback: on-demand next).
    `refused_here` (what the cloud said) skips the cluster's own placement: it was just refused.
    `sweep(cluster, ws)` runs after each try, refused or not (strays.sweep_strays: the instances
    a lost create answer leaked), its events to `record`; every caller that changes a cloud passes it."""
    cluster = with_node_placement(cluster, ws)
    if len(candidates(cluster)) == 1 and not cluster.node_placement:
        _swept(cluster, ws, attempt, record, sweep)   # nowhere else to go: the refusal is the cloud's one message
        return cluster
    nodes = dict(cluster.node_placement)
    here = (cluster.spec.zone, cluster.instance.type, cluster.spec.spot.enabled)
    order = ([] if refused_here else [here]) + [c for c in candidates(cluster) if c != here]
    tried: list[str] = [f"{_label(cluster, *here)}: {refused_here}"] if refused_here else []
    held_by: dict[str, str] = {}     # {zone: subnet} of refused tries: still in the state (node_entry)
    while order:
        where = order.pop(0)
        for i in indexes:
            old = nodes.pop(str(i), None) or {}
            if old.get("zone") and old.get("subnet_cidr"):
                held_by.setdefault(old["zone"], old["subnet_cidr"])
            entry = node_entry(cluster, where, nodes, held_by)
            if entry:
                nodes[str(i)] = entry
        placed_nodes = dataclasses.replace(cluster, node_placement=dict(nodes))
        label = _label(cluster, *where)
        try:
            _swept(placed_nodes, ws, attempt, record, sweep)
        except CapacityError as err:
            quota = err.problem.kind == "quota"
            if not quota:
                _note_refusal(ws, where, time.time())
            tried.append(f"{label}: {'quota' if quota else 'no capacity'} ({err.problem.code})")
            record({"kind": "placement_refused", "nodes": indexes, "zone": where[0], "type": where[1],
                    "spot": where[2], "code": err.problem.code})
            if quota and where[2] and any(not c[2] for c in order):
                order = [c for c in order if not c[2]]
            elif quota or not order:
                raise _all_refused(err, tried, quota=quota) from None
            progress.info(f"replacement {len(tried)}: {tried[-1]}; trying the next")
            continue
        _keep(ws, here, nodes)
        progress.info(f"replacement of node(s) {', '.join(map(str, indexes))}: {label}: up")
        return placed_nodes
    raise AssertionError("unreachable: the order starts with the cluster's placement")


def _swept(placed_nodes: Cluster, ws: Workspace, attempt: Callable[[Cluster], Any],
           record: Callable[[dict], None], sweep: Sweep | None) -> None:
    """`attempt(placed_nodes)`, then, whatever its outcome, `sweep` (the instances the try may have
    leaked, terminated: cluster/strays.py), each of its events to `record`. A sweep that leaves some
    raises StraysLeft; after a failed attempt that is a note on the attempt's error."""
    try:
        attempt(placed_nodes)
    except TrainkitError as err:
        try:
            for ev in sweep(placed_nodes, ws) if sweep else []:
                record(ev)
        except strays.StraysLeft as left:
            err.append_note(f"{left.message}; {left.fix}")
        raise
    for ev in sweep(placed_nodes, ws) if sweep else []:
        record(ev)


def zone_spot_prices(cluster: Cluster) -> dict[tuple[str, str], float]:
    """{(zone, type): spot price} from the cloud room's price adapter where it has `spot_by_zone`
    (AWS); {} otherwise."""
    room = cluster.room
    if not room.price_adapter:
        return {}
    adapter = importlib.import_module(room.price_adapter)
    if not hasattr(adapter, "spot_by_zone"):
        return {}
    types = list(cluster.spec.instance.type_candidates or (cluster.instance.type,))
    return adapter.spot_by_zone(cluster.spec.region, types, cluster.spec.endpoints)


def _refusals(ws: Workspace, now: float) -> list[dict]:
    """This workspace's capacity refusals of the last RECENT_S ({zone, type, spot, at}); an
    unreadable history (edited, half a file) counts as none, said once: it only orders zones, and
    the next refusal rewrites it whole."""
    try:
        history = records.load(ws.root / HISTORY_FILE, records.Refusals, "", legacy_list="refusals")
    except InputError as err:
        progress.info(f"{err.message.splitlines()[0]}; ignoring it (it only orders zones)")
        return []
    return [r.model_dump(include={"zone", "type", "spot", "at"}) for r in (history.refusals if history else [])
            if now - r.at < RECENT_S]


def recent_refusals(ws: Workspace, now: float) -> set[Placement]:
    """(zone, type, spot) refused for capacity within RECENT_S, from this workspace's history."""
    return {(r["zone"], r["type"], r["spot"]) for r in _refusals(ws, now)}


def _note_refusal(ws: Workspace, where: Placement, now: float) -> None:
    zone, kind, spot = where
    rows = _refusals(ws, now) + [{"zone": zone, "type": kind, "spot": spot, "at": now}]
    write_atomic(ws.root / HISTORY_FILE, records.dump({"refusals": rows}, indent=1) + "\n")


def auto_order(order: list[Placement], refused: set[Placement],
               prices: dict[tuple[str, str], float]) -> list[Placement]:
    """`zone: auto`'s order (pure): within each (type, billing) group, zones refused recently go
    last, then by the spot price of the zone (spot candidates, where known), then as listed."""
    rank = {c: i for i, c in enumerate(order)}

    def key(c: Placement):
        zone, kind, spot = c
        group = min(rank[o] for o in order if o[1:] == c[1:])
        price = prices.get((zone, kind), float("inf")) if spot else 0.0
        return (group, c in refused, price, rank[c])
    return sorted(order, key=key)


def _auto(cluster: Cluster, ws: Workspace, order: list[Placement]) -> list[Placement]:
    """The candidates of a `zone: auto` spec in auto_order, saying what decided it."""
    prices: dict[tuple[str, str], float] = {}
    if cluster.spec.spot.enabled:
        try:
            prices = zone_spot_prices(cluster)
        except Exception as err:  # noqa: BLE001 - the order falls back to the listed one
            progress.info(f"zone: auto: no spot prices ({type(err).__name__}: {str(err)[:120]}); "
                          "the zones go in the listed order")
    refused = recent_refusals(ws, time.time())
    ordered = auto_order(order, refused, prices)
    zones = list(dict.fromkeys(zone for zone, _, _ in ordered))   # first appearance, in order
    why = [w for w, on in (("spot price", bool(prices)), ("refused within the hour last", bool(refused))) if on]
    progress.info(f"zone: auto: {', '.join(zones)}" + (f" (by {'; '.join(why)})" if why else ""))
    return ordered


def _screened(cluster: Cluster, ws: Workspace) -> tuple[list[Placement], bool, list[dict]]:
    """(the candidates in the order apply tries them, whether the state holds anything, the
    preflight's rows): `zone: auto` ordered, the placement the nodes run on first (a running
    cluster does not move unless refused), then what the cloud does not offer skipped
    (cluster/preflight.py)."""
    order = candidates(cluster)
    current, existed = settle(cluster, ws)
    if cluster.spec.zone_auto:
        order = _auto(cluster, ws, order)
    start = None
    if existed:
        start = (current.spec.zone, current.instance.type, current.spec.spot.enabled)
        order = [start] + [c for c in order if c != start]
    order, rows = preflight.screen(cluster, order, preflight.ask(cluster, order), keep=start)
    return order, existed, rows


def plan_placement(cluster: Cluster, ws: Workspace) -> tuple[Cluster, dict[str, Any] | None]:
    """Where `trainkit plan` plans the nodes, and the placement section of its review (None for a
    spec with one candidate): where they run now, else the first candidate the preflight keeps."""
    if len(candidates(cluster)) == 1:
        return cluster, None
    order, _, rows = _screened(cluster, ws)
    chosen = order[0]
    return placed(cluster, *chosen), {
        "chosen": {"zone": chosen[0], "type": chosen[1], "billing": "spot" if chosen[2] else "on_demand"},
        "currency": cluster.catalog.currency, "candidates": rows}


def apply_in_order(cluster: Cluster, ws: Workspace, attempt: Callable[[Cluster], Any]) -> tuple[Cluster, Any]:
    """`attempt(cluster)` at each candidate until one is not refused for capacity; returns
    (the cluster as placed, what attempt returned). CapacityError listing the attempts when all
    are refused (exit 4), at once on a quota refusal (a spot quota with an on-demand fallback
    skips to the on-demand candidates)."""
    if len(candidates(cluster)) == 1:
        return cluster, attempt(cluster)
    order, existed, _ = _screened(cluster, ws)
    if existed:
        return _move_new_nodes(cluster, ws, order[0], attempt)
    # nothing of this cluster existed before: what the refused attempts made can go
    tried: list[str] = []
    total, n = len(order), 0
    while order:
        (zone, kind, spot), n = order.pop(0), n + 1
        here = placed(cluster, zone, kind, spot)
        where = _label(cluster, zone, kind, spot)
        try:
            result = attempt(here)
        except CapacityError as err:
            quota = err.problem.kind == "quota"
            if not quota:
                _note_refusal(ws, (zone, kind, spot), time.time())
            tried.append(f"{where}: {'quota' if quota else 'no capacity'} ({err.problem.code})")
            if quota and spot and any(not c[2] for c in order):  # a spot quota: on-demand draws on another
                order = [c for c in order if not c[2]]
            elif quota:
                progress.info(f"placement {n}/{total}: {tried[-1]}")
                raise _all_refused(err, tried, quota=True) from None
            progress.info(f"placement {n}/{total}: {tried[-1]}"
                          + ("; trying the next" if order else ""))
            last = err
            continue
        progress.info(f"placement {n}/{total}: {where}: up")
        _keep(ws, (zone, kind, spot))
        return here, result
    _remove_attempts(here, ws)
    raise _all_refused(last, tried, quota=False, removed=True)


def _move_new_nodes(cluster: Cluster, ws: Workspace, home: Placement,
                    attempt: Callable[[Cluster], Any]) -> tuple[Cluster, Any]:
    """A cluster that exists keeps its placement, network and shared storage (a NAS or its subnet
    in another zone is a new, empty one): the apply runs there, and when the cloud refuses what it
    creates, only the nodes the state then lacks (new, or replaced by this apply) move to the next
    candidates, as a recovery's replacement does (replace_in_order, node_placement)."""
    here = placed(cluster, *home)
    try:
        return here, attempt(here)
    except CapacityError as err:
        if err.problem.kind == "quota":  # another zone draws on the same quota
            raise _all_refused(err, [f"{_label(cluster, *home)}: quota ({err.problem.code})"], quota=True) from None
        missing = missing_nodes(here, ws)
        if not missing:
            raise
        refusal = f"no capacity ({err.problem.code})"
        progress.info(f"placement 1: {_label(cluster, *home)}: {refusal}; moving node(s) "
                      f"{', '.join(map(str, missing))} to the next candidates, the cluster stays")
    results: list[Any] = []
    moved = replace_in_order(here, ws, missing, lambda c: results.append(attempt(c)),
                             lambda ev: None, refused_here=refusal, sweep=strays.sweep_strays)
    return moved, results[-1]


def missing_nodes(cluster: Cluster, ws: Workspace) -> list[int]:
    """Indexes of the spec's nodes whose instance the state does not hold (the module interface:
    `<type>.node[i]`)."""
    held = {r.get("index") for r in held_resources(cluster, ws)
            if r["address"].rsplit(".", 1)[-1].startswith("node[") and (cluster.room.billed(r)
                                                                     or {}).get("node")}
    return [i for i in range(cluster.nodes) if i not in held]


def _all_refused(err: CapacityError, tried: list[str], quota: bool, removed: bool = False) -> CapacityError:
    what = "a quota is used up" if quota else f"every candidate was refused ({len(tried)} tried)"
    left = "; what the attempts created was destroyed again" if removed else ""
    return CapacityError(f"{what}:\n" + "\n".join(f"  {i}. {t}" for i, t in enumerate(tried, 1)) + left,
                         err.problem, fix=err.fix, exit_code=errors.APPLY)


def _remove_attempts(cluster: Cluster, ws: Workspace) -> None:
    """Destroy what the refused attempts created (a cluster that did not exist before)."""
    runner, _ = render_and_init(cluster, ws, phase=errors.APPLY)
    if runner.state_list():
        with progress.step("terraform destroy (every candidate was refused)") as s:
            runner.on_line = s.line
            runner.destroy()
