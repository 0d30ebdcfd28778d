"""The controller of a cloud target (issue 42): the instance the module renders (output
`controller` {id, private_ip, public_ip, role}), as refusals, a Node to reach it, and the loop's
environment. Pure but for reading the workspace's outputs.json and inventory.yml.

What a Terraform target needs before `train --recover --detach` hands its loop over (refuse(),
called by runs/start.checked before anything starts):

- a remote state backend: the controller reads and changes the cluster through the same state
  the user's workspace does; a `local` backend lives on the user's machine only;
- the controller in the applied state: `train` never applies unreviewed, so a spec whose applied
  stack did not render it (`controller.enabled` unset or false at apply time) is refused with the
  apply that shows the instance, its role and its price.

The loop's environment (loop_env): no credentials of any cloud travel. The controller's terraform
and SDKs take the instance identity's temporary credentials from the metadata service (AWS: the
instance profile through IMDSv2; the SDKs' and the provider's default credential chain ends there).
Only names in ENV_TRAVELS travel, and only when set here: the region (AWS_REGION,
AWS_DEFAULT_REGION), custom endpoints (AWS_ENDPOINT_URL and AWS_ENDPOINT_URL_<SERVICE>: an
S3-compatible store, an emulator), NO_PROXY/no_proxy and the room's own region variables. The
provider mirror configuration (TF_CLI_CONFIG_FILE) is shipped as a file by the hand-off.
"""

from __future__ import annotations

import re
import shlex
from typing import Any, Mapping

from trainkit.clouds import all_clouds
from trainkit.errors import InputError
from trainkit.provision.inventory import inventory_hosts, load_inventory
from trainkit.provision.node import Node, node_from_vars, read_nodes
from trainkit.spec import controller_block
from trainkit.util import yamlload
from trainkit.workspace import Workspace

# Non-secret variables that may travel to the controller's loop (module doc). The AWS SDKs read
# AWS_ENDPOINT_URL and AWS_ENDPOINT_URL_<SERVICE> ("Service-specific endpoints", AWS SDKs and
# Tools Reference Guide); the regions from AWS_REGION / AWS_DEFAULT_REGION (same guide, "Region").
ENV_TRAVELS = re.compile(r"AWS_REGION|AWS_DEFAULT_REGION|AWS_ENDPOINT_URL(_[A-Z0-9_]+)?|NO_PROXY|no_proxy")
# Never travels whatever a room lists (AWS_SESSION_TOKEN, *_SECRET_KEY, ...): defence in depth.
SECRET_WORDS = re.compile(r"KEY|SECRET|TOKEN|PASSWORD|CREDENTIAL", re.IGNORECASE)
CONTROLLER_NAME = "controller"


def instance_controller(cluster: Any) -> bool:
    """Whether the cluster's controller is an instance its module renders (a Terraform target)."""
    return bool(cluster.room.has_module)


def refuse(cluster: Any, outputs: Mapping[str, Any] | None, down: bool = False) -> None:
    """InputError when a Terraform target's run cannot be handed to its controller (module doc):
    a local backend (field backend.type), no controller in the applied state's `outputs`
    (field controller.enabled), or `down` (--down / spec `down`). None of it applies anything."""
    problem = problem_of(cluster.spec, cluster.room, outputs, cluster.source, down)
    if problem:
        raise InputError(problem[0], fix=problem[1])


def problem_of(spec: Any, room: Any, outputs: Mapping[str, Any] | None, src: str = "SPEC",
               down: bool = False) -> tuple[str, str] | None:
    """(message, fix) for refuse(), or None when the hand-off may go on (pure); `src`: the spec's path.

    `down` is refused on a cloud: the whole-stack destroy would terminate the controller instance
    it runs on part-way (Terraform destroys the instance before the subnet, security group and
    role it depends on, so the rest would be left half-destroyed), and the controller's policy
    allows changing the nodes, not deleting the network, the NAS or its own role (docs/aws.md).
    The nodes' `idle:` guard and `ttl:` stop the billing in the meantime."""
    if down:
        return ("down: a cloud's controller cannot yet destroy the cluster it runs in (it would terminate "
                "itself part-way, and its role may not delete the network or the NAS)",
                f"drop --down (and `down: true` from the spec); when the run ends, destroy from your machine: "
                f"`trainkit destroy {src}`; `idle:` and `ttl:` stop idle nodes billing meanwhile")
    if spec.backend.type == "local":
        return ("backend.type: local: the controller cannot reach a state kept on this machine "
                "(a controller acts through the cluster's remote state)",
                f"set `backend: {{type: {room.backend_type}, bucket: ..., region: ...}}` in the spec "
                f"(docs/state.md) and run `trainkit apply {src}` to move the state there")
    if outputs is not None and not controller_of(outputs):
        return ("controller.enabled: the applied cluster has no controller instance (terraform output "
                "`controller` is null: the applied spec did not render it)",
                f"set `controller.enabled: true` in the spec and run `trainkit apply {src}` (its plan "
                "shows the instance, its role and its price); train never applies unreviewed")
    return None


def controller_of(outputs: Mapping[str, Any]) -> dict[str, Any] | None:
    """The module's `controller` output ({id, private_ip, public_ip, role}), None when there is none."""
    out = outputs.get("controller")
    return out if isinstance(out, dict) and out.get("private_ip") else None


def wanted(cluster: Any, opts: Any) -> bool:
    """--recover --detach on a Terraform target whose spec wants a controller
    (controller_block.controller_wanted: `enabled`, or unset on spot)."""
    return bool(instance_controller(cluster) and opts.recover and opts.detach
                and controller_block.controller_wanted(cluster.spec, opts.recover, opts.detach))


def node(ws: Workspace) -> Node:
    """The controller instance as a Node: the output's public_ip, else its private_ip (then through
    the head as the workers are reached: their ProxyCommand), the cluster's ssh user and key as
    inventory.yml has them. InputError naming outputs.json when it holds no controller."""
    ctl = controller_of(ws.read_outputs())
    if ctl is None:
        raise InputError(f"{ws.outputs_json}: no `controller` output", fix="set `controller.enabled: true` "
                         "and run `trainkit apply SPEC`")
    inv = load_inventory(ws.inventory_yml)
    group = {**(inv["all"].get("vars") or {}), **user_group_vars(ws)}   # as Ansible merges them
    hosts = list(inventory_hosts(inv).values())
    public = ctl.get("public_ip")
    jumped = [h for h in hosts if "ProxyCommand" in str(h.get("ansible_ssh_common_args", ""))]
    like = hosts[0] if public or not jumped else jumped[0]
    keep = ("ansible_user", "ansible_ssh_private_key_file", "ansible_ssh_common_args", "trainkit_root")
    hv = {**group, **{k: like[k] for k in keep if k in like}, "ansible_host": public or ctl["private_ip"],
          "trainkit_private_ip": ctl["private_ip"], "trainkit_node_python": venv_python(group)}
    return node_from_vars(CONTROLLER_NAME, 0, hv, str(ws.inventory_yml))


def venv_python(group: Mapping[str, Any]) -> str:
    """The controller's Python: the trainkit role's venv under launch.root (roles/trainkit defaults),
    unless the group vars reuse an interpreter (trainkit_venv_mode: reuse)."""
    if group.get("trainkit_venv_mode") == "reuse" and group.get("trainkit_node_python"):
        return str(group["trainkit_node_python"])
    return str(group.get("trainkit_root") or "/opt/trainkit").rstrip("/") + "/venv/bin/python"


def current_nodes(ws: Workspace) -> list[tuple[Node, str]]:
    """Every node of the applied cluster (inventory.yml) with its authorized_keys file, a shell
    word: `trainkit_authorized_keys_file` of the workspace's group_vars/all.yml (quoted), else the
    ssh user's ~/.ssh/authorized_keys (cloud images read it: sshd(8) AuthorizedKeysFile default)."""
    nodes, _ = read_nodes(ws.inventory_yml)
    keys = user_group_vars(ws).get("trainkit_authorized_keys_file")
    return [(n, shlex.quote(str(keys)) if keys else '"$HOME"/.ssh/authorized_keys') for n in nodes]


def user_group_vars(ws: Workspace) -> dict[str, Any]:
    """The workspace's group_vars/all.yml ({} when absent); InputError naming it when broken."""
    path = ws.root / "group_vars" / "all.yml"
    data = yamlload.load_file(path, "group vars file") if path.is_file() else None
    if data is not None and not isinstance(data, dict):
        raise InputError(f"{path}: group vars must be a mapping (key: value lines)", fix="fix the file; Ansible reads it too")
    return data or {}


def loop_env(environ: Mapping[str, str], room: Any) -> dict[str, str]:
    """The variables of `environ` that travel to the loop (module doc): ENV_TRAVELS and the room's
    region variables, never a name any target's room lists as a credential."""
    secret = {v for r in all_clouds() for v in r.credential_variables()}
    names = set(getattr(room, "region_variables", ()) or ())
    return {k: v for k, v in sorted(environ.items())
            if (ENV_TRAVELS.fullmatch(k) or k in names) and k not in secret and not SECRET_WORDS.search(k)}
