"""`trainkit destroy`: tear a cluster down through its state backend, then ask the cloud what is left.

The state backend says what trainkit created (any workspace sees the same state); the cloud's tag
API says what still carries the cluster's tag `trainkit-cluster=<name>` afterwards (a resource
dropped from state, a deleted workspace). Leftovers are reported, and deleted with `sweep` after a
confirmation. Run artifacts (runs/) and the review (review.md) are kept; terraform logs, plans,
outputs, inventory, keys and the rendered stack are removed once the state is empty.
"""

from __future__ import annotations

import importlib
import os
from pathlib import Path
from typing import Any, Callable

from trainkit import clouds, errors
from trainkit.clouds.base import NODES_HOSTS, NODES_LOCAL, NODES_SCHEDULER
from trainkit.clouds.credentials import describe_sets, explain_failure, presence
from trainkit.cluster import scheduler
from trainkit.cluster.host_cleanup import clean_hosts
from trainkit.errors import CredentialsError, TrainkitError
from trainkit.spec.resolve import Cluster
from trainkit.spec.schema import RESERVED_TAG
from trainkit.stack.state import backend_description, render_and_init
from trainkit.util import progress
from trainkit.util.dist import pip_install
from trainkit.workspace import Workspace


def destroy(cluster: Cluster, ws: Workspace, sweep: bool = False,
            confirm_sweep: Callable[[list[dict]], bool] | None = None) -> dict[str, Any]:
    """Destroy what the state backend holds, then report (and with `sweep`, delete) leftovers.

    Returns {destroyed, note?, leftovers: [...], swept: [...], untracked?: [...], leftover_check: str,
    not_cleaned?: [{host, address, fix}]} (`untracked`: without `sweep`, tagged copies the state
    did not hold before destroy; `not_cleaned`: hosts that did not answer, cluster/host_cleanup.py). Raises
    TrainkitError (exit DESTROY) when the backend cannot be reached, when the state is not empty
    afterwards, when the leftover check could not run (no SDK, no credentials, no network), or
    when tagged resources are left and not swept; the workspace is then kept.
    """
    return TEARDOWNS[teardown_kind(cluster.room)](cluster, ws, sweep, confirm_sweep)


def teardown_kind(room) -> str:
    """The key of a room in TEARDOWNS: "terraform" for a room with a module, else where its nodes
    come from (Cloud.node_source)."""
    return TERRAFORM if room.has_module else room.node_source


def _clean_nodes(cluster: Cluster, ws: Workspace, sweep: bool, confirm_sweep) -> dict[str, Any]:
    """Nothing was provisioned (hosts, local): clean what trainkit left on the nodes that ran it."""
    result: dict[str, Any] = {"destroyed": True, "leftovers": [], "swept": []}
    if ws.inventory_yml.exists():   # the hosts that ran trainkit; those that do not answer are named
        result["not_cleaned"] = clean_hosts(cluster, ws)
    else:  # never applied here, or destroyed already: say so rather than "destroyed"
        result["note"] = f"nothing to destroy: not applied in {ws.root} (no inventory.yml)"
    ws.remove_cluster_files()
    return result


def _destroy_stack(cluster: Cluster, ws: Workspace, sweep: bool, confirm_sweep) -> dict[str, Any]:
    """terraform destroy from the state backend, then the leftover check (and sweep) by tag."""
    ws.rotate_log()
    result: dict[str, Any] = {"destroyed": True, "swept": []}
    local_state = ws.terraform_dir / "terraform.tfstate"
    failed: TrainkitError | None = None
    if cluster.spec.backend.type == "local" and not local_state.exists():
        result["note"] = (f"no terraform state at {local_state} (local backend): nothing was applied "
                          "from this workspace")
    else:
        runner, _ = render_and_init(cluster, ws, phase=errors.DESTROY)
        if not runner.state_list():
            result["note"] = f"{backend_description(cluster, ws)} holds nothing: nothing to destroy"
        else:
            # copies the state never recorded (a lost create response) block terraform's deletes
            if sweep:
                result["swept"] = _sweep_untracked(cluster, runner, confirm_sweep)
            else:
                result["swept"], result["untracked"] = _clear_untracked(cluster, runner)
            try:
                failed = _terraform_destroy(runner, sweep)
            except TrainkitError as err:
                if result.get("untracked") and err.exit_code != 130:
                    err.fix = (f"delete what the state does not hold ({len(result['untracked'])} tagged "
                               f"resource(s), named above) first: `trainkit destroy {cluster.source} --sweep`")
                raise
    swept_first, checked = result["swept"], _leftovers(cluster, sweep, confirm_sweep)
    result.update(checked, swept=swept_first + checked.get("swept", []))
    if failed is not None:
        _finish_after_sweep(cluster, runner, failed, result["leftovers"])
    if result["leftovers"]:
        could_not = " (the sweep could not delete them)" if sweep else ""
        raise TrainkitError(f"the state is empty but {len(result['leftovers'])} resource(s) tagged "
                            f"{RESERVED_TAG}={cluster.name} are still in the cloud{could_not}:\n"
                            + "\n".join(f"  {r['type']} {r['id']}" for r in result["leftovers"])
                            + (f"\n  last error: {result['sweep_error']}" if result.get("sweep_error") else ""),
                            fix=f"delete them with `trainkit destroy {cluster.source} --sweep`" if not sweep else
                            "delete them in the console (the error above says why the sweep could not)",
                            exit_code=errors.DESTROY)
    ws.remove_cluster_files()
    return result


def _clean_scheduler(cluster: Cluster, ws: Workspace, sweep: bool, confirm_sweep) -> dict[str, Any]:
    """A scheduler's cluster: trainkit's folder on the shared storage removed through the login
    node (cluster/scheduler.py); the cluster itself is the site's and is not touched."""
    result: dict[str, Any] = {"destroyed": True, "leftovers": [], "swept": []}
    if ws.inventory_yml.exists():
        scheduler.clean(cluster, ws)
    else:
        result["note"] = f"nothing to destroy: not applied in {ws.root} (no inventory.yml)"
    ws.remove_cluster_files()
    return result


TERRAFORM = "terraform"
# How a cluster is torn down, by teardown_kind(room): terraform destroy (a room with a module),
# trainkit's files cleaned off the nodes that ran it (hosts, local), or off the scheduler's
# shared storage (a scheduler's cluster: the site's machines are never touched).
TEARDOWNS: dict[str, Callable[[Cluster, Workspace, bool, Any], dict[str, Any]]] = {
    TERRAFORM: _destroy_stack, NODES_HOSTS: _clean_nodes, NODES_LOCAL: _clean_nodes,
    NODES_SCHEDULER: _clean_scheduler}


def _finish_after_sweep(cluster: Cluster, runner, failed: TrainkitError, leftovers: list[dict]) -> None:
    """terraform destroy failed and the sweep ran: drop from the state what the sweep deleted, let
    terraform destroy the rest (its own records, untagged rules), then raise naming what is left."""
    try:
        runner.refresh()
        runner.destroy()
    except TrainkitError as err:
        failed = err
    left = runner.state_list()
    if left or leftovers:
        raise TrainkitError(f"terraform destroy failed ({failed.message.splitlines()[0]}); "
                            + _still_there(left, leftovers),
                            fix=f"run `trainkit destroy {cluster.source} --sweep` again; the workspace and keys "
                                f"were kept; {failed.fix}", exit_code=errors.DESTROY)


def _terraform_destroy(runner, sweep: bool) -> TrainkitError | None:
    """terraform destroy; with `sweep` a failure is returned (the sweep still runs), else raised.
    Raises when the state is not empty afterwards."""
    try:
        with progress.step("terraform destroy") as s:
            runner.on_line = s.line
            runner.destroy()
    except TrainkitError as err:
        if not sweep or err.exit_code == 130:
            raise
        progress.info("terraform destroy failed; sweeping what carries the cluster's tag anyway")
        return err
    left = runner.state_list()
    if left:
        raise TrainkitError("terraform destroy finished but the state still holds: " + ", ".join(left),
                            fix="run `trainkit destroy` again; the workspace and keys were kept",
                            exit_code=errors.DESTROY)
    return None


def _still_there(state_left: list[str], tagged_left: list[dict]) -> str:
    parts = [f"the state still holds {', '.join(state_left)}"] if state_left else []
    if tagged_left:
        parts.append("the sweep could not delete " + ", ".join(f"{r['type']} {r['id']}" for r in tagged_left))
    return "; ".join(parts)


def _untracked(cluster: Cluster, runner, values: dict | None = None) -> list[dict]:
    """What carries the cluster's tag but is not in the state (terraform never learned of it: a
    create whose response was lost, then retried). [] when the cloud has no sweeper or the check
    cannot run (the leftover check after destroy reports that). `values`: the state's, if read."""
    sweeper = tag_sweeper(cluster.room)
    if sweeper is None:
        return []
    tracked = _state_ids(values if values is not None else runner.state_json().get("values") or {})
    try:
        return [r for r in sweeper.find(cluster) if r["id"] not in tracked]
    except Exception:  # noqa: BLE001 - reported by the leftover check after destroy
        return []


def _clear_untracked(cluster: Cluster, runner) -> tuple[list[dict], list[dict]]:
    """Without --sweep, before terraform destroy: (deleted, untracked). What blocks the deletes of
    what the state holds is deleted first (`_blocking`): it carries the cluster's tag AND lives in
    the VPC this destroy deletes, or is an untaggable part of the state's own resources; the cloud
    refuses those deletes while it exists (the provider retries DeleteVpc for minutes, then
    fails). Other untracked copies (disks, addresses, keys: outside the VPC) are named, and left
    to `--sweep`."""
    values = runner.state_json().get("values") or {}
    untracked = _untracked(cluster, runner, values)
    sweeper, blocking = tag_sweeper(cluster.room), _blocking(cluster, untracked, values)
    if not blocking:
        return [], _warn_untracked(cluster, untracked)
    with progress.step(f"deleting {len(blocking)} resource(s) in the cluster's network that the state does not "
                       "hold (a create whose answer was lost): "
                       + ", ".join(f"{r['type']} {r['id']}" for r in blocking)):
        try:
            sweeper.delete(cluster, blocking)
        except Exception as err:  # noqa: BLE001 - what is left is named below
            progress.info(f"sweep: {err}")
    untracked = _untracked(cluster, runner, values)
    left = {r["id"] for r in untracked} | {r["id"] for r in _blocking(cluster, untracked, values)}
    return [r for r in blocking if r["id"] not in left], _warn_untracked(cluster, untracked)


def _blocking(cluster: Cluster, untracked: list[dict], values: dict) -> list[dict]:
    """What the state does not hold but its deletes would wait on: the tagged `untracked` copies
    inside a VPC the state holds (the sweeper's `in_network`), and untaggable parts of the
    state's own resources (its `untracked_parts`: an EFS or NAS mount target). [] where the room's
    sweeper has neither, or the cloud cannot be asked (then they are named, as any other)."""
    sweeper = tag_sweeper(cluster.room)
    try:
        inside = sweeper.in_network(cluster, untracked, values) if untracked and hasattr(sweeper, "in_network") else []
        parts = sweeper.untracked_parts(cluster, values) if hasattr(sweeper, "untracked_parts") else []
    except Exception as err:  # noqa: BLE001 - then they are only named
        progress.info(f"could not tell which untracked resources are in the cluster's network: {err}")
        return []
    return inside + parts


def _warn_untracked(cluster: Cluster, untracked: list[dict]) -> list[dict]:
    """Say before terraform destroy starts that copies the state does not hold will hold up the
    deletes of what they use, and how to delete them too. Returns them."""
    if untracked:
        progress.info(f"warning: {len(untracked)} resource(s) tagged {RESERVED_TAG}={cluster.name} are not in "
                      "the state (a create whose answer was lost): "
                      + ", ".join(f"{r['type']} {r['id']}" for r in untracked)
                      + f". terraform destroy does not delete them: `trainkit destroy {cluster.source} --sweep` "
                      "does, first. If one uses what terraform deletes, terraform retries that delete for "
                      "minutes before it fails: stop it (Ctrl-C) and run --sweep")
    return untracked


def _sweep_untracked(cluster: Cluster, runner, confirm) -> list[dict]:
    """Delete what carries the cluster's tag but is not in the state (`_untracked`). Returns what
    was deleted."""
    untracked = _untracked(cluster, runner)
    if not untracked or (confirm is not None and not confirm(untracked)):
        return []
    sweeper = tag_sweeper(cluster.room)
    with progress.step(f"deleting {len(untracked)} tagged resource(s) the state does not hold"):
        try:
            sweeper.delete(cluster, untracked)
        except Exception as err:  # noqa: BLE001 - what is left is found and named after destroy
            progress.info(f"sweep: {err}")
    return untracked


def _state_ids(values: dict) -> set[str]:
    """Every string attribute value of every resource in a state tree (ids, ARNs, names)."""
    out, stack = set(), [values.get("root_module") or {}]
    while stack:
        module = stack.pop()
        stack.extend(module.get("child_modules") or [])
        for res in module.get("resources") or []:
            out.update(v for v in (res.get("values") or {}).values() if isinstance(v, str))
    return out


def _leftovers(cluster: Cluster, sweep: bool, confirm) -> dict[str, Any]:
    """{leftovers, swept, leftover_check}: what the cloud's tag API still finds for the cluster."""
    sweeper = tag_sweeper(cluster.room)
    tag = f"{RESERVED_TAG}={cluster.name}"
    if sweeper is None:
        msg = f"not implemented for this cloud: check the console for tag {tag}"
        progress.info(f"leftover check: {msg}")
        return {"leftovers": [], "leftover_check": msg}
    room = cluster.room
    if not presence(room, os.environ, Path.home())["provider"]["ok"]:  # the same cause, the same code (13)
        raise CredentialsError(f"the state is empty, but trainkit cannot ask {room.title} for resources "
                               f"tagged {tag}: no credentials in the environment; the workspace was kept",
                               fix=f"set {describe_sets(room.credentials)}, then run `trainkit destroy "
                                   f"{cluster.source}` again")
    try:
        found = sweeper.find(cluster)
    except Exception as err:  # any SDK/credential/network failure: the check did not run
        explained = explain_failure(cluster.spec.cloud, f"{type(err).__name__}: {err}")
        if isinstance(explained, CredentialsError):
            raise CredentialsError(f"the state is empty, but {explained.message}; the workspace was kept",
                                   fix=f"{explained.fix}; then run `trainkit destroy {cluster.source}` again") from None
        # Nothing says the cloud is empty: fail, and keep the workspace (keys, state pointer, logs)
        # so that `destroy` can be run again once the check can run.
        raise TrainkitError(f"the state is empty, but trainkit could not ask the cloud for resources tagged "
                            f"{tag} ({err}); the workspace was kept",
                            fix=f"fix that (install the cloud's SDK: {pip_install('control', cluster.spec.cloud)}, "
                                f"and check its credentials), then run `trainkit destroy "
                                f"{cluster.source}` again; or look for tag {tag} in the console",
                            exit_code=errors.DESTROY) from None
    swept: list[dict] = []
    out: dict[str, Any] = {}
    if found and sweep and (confirm is None or confirm(found)):
        with progress.step(f"deleting {len(found)} leftover resource(s) tagged {tag}"):
            try:
                sweeper.delete(cluster, found)
            except Exception as err:  # noqa: BLE001 - what is left is found again and named
                out["sweep_error"] = f"{type(err).__name__}: {err}"[:300]
        before, found = found, sweeper.find(cluster)
        swept = [r for r in before if r["id"] not in {f["id"] for f in found}]
    return {**out, "leftovers": found, "swept": swept,
            "leftover_check": f"asked the cloud for resources tagged {tag}: {len(found)} left"}


def tag_sweeper(room: clouds.Cloud):
    """The room's sweeper module (find/delete by tag), imported lazily; None if it has none."""
    name = room.tag_sweeper
    return importlib.import_module(name) if name else None
