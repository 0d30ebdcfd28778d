"""Terraform values as Python data, and their msgpack wire form (plugin protocol v6 DynamicValue).

A value is None (null), UNKNOWN (not known until apply), a bool, int, float, str, a list (list and
set values alike), or a dict (maps and objects). Types are the cty JSON type encoding the schema
files use: "string" | "number" | "bool" | ["list"|"set"|"map", T] | ["object", {name: T}].

The wire form is cty's msgpack encoding (github.com/zclconf/go-cty, cty/msgpack): an unknown is
the extension type 0 (`unknownVal`, fixext1 0x00); terraform >= 1.6 may send a *refined* unknown
as extension type 12 (`unknownValWithRefinements`), whose payload says what is known about it
(not null, a string prefix, a length range). Both read as UNKNOWN here; a refined unknown keeps
`not_null`, because the SDK treats "known after apply but not null" as set (ConflictsWith etc.).

Only the standard library, and msgpack (in the stand-in's own venv) for the wire form: the tests
read stores and plans with the rest of this module from trainkit's venv.
"""

from __future__ import annotations

from typing import Any

# cty/msgpack/unknown.go: unknownVal is the msgpack fixext1 of type 0 with one zero byte;
# unknownValWithRefinements (type 12) carries a msgpack map of refinements.
_EXT_UNKNOWN = 0
_EXT_UNKNOWN_REFINED = 12
_REFINE_NOT_NULL = 1  # cty/msgpack/unknown.go: unknownValRefinementIsNotNull


class Unknown:
    """A value known only after apply. `not_null` is set when terraform refined it as not null."""

    __slots__ = ("not_null",)

    def __init__(self, not_null: bool = False):
        self.not_null = not_null

    def __repr__(self) -> str:
        return "UNKNOWN" if not self.not_null else "UNKNOWN(not null)"

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Unknown)

    def __hash__(self) -> int:
        return 0


UNKNOWN = Unknown()




def _ext_hook(code: int, data: bytes) -> Any:
    import msgpack

    if code == _EXT_UNKNOWN:
        return Unknown()
    if code == _EXT_UNKNOWN_REFINED:
        try:
            refinements = msgpack.unpackb(data, strict_map_key=False)
        except Exception:  # noqa: BLE001 - an unreadable refinement is still an unknown
            refinements = {}
        return Unknown(not_null=bool(isinstance(refinements, dict) and refinements.get(_REFINE_NOT_NULL)))
    return msgpack.ExtType(code, data)


def _default(obj: Any) -> Any:
    import msgpack

    if isinstance(obj, Unknown):
        return msgpack.ExtType(_EXT_UNKNOWN, b"\x00")
    raise TypeError(f"cannot encode {type(obj).__name__} as a terraform value")


def decode(data: bytes) -> Any:
    """msgpack bytes of a DynamicValue -> a Python value (None for empty bytes)."""
    import msgpack

    if not data:
        return None
    return msgpack.unpackb(data, ext_hook=_ext_hook, raw=False, strict_map_key=False)


def encode(value: Any) -> bytes:
    import msgpack

    return msgpack.packb(value, default=_default, use_bin_type=True)


def conform(value: Any, typ: Any) -> Any:
    """`value` shaped as `typ`: every object attribute present (missing ones null), numbers that
    are whole kept as ints, element values conformed. Terraform decodes msgpack against the schema's
    type, so what the stand-in sends must carry exactly the type's attributes."""
    if value is None or isinstance(value, Unknown):
        return value
    if typ == "number":
        if isinstance(value, str):
            value = float(value)
        if isinstance(value, float) and value.is_integer() and abs(value) < 2**53:
            return int(value)
        return value
    if typ == "bool":
        return value if isinstance(value, bool) else str(value).lower() == "true"
    if typ == "string":
        if isinstance(value, bool):
            return "true" if value else "false"
        return value if isinstance(value, str) else str(value)
    kind, inner = typ
    if kind in ("list", "set"):
        return [conform(v, inner) for v in value]
    if kind == "map":
        return {k: conform(v, inner) for k, v in value.items()}
    return {name: conform(value.get(name), t) for name, t in inner.items()}


def has_unknown(value: Any) -> bool:
    if isinstance(value, Unknown):
        return True
    if isinstance(value, list):
        return any(has_unknown(v) for v in value)
    if isinstance(value, dict):
        return any(has_unknown(v) for v in value.values())
    return False


def is_set(value: Any) -> bool:
    """Set as the SDK's ResourceConfig.Get sees it: non-null and not an empty collection
    (an unknown counts as set only when refined as not null)."""
    if isinstance(value, Unknown):
        return value.not_null
    return value is not None and value != [] and value != {}


def get_path(root: Any, path: str) -> Any:
    """The value at an SDK path such as "name" or "block.0.attr" (None where absent)."""
    value = root
    for step in path.split("."):
        if isinstance(value, dict):
            value = value.get(step)
        elif isinstance(value, list) and step.isdigit():
            value = value[int(step)] if int(step) < len(value) else None
        else:
            return None
    return value
