"""The user's job, step by step: plan, apply, train, destroy, status. Glue between the pure steps
(resolve, render, review, inventory) and the edges that run tools (terraform, provision).

Each function takes a resolved `Cluster` and its `Workspace`, does one command's work and returns
data for the CLI to render. Only cloud targets touch terraform; `local` and `hosts` go straight
to Ansible.
"""

from __future__ import annotations

import hashlib
import json
import shutil
import socket
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from trainkit import errors, progress
from trainkit.errors import TrainkitError
from trainkit.cost import cluster_cost, no_cost
from trainkit.resolve import Cluster, nat_gateway
from trainkit.review import ROLES, review
from trainkit.spec import CLOUD_TARGETS
from trainkit.workspace import Workspace

SSH_WAIT_S = 300  # cloud images usually accept SSH within 1-2 minutes of "running"


def is_cloud(cluster: Cluster) -> bool:
    return cluster.spec.cloud in CLOUD_TARGETS


# ---------------------------------------------------------------- plan

def render_and_init(cluster: Cluster, ws: Workspace):
    """Render the root stack into the workspace and `terraform init` it; returns the runner."""
    from trainkit.render import write_stack
    from trainkit.terraform import TerraformRunner, terraform_path

    terraform_path()  # fail first, with install instructions, when terraform is missing
    ws.ensure()
    write_stack(cluster, ws.ensure_ssh_key(comment=f"trainkit-{cluster.name}"), ws.terraform_dir)
    with progress.step("terraform init") as s:
        runner = TerraformRunner(ws.terraform_dir, ws.root / "terraform.log", on_line=s.line)
        runner.init()
    return runner


def plan(cluster: Cluster, ws: Workspace, destroy: bool = False) -> dict[str, Any]:
    """Render, init, plan to plan.bin, show -json to plan.json; returns the review (also review.md)."""
    if not is_cloud(cluster):
        return _no_terraform_review(cluster)
    runner = render_and_init(cluster, ws)
    with progress.step("terraform plan") as s:
        runner.on_line = s.line
        runner.plan(ws.plan_bin, destroy=destroy)
        plan_data = runner.show_json(ws.plan_bin)
    ws.plan_json.write_text(json.dumps(plan_data, indent=1, sort_keys=True))
    (ws.root / "plan.fingerprint").write_text(stack_fingerprint(ws.terraform_dir))
    from trainkit.checkov import scan_plan

    extra, checkov_note = scan_plan(ws.plan_json)
    rev = review(plan_data, cluster, extra)
    rev["checkov"] = checkov_note
    from trainkit.review import to_markdown
    ws.review_md.write_text(to_markdown(rev))
    return rev


def _no_terraform_review(cluster: Cluster) -> dict[str, Any]:
    return {"cluster": cluster.name, "cloud": cluster.spec.cloud,
            "changes": {"by_role": {role: {} for role in ROLES}, "add": 0, "change": 0, "destroy": 0, "addresses": [],
                        "has_changes": False},
            "cost": no_cost(cluster), "findings": [], "blocking": False, "safety": [],
            "note": f"{cluster.spec.cloud}: nothing to provision with terraform ({cluster.nodes} node(s))"}


def stack_fingerprint(folder: Path) -> str:
    """Hash of every rendered file (not .terraform/ or state): a saved plan is for exactly these."""
    h = hashlib.sha256()
    for path in sorted(folder.rglob("*")):
        rel = path.relative_to(folder)
        if path.is_file() and rel.parts[0] != ".terraform" and not rel.name.startswith("terraform.tfstate") \
                and rel.name != ".terraform.lock.hcl":
            h.update(str(rel).encode() + b"\0" + path.read_bytes() + b"\0")
    return h.hexdigest()


# ---------------------------------------------------------------- apply

@dataclass
class ApplyResult:
    review: dict[str, Any] | None
    outputs: dict[str, Any]
    provisioned: bool


def apply(cluster: Cluster, ws: Workspace, confirm, provision: bool = True) -> ApplyResult:
    """Create/update the cluster, write outputs.json and inventory.yml, then run site.yml.

    `confirm(review) -> bool` is asked only when the saved plan is missing or stale.
    """
    rev = None
    outputs: dict[str, Any] = {}
    if is_cloud(cluster):
        rev, outputs = _terraform_apply(cluster, ws, confirm)
        ws.outputs_json.write_text(json.dumps(outputs, indent=2, sort_keys=True))
        (ws.root / "applied.json").write_text(json.dumps({"applied_at": time.time()}))
    from trainkit.provision import prepare_inventory, run_site

    if provision:  # run_site writes inventory.yml itself
        if is_cloud(cluster) or cluster.spec.cloud == "hosts":
            wait_for_ssh(_ssh_targets(cluster, ws))
        run_site(cluster, ws)
    else:
        prepare_inventory(cluster, ws)
    return ApplyResult(review=rev, outputs=outputs, provisioned=provision)


def _terraform_apply(cluster: Cluster, ws: Workspace, confirm) -> tuple[dict | None, dict]:
    saved = ws.plan_bin.exists() and (ws.root / "plan.fingerprint").exists()
    runner = render_and_init(cluster, ws)
    fresh = saved and (ws.root / "plan.fingerprint").read_text() == stack_fingerprint(ws.terraform_dir)
    rev = review(json.loads(ws.plan_json.read_text()), cluster) if fresh else plan(cluster, ws)
    refuse_blocking(rev)  # e.g. budget.max_per_hour exceeded, even for a plan saved earlier
    if not fresh:
        if rev["changes"]["has_changes"] and not confirm(rev):
            raise TrainkitError("apply cancelled; nothing was changed", exit_code=errors.APPLY)
    with progress.step("terraform apply") as s:
        runner.on_line = s.line
        try:
            runner.apply_plan(ws.plan_bin)
        except TrainkitError as err:
            if "Saved plan is stale" not in err.message:
                raise
            progress.info("the saved plan is stale (the state changed since); planning again")
            rev = plan(cluster, ws)
            if rev["changes"]["has_changes"] and not confirm(rev):
                raise TrainkitError("apply cancelled; nothing was changed", exit_code=errors.APPLY)
            runner.apply_plan(ws.plan_bin)
        finally:
            # A saved plan can be applied once; drop it so the next apply plans again.
            ws.plan_bin.unlink(missing_ok=True)
            (ws.root / "plan.fingerprint").unlink(missing_ok=True)
        outputs = {k: v["value"] for k, v in runner.outputs().items()}
    return rev, outputs


def refuse_blocking(rev: dict[str, Any]) -> None:
    """Raise (exit code PLAN_BLOCKED) when the review has a blocking finding."""
    blocking = [f"{f['code']}: {f['message']}" for f in rev["findings"] if f["severity"] == "block"]
    if blocking:
        raise TrainkitError("apply refused: " + "; ".join(blocking), exit_code=errors.PLAN_BLOCKED)


def _ssh_targets(cluster: Cluster, ws: Workspace) -> list[tuple[str, int]]:
    if cluster.spec.cloud == "hosts":
        return [(h.address, h.port) for h in cluster.spec.hosts]
    nodes = ws.read_outputs().get("nodes") or []
    return [(n["public_ip"], 22) for n in nodes if n.get("public_ip")]


def wait_for_ssh(targets: list[tuple[str, int]], timeout_s: float = SSH_WAIT_S) -> None:
    """Block until every (host, port) accepts TCP; TrainkitError naming those that never did."""
    pending = list(targets)
    with progress.step(f"waiting for SSH on {len(pending)} node(s)") as s:
        deadline = time.monotonic() + timeout_s
        while pending and time.monotonic() < deadline:
            for target in list(pending):
                try:
                    socket.create_connection(target, timeout=3).close()
                    pending.remove(target)
                    s.line(f"{target[0]}:{target[1]} is up")
                except OSError:
                    pass
            if pending:
                time.sleep(2)
    if pending:
        raise TrainkitError(f"SSH did not come up within {timeout_s:.0f}s on: "
                            + ", ".join(f"{h}:{p}" for h, p in pending),
                            fix="check admin_cidrs includes your address, and the image's SSH user",
                            exit_code=errors.PROVISION)


# ---------------------------------------------------------------- train

def train(cluster: Cluster, ws: Workspace, config: Path, overrides: list[str]) -> dict[str, Any]:
    """Run train.yml on every node; the run's files land in runs/<run-id>/. Returns its summary."""
    from trainkit.provision import run_train

    if not ws.inventory_yml.exists():
        raise TrainkitError(f"cluster {cluster.name} is not set up in {ws.root}",
                            fix="run `trainkit apply` (or `make cluster`) first", exit_code=errors.TRAIN)
    run_dir = ws.new_run_dir()
    with progress.follow(_rank0_log(ws, run_dir.name), prefix="  rank 0 | "):
        result = run_train(cluster, ws, config, overrides, run_dir=run_dir)
    summary_path = result.run_dir / "summary.json"
    summary = json.loads(summary_path.read_text()) if summary_path.exists() else {}
    onnx = result.run_dir / "model.onnx"
    return {"run_id": result.run_dir.name, "run_dir": str(result.run_dir), **summary,
            "onnx": str(onnx) if onnx.exists() else None}


def _rank0_log(ws: Workspace, run_id: str) -> Path:
    """Where rank 0 logs on the head node; readable here on `local` and on a NAS mounted here too."""
    import yaml

    work = yaml.safe_load(ws.inventory_yml.read_text())["all"]["vars"].get("trainkit_work_dir", "/nonexistent")
    return Path(work) / "runs" / run_id / "logs" / "rank-0.log"


# ---------------------------------------------------------------- destroy

def destroy(cluster: Cluster, ws: Workspace) -> dict[str, Any]:
    """Tear down; verify the state is empty before deleting keys and terraform files.

    Run artifacts (runs/) are always kept.
    """
    if not is_cloud(cluster):
        from trainkit.provision import run_cleanup
        if ws.inventory_yml.exists():
            run_cleanup(cluster, ws)
        _remove_owned(ws, keep_terraform=False)
        return {"destroyed": True, "left": []}
    if not ws.terraform_dir.exists():
        return {"destroyed": True, "left": [], "note": "nothing was ever applied here"}
    runner = render_and_init(cluster, ws)
    with progress.step("terraform destroy") as s:
        runner.on_line = s.line
        runner.destroy()
    left = runner.state_list()
    if left:
        raise TrainkitError("terraform destroy finished but the state still holds: " + ", ".join(left),
                            fix="run `trainkit destroy` again; the workspace and keys were kept",
                            exit_code=errors.DESTROY)
    _remove_owned(ws, keep_terraform=False)
    return {"destroyed": True, "left": []}


def _remove_owned(ws: Workspace, keep_terraform: bool) -> None:
    """Remove what destroy owns: terraform files, plans, outputs, inventory, keys. Keep runs/."""
    names = ["plan.bin", "plan.json", "plan.fingerprint", "review.md", "outputs.json",
             "inventory.yml", "applied.json", "ssh", "ansible", "node"]
    if not keep_terraform:
        names.append("terraform")
    for name in names:
        path = ws.root / name
        if path.is_dir():
            shutil.rmtree(path)
        elif path.exists():
            path.unlink()


# ---------------------------------------------------------------- status

def running_cost(cluster: Cluster, nodes: int) -> dict[str, Any]:
    """What `nodes` running nodes cost, by the same model as the plan review (`trainkit.cost`)."""
    if not nodes:
        return {"currency": cluster.catalog.currency, "per_hour": None, "cost": None}
    c = cluster_cost(cluster, nodes, 1 if nat_gateway(cluster.spec) else 0)
    return {"currency": c["currency"], "per_hour": c["per_hour"], "cost": c}


def safety_status(cluster: Cluster, applied_at: float, now: float) -> dict[str, Any]:
    """The TTL deadline (UTC, from the apply time) and the idle setting, for `status`."""
    from trainkit.safety import idle_minutes, ttl_hours

    out: dict[str, Any] = {"ttl_deadline": None, "idle_after_minutes": idle_minutes(cluster.spec)}
    hours = ttl_hours(cluster.spec)
    if hours is not None:
        deadline = applied_at + hours * 3600
        out["ttl_deadline"] = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(deadline))
        out["ttl_left_hours"] = round(max(0.0, deadline - now) / 3600, 2)
    return out


def status(cluster: Cluster, ws: Workspace) -> dict[str, Any]:
    """What exists (from outputs.json) and what it has cost since apply (catalog prices)."""
    applied = ws.root / "applied.json"
    out: dict[str, Any] = {"cluster": cluster.name, "cloud": cluster.spec.cloud,
                           "workspace": str(ws.root), "exists": False, "nodes": []}
    if is_cloud(cluster):
        if ws.outputs_json.exists():
            out["nodes"] = ws.read_outputs().get("nodes") or []
            out["exists"] = bool(out["nodes"])
        out.update(running_cost(cluster, len(out["nodes"])))
        if out["exists"] and applied.exists():
            applied_at = json.loads(applied.read_text())["applied_at"]
            out.update(safety_status(cluster, applied_at, time.time()))
            hours = (time.time() - applied_at) / 3600
            out["hours"] = round(hours, 3)
            out["cost_so_far"] = round(hours * out["per_hour"], 2)
    else:
        out["exists"] = ws.inventory_yml.exists()
        hosts = cluster.spec.hosts or ()
        out["nodes"] = [{"name": h.name, "private_ip": h.private_ip or h.address, "public_ip": h.address}
                        for h in hosts] or [{"name": "localhost", "private_ip": "127.0.0.1", "public_ip": None}]
    runs = sorted(p.name for p in ws.runs_dir.iterdir()) if ws.runs_dir.exists() else []
    out["runs"] = runs
    return out
