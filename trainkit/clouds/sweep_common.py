"""Pieces every cloud's tag sweeper shares (the sweepers are trainkit/clouds/<cloud>_sweep.py)."""

from __future__ import annotations

import time
from typing import Callable

POLL_S = 5


def gone_ok(call: Callable[[], object]) -> None:
    """Run a delete call; a NotFound error means it is gone already (e.g. a disk released with its
    instance) and is not a failure. Any other error propagates."""
    try:
        call()
    except Exception as err:
        if "NotFound" not in str(getattr(err, "code", "")):
            raise


def wait_gone(still_there: Callable[[], bool], ids: list[str], action: str, wait_s: float) -> None:
    """Poll until `still_there()` is false; TimeoutError naming `ids` after `wait_s` seconds."""
    deadline = time.monotonic() + wait_s
    while still_there():
        if time.monotonic() > deadline:
            raise TimeoutError(f"instances {', '.join(ids)} still exist {wait_s:.0f}s after {action}")
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
