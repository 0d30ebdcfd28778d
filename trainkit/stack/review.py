"""Plan JSON (`terraform show -json`) -> a review: changes by role, cost, findings. Pure functions.

`review(plan, cluster)` returns a dict whose keys are stable for CI (`--format json`);
`to_text` and `to_markdown` render it for terminals and pull requests. Per-cloud knowledge
(which resource is compute, which attribute opens SSH or a public IP) is asked of the cloud's room
through `trainkit.stack.plan_rules`.
"""

from __future__ import annotations

import ipaddress
import time
from collections import Counter
from typing import Any

from trainkit.money.cost import HOURS_PER_MONTH, no_cost, resources_cost
from trainkit.spec import safety as safety_nets
from trainkit.spec.resolve import Cluster
from trainkit.stack.controller_review import policy_lines
from trainkit.stack.plan_diff import changed_attributes
from trainkit.stack.plan_rules import (
    ROLE_KEYWORDS,
    disks_unencrypted,
    public_ip_nodes,
    release_moves,
    ssh_sources,
    storage_losses,
)

ROLES = ("network", "compute", "storage", "nas")
# The finding that names disks and shared file systems a plan destroys (apply --yes refuses it).
STORAGE_LOSS = "storage-loss"
# Most dangerous first: the review lists replace and delete before anything else.
ACTION_ORDER = ("delete", "replace", "update", "create")


def role_of(resource_type: str) -> str:
    for role, keywords in ROLE_KEYWORDS:
        if any(k in resource_type for k in keywords):
            return role
    return "network"


def changes(plan: dict, disrupted: dict[str, tuple[str, str]] | None = None) -> dict[str, Any]:
    """Counts of create/update/delete/replace per role, plus the addresses that change, each with
    its changed attributes (trainkit.stack.plan_diff: before -> after, sensitive values masked).
    `disrupted` (address -> (verdict, cause), plan_rules.disruptions) marks an update that stops
    its node (`disruption: "stops"`) and gives a replacement planned for a refused update its cause."""
    disrupted = disrupted or {}
    counts = {role: Counter() for role in ROLES}
    addresses = []
    for rc in plan.get("resource_changes", []):
        if rc.get("mode") == "data":
            continue
        actions = rc["change"]["actions"]
        action = ("replace" if set(actions) == {"create", "delete"} else
                  "no-op" if actions in (["no-op"], ["read"]) else actions[0])
        counts[role_of(rc["type"])][action] += 1
        if action != "no-op":
            entry = {"address": rc["address"], "action": action, "role": role_of(rc["type"]),
                     "attributes": changed_attributes(rc["change"], action)}
            if action == "replace":
                entry.update(replace_reason(rc, plan))
                verdict, cause = disrupted.get(rc["address"], ("", ""))
                if verdict == "refused":
                    entry["reason"] = f"the cloud cannot update it in place: {cause}"
                elif verdict == "moves":
                    entry["reason"] = cause
            elif action == "update" and rc["address"] in disrupted:
                entry["disruption"], entry["reason"] = disrupted[rc["address"]]
            elif action == "delete":
                entry.update(delete_reason(rc))
            addresses.append(entry)
    addresses.sort(key=lambda a: (ACTION_ORDER.index(a["action"]), ROLES.index(a["role"]), a["address"]))
    total = Counter()
    for c in counts.values():
        total.update(c)
    return {
        "by_role": {role: {a: c[a] for a in ("create", "update", "delete", "replace") if c[a]}
                    for role, c in counts.items()},
        "add": total["create"] + total["replace"], "change": total["update"],
        "destroy": total["delete"] + total["replace"], "addresses": addresses,
        "has_changes": bool(addresses),
    }


# What a replaced resource loses, by role (a new instance is a new machine).
LOSES = {"compute": "its local disks, its public IP and any job running on it (checkpoint first)",
         "storage": "the data on it", "nas": "the files on it"}


# The spec field behind an attribute the providers cannot change in place (ForceNew in their
# schemas: tencentcloud_instance allocate_public_ip/internet_max_bandwidth_out, huaweicloud_compute_
# instance eip_type/bandwidth, every instance's zone, subnet and image), so a REPLACE names its cause.
SPEC_CAUSES = {"allocate_public_ip": "network.public_ip", "internet_max_bandwidth_out": "network.public_ip",
               "eip_type": "network.public_ip", "bandwidth": "network.public_ip",
               "associate_public_ip_address": "network.public_ip",
               "availability_zone": "zone", "subnet_id": "zone or network", "network": "zone or network",
               "vswitch_id": "zone or network", "system_disk": "storage.system_disk",
               "image_id": "image", "ami": "image", "instance_type": "instance.type",
               "flavor_id": "instance.type", "charging_mode": "spot", "instance_charge_type": "spot",
               "spot_strategy": "spot"}


def replace_reason(rc: dict, plan: dict) -> dict[str, Any]:
    """Why terraform replaces `rc` (plan JSON `replace_paths` / `action_reason`) and what is lost."""
    paths = [".".join(str(p) for p in path) for path in rc["change"].get("replace_paths") or []]
    why = rc.get("action_reason", "")
    if paths:
        fields = sorted({SPEC_CAUSES[p.split(".")[0]] for p in paths if p.split(".")[0] in SPEC_CAUSES})
        reason = f"{', '.join(paths)} cannot change in place" + (
            f" (spec: {', '.join(fields)})" if fields else "")
    elif why == "replace_by_triggers":
        module = rc.get("module_address", "")
        causes = [_data_change(o) for o in plan.get("resource_changes", [])
                  if o.get("module_address", "") == module and o["type"] == "terraform_data"
                  and o["change"]["actions"] not in (["no-op"], ["read"])
                  and o.get("name") != "born"  # a node's creation record follows it, never drives it
                  and (o.get("name") != "node" or o.get("index") == rc.get("index"))]
        reason = f"replaced with {', '.join(causes) or 'a resource it depends on'} (replace_triggered_by)"
    elif why == "replace_by_request":
        reason = "asked for (terraform -replace, e.g. `--upgrade-image`)"
    elif why == "replace_because_tainted":
        reason = "tainted: a create or update failed part way"
    else:
        reason = "the provider cannot update it in place"
    out: dict[str, Any] = {"reason": reason, "replace_paths": paths}
    if LOSES.get(role_of(rc["type"])):
        out["loses"] = LOSES[role_of(rc["type"])]
    return out


# Terraform's plan JSON `action_reason` for a delete (Terraform docs, "JSON Output Format").
DELETE_REASONS = {
    "delete_because_no_resource_config": "no longer in the configuration",
    "delete_because_count_index": "its count index is gone (fewer nodes or disks in the spec)",
    "delete_because_each_key": "its for_each key is gone",
    "delete_because_no_module": "its module is no longer in the configuration",
    "delete_because_wrong_repetition": "the resource changed between count and for_each",
    "delete_because_no_move_target": "moved to an address that does not exist",
}


def delete_reason(rc: dict) -> dict[str, Any]:
    """Why terraform destroys `rc` (plan JSON `action_reason`) and what is lost with it."""
    out: dict[str, Any] = {"reason": DELETE_REASONS.get(rc.get("action_reason", ""), "destroyed by this plan")}
    if LOSES.get(role_of(rc["type"])):
        out["loses"] = LOSES[role_of(rc["type"])]
    return out


def _data_change(rc: dict) -> str:
    """"<what> (key before -> after; ...)" of a changed terraform_data record; a node's own record
    (the modules' terraform_data.node[i]) is "its billing record"."""
    name = rc.get("name") or rc["address"].rsplit(".", 1)[-1]
    name = "its billing record" if name == "node" else name
    before = (rc["change"].get("before") or {}).get("input")
    after = (rc["change"].get("after") or {}).get("input")
    if isinstance(before, dict) and isinstance(after, dict):
        diff = [f"{k} {before.get(k)} -> {after.get(k)}" for k in sorted(set(before) | set(after))
                if before.get(k) != after.get(k)]
        return f"{name} ({'; '.join(diff)})" if diff else name
    return name


def after_resources(plan: dict) -> list[dict]:
    """Every managed resource as it will be after apply: {type, index, address, values}."""
    return _resources(plan, "after", skip=["delete"])


def before_resources(plan: dict) -> list[dict]:
    """Every managed resource as it is now (before apply): {type, index, address, values}."""
    return _resources(plan, "before", skip=["create"])


def _resources(plan: dict, side: str, skip: list[str]) -> list[dict]:
    """{type, index, address, values, unknown}: `unknown` is terraform's after_unknown (true where a
    value is known only after apply, absent from `values`), so a rule can tell "not set" from
    "not known yet"; {} for the before side."""
    out = []
    for rc in plan.get("resource_changes", []):
        if rc.get("mode") != "data" and rc["change"]["actions"] != skip:
            unknown = rc["change"].get("after_unknown") if side == "after" else None
            out.append({"type": rc["type"], "index": rc.get("index"), "address": rc["address"],
                        "values": rc["change"].get(side) or {},
                        "unknown": unknown if isinstance(unknown, dict) else {}})
    return out


def cost(cluster: Cluster, resources: list[dict], before: list[dict] | None = None) -> dict[str, Any]:
    """The cluster's cost after apply, plus the delta against `before` (what the state holds now).

    Both sides are priced from their resources (each node at its own type and billing, each disk at
    its own size: `trainkit.money.cost.resources_cost`), so "now" is the figure `status` shows and
    the delta is new minus now.
    """
    out = resources_cost(cluster, resources)
    if before is not None:
        current = resources_cost(cluster, before)
        out["current_per_hour"] = current["per_hour"]
        out["current_complete"] = current["complete"]
        out["delta_per_hour"] = round(out["per_hour"] - current["per_hour"], 4)
        out["delta_per_month"] = round(out["delta_per_hour"] * HOURS_PER_MONTH, 2)
    return out


def findings(cluster: Cluster, resources: list[dict], cost_: dict) -> list[dict]:
    """Security and cost findings; severity "block" makes `trainkit plan` exit 11."""
    spec, out = cluster.spec, []
    allowed = [ipaddress.ip_network(c) for c in spec.network.admin_cidrs]
    inside = ipaddress.ip_network(spec.network.vpc_cidr)
    for address, cidr in ssh_sources(cluster.room, resources):
        net = ipaddress.ip_network(cidr, strict=False)
        if (net.version == inside.version and net.subnet_of(inside)) or any(net.subnet_of(a) for a in allowed if a.version == net.version):
            continue
        open_world = net.prefixlen == 0
        severity = "block" if open_world and not spec.network.allow_ssh_from_anywhere else "warn"
        out.append(_finding("ssh-open", severity, f"{address} allows SSH from {cidr}, outside admin_cidrs"))
    for address in public_ip_nodes(cluster.room, resources):
        out.append(_finding("worker-public-ip", "warn", f"{address} is a worker with a public IP"))
    for address in disks_unencrypted(cluster.room, resources):
        out.append(_finding("disk-unencrypted", "warn", f"{address} is not encrypted"))
    if spec.spot.enabled and not cluster.nas["enabled"]:
        out.append(_finding("spot-no-shared-checkpoints", "warn",
                            "spot nodes without shared storage (storage.nas): checkpoints on a "
                            "reclaimed node's disk are lost; enable nas to resume elsewhere"))
    budget = spec.budget.max_per_hour
    if budget is not None:
        if cost_["per_hour"] > budget:
            out.append(_finding("budget-exceeded", "block",
                                f"{cost_['per_hour']:.2f} {cost_['currency']}/h exceeds budget.max_per_hour "
                                f"{budget:.2f}" + (" (spot at its max_price)" if cost_["upper_bound"] else "")))
        elif not cost_["complete"]:
            out.append(_finding("budget-unchecked", "warn",
                                f"budget set but prices unknown for: {', '.join(cost_['unknown'])}"))
    return out


def _finding(code: str, severity: str, message: str) -> dict:
    return {"code": code, "severity": severity, "message": message}


def review(plan: dict, cluster: Cluster, extra_findings: list[dict] | None = None,
           disrupted: dict[str, tuple[str, str]] | None = None) -> dict[str, Any]:
    """The whole review; stable keys: cluster, cloud, changes, cost, findings, blocking, safety.

    `extra_findings` come from tools run at the edge (checkov on plan.json); `disrupted` says which
    in-place updates stop a node or were refused (see `changes`).
    """
    resources = after_resources(plan)
    cost_ = cost(cluster, resources, before_resources(plan))
    found = findings(cluster, resources, cost_) + list(extra_findings or [])
    found += [_finding("layout-move", "warn", f"{address} is replaced though the spec did not ask for it: {cause}")
              for address, (verdict, cause) in sorted((disrupted or {}).items()) if verdict == "moves"]
    release_lines, release_found = release_review(cluster, plan)
    found += release_found
    lost = storage_losses(cluster.room, plan)
    if lost:
        found.append(_finding(STORAGE_LOSS, "warn", f"destroys the data on {', '.join(lost)}: `apply --yes` "
                              "refuses this plan unless given --allow-storage-loss"))
    rev = _review(cluster, changes(plan, disrupted), cost_, found, safety(cluster) + release_lines)
    policy = policy_lines(plan)
    return {**rev, "controller_policy": policy} if policy else rev


# Alibaba auto_release_time and Huawei auto_terminate_time must lie at least 30 minutes after the
# call that sets them, on create and on change (alicloud_instance docs, ModifyInstanceAutoReleaseTime:
# "at least half an hour later than the current time"; Huawei ECS docs, "Setting Auto-Deletion Time").
RELEASE_MARGIN_S = 30 * 60


def _utc(epoch: float) -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(epoch))


def release_review(cluster: Cluster, plan: dict, now: float | None = None) -> tuple[list[str], list[dict]]:
    """(safety lines, findings) about the release times of the nodes `plan` keeps, each counted
    from the node's own creation: the ones a ttl edit moves in place (old -> new), the ones that
    keep theirs, and a blocking `ttl` finding where a new time is under RELEASE_MARGIN_S ahead of
    `now` (the cloud refuses it, half way through the apply)."""
    moves = release_moves(cluster.room, plan)
    now = time.time() if now is None else now
    moved = [(a, old, new) for a, old, new in moves if new != old]
    kept = [old for _, old, new in moves if new == old]
    lines, found = [], []
    unrecorded = _unrecorded_births(plan)
    if moved:
        shown = ", ".join(f"{a.split('.', 2)[-1] if a.startswith('module.') else a} "
                          f"{_utc(old)} -> {_utc(new) if new else 'never'}" for a, old, new in moved)
        lines.append(f"ttl: {len(moved)} running node(s) get a new release time in place, counted from each "
                     f"one's creation (no restart): {shown}")
        if any(_index(a) in unrecorded for a, _, _ in moved):
            lines.append("ttl: nodes applied before trainkit recorded each node's creation (terraform_data.born) "
                         "have their release time counted from this apply, once")
    if kept:
        lines.append(f"ttl: {len(kept)} running node(s) keep their release time (the first at {_utc(min(kept))}); "
                     "`trainkit status` shows the deadline")
    late = [a for a, _, new in moved if new is not None and new < now + RELEASE_MARGIN_S]
    if late:
        found.append(_finding("ttl-too-soon", "block", f"ttl {cluster.spec.ttl}: counted from their creation, "
                              f"{', '.join(late)} would be released less than 30 minutes from now (or in the "
                              "past), which the cloud refuses: set a longer ttl, or `trainkit destroy`"))
    return lines, found


def _index(address: str) -> str:
    return address.rsplit("[", 1)[-1].rstrip("]") if address.endswith("]") else ""


def _unrecorded_births(plan: dict) -> set[str]:
    """Indexes whose creation record `terraform_data.born[i]` the plan creates for the first time
    (a state applied before the record existed: nothing of it is replaced)."""
    return {_index(rc["address"]) for rc in plan.get("resource_changes", [])
            if rc.get("type") == "terraform_data" and rc.get("name") == "born" and rc["change"]["actions"] == ["create"]}


def no_terraform_review(cluster: Cluster) -> dict[str, Any]:
    """The review of a target terraform does not manage (local, hosts): same keys, no changes,
    no cost, a `note` saying so."""

    rev = _review(cluster, changes({}), no_cost(cluster), [], [])
    rev["note"] = f"{cluster.spec.cloud}: nothing to provision with terraform ({cluster.nodes} node(s))"
    return rev


def _review(cluster: Cluster, changes_: dict, cost_: dict, found: list[dict], safety_: list[str]) -> dict:
    """The one shape of a review (its keys are stable for CI)."""
    return {"cluster": cluster.name, "cloud": cluster.spec.cloud, "changes": changes_,
            "cost": cost_, "findings": found, "safety": safety_,
            "blocking": any(f["severity"] == "block" for f in found)}


def safety(cluster: Cluster) -> list[str]:
    """What the cloud and the nodes will do about a forgotten cluster (ttl, idle), in words."""
    return safety_nets.describe(cluster)


def header(cluster: Cluster, workspace: str, backend: str, commit: str | None, apply: str) -> dict[str, Any]:
    """What a reviewer reads first, as Atlantis comments begin: which cluster on which cloud and
    region, the workspace, the state backend, the commit of the spec (None outside git) and the
    command that applies this plan."""
    return {"cluster": cluster.name, "cloud": cluster.spec.cloud, "region": cluster.spec.region,
            "spec": cluster.source, "workspace": workspace, "backend": backend,
            "commit": commit, "apply": apply}
