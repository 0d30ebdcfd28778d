"""The schema data of one provider (tests/standin/schemas/<type>.json, format in FORMAT.md).

A BLOCK is kept as the JSON dict it is; this module adds what the SDK adds and answers questions
about it. terraform-plugin-sdk/v2 (helper/schema/core_schema.go, CoreConfigSchema) gives every
resource and data source an "id" attribute, Optional and Computed, when the Go schema has none.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from .values import Unknown, conform

SCHEMAS = Path(__file__).resolve().parent / "schemas"

# The providers the stand-in serves: local name -> (registry source, the release trainkit pins).
PROVIDERS = {
    "alicloud": ("aliyun/alicloud", "1.289.0"),
    "tencentcloud": ("tencentcloudstack/tencentcloud", "1.83.25"),
    "huaweicloud": ("huaweicloud/huaweicloud", "1.97.1"),
}

_ID = {"type": "string", "optional": True, "computed": True}


def load(provider: str) -> dict[str, Any]:
    """The schema file of `provider` ("alicloud", ...), with the SDK's implicit `id` added."""
    data = json.loads((SCHEMAS / f"{provider}.json").read_text())
    for kind in ("resources", "data_sources"):
        for entry in data[kind].values():
            entry["block"].setdefault("attributes", {}).setdefault("id", dict(_ID))
            entry["block"].setdefault("blocks", {})
    data["provider"].setdefault("attributes", {})
    data["provider"].setdefault("blocks", {})
    return data


def attributes(block: dict) -> dict[str, dict]:
    return block.get("attributes", {})


def blocks(block: dict) -> dict[str, dict]:
    return block.get("blocks", {})


def computed_only(attr: dict) -> bool:
    return bool(attr.get("computed")) and not attr.get("optional") and not attr.get("required")




def conform_block(value: Any, block: dict) -> Any:
    """A block's value with every attribute present and nested blocks as the nesting wants
    (absent list/set blocks are empty lists, an absent single block is null)."""
    if value is None or isinstance(value, Unknown):
        return value
    out = {name: conform(value.get(name), a["type"]) for name, a in attributes(block).items()}
    for name, nested in blocks(block).items():
        inner = value.get(name)
        if nested["nesting"] == "single":
            out[name] = conform_block(inner, nested["block"])
        elif isinstance(inner, Unknown):
            out[name] = inner
        else:
            out[name] = [conform_block(v, nested["block"]) for v in (inner or [])]
    return out
