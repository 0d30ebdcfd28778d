"""Capacity and quota refusals, asked of the cloud rooms: one message instead of the provider's text.

    problem(cloud, output, zone, instance_type) -> CapacityProblem | None
                 the room's reading of a terraform failure, zone and type filled from the spec
                 where the provider's text does not name them
    explain(cloud, problem, log) -> CapacityError
                 the one message: what was refused, where, and what to try

The provider's own words stay in terraform.log (the message names the log). `CapacityError`
carries the structured problem, so that a caller can try another zone or type (issue 21).
"""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Callable

from trainkit import clouds, errors
from trainkit.clouds.base import CapacityProblem
from trainkit.errors import TrainkitError


class CapacityError(TrainkitError):
    """A create refused for want of capacity or quota; `problem` says which, where and what."""

    def __init__(self, message: str, problem: CapacityProblem, fix: str, exit_code: int = errors.APPLY):
        super().__init__(message, fix=fix, exit_code=exit_code)
        self.problem = problem


def problem(cloud_name: str, output: str, zone: str | None = None,
            instance_type: str | None = None) -> CapacityProblem | None:
    """The room's CapacityProblem for `output` (None when it is about something else)."""
    try:
        cloud = clouds.get(cloud_name)
    except KeyError:
        return None
    found = cloud.capacity_error(output)
    if found is None:
        return None
    return dataclasses.replace(found, zone=found.zone or zone, instance_type=found.instance_type or instance_type)


def reader(cloud_name: str) -> "Callable[[str], CapacityProblem | None] | None":
    """The room's reader of capacity/quota refusals in provider text (None: no such room)."""
    try:
        return clouds.get(cloud_name).capacity_error
    except KeyError:
        return None


def explain(cloud_name: str, found: CapacityProblem, log: Path | str, phase: int = errors.APPLY) -> CapacityError:
    """One message for `found`: names the cloud, the zone, the type and what to try next."""
    title = clouds.get(cloud_name).title
    what = found.instance_type or "the instance type"
    where = f"zone {found.zone}" if found.zone else "the zone"
    kept = ("what was created before the refusal still exists and may bill: `trainkit status` lists it, "
            "`trainkit destroy` removes it")
    if found.kind == "quota":
        quota = found.quota or "the quota named in the error"
        return CapacityError(
            f"{title} refused {what} in {where}: the account's quota is used up ({found.code}: {quota})",
            found, fix=f"request a quota increase for {quota} in the {title} console, or ask for fewer "
                       f"nodes or a smaller instance type; {kept}; provider's text in {log}", exit_code=phase)
    return CapacityError(
        f"{title} has no capacity for {what} in {where} right now ({found.code})",
        found, fix=f"try another zone (`zone:`, a list is tried in order), another instance type "
                   f"(`instance.type:`, a list too), or on-demand instead of spot (`spot.enabled: false`, "
                   f"or `spot.fallback: on_demand` to try spot first), or try again later; {kept}; provider's text "
                   f"in {log}", exit_code=phase)
