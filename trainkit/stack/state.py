"""The stack's state: render + `terraform init` against the backend (settling the SSH key every
workspace of a cluster renders), what the state and the cloud hold now (a refresh-only plan), drift
and change sets of a plan, and where the state lives, in words.

Reads the cloud and the backend; never changes either.
"""

from __future__ import annotations

import dataclasses
import os
from typing import Any

from trainkit import errors
from trainkit.errors import InputError, TrainkitError
from trainkit.spec.resolve import Cluster
from trainkit.spec.sshkeys import PUBLIC_KEY, key_files
from trainkit.stack.render import backend_config, instance_identity, write_stack
from trainkit.stack.terraform import TerraformRunner, terraform_path
from trainkit.util import progress
from trainkit.workspace import Workspace


def render_and_init(cluster: Cluster, ws: Workspace, phase: int = errors.PLAN):
    """Render the root stack, `terraform init` it (reaching the state backend) and settle its key.

    Returns `(runner, outputs)`, `outputs` being the backend's `{name: value}` (empty when the
    cluster does not exist). The SSH key rendered is, in order: the spec's `ssh.public_key`, the
    key the cluster already has in its state (so every workspace of a cluster renders the same
    key), this workspace's generated key, a newly generated one.
    """

    terraform_path()  # fail first, with install instructions, when terraform is missing
    ws.ensure()
    cluster = with_node_placement(cluster, ws)
    pub, _ = key_files(cluster.spec.ssh)
    user_key = pub.read_text().strip() if pub is not None else None
    first = user_key or ws.generated_public_key() or _INIT_ONLY_KEY
    extra = controller_keys(ws)
    write_stack(cluster, first, ws.terraform_dir, extra)
    with progress.step("terraform init") as s:
        runner = TerraformRunner(ws.terraform_dir, ws.terraform_log, on_line=s.line,
                                 cloud=cluster.spec.cloud, placement=(cluster.spec.zone, cluster.instance and cluster.instance.type))
        try:
            runner.init(phase=phase)
        except TrainkitError as err:
            if err.exit_code == 130:  # Ctrl-C: keep terraform's own message
                raise
            raise init_failure(cluster, ws, runner.failed_output, err, phase) from None
        outputs = {k: v["value"] for k, v in runner.outputs(phase=phase).items()}
    state_key = outputs.get("ssh_public_key") or (_key_in_state(runner.state_json(phase)) if outputs else None)
    key = user_key or state_key or ws.ensure_ssh_key(comment=f"trainkit-{cluster.name}")
    if key != first:
        write_stack(cluster, key, ws.terraform_dir, extra)
    return runner, outputs


def controller_keys(ws: Workspace) -> tuple[str, ...]:
    """The cloud controller's own public key when `ws` is the workspace its loop runs in, else ().

    That loop renders with INSTANCE_IDENTITY set (runs/handoff_cloud.py) in the workspace beside
    the key pair the hand-off made on it (Workspace.controller_public_key). Its render passes the
    key to the module's `extra_authorized_keys`, so a node it creates (a replacement) lets it in.
    InputError naming the file when that file is not one OpenSSH public key line."""
    pub = ws.controller_public_key() if instance_identity() else None
    if pub is None or not pub.is_file():
        return ()
    text = pub.read_text(errors="replace").strip()
    if not PUBLIC_KEY.fullmatch(text) or not text.startswith("ssh-ed25519 "):
        raise InputError(f"{pub}: not the controller's OpenSSH public key line (ssh-ed25519 ...)",
                         fix="hand the run off again from your machine: trainkit train SPEC --recover --detach")
    return (text,)


def with_node_placement(cluster: Cluster, ws: Workspace) -> Cluster:
    """`cluster` with the nodes this workspace placed apart (a replacement that failed over at
    recovery), where the cluster has none set and each placement is still one the spec allows
    (its zones, types and billings); a spec that no longer lists it moves that node back. A
    cluster whose node_placement is set ({} included) is returned as it is."""
    if cluster.node_placement is not None:
        return cluster
    spec = cluster.spec
    zones = set(spec.zone_candidates or (spec.zone,))
    types = set(spec.instance.type_candidates or ((cluster.instance.type,) if cluster.instance else ()))
    spots = {spec.spot.enabled} | ({False} if spec.spot.enabled and spec.spot.fallback == "on_demand" else set())
    kept = {i: p for i, p in ws.node_placement().items()
            if int(i) < cluster.nodes and p.get("zone", spec.zone) in zones
            and p.get("instance_type", cluster.instance and cluster.instance.type) in types
            and p.get("spot", spec.spot.enabled) in spots}
    return dataclasses.replace(cluster, node_placement=kept)


def _key_in_state(state: dict) -> str | None:
    """The key pair's public key in a state applied before modules output `ssh_public_key`."""
    stack = [state.get("values", {}).get("root_module", {})]
    while stack:
        module = stack.pop()
        stack.extend(module.get("child_modules", []))
        for res in module.get("resources", []):
            key = (res.get("values") or {}).get("public_key")
            if res.get("mode") == "managed" and isinstance(key, str) and key.startswith(("ssh-", "ecdsa-")):
                return key
    return None


# Rendered only for `terraform init`, which reads the backend block and never the module inputs.
_INIT_ONLY_KEY = "ssh-ed25519 AAAA-trainkit-init-only"


def init_stage(output: str) -> str:
    """What a failed `terraform init` could not do, from its output: "silent" (it printed nothing),
    "cli-config" (its CLI configuration has an error), "providers" or "modules" (its first error is
    about installing them), else "backend" (reaching the state backend, the last thing init does;
    terraform announces the stages before it runs them, so the headers do not say which failed)."""
    if not output.strip():
        return "silent"
    if "problems with the CLI configuration" in output and "│ Error:" in output.split("\n\n\n")[0]:
        return "cli-config"
    first = output.split("\nError: ", 1)[1].split("\n", 1)[0].lower() if "\nError: " in output else ""
    return "providers" if "provider" in first else "modules" if "module" in first else "backend"


def init_failure(cluster: Cluster, ws: Workspace, output: str, err: TrainkitError, phase: int) -> TrainkitError:
    """The one message for a failed `terraform init`, blaming what failed: the state backend only
    when terraform was reaching it (a silent terraform or a broken CLI configuration is not the
    backend's fault)."""
    stage, config = init_stage(output), os.environ.get("TF_CLI_CONFIG_FILE") or "~/.terraformrc"
    if stage == "silent":
        return TrainkitError(f"terraform init failed without printing anything ({err.message.splitlines()[0]})",
                             fix="check the terraform binary (TRAINKIT_TERRAFORM, else terraform on PATH): "
                                 "`terraform version` must answer", exit_code=phase)
    if stage == "cli-config":
        return TrainkitError(f"terraform's CLI configuration {config} has errors, and terraform init failed: "
                             f"{err.message}", fix=f"fix {config} or unset TF_CLI_CONFIG_FILE; {err.fix}",
                             exit_code=phase)
    if stage == "backend":
        return TrainkitError(f"the state backend ({backend_description(cluster, ws)}) could not be read, so "
                             f"nothing was changed: {err.message}",
                             fix=f"check `backend:` in {cluster.source} (the bucket must exist and your credentials "
                                 f"must reach it), then run the command again; {err.fix}", exit_code=phase)
    what = {"providers": "could not install the providers", "modules": "could not load the modules"}.get(stage, "failed")
    return TrainkitError(f"terraform init {what}, so nothing was changed: {err.message}",
                         fix=f"check the network or the provider mirror in {config}; {err.fix}", exit_code=phase)


def backend_description(cluster: Cluster, ws: Workspace) -> str:
    """Where the cluster's state lives, for messages: "s3 bucket/key" or the local file."""

    kind, args, _ = backend_config(cluster)
    if kind == "local":
        return f"local state {ws.terraform_dir / args['path']}"
    where = "/".join(str(args[k]) for k in ("bucket", "prefix", "key") if args.get(k))
    return f"{kind} backend {where}"


def change_set(plan_data: dict) -> set[tuple[str, tuple[str, ...]]]:
    """The plan's resource changes as {(address, actions)}, no-ops and reads left out."""
    return {(rc["address"], tuple(rc["change"]["actions"])) for rc in plan_data.get("resource_changes", [])
            if set(rc["change"]["actions"]) - {"no-op", "read"}}


def drifted(plan_data: dict) -> list[str]:
    """Resources the cloud no longer has although the state listed them ("deleted outside trainkit")."""
    return sorted(rd["address"] for rd in plan_data.get("resource_drift", [])
                  if "delete" in rd["change"]["actions"])


def observe(cluster: Cluster, ws: Workspace) -> tuple[dict[str, Any], list[str], list[str], list[dict]]:
    """(outputs as the cloud has them now, addresses gone from the cloud, addresses the state holds
    when it holds no nodes, the state's resources `{type, index, address, values}`): a refresh-only
    plan. The third is non-empty when an apply failed or a destroy stopped part-way: resources that
    may still bill. The fourth is what `status` prices (the review prices "now" from the same).

    Changes nothing: neither the cloud nor the state. Caches the outputs in outputs.json.
    """
    ws.rotate_log()
    runner, outputs = render_and_init(cluster, ws)
    if not outputs:  # no outputs: nothing to refresh, but maybe resources left part-way
        ws.outputs_json.unlink(missing_ok=True)
        held = state_resources(runner.state_json().get("values") or {})
        return {}, [], [r["address"] for r in held], held
    refresh = ws.refresh_bin
    try:
        with progress.step("terraform plan -refresh-only") as s:
            runner.on_line = s.line
            runner.plan(refresh, refresh_only=True)
            data = runner.show_json(refresh)
    finally:
        refresh.unlink(missing_ok=True)
    outputs = {k: v.get("value") for k, v in data.get("planned_values", {}).get("outputs", {}).items()}
    ws.write_outputs(outputs)
    # a refresh-only plan's planned_values may hold only the outputs; prior_state is the state as
    # refreshed (terraform JSON output format, "prior_state")
    planned = data.get("planned_values") or {}
    held = state_resources(planned if planned.get("root_module") else (data.get("prior_state") or {}).get("values") or {})
    return outputs, drifted(data), [] if outputs.get("nodes") else [r["address"] for r in held], held


def state_resources(values: dict) -> list[dict]:
    """Managed resources of a state or planned-values tree (`{root_module: {resources,
    child_modules}}`) as `{type, index, address, values}`."""
    out, stack = [], [values.get("root_module") or {}]
    while stack:
        module = stack.pop()
        stack.extend(module.get("child_modules") or [])
        out += [{"type": r["type"], "index": r.get("index"), "address": r["address"], "values": r.get("values") or {}}
                for r in module.get("resources") or [] if r.get("mode") == "managed"]
    return sorted(out, key=lambda r: r["address"])
