"""What changes in one resource, attribute by attribute, from a plan's `resource_changes[].change`.

    changed_attributes(change, action) -> [{"name", "before", "after"}]

Terraform's JSON plan gives `before` and `after` (the whole object), `after_unknown` (true where
a value is known only after apply) and `before_sensitive` / `after_sensitive` (true where a value
is sensitive), each shaped like the object or `true` for all of it (Terraform docs, "JSON Output
Format", change representation). Names are dotted paths as `terraform show` prints them
(`tags.team`, `ebs_block_device[0].volume_size`). A sensitive value is never shown: it is
SENSITIVE, before and after. Values are rendered as short strings, the way a reviewer reads them.
Pure functions.
"""

from __future__ import annotations

import json
from typing import Any

SENSITIVE = "(sensitive)"
UNKNOWN = "(known after apply)"
ABSENT = "null"
MAX_VALUE = 120  # characters of one value shown; a user-data script or a policy document is cut


def changed_attributes(change: dict[str, Any], action: str) -> list[dict[str, str]]:
    """The attributes that differ between `before` and `after` (create: every attribute set or
    known only after apply; delete: every attribute that was set), sorted by name."""
    before = _flatten(change.get("before") if action != "create" else None)
    after = _flatten(change.get("after") if action != "delete" else None)
    unknown = _flatten(change.get("after_unknown") if action != "delete" else None)
    secret_before = _flatten(change.get("before_sensitive"))
    secret_after = _flatten(change.get("after_sensitive"))
    rows = []
    for name in sorted(set(before) | set(after) | {k for k, v in unknown.items() if v is True}):
        old, new = before.get(name), after.get(name)
        is_unknown = unknown.get(name) is True
        if old == new and not is_unknown:
            continue
        if old is None and new is None and not is_unknown:
            continue
        hidden = _covered(secret_before, name) or _covered(secret_after, name)
        rows.append({"name": name,
                     "before": SENSITIVE if hidden and old is not None else _shown(old),
                     "after": UNKNOWN if is_unknown else SENSITIVE if hidden and new is not None else _shown(new)})
    return rows


def _flatten(value: Any, prefix: str = "") -> dict[str, Any]:
    """{dotted path: leaf}; an empty map or list is a leaf of its own (so `{}` -> `{a: 1}` shows)."""
    if isinstance(value, dict) and value:
        out: dict[str, Any] = {}
        for key, item in value.items():
            out.update(_flatten(item, f"{prefix}.{key}" if prefix else str(key)))
        return out
    if isinstance(value, list) and value and any(isinstance(v, (dict, list)) for v in value):
        out = {}
        for i, item in enumerate(value):
            out.update(_flatten(item, f"{prefix}[{i}]"))
        return out
    return {prefix: value} if prefix else ({} if value is None else {"": value})


def _covered(sensitive: dict[str, Any], name: str) -> bool:
    """Whether the sensitivity map marks `name` or a parent of it (`true` covers all under it)."""
    if sensitive.get("") is True:
        return True
    for path, flag in sensitive.items():
        if flag is True and (name == path or name.startswith(path + ".") or name.startswith(path + "[")):
            return True
    return False


def _shown(value: Any) -> str:
    """A value as a reviewer reads it: strings quoted, others as JSON, long ones cut."""
    if value is None:
        return ABSENT
    text = json.dumps(value, ensure_ascii=False, sort_keys=True)
    return text if len(text) <= MAX_VALUE else text[:MAX_VALUE - 1] + "…"
