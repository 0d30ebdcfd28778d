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

from trainkit.clouds import Cloud
from trainkit.clouds.base import NODES_HOSTS, NODES_SCHEDULER, NODES_TERRAFORM


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
