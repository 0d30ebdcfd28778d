"""Pydantic validation errors -> (field path, what is wrong, fix) in the YAML user's words: close
matches for unknown keys and choices, what a field takes instead of pydantic's type names, a
field's description as the fix for a pattern it does not fit."""

from __future__ import annotations

import difflib
import re
from typing import Any

from pydantic import BaseModel, ValidationError


def pydantic_problems(err: ValidationError, model: type[BaseModel]) -> list[tuple[str, str, str | None]]:
    """Turn pydantic errors into (field path, message, fix) with close-match suggestions."""
    problems = []
    for e in err.errors():
        loc = [p for p in e["loc"] if not (isinstance(p, str) and p.startswith("function-"))]
        field = _dotted(loc)
        msg, fix = e["msg"].removeprefix("Value error, "), None
        if e["type"] in _EXPECTED:
            msg = f"expected {_EXPECTED[e['type']]}, got {_shown(e.get('input'))}"
        elif e["type"] == "extra_forbidden":
            known = _fields_at(model, loc[:-1])
            close = difflib.get_close_matches(str(loc[-1]), known, n=1)
            msg = "unknown field"
            fix = f"did you mean {close[0]!r}?" if close else f"known fields: {', '.join(known)}"
        elif e["type"] == "literal_error":
            expected = e.get("ctx", {}).get("expected", "")
            options = re.findall(r"'([^']+)'", expected)
            close = difflib.get_close_matches(str(e.get("input")), options, n=1)
            msg = f"{e.get('input')!r} is not one of {', '.join(options)}"
            fix = f"did you mean {close[0]!r}?" if close else None
        elif e["type"] == "missing":
            msg = "required field is missing"
        elif e["type"] == "string_pattern_mismatch" and (info := _field_info(model, loc)):
            msg, fix = f"{e.get('input')!r} is not a valid {loc[-1]}", info.description
        elif e["type"] == "value_error" and (not loc or "\n" in msg or ": " in msg):
            known = _fields_at(model, loc)
            for part in msg.split("\n"):
                head, _, rest = part.partition(": ")
                if not loc:
                    problems.append((head, rest or part, None))
                elif rest and head.split(".")[0].split("[")[0] in known:
                    problems.append((f"{field}.{head}", rest, None))
                else:
                    problems.append((field, part, None))
            continue
        problems.append((field, msg, fix))
    return problems


_MAPPING, _WHOLE = "a mapping (key: value lines)", "a whole number"
_LIST = "a list ([a, b], or one '- item' per line)"
# pydantic error type -> what the field takes, in the YAML user's words (not "instance of LaunchSpec").
_EXPECTED = {"model_type": _MAPPING, "dict_type": _MAPPING, "tuple_type": _LIST, "list_type": _LIST,
             "string_type": "text", "int_type": _WHOLE, "int_parsing": _WHOLE, "int_from_float": _WHOLE,
             "float_type": "a number", "float_parsing": "a number", "bool_type": "true or false",
             "bool_parsing": "true or false"}


def _shown(value: Any) -> str:
    """A bad value as the user wrote it, briefly."""
    if value is None:
        return "nothing (null)"
    if isinstance(value, (dict, list, tuple)):
        return "a mapping" if isinstance(value, dict) else "a list"
    text = str(value).lower() if isinstance(value, bool) else repr(value)
    return text if len(text) <= 40 else text[:37] + "..."


def _dotted(loc: list) -> str:
    out = ""
    for part in loc:
        out += f"[{part}]" if isinstance(part, int) else (f".{part}" if out else str(part))
    return out


def _field_info(model: type[BaseModel], loc: list) -> Any:
    """The pydantic FieldInfo at `loc` when it has a description (the fix to show), else None."""
    current: Any = model
    for part in loc[:-1]:
        info = None if isinstance(part, int) else getattr(current, "model_fields", {}).get(part)
        if info is not None:
            current = _model_in(info.annotation)
        elif not isinstance(part, int):
            return None
    info = getattr(current, "model_fields", {}).get(loc[-1]) if loc else None
    return info if info is not None and info.description else None


def _fields_at(model: type[BaseModel], loc: list) -> list[str]:
    """The field names of the sub-model at `loc` (for suggestions); [] when unknown."""
    current: Any = model
    for part in loc:
        if isinstance(part, int):
            continue
        info = getattr(current, "model_fields", {}).get(part)
        if info is None:
            return []
        current = _model_in(info.annotation)
    return list(getattr(current, "model_fields", {}))


def _model_in(annotation: Any) -> Any:
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return annotation
    for arg in getattr(annotation, "__args__", ()):
        found = _model_in(arg)
        if found is not None:
            return found
    return None


def train_config_given_as_spec(data: dict[str, Any], spec: type[BaseModel], train: type[BaseModel],
                               launch_keys: tuple[str, ...]) -> list[tuple[str, str, str | None]]:
    """One problem when `data` (a file given as a cluster spec) is a train config: it has no
    `cloud:` and more of its keys are train-config keys than spec keys (keys both know, such as
    `name`, are not counted). [] otherwise, so the spec's own problems are listed."""
    keys = {str(k) for k in data}
    train_keys = set(train.model_fields) | set(launch_keys)
    spec_keys = set(spec.model_fields)
    only_train, only_spec = keys & (train_keys - spec_keys), keys & (spec_keys - train_keys)
    if "cloud" in keys or not only_train or len(only_train) <= len(only_spec):
        return []
    shown = ", ".join(sorted(only_train)[:4])
    return [("", f"this is a train config ({shown}, ...), not a cluster spec",
             "use --config: `trainkit validate --config FILE` (with a cluster spec first to check it "
             "against that cluster: `trainkit validate SPEC --config FILE`); cluster specs are in "
             "examples/clusters/")]
