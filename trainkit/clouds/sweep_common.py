"""Pieces every cloud's tag sweeper shares (the sweepers are trainkit/clouds/<cloud>_sweep.py)."""

from __future__ import annotations

import time
from typing import Callable

POLL_S = 5
# Throttled calls are retried: the clouds answer a burst (a sweep makes dozens of calls) with a throttling
# error that says "retry later" (Alibaba Throttling.User, Tencent RequestLimitExceeded, Huawei APIGW.0308
# with HTTP 429, whose docs advise retrying "after a short period (for example, 2 to 5 seconds)"), and the
# SDKs trainkit uses retry none of it by default (tea-openapi without RetryOptions, CommonClient with its
# NoopRetryer, plain requests for Huawei). Four attempts, waiting 1, 2 and 4 s between them: the backoff of
# Tencent's own StandardRetryer (2**n s), one attempt more.
THROTTLE_ATTEMPTS = 4


def backoff(attempt: int) -> float:
    """Seconds to wait after failed attempt `attempt` (0-based): 1, 2, 4."""
    return float(2 ** attempt)


def retry_throttled(call: Callable[[], object], throttled: Callable[[Exception], bool]):
    """`call()`, called again after a throttling error (`throttled(err)`) up to THROTTLE_ATTEMPTS times
    in all; the last error, or any other, propagates."""
    for attempt in range(THROTTLE_ATTEMPTS):
        try:
            return call()
        except Exception as err:
            if attempt == THROTTLE_ATTEMPTS - 1 or not throttled(err):
                raise
            time.sleep(backoff(attempt))
    raise AssertionError("unreachable")


def gone_ok(call: Callable[[], object]) -> None:
    """Run a delete call; a NotFound error means it is gone already (e.g. a disk released with its
    instance) and is not a failure. Any other error propagates."""
    try:
        call()
    except Exception as err:
        if "NotFound" not in str(getattr(err, "code", "")):
            raise


def wait_gone(still_there: Callable[[], bool], ids: list[str], action: str, wait_s: float,
              what: str = "instances") -> None:
    """Poll until `still_there()` is false; TimeoutError naming `ids` (`what` they are) after `wait_s` seconds."""
    deadline = time.monotonic() + wait_s
    while still_there():
        if time.monotonic() > deadline:
            raise TimeoutError(f"{what} {', '.join(ids)} still exist {wait_s:.0f}s after {action}")
        time.sleep(POLL_S)


def in_order(found: dict, order: tuple[str, ...]) -> list[dict]:
    """The found resources sorted by `order` (dependency order; unknown types last), then id."""
    rank = {k: i for i, k in enumerate(order)}
    return sorted(found.values(), key=lambda r: (rank.get(r["type"], len(order)), r["id"]))


def report_undeletable(found: list[dict], deletable, ref: str, say: Callable[[str], None]) -> None:
    """Name every found resource whose type has no delete call: reported, never skipped silently."""
    for res in found:
        if res["type"] not in deletable:
            say(f"cannot delete {res['type']} {res['id']} ({res[ref]}) here: delete it in the console")


def state_ids(values: dict, rtype: str) -> set[str]:
    """The ids of a state's resources of type `rtype`. `values`: `terraform show -json`'s "values"
    tree, a root_module whose resources and child_modules (nested) hold {type, values: {id, ...}}."""
    ids, stack = set(), [values.get("root_module") or {}]
    while stack:
        module = stack.pop()
        stack.extend(module.get("child_modules") or [])
        ids |= {r["values"]["id"] for r in module.get("resources") or []
                if r.get("type") == rtype and (r.get("values") or {}).get("id")}
    return ids


def batches(ids: list[str], size: int) -> list[list[str]]:
    """`ids` in lists of at most `size` (what one describe call takes)."""
    return [ids[i:i + size] for i in range(0, len(ids), size)]


def in_vpcs(cluster, found: list[dict], state_values: dict, vpc_type: str, asks: dict) -> list[dict]:
    """The resources of `found` whose VPC is one the state holds (resources of `vpc_type` in
    `terraform show -json` values). `asks[type](cluster, ids) -> {id: {vpc ids}}` says where the
    resources of one type are; types without an entry are in no VPC and never returned."""
    vpcs = state_ids(state_values, vpc_type)
    kinds = [r for r in found if r["type"] in asks]
    if not vpcs or not kinds:
        return []
    where: dict[str, set] = {}
    for kind, ask in asks.items():
        ids = [r["id"] for r in kinds if r["type"] == kind]
        if ids:
            where.update(ask(cluster, ids))
    return [r for r in kinds if where.get(r["id"], set()) & vpcs]
