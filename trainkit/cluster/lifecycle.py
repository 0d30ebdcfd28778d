"""The user's job, step by step: plan, apply, train, destroy, status. Glue between the pure steps
(resolve, render, review, inventory) and the edges that run tools (terraform, provision).

Each function takes a resolved `Cluster` and its `Workspace`, does one command's work and returns
data for the CLI to render. Only cloud targets touch terraform; `local` and `hosts` go straight
to Ansible.
"""

from __future__ import annotations

import json
import re
import shlex
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from trainkit import errors
from trainkit.clouds.base import NODES_HOSTS, NODES_LOCAL, NODES_SCHEDULER
from trainkit.cluster import failover, lost, scheduler
from trainkit.cluster.replace import effective_cluster
from trainkit.errors import InputError, SpecError, TrainkitError
from trainkit.money.cost import running_cost, state_cost
from trainkit.provision.playbook import prepare_inventory, run_site
from trainkit.provision.reach import wait_for_ssh
from trainkit.spec import placeholders
from trainkit.spec.resolve import Cluster
from trainkit.spec.safety import idle_minutes, ttl_hours
from trainkit.stack import adopt
from trainkit.stack.checkov import scan_plan
from trainkit.stack.plan_rules import disruptions, refused_in_place, release_times, storage_losses, with_born
from trainkit.stack.review import header, no_terraform_review, review
from trainkit.stack.review_render import to_markdown
from trainkit.stack.state import backend_description, change_set, drifted, observe, render_and_init, state_resources
from trainkit.util import progress
from trainkit.util.gitinfo import commit_of
from trainkit.workspace import Workspace

# ---------------------------------------------------------------- plan


def plan(cluster: Cluster, ws: Workspace, upgrade_image: bool = False) -> dict[str, Any]:
    """Render, init, plan to plan.bin, show -json to plan.json; returns the review (also review.md).

    The modules fix each node's image when it is created (a newer published image changes
    nothing); `upgrade_image` plans every existing node replaced, onto the image the spec or the
    module's image lookup gives now.
    """
    if not cluster.room.has_module:
        return no_terraform_review(cluster)
    ws.rotate_log()
    # `zone:`/`type:` lists: where the nodes run now, else the first candidate the cloud offers
    cluster, placement = failover.plan_placement(cluster, ws)
    runner, _ = render_and_init(cluster, ws)
    return _plan(cluster, ws, runner, upgrade_image, placement)


# Every module names its instances `<type>.node[i]` (the module interface, see cluster/replace.py).
_NODE_ADDRESS = re.compile(r"^module\.cluster\.[a-z0-9_]*instance\.node\[\d+\]$")


def node_addresses(runner) -> list[str]:
    """The instance addresses the state holds, each with its creation record (with_born): what
    `--upgrade-image` replaces."""
    held = runner.state_list()
    return with_born([a for a in held if _NODE_ADDRESS.match(a)], held)


def _plan(cluster: Cluster, ws: Workspace, runner, upgrade_image: bool = False,
          placement: dict[str, Any] | None = None) -> dict[str, Any]:
    """Plan (refreshing against the cloud) into plan.bin/plan.json/review.md; returns the review
    (with `placement`, the preflight's candidates, when given)."""

    replace = node_addresses(runner) if upgrade_image else []
    with progress.step("terraform plan") as s:
        runner.on_line = s.line
        runner.plan(ws.plan_bin, replace=replace)
        plan_data = runner.show_json(ws.plan_bin)
        refused = refused_in_place(cluster.room, plan_data)
        if refused:  # an update the cloud would refuse half way: replace those resources instead
            progress.info("planned again with " + ", ".join(f"{a} replaced ({why})" for a, why in refused.items()))
            runner.plan(ws.plan_bin, replace=with_born(replace + sorted(refused), runner.state_list()))
            plan_data = runner.show_json(ws.plan_bin)
    ws.save_plan(plan_data, ws.stack_fingerprint())

    extra, checkov_note = scan_plan(ws.plan_json)
    disrupted = {**disruptions(cluster.room, plan_data), **{a: ("refused", why) for a, why in refused.items()}}
    rev = review(plan_data, cluster, extra, disrupted)
    rev["checkov"] = checkov_note
    rev["header"] = review_header(cluster, ws)
    drift = drifted(plan_data)
    if drift:
        rev["drift"] = drift
    if placement:
        rev["placement"] = placement
    ws.review_md.write_text(to_markdown(rev))
    return rev


def review_header(cluster: Cluster, ws: Workspace) -> dict[str, Any]:
    """The review's header: workspace, backend, the spec's commit (when in git), the apply command
    (with --workdir when the workspace is not the default one)."""
    apply = f"trainkit apply {shlex.quote(cluster.source)}"
    if ws.root != Workspace.for_cluster(cluster.name).root:
        apply += f" --workdir {shlex.quote(str(ws.root))}"
    return header(cluster, str(ws.root), backend_description(cluster, ws), commit_of(cluster.source), apply)


# ---------------------------------------------------------------- apply

@dataclass
class ApplyResult:
    review: dict[str, Any] | None
    outputs: dict[str, Any]
    provisioned: bool


def apply(cluster: Cluster, ws: Workspace, confirm, provision: bool = True,
          upgrade_image: bool = False, storage_loss: bool = False) -> ApplyResult:
    """Create/update the cluster, write outputs.json and inventory.yml, then run site.yml.

    `confirm(review) -> bool` is asked unless the new plan makes only reviewed changes. A plan that
    destroys disks or shared file systems (plan_rules.storage_losses) is applied only with
    `storage_loss` (the user confirms each plan, or named --allow-storage-loss); otherwise
    TrainkitError(PLAN_BLOCKED) naming them, before anything changes. A failure after terraform may
    have changed the cloud (apply, provision) gets a note naming what the state holds now, what it
    costs per hour and the command that removes it (`err.note`).
    """
    refuse_placeholders(cluster)
    try:
        return _apply(cluster, ws, confirm, provision, upgrade_image, storage_loss)
    except TrainkitError as err:
        if cluster.room.has_module and not isinstance(err, (InputError, Declined)) and err.exit_code not in _NOTHING_CHANGED:
            _say_what_bills(cluster, ws, err)
        raise


def refuse_placeholders(cluster: Cluster) -> None:
    """SpecError (exit 2) naming each field that still holds an example's placeholder (a
    documentation address range, an example bucket: trainkit.spec.placeholders) on a target that
    bills; nothing is planned or created."""
    found = placeholders.problems(cluster.spec)
    if found:
        raise SpecError(cluster.source, found)


# Failures that stop an apply before terraform changed anything (or Ctrl-C: the user is there).
_NOTHING_CHANGED = (errors.PLAN_BLOCKED, errors.MISSING_TOOL, errors.LOCKED, 130)


class Declined(TrainkitError):
    """The user answered no to a plan: nothing was changed."""

    exit_code = errors.APPLY


def _say_what_bills(cluster: Cluster, ws: Workspace, err: TrainkitError) -> None:
    """Add to a failed apply's error what its state holds now (resources that bill, and their price
    per hour) and the command that removes them; changes nothing. When the state cannot be read,
    the note says so and names `status` and `destroy`."""
    src = shlex.quote(cluster.source)
    if ws.root != Workspace.for_cluster(cluster.name).root:
        src += f" --workdir {shlex.quote(str(ws.root))}"
    remove = f"remove it with `trainkit destroy {src} --yes` (or finish it: `trainkit apply {src}`)"
    try:
        runner, _ = render_and_init(cluster, ws, phase=err.exit_code)
        held = state_resources(runner.state_json().get("values") or {})
    except TrainkitError:
        err.append_note(f"what the failed apply left could not be read: `trainkit status {src}` shows what "
                     f"exists; {remove}")
        return
    if not held:
        err.append_note("nothing was left in the cloud: the state holds no resources")
        return
    cost = state_cost(cluster, held)
    nodes = sum(1 for r in held if _NODE_ADDRESS.match(r["address"]))
    price = f" at about {cost['per_hour']:,.2f} {cost['currency']}/h" if cost["per_hour"] else ""
    err.append_note(f"the cluster exists and bills{price}: {nodes} node(s), {len(held)} resource(s) in "
                 f"{backend_description(cluster, ws)}; {remove}")


def _apply(cluster: Cluster, ws: Workspace, confirm, provision: bool, upgrade_image: bool,
           storage_loss: bool = False) -> ApplyResult:
    rev = None
    outputs: dict[str, Any] = {}
    if cluster.room.node_source == NODES_SCHEDULER:   # nothing provisioned: the login node is checked
        prepare_inventory(cluster, ws)
        try:
            scheduler.check_login(cluster, ws)
        except TrainkitError:
            ws.inventory_yml.unlink(missing_ok=True)   # not applied: train/status say "apply first"
            raise
        return ApplyResult(review=None, outputs={}, provisioned=False)
    if cluster.room.has_module:
        # one candidate after the other when the spec lists zones or types (cluster/failover.py)
        cluster, (rev, outputs) = failover.apply_in_order(
            cluster, ws, lambda here: _terraform_apply(here, ws, confirm, provision, upgrade_image, storage_loss))
        ws.write_outputs(outputs)
        ws.mark_applied(time.time())

    cluster = effective_cluster(cluster, ws)   # hosts: hosts.json's active list, the one every reader uses
    if provision:  # run_site writes inventory.yml itself
        if cluster.room.installs_key:
            require_private_key(cluster, ws, outputs.get("ssh_public_key"))
        if cluster.room.node_source != NODES_LOCAL:
            wait_for_ssh(_ssh_targets(cluster, ws))
        run_site(cluster, ws)
    else:
        prepare_inventory(cluster, ws)
    return ApplyResult(review=rev, outputs=outputs, provisioned=provision)


def _terraform_apply(cluster: Cluster, ws: Workspace, confirm, provision: bool,
                     upgrade_image: bool = False, storage_loss: bool = False) -> tuple[dict | None, dict]:
    """Plan again (refreshed against the cloud), then apply that plan.

    The plan saved by `trainkit plan` is what the user reviewed; it is never applied as such (the
    cloud may have changed since: a reclaimed spot node). When the new plan makes only the
    reviewed changes it is applied without asking again; otherwise `confirm(review)` decides.
    """
    ws.rotate_log()
    saved = ws.saved_plan()
    runner, state = render_and_init(cluster, ws, phase=errors.APPLY)
    if provision:  # before changing anything: provisioning will need the cluster's private key
        require_private_key(cluster, ws, state.get("ssh_public_key"))
    reviewed = change_set(saved[1]) if saved and saved[0] == ws.stack_fingerprint() else None
    rev = _plan(cluster, ws, runner, upgrade_image)
    _confirm_plan(rev, cluster, ws, confirm, reviewed, storage_loss)
    with progress.step("terraform apply") as s:
        runner.on_line = s.line
        try:
            rev = _apply_planned(cluster, ws, runner, confirm, rev, upgrade_image, storage_loss)
        finally:
            ws.drop_saved_plan()  # a saved plan can be applied once: the next apply plans again
        outputs = {k: v["value"] for k, v in runner.outputs().items()}
    return rev, outputs


def _apply_planned(cluster: Cluster, ws: Workspace, runner, confirm, rev: dict[str, Any],
                   upgrade_image: bool, storage_loss: bool = False) -> dict[str, Any]:
    """Apply plan.bin (confirmed by the caller); returns the review of what was applied.

    Plans and applies once more when the state changed while planning (terraform: "Saved plan is
    stale"; confirmed again), or when the cloud refused creates as duplicates of themselves (their
    answers were lost, stack/adopt.py): those are imported first, and what is left of the confirmed
    plan is applied without asking again. Any other failure is raised as it is.
    """
    reviewed: set | None = change_set(json.loads(ws.plan_json.read_text()))
    try:
        runner.apply_plan(ws.plan_bin)
        return rev
    except TrainkitError as err:
        if "Saved plan is stale" in err.message:
            progress.info("the state changed while planning (another workspace?); planning again")
            reviewed = None
        elif type(err) is not TrainkitError or not _adopt(cluster, ws, runner):
            raise  # capacity, credentials, a lock: the callers act on those
    rev = _plan(cluster, ws, runner, upgrade_image)
    _confirm_plan(rev, cluster, ws, confirm, reviewed, storage_loss)
    runner.apply_plan(ws.plan_bin)
    return rev


def _adopt(cluster: Cluster, ws: Workspace, runner) -> list[str]:
    """Import what the last apply's errors name as created already (stack/adopt.py); the
    addresses imported ([] when the failure was something else)."""
    room = cluster.room
    addresses = adopt.duplicates(runner.failed_output, room.duplicate_error)
    if not addresses:
        return []
    runner.plan(ws.plan_bin)  # the values that were unknown before the apply (IDs) are known now
    found = adopt.imports(addresses, runner.show_json(ws.plan_bin), room.import_id)
    for address, resource_id in found:
        progress.info(f"{address}: the cloud holds it already (the answer to its create was lost); "
                      f"importing {resource_id}")
        runner.import_(address, resource_id)
    return [address for address, _ in found]


def _confirm_plan(rev: dict[str, Any], cluster: Cluster, ws: Workspace, confirm, reviewed: set | None,
                  storage_loss: bool = False) -> None:
    """Refuse a blocking plan, and one that destroys storage unless `storage_loss`; ask
    `confirm(rev)` unless the new plan (plan.json) makes only changes among the `reviewed` ones,
    or none. TrainkitError(APPLY) "cancelled" when the answer is no."""
    refuse_blocking(rev)  # e.g. budget.max_per_hour exceeded, even for a plan saved earlier
    plan_data = json.loads(ws.plan_json.read_text())
    lost = storage_losses(cluster.room, plan_data)
    if lost and not storage_loss:
        raise TrainkitError(f"apply refused: this plan destroys {', '.join(lost)} and the data on it; "
                            "nothing was changed", exit_code=errors.PLAN_BLOCKED,
                            fix="read the plan (`trainkit plan`: each one's cause is listed); to go ahead, "
                                "apply again answering the question, or with --allow-storage-loss")
    now = change_set(plan_data)
    if reviewed is not None and now <= reviewed:
        return
    if reviewed is not None:
        progress.info("the cloud or the state changed since `trainkit plan`: planned again"
                      + (f"; gone from the cloud: {', '.join(rev['drift'])}" if rev.get("drift") else ""))
    if rev["changes"]["has_changes"] and not confirm(rev):
        raise Declined("apply cancelled; nothing was changed")


def refuse_blocking(rev: dict[str, Any]) -> None:
    """Raise (exit code PLAN_BLOCKED) when the review has a blocking finding."""
    blocking = [f"{f['code']}: {f['message']}" for f in rev["findings"] if f["severity"] == "block"]
    if blocking:
        raise TrainkitError("apply refused: " + "; ".join(blocking), exit_code=errors.PLAN_BLOCKED)


def _ssh_targets(cluster: Cluster, ws: Workspace) -> list[tuple[str, int]]:
    if cluster.room.node_source == NODES_HOSTS:
        return [(h.address, h.port) for h in cluster.spec.hosts]
    nodes = ws.read_outputs().get("nodes") or []
    return [(n["public_ip"], 22) for n in nodes if n.get("public_ip")]


# ---------------------------------------------------------------- status

def safety_status(cluster: Cluster, applied_at: float, now: float,
                  resources: list[dict] | None = None) -> dict[str, Any]:
    """The TTL deadline (UTC) and the idle setting, for `status`. Where the cloud releases nodes
    at a time (the room's ttl_argument), the deadline is the earliest one the state's nodes carry
    (`ttl_source: "state"`; each node's is fixed when it is created); otherwise, and when the
    state holds none, the apply time plus the spec's ttl (the node-side timer)."""

    out: dict[str, Any] = {"ttl_deadline": None, "idle_after_minutes": idle_minutes(cluster.spec)}
    held = release_times(cluster.room, resources or [])
    hours = ttl_hours(cluster.spec)
    if held:
        deadline = min(held)
        out["ttl_source"] = "state"
    elif hours is not None:
        deadline = applied_at + hours * 3600
    else:
        return out
    out["ttl_deadline"] = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(deadline))
    out["ttl_left_hours"] = round(max(0.0, deadline - now) / 3600, 2)
    return out


def status(cluster: Cluster, ws: Workspace, live: bool = True) -> dict[str, Any]:
    """What exists, as the cloud has it now (the state refreshed, nothing changed), and its cost.

    Cloud targets: a refresh-only plan against the state backend; `drift` lists resources the
    state had and the cloud no longer has. `live=False` (the workspace is busy with another
    command) reads the outputs.json cache instead and says so in `cached`. The cost since apply
    needs this workspace's apply time. A cluster never applied (or destroyed) is `exists: False`
    with no nodes on every target: `status` answers "not created" and exits 0 for it.
    """
    out: dict[str, Any] = {"cluster": cluster.name, "cloud": cluster.spec.cloud,
                           "workspace": str(ws.root), "exists": False, "nodes": []}
    if cluster.room.has_module:
        resources: list[dict] | None = None
        if live:
            outputs, drift, out["held"], resources = observe(cluster, ws)
        else:
            outputs, drift = (ws.read_outputs() if ws.outputs_json.exists() else {}), []
            out["cached"] = str(ws.outputs_json)
        out["backend"] = backend_description(cluster, ws)
        out["nodes"], out["drift"] = outputs.get("nodes") or [], drift
        out["lost"] = sorted(lost.missing(cluster, out["nodes"]))   # refused everywhere: `apply` recreates
        out["lost_fix"] = lost.fix(cluster) if out["lost"] else None
        out["exists"] = bool(out["nodes"] or out.get("held"))
        out.update(running_cost(cluster, len(out["nodes"])) if resources is None else state_cost(cluster, resources))
        applied_at = ws.applied_at()
        if out["exists"] and applied_at is not None:
            out.update(safety_status(cluster, applied_at, time.time(), resources))
            out["hours"] = round((time.time() - applied_at) / 3600, 3)
            if out["per_hour"] is not None:
                out["cost_so_far"] = round(out["hours"] * out["per_hour"], 2)
    elif cluster.room.node_source == NODES_SCHEDULER:   # the login node (the jobs: below)
        out["exists"] = ws.inventory_yml.exists()
        login = cluster.spec.slurm.login
        out["nodes"] = [{"name": "login", "private_ip": login.address, "public_ip": login.address}] \
            if out["exists"] else []
    else:
        out["exists"] = ws.inventory_yml.exists()
        hosts = cluster.spec.hosts or ()
        out["nodes"] = ([{"name": h.name, "private_ip": h.private_ip or h.address, "public_ip": h.address}
                         for h in hosts] or [{"name": "localhost", "private_ip": "127.0.0.1", "public_ip": None}]
                        ) if out["exists"] else []
    if cluster.batch_jobs and out["exists"]:   # runs are Slurm jobs: the open runs' jobs from the queue
        out["jobs"] = scheduler.jobs(ws)
    runs = sorted(p.name for p in ws.runs_dir.iterdir()) if ws.runs_dir.exists() else []
    out["runs"] = runs
    return out


def sync(cluster: Cluster, ws: Workspace, need_ssh: bool = False) -> dict[str, Any]:
    """Outputs and inventory.yml of a cloud cluster from its state backend (any workspace works).

    InputError (exit 2, "apply first") when the backend holds no such cluster; with `need_ssh`, InputError (exit 2)
    when the cluster's private key is not where SSH will look for it.
    """

    ws.rotate_log()
    runner, outputs = render_and_init(cluster, ws)
    if not outputs.get("nodes") and runner.state_list():
        raise InputError(f"cluster {cluster.name} is half there: {backend_description(cluster, ws)} holds "
                         "resources but no nodes (a destroy or apply stopped part-way); they may still bill",
                         fix=f"finish it: `trainkit destroy {cluster.source}` (or `trainkit apply {cluster.source}`)")
    if not outputs.get("nodes"):
        raise InputError(f"cluster {cluster.name} does not exist: {backend_description(cluster, ws)} "
                         "holds no nodes: apply first", fix=f"run `trainkit apply {cluster.source}` first")
    ws.write_outputs(outputs)
    if need_ssh:
        require_private_key(cluster, ws, outputs.get("ssh_public_key"))
    prepare_inventory(cluster, ws)
    return outputs


def require_private_key(cluster: Cluster, ws: Workspace, cluster_key: str | None) -> None:
    """InputError (exit 2) saying where to put the private key unless SSH can log in with it.

    `cluster_key` is the public key the cluster has (from its state), or None if unknown.
    """
    path = Path(cluster.spec.ssh.private_key).expanduser() if cluster.spec.ssh.private_key \
        else ws.ssh_private_key
    mine = None if cluster.spec.ssh.private_key else ws.generated_public_key()
    mismatch = bool(cluster_key and mine and mine.split()[:2] != cluster_key.split()[:2])
    if path.is_file() and not mismatch:
        return
    what = "is not the cluster's key" if mismatch else "does not exist"
    raise InputError(f"cluster {cluster.name}: the SSH private key {path} {what}",
                     fix=f"copy the cluster's private key (from the workspace that created it) to {path} "
                         "with mode 0600, or set ssh.private_key in the spec")
