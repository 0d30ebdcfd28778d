"""Adopt what the cloud created but terraform never recorded because the answer was lost.

A create request whose answer is lost (a dropped connection, a timeout under load) is sent again by
the SDK; the cloud has already carried out the first one ("Ensuring idempotency in Amazon EC2 API
requests", EC2 developer guide: "you might create more resources than you intended"). Where the
API has no idempotency token, the retry fails with "already exists" and the apply fails, although
what the plan asked for is there. The cloud room recognises such a refusal and names the import ID
(Cloud.duplicate_error, Cloud.import_id); the apply imports it and goes on (cluster/lifecycle.py).

Pure functions of terraform's output and plan JSON; the terraform runs are the caller's.
"""

from __future__ import annotations

import re
from typing import Callable

# terraform's diagnostics (-no-color): "Error: <summary>", detail lines, then "  with <address>,"
# naming the resource (terraform's internal/command/format/diagnostic.go).
_ERROR = re.compile(r"^(?:│ )?Error: ", re.M)
_WITH = re.compile(r"^(?:│ )?\s*with (\S+),$", re.M)


def failed_resources(output: str) -> list[tuple[str, str]]:
    """(address, that diagnostic's text) for each error terraform's output pins on a resource."""
    starts = [m.start() for m in _ERROR.finditer(output)] + [len(output)]
    out = []
    for begin, end in zip(starts, starts[1:]):
        block = output[begin:end]
        found = _WITH.search(block)
        if found:
            out.append((found.group(1), block))
    return out


def duplicates(output: str, pattern: str | None) -> list[str]:
    """Addresses of the resources whose error matches the room's `duplicate_error` pattern."""
    if not pattern:
        return []
    return [address for address, text in failed_resources(output) if re.search(pattern, text)]


def imports(addresses: list[str], plan: dict, import_id: Callable[[str, dict], "str | None"]) -> list[tuple[str, str]]:
    """(address, import ID) for each of `addresses` that `plan` still plans to create.

    `plan` is a plan JSON made after the failure: its planned values hold the IDs that were unknown
    before the apply (the security group a rule belongs to). `import_id` is the room's.
    """
    planned = {rc["address"]: rc for rc in plan.get("resource_changes") or []
               if rc.get("change", {}).get("actions") == ["create"]}
    out = []
    for address in addresses:
        rc = planned.get(address)
        found = import_id(rc["type"], rc["change"].get("after") or {}) if rc else None
        if found:
            out.append((address, found))
    return out
