"""After a replacement: instances that carry the cluster's tag and that the state does not hold.

A create whose answer was lost (the SDK retries RunInstances after a timeout; the seed clouds'
providers report the lost answer as a failure) leaves an instance that bills and that terraform
never learned of: recovery would report success and nothing would ever look for it. After every
replacement try (cluster/failover.replace_in_order: a recovery's replacement, each failover hop,
an apply moving new nodes), whatever its outcome, the cloud room's tag sweeper (the one
`destroy --sweep` uses, trainkit/clouds/<cloud>_sweep.py) is asked for the cluster's tagged
instances; those whose id the state does not hold are terminated through it, and what is still
there afterwards is named (`StraysLeft`, exit PREEMPTED: the run stops so the user sees what bills).

Only instances: other untracked copies (a subnet, a disk) cost little or nothing and block no
replacement; `trainkit destroy` names and sweeps them (cluster/teardown.py).
"""

from __future__ import annotations

import importlib
from typing import Any

from trainkit import errors
from trainkit.errors import TrainkitError
from trainkit.spec.schema import RESERVED_TAG
from trainkit.stack.state import render_and_init, state_resources
from trainkit.util import progress

Event = dict[str, Any]


class StraysLeft(TrainkitError):
    """Untracked tagged instances the sweep could not terminate: they bill until someone does."""

    exit_code = errors.PREEMPTED


def untracked_instances(found: list[dict], values: dict) -> list[dict]:
    """The sweeper's `found` ({type, id, ...}) instances whose id no resource of the state tree
    `values` (`terraform show -json`'s "values") holds as an attribute value (pure)."""
    held = {v for r in state_resources(values) for v in (r.get("values") or {}).values() if isinstance(v, str)}
    return [r for r in found if r["type"] == "instance" and r["id"] not in held]


def sweep_strays(cluster, ws) -> list[Event]:
    """Terminate the cluster's tagged instances the state does not hold. Returns the events of it:
    `strays_removed` {ids} when some were found and terminated, `strays_unchecked` {why} when the
    cloud could not be asked (a warning: the replacement itself stands), [] when none were found
    or the room has no sweeper. StraysLeft naming the ids still there after the sweep."""
    name = cluster.room.tag_sweeper
    if not name:
        return []
    sweeper = importlib.import_module(name)
    try:
        runner, _ = render_and_init(cluster, ws)
        values = runner.state_json().get("values") or {}
        strays = untracked_instances(sweeper.find(cluster), values)
    except Exception as err:  # noqa: BLE001 - said, and recorded: the check did not run
        why = f"{type(err).__name__}: {err}"[:300]
        progress.info(f"warning: could not look for instances tagged {RESERVED_TAG}={cluster.name} that the "
                      f"state does not hold ({why}); `trainkit destroy {cluster.source}` names any later")
        return [{"kind": "strays_unchecked", "why": why}]
    if not strays:
        return []
    ids = [r["id"] for r in strays]
    with progress.step(f"terminating {len(ids)} instance(s) tagged {RESERVED_TAG}={cluster.name} that the state "
                       f"does not hold (a create whose answer was lost): {', '.join(ids)}"):
        try:
            sweeper.delete(cluster, strays)
        except Exception as err:  # noqa: BLE001 - what is left is found again and named
            progress.info(f"sweep: {type(err).__name__}: {str(err)[:200]}")
    left = [i for i in ids if i in {r["id"] for r in untracked_instances(sweeper.find(cluster), values)}]
    if left:
        raise StraysLeft(f"{len(left)} instance(s) tagged {RESERVED_TAG}={cluster.name} that the state does not "
                         f"hold could not be terminated and bill: {', '.join(left)}",
                         fix=f"terminate {', '.join(left)} in the cloud's console (or its CLI), then resume the run "
                             f"(`trainkit train {cluster.source} --resume RUN --recover`)")
    return [{"kind": "strays_removed", "ids": ids}]
