"""The spec's `controller:` block: where `train --recover --detach` runs the recovery loop once the
user's machine lets go of it, and `down:` (destroy the cluster when its run ends).

    controller:
      enabled: true           # default (unset): on when `train --recover --detach` runs on spot
      instance_type: ...      # a cloud target: default the catalog's cheapest CPU type that fits
      host: ctl               # target hosts: the host (one of `hosts:`, not a spare) that runs it
    down: true                # the default of `train --down`

On a cloud target the controller is a small on-demand instance in the cluster's network, rendered by
the same module and acting through the cloud's instance identity; on `hosts` it is the named host.
`local` and `slurm` have none: on `local` the user's machine is the cluster, and on `slurm` the
scheduler keeps the job (its requeue is the recovery loop).

`problems(spec, room)` holds the rules that depend on the target; spec/target_rules.py calls it.
"""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from trainkit.catalog import Catalog, InstanceType, controller_types
from trainkit.clouds import Cloud
from trainkit.clouds.base import NODES_HOSTS, NODES_SCHEDULER, NODES_TERRAFORM
from trainkit.errors import InputError

# The smallest controller the catalog pick accepts. Memory: the controller runs `terraform apply`
# with the cloud's provider plugin, and the AWS provider alone has been measured at hundreds of MB
# RSS per process and plans failing with out-of-memory on a 1.6 GB allowance
# (hashicorp/terraform-provider-aws #31722, #29631, #5084), beside Python (trainkit, ansible-runner).
# vCPUs: terraform core and its provider plugin are separate processes, and Ansible forks per host.
# 2 vCPU / 2 GiB is the smallest general-purpose size each catalog's controllers: list offers.
CONTROLLER_MIN_VCPUS = 2
CONTROLLER_MIN_RAM_GB = 2


class ControllerSpec(BaseModel):
    """`controller:` (module doc)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    enabled: bool | None = Field(None, description="Hand `train --recover --detach`'s loop to a controller; "
                                                   "unset: on when that runs on spot")
    instance_type: str | None = Field(None, description="A cloud target's controller instance type; unset: "
                                                        "the catalog's cheapest CPU type that fits")
    host: str | None = Field(None, description="Target hosts: the name of the host (in hosts:, not a spare) "
                                               "that runs the controller")


def problems(s: Any, room: Cloud) -> list[str]:
    """What `room` refuses in spec `s`'s `controller:` and `down:`; each string names its field first."""
    c: ControllerSpec = s.controller
    out: list[str] = []
    provisions = room.node_source in (NODES_TERRAFORM, NODES_HOSTS)
    if not provisions and (c.enabled or c.host or c.instance_type):
        why = "the scheduler keeps the job" if room.node_source == NODES_SCHEDULER else "this machine is the cluster"
        out.append(f"controller: the {s.cloud} target runs no controller ({why}); remove `controller`")
        return out
    if not provisions and s.down:
        out.append(f"down: trainkit does not destroy a {s.cloud} target's machines; remove `down`")
    if c.instance_type is not None and room.node_source != NODES_TERRAFORM:
        out.append(f"controller.instance_type: the {s.cloud} target provisions no instance; name the host "
                   "that runs the controller with controller.host")
    if c.host is not None and room.node_source != NODES_HOSTS:
        out.append(f"controller.host: only target hosts runs the controller on one of its hosts; on "
                   f"{s.cloud} trainkit provisions it (remove `host`, or set controller.instance_type)")
    elif c.host is not None:
        names = {h.name: h for h in s.hosts}
        if c.host not in names:
            out.append(f"controller.host: {c.host!r} is not one of hosts: ({', '.join(names) or 'none'}); "
                       "give the name of the host that runs the controller")
        elif names[c.host].spare:
            out.append(f"controller.host: {c.host!r} is a spare (held for replacements); name another host")
    elif c.enabled and room.node_source == NODES_HOSTS:
        out.append("controller.host: target hosts runs the controller on a host you name; set "
                   "controller.host to one of hosts:")
    return out


def controller_wanted(s: Any, recover: bool, detach: bool) -> bool:
    """Whether a run started with `--recover`/`--detach` hands its loop to a controller: the spec's
    `controller.enabled` when set; unset, exactly for `train --recover --detach` on spot. Never on a
    target that runs none (local, slurm)."""
    if s.room.node_source not in (NODES_TERRAFORM, NODES_HOSTS):
        return False
    if s.controller.enabled is not None:
        return s.controller.enabled
    return recover and detach and bool(s.spot.enabled)


def rendered(s: Any) -> bool:
    """Whether the cloud module renders the controller instance: `controller.enabled: true` on a
    Terraform target. ("auto" is decided at run time: the runtime renders with `controller_type`.)"""
    return bool(s.controller.enabled) and s.room.node_source == NODES_TERRAFORM


def controller_type(s: Any, catalog: Catalog) -> InstanceType:
    """The controller's instance type: `controller.instance_type` (a type of the catalog: its CPU
    `controllers:` or its node types), else the cheapest CPU-only type of the catalog with at least
    CONTROLLER_MIN_VCPUS and CONTROLLER_MIN_RAM_GB, priced on demand (a controller is never spot).

    The catalog is per cloud, not per zone: its controller types are general-purpose families every
    region sells. InputError naming controller.instance_type when the named type is unknown or no
    type fits."""
    return pick(s.controller.instance_type, catalog)


def pick(named: str | None, catalog: Catalog) -> InstanceType:
    """controller_type's rule for a type `named` in the spec (None: the cheapest that fits): the
    one place `cost`, the review and the module take the controller from."""
    known = {i.type: i for i in (*catalog.controllers, *catalog.instances)}
    if named is not None:
        if named not in known:
            cpu = ", ".join(i.type for i in catalog.controllers) or "none"
            raise InputError(f"controller.instance_type: {named!r} is not in the {catalog.cloud} catalog",
                             fix=f"name one of the catalog's controller types ({cpu}), or remove it to take "
                                 "the cheapest that fits")
        return known[named]
    fits = controller_types(catalog, CONTROLLER_MIN_VCPUS, CONTROLLER_MIN_RAM_GB)
    if not fits:
        raise InputError(f"controller.instance_type: the {catalog.cloud} catalog lists no CPU type with "
                         f">= {CONTROLLER_MIN_VCPUS} vCPUs and >= {CONTROLLER_MIN_RAM_GB} GiB",
                         fix="set controller.instance_type to a type your account can launch")
    return fits[0]
