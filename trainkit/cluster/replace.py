"""Replace what a reclaim took, and only that: hosts -> a spare host; cloud -> the lost instance.

Side effects: writes ws/hosts.json (hosts, whole, through the workspace's atomic writer), runs
terraform (cloud) and site.yml limited to the new node(s) (on every node with `scheduler: slurm`:
site_limit). Every function returns what it did as
event records (`{"kind": ..., ..., "took_s": ...}`); the caller (recovery) writes them to the
run's events.jsonl, so this module knows nothing of runs.

Cloud instances are replaced through the module interface (every module names its repeated
resources by role, `node` for instances and `data` for data disks and their attachments):

1. `terraform apply -refresh-only`: an instance the cloud terminated leaves the state;
2. in the refreshed state, find by id each lost node's `<type>.node[i]` (if it is still there,
   e.g. stopped but not gone) and the `<type>.data[i]` resources of its index (disk, attachment);
3. `terraform plan -replace=...` of those to a file, checked (`guarded_replace`): a plan that
   changes anything but the lost nodes' own resources and another zone's new parts stops the
   recovery before any change (the spec or trainkit changed since the last apply); otherwise that
   saved plan is applied: the lost instance comes back with a fresh data disk attached; every
   other node, disk, the NAS and the network keep their ids;
4. outputs.json is rewritten (the new instance's id and addresses);
5. after each try, instances tagged with the cluster's tag that the state does not hold (a create
   whose answer was lost) are terminated (cluster/strays.py): a `strays_removed` event.

When the cloud refuses step 3 for capacity, the replacement alone moves to the spec's next
candidate zone/type/billing (cluster.failover.replace_in_order): a `placement_refused` event per
refusal, and the survivors keep their ids.
"""

from __future__ import annotations

import re
import time
from dataclasses import replace
from typing import Any, Callable

from trainkit import records
from trainkit.clouds.base import REPLACE_NONE, REPLACE_SPARE, REPLACE_TERRAFORM
from trainkit.clouds.capacity import CapacityError
from trainkit.cluster import failover, strays
from trainkit.cluster import lost as lost_nodes
from trainkit.errors import APPLY, PREEMPTED, TrainkitError
from trainkit.provision.playbook import prepare_inventory, run_site
from trainkit.provision.reach import reachable, wait_for_ssh
from trainkit.spec.resolve import Cluster
from trainkit.stack.plan_rules import beyond_recovery
from trainkit.stack.state import render_and_init
from trainkit.workspace import Workspace, write_atomic

Event = dict[str, Any]
# The recovery's own saved plan, beside the user's plan.bin (never applied by `trainkit apply`).
RECOVERY_PLAN = "recovery-plan.bin"


def replace_lost(cluster: Cluster, ws: Workspace, lost: list[str], resume_hint: str,
                 record: Callable[[Event], None]) -> Cluster:
    """The cluster with `lost` nodes replaced and provisioned; each event of doing it goes to
    `record` as it happens (a `replaced` before its provisioning starts, so a controller that
    dies while provisioning leaves a record of the half-done node);
    TrainkitError(PREEMPTED) when that is not possible (no spare left, `local`). `resume_hint` is
    the command that resumes the run, for the message when no spare answers. On `hosts`, a spare
    that stops answering while it is provisioned is given up (a `spare_failed` event) and the
    next spare takes its place."""
    return REPLACEMENTS[cluster.room.replacement](cluster, ws, lost, resume_hint, record)


def _nothing_replaces(cluster: Cluster, ws: Workspace, lost: list[str], resume_hint: str,
                      record: Callable[[Event], None]) -> Cluster:
    raise TrainkitError(f"{', '.join(lost)} is unreachable and the {cluster.spec.cloud} target has "
                        "nothing to replace it with", exit_code=PREEMPTED)


def _new_instances(cluster: Cluster, ws: Workspace, lost: list[str], resume_hint: str,
                   record: Callable[[Event], None]) -> Cluster:
    """New instances in the places of `lost` (a targeted apply, replace_instances), provisioned."""
    try:
        evs = replace_instances(cluster, ws, lost)
    except CapacityError as err:     # refused everywhere: the nodes stay in the record as lost
        err.fix = f"{err.fix}; node(s) {', '.join(lost)} stay lost: {lost_nodes.fix(cluster)}".lstrip("; ")
        record({"kind": "node_lost", "nodes": lost, "fix": lost_nodes.fix(cluster)})
        raise
    for ev in evs:
        record(ev)
    fresh = [n for n in ws.read_outputs().get("nodes") or [] if n["name"] in lost and n.get("public_ip")]
    wait_for_ssh([(n["public_ip"], 22) for n in fresh])   # private ones: through the head, by Ansible
    t0 = time.time()
    prepare_inventory(cluster, ws)               # site.yml on the new node(s) only (ansible --limit)
    run_site(cluster, ws, limit=site_limit(cluster, lost))
    record({"kind": "provisioned", "nodes": lost, "took_s": round(time.time() - t0, 3)})
    return cluster


def _spares_in(cluster: Cluster, ws: Workspace, lost: list[str], resume_hint: str,
               record: Callable[[Event], None]) -> Cluster:
    """Spares in the places of `lost`, provisioned (site.yml --limit); a spare that fails and then
    does not answer on SSH is replaced by the next one. A provisioning failure of a spare that
    still answers is the playbook's error (exit 5): another spare would fail the same way."""
    todo = list(lost)              # places (names in hosts.json's active list) still to fill
    pending: list[str] = []        # spares put in and not yet provisioned
    while True:
        cluster, new, evs = _swap_spares(cluster, ws, todo, resume_hint)
        for ev in evs:
            record(ev)
        pending += new
        t0 = time.time()
        try:
            prepare_inventory(cluster, ws)
            run_site(cluster, ws, limit=site_limit(cluster, pending))
        except TrainkitError:
            by_name = {h.name: h for h in cluster.spec.hosts}
            todo = [n for n in pending if not reachable(by_name[n].address, by_name[n].port)]
            if not todo:
                raise
            pending = [n for n in pending if n not in todo]
            for n in todo:
                record({"kind": "spare_failed", "node": n, "took_s": round(time.time() - t0, 3)})
            continue
        record({"kind": "provisioned", "nodes": pending, "took_s": round(time.time() - t0, 3)})
        return cluster


def site_limit(cluster: Cluster, new: list[str]) -> list[str] | None:
    """The nodes site.yml provisions after a replacement: the new ones; every active node (None)
    on a cluster with `scheduler: slurm`, whose slurm.conf is one file the same on every node
    (slurm.conf(5)) that now names the new node in the lost one's place, so the slurm role
    rewrites it everywhere and restarts the daemons (every other role changes nothing there)."""
    return None if cluster.batch_jobs else new


# How a lost node is replaced (Cloud.replacement) -> (cluster, ws, lost, resume_hint, record) -> the
# cluster with them replaced and provisioned. A new kind of target adds a row here.
REPLACEMENTS: dict[str, Callable[[Cluster, Workspace, list[str], str, Callable[[Event], None]], Cluster]] = {
    REPLACE_TERRAFORM: _new_instances, REPLACE_SPARE: _spares_in, REPLACE_NONE: _nothing_replaces}


def _swap_spares(cluster: Cluster, ws: Workspace, lost: list[str], resume_hint: str
                 ) -> tuple[Cluster, list[str], list[Event]]:
    """Put a spare that answers on SSH in the place of each of `lost` (hosts.json, written whole:
    `active` in rank order, `replaced` {first lost host: the host in its place now})."""
    t0 = time.time()
    hosts = cluster.spec.hosts
    active = [h.name for h in hosts if not h.spare]
    spares = [h for h in hosts if h.spare and reachable(h.address, h.port)]
    path = ws.hosts_json
    old = records.load(path, records.Hosts, HOSTS_FIX)
    replaced = dict(old.replaced) if old else {}
    new, events = [], []
    strangers = [name for name in lost if name not in active]
    if strangers:   # the nodes were read from another list than this one (an inventory written before)
        raise TrainkitError(f"host(s) {', '.join(strangers)} are not among the cluster's active hosts "
                            f"({', '.join(active)}: the spec and {path.name}): the run's nodes and the "
                            "cluster's record disagree", exit_code=PREEMPTED,
                            fix="run `trainkit apply SPEC` (it provisions the active hosts and writes the "
                                f"inventory from the same list), then resume with `{resume_hint}`")
    for name in lost:
        if not spares:
            raise TrainkitError(f"host {name} is unreachable and no spare host answers on SSH",
                                fix="add a host with `spare: true` to the spec, or bring the host back "
                                    f"and resume with `{resume_hint}`",
                                exit_code=PREEMPTED)
        spare = spares.pop(0)
        active[active.index(name)] = spare.name
        new.append(spare.name)
        first = next((k for k, v in replaced.items() if v == name), name)
        replaced[first] = spare.name
        events.append({"kind": "replaced", "node": name, "by": spare.name,
                       "took_s": round(time.time() - t0, 3)})
    write_atomic(path, records.dump({"active": active, "replaced": replaced}, indent=2))
    return effective_cluster(cluster, ws), new, events


def replace_instances(cluster: Cluster, ws: Workspace, lost: list[str]) -> list[Event]:
    """Recreate the instances of the nodes named `lost` (outputs.json names); one `replaced`
    event per node with its old and new instance id."""
    t0 = time.time()
    held = ws.read_outputs().get("nodes") or []
    index = lost_nodes.indexes(cluster, held)           # lost before (refused everywhere) too
    nodes = {index[n["name"]]: n for n in held}
    unknown = [name for name in lost if name not in index]
    if unknown:
        raise TrainkitError(f"lost node(s) {', '.join(unknown)} are neither in {ws.outputs_json} nor among the "
                            f"spec's {cluster.nodes} node(s)", exit_code=PREEMPTED,
                            fix=f"the spec changed since the run started: `trainkit apply {cluster.source}`, then "
                                "resume the run (`trainkit train SPEC --resume RUN --recover`)")
    runner, _ = render_and_init(cluster, ws)
    runner.refresh()
    state = runner.state_json()
    addresses = []
    for name in lost:
        addresses += replace_addresses(state, index[name], nodes.get(index[name], {}).get("id"))
    events: list[Event] = []
    tries = 0

    def attempt(placed: Cluster) -> None:
        # each try renders its placement; after a refusal nothing is named for -replace: what the
        # refused try created moves with the new placement (another zone replaces disk and node)
        nonlocal runner, tries
        tries += 1
        runner, _ = render_and_init(placed, ws)
        guarded_replace(runner, ws, addresses if tries == 1 else [], [index[name] for name in lost])

    def refused(ev: Event) -> None:
        events.append({**ev, "took_s": round(time.time() - t0, 3)})

    failover.replace_in_order(cluster, ws, [index[name] for name in lost], attempt, refused,
                              sweep=strays.sweep_strays)   # a lost create answer leaks no instance
    outputs = {k: v["value"] for k, v in runner.outputs().items()}
    ws.write_outputs(outputs)
    new = {n["name"]: n.get("id") for n in outputs.get("nodes") or []}
    return events + [{"kind": "replaced", "node": name, "old_id": nodes.get(index[name], {}).get("id"),
                      "new_id": new.get(name), "took_s": round(time.time() - t0, 3)} for name in lost]


def guarded_replace(runner, ws: Workspace, addresses: list[str], indexes: list[int]) -> None:
    """Plan the replacement to a file (`-replace` of `addresses`), check that it touches only the
    nodes `indexes` (plan_rules.beyond_recovery), and apply that saved plan. A plan that would
    change anything else (the spec or trainkit changed since the last apply) changes nothing:
    TrainkitError(PREEMPTED) naming what it would change, so the run waits for the user's
    reviewed `trainkit apply` instead of taking an unreviewed change in the middle of a run."""
    plan_file = ws.root / RECOVERY_PLAN
    try:
        runner.plan(plan_file, phase=APPLY, replace=addresses)
        extra = beyond_recovery(runner.show_json(plan_file, phase=APPLY), indexes)
        if extra:
            raise TrainkitError(
                f"recovery stopped before changing anything: replacing node(s) {', '.join(map(str, indexes))} "
                f"would also {'; '.join(extra)}: the spec (or trainkit) changed since the last apply",
                fix="review and apply those changes first (`trainkit plan`, then `trainkit apply`), then resume "
                    "the run (`trainkit train SPEC --resume RUN --recover`)", exit_code=PREEMPTED)
        runner.apply_plan(plan_file)
    finally:
        plan_file.unlink(missing_ok=True)


def replace_addresses(state: dict, i: int, instance_id: str | None) -> list[str]:
    """Addresses to `-replace` for node index `i`: its instance if still in the state, the
    `data[i]` resources (data disk, attachment) and its creation record `born[i]` (the new node's
    release time counts from its own creation). Pure: reads the `terraform show -json` dict."""
    out = []
    for res in _resources((state.get("values") or {}).get("root_module") or {}):
        m = re.search(r"\.(node|data|born)\[(\d+)\]$", res.get("address", ""))
        if not m or int(m.group(2)) != i or res.get("mode") != "managed":
            continue
        if m.group(1) in ("data", "born") or (res.get("values") or {}).get("id") == instance_id:
            out.append(res["address"])
    return out


def _resources(module: dict):
    yield from module.get("resources") or []
    for child in module.get("child_modules") or []:
        yield from _resources(child)


HOSTS_FIX = ("trainkit writes it when a spare replaces a host: restore it from a backup, or delete it to use "
             "the hosts as the spec lists them (a host that was replaced comes back as a node)")


def effective_cluster(cluster: Cluster, ws: Workspace) -> Cluster:
    """`cluster` with hosts replaced by spares in earlier recoveries (ws/hosts.json)."""
    path = ws.hosts_json
    if cluster.room.replacement != REPLACE_SPARE or not path.is_file():
        return cluster
    record = records.load(path, records.Hosts, HOSTS_FIX)
    active = record.active if record else []
    by_name = {h.name: h for h in cluster.spec.hosts}
    if not all(n in by_name for n in active):
        return cluster                   # the spec changed since: it wins
    hosts = [by_name[n].model_copy(update={"spare": False}) for n in active]
    hosts += [h.model_copy(update={"spare": True}) for h in cluster.spec.hosts if h.name not in active]
    return replace(cluster, spec=cluster.spec.model_copy(update={"hosts": tuple(hosts)}))
