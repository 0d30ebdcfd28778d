"""What terraform-plugin-sdk/v2 enforces inside a real provider, driven by the schema data.

Terraform core checks types, references, unknown arguments, Required and block counts itself. A
provider built on the SDK adds (helper/schema/schema.go, schemaMap.Validate / validateConflictingAttributes
/ validateExactlyOneAttribute / validateAtLeastOneAttribute / validateRequiredWithAttribute, and
schemaMap.Diff for the plan):

- an error for a value set on a Computed-only attribute ("... : this field cannot be set");
- ValidateFunc / ValidateDiagFunc: enums, int and length ranges, patterns, CIDRs (CHECK kinds of
  FORMAT.md; "other" is served but not enforced);
- ConflictsWith, ExactlyOneOf, AtLeastOneOf, RequiredWith;
- MinItems / MaxItems on list and set attributes;
- deprecation warnings;
- at plan: Default for an unset Optional attribute, unknown for Computed attributes on create,
  and every ForceNew attribute (nested ones too) whose value changes as a requires_replace path.

Pure functions of (schema block, values): unit-tested in tests/unit/test_standin_sdk.py.
"""

from __future__ import annotations

import ipaddress
import re
from typing import Any

from .schema import attributes, blocks, computed_only
from .values import UNKNOWN, Unknown, get_path, has_unknown, is_set

Diag = dict  # {"severity": "error"|"warning", "summary": str, "detail": str, "path": [steps]}


def _error(path: list, summary: str, detail: str = "") -> Diag:
    return {"severity": "error", "summary": summary, "detail": detail, "path": path}


def validate(block: dict, config: Any) -> list[Diag]:
    """Diagnostics for a resource or data source config, as the SDK's Validate gives them."""
    diags: list[Diag] = []
    _validate_block(block, config or {}, config or {}, [], diags)
    return diags


def _validate_block(block: dict, value: dict, root: dict, path: list, diags: list[Diag]) -> None:
    for name, attr in attributes(block).items():
        _validate_attr(name, attr, value.get(name), root, path + [name], diags)
    for name, nested in blocks(block).items():
        elems = value.get(name)
        if nested["nesting"] == "single":
            elems = [] if elems is None else [elems]
        _relations(name, nested, None if elems in ([], None) else elems, root, path + [name], diags)
        if isinstance(elems, Unknown) or elems is None:
            continue
        if nested.get("max_items") and len(elems) > nested["max_items"]:
            diags.append(_error(path + [name], f"Too many {name} blocks",
                                f"No more than {nested['max_items']} \"{name}\" blocks are allowed"))
        for i, elem in enumerate(elems):
            if isinstance(elem, dict):
                _validate_block(nested["block"], elem, root, path + [name, i], diags)


def _validate_attr(name: str, attr: dict, value: Any, root: dict, path: list, diags: list[Diag]) -> None:
    """schemaMap.validate for one key, in the SDK's order: the groups; nothing more when unset;
    computed-only set; RequiredWith; nothing more while unknown; ConflictsWith; the value's checks."""
    if not _relations(name, attr, value, root, path, diags):
        return
    if attr.get("deprecated"):
        diags.append({"severity": "warning", "summary": "Argument is deprecated",
                      "detail": attr["deprecated"], "path": path})
    if has_unknown(value):
        return
    if isinstance(value, list):
        if attr.get("max_items") and len(value) > attr["max_items"]:
            diags.append(_error(path, "Too many list items", f'"{name}": attribute supports '
                                f'{attr["max_items"]} item maximum, config has {len(value)} declared'))
        if attr.get("min_items") and len(value) < attr["min_items"]:
            diags.append(_error(path, "Not enough list items", f'"{name}": attribute requires '
                                f'{attr["min_items"]} item minimum, config has {len(value)} declared'))
        items = value
    elif isinstance(value, dict):
        items = list(value.values())
    else:
        items = [value]
    for check in attr.get("validate", []):
        for item in items:
            problem = None if item is None else check_value(check, item)
            if problem:
                diags.append(_error(path, "Invalid value", f'expected {name} {problem}'))


def _relations(name: str, spec: dict, value: Any, root: dict, path: list, diags: list[Diag]) -> bool:
    """ExactlyOneOf / AtLeastOneOf / computed-only / RequiredWith / ConflictsWith of one key, as
    helper/schema/schema.go (v2) checks them; True when the value's own checks should follow
    (it is set and known). The SDK adds the key itself to a group (`allKeys :=
    removeDuplicates(append(schema.ExactlyOneOf, k))`) and treats an unknown as set."""
    own = ".".join(str(p) for p in path)
    _check_group("exactly_one_of", _group(spec.get("exactly_one_of"), own), root, path, diags)
    _check_group("at_least_one_of", _group(spec.get("at_least_one_of"), own), root, path, diags)
    if value is None:
        return False
    if computed_only(spec):
        diags.append(_error(path, "Computed attributes cannot be set",
                            f'Computed attributes cannot be set, but a value was set for "{own}".'))
        return False
    group = _group(spec.get("required_with"), own)
    if group and any(get_path(root, p) is None for p in group):
        diags.append(_error(path, "Missing required argument",
                            f'"{own}": all of `{",".join(group)}` must be specified'))
    if has_unknown(value):
        return True
    for other in spec.get("conflicts_with", []):
        found = get_path(root, other)
        if is_set(found) and not has_unknown(found):
            diags.append(_error(path, "Conflicting configuration arguments", f'"{own}": conflicts with {other}'))
    return True


def _group(keys: list | None, own: str) -> list[str]:
    return sorted(set([*keys, own])) if keys else []


def _check_group(key: str, group: list, root: dict, path: list, diags: list[Diag]) -> None:
    """validateExactlyOneAttribute / validateAtLeastOneAttribute: unknowns are counted apart and
    never make the group fail on their own."""
    if not group:
        return
    values = [get_path(root, p) for p in group]
    unknown = sum(1 for v in values if has_unknown(v))
    specified = [p for p, v in zip(group, values) if not has_unknown(v) and is_set(v)]
    names = ",".join(group)
    if key == "exactly_one_of" and len(specified) > 1:
        diags.append(_error(path, "Invalid combination of arguments",
                            f'"{path[-1]}": only one of `{names}` can be specified, but `{",".join(specified)}` were specified.'))
    elif key == "exactly_one_of" and not specified and not unknown:
        diags.append(_error(path, "Invalid combination of arguments", f'"{path[-1]}": one of `{names}` must be specified'))
    if key == "at_least_one_of" and not specified and not unknown:
        diags.append(_error(path, "Missing required argument", f'"{path[-1]}": one of `{names}` must be specified'))


def check_value(check: dict, value: Any) -> str | None:
    """What is wrong with `value` under one CHECK, as the SDK's validation words it; None if fine."""
    kind = check["kind"]
    if kind == "one_of":
        allowed = check["values"]
        if check.get("ignore_case") and isinstance(value, str):  # StringInSlice(..., true)
            ok = value.lower() in [str(a).lower() for a in allowed]
        else:
            ok = value in allowed or (isinstance(value, (int, float)) and float(value) in allowed)
        if not ok:
            return f"to be one of {allowed}, got {value}"
    elif kind == "other" and check.get("go", "").startswith("Removed:"):
        # terraform-plugin-sdk v1 keeps removed fields in the schema and refuses them when set
        # (helper/schema/schema.go validateType: "[REMOVED] <message>").
        return "to be unset: [REMOVED] " + check["go"].split(":", 1)[1].strip().strip('"')
    elif kind in ("int_between", "float_between"):
        lo, hi = check.get("min"), check.get("max")
        if not isinstance(value, (int, float)) or (lo is not None and value < lo) or (hi is not None and value > hi):
            return f"to be in the range ({lo} - {hi}), got {value}"
    elif kind == "len_between":
        lo, hi = check.get("min") or 0, check.get("max")
        if not isinstance(value, str) or len(value) < lo or (hi is not None and len(value) > hi):
            return f"length to be in the range ({lo} - {hi}), got {value}"
    elif kind == "regex":
        if not isinstance(value, str) or not re.search(check["pattern"], value):
            return f"to match regular expression {check['pattern']!r}, got {value}"
    elif kind == "cidr":
        try:
            ipaddress.ip_network(value, strict=True)
        except ValueError:
            return f"to contain a valid network CIDR, got: {value}"
    elif kind == "ip":
        try:
            ipaddress.ip_address(value)
        except ValueError:
            return f"to contain a valid IP, got: {value}"
    return None


# ---------------------------------------------------------------------------------------- plan

def plan(block: dict, prior: Any, proposed: Any, config: Any) -> tuple[Any, list[list]]:
    """(planned state, requires_replace paths) for one resource, as the SDK's PlanResourceChange
    makes them. `prior` is None on create; `proposed` None means destroy (returned as it is)."""
    if proposed is None:
        return None, []
    planned = _plan_block(block, prior, proposed, config or {})
    replace: list[list] = []
    if prior is not None:
        _replace_paths(block, prior, planned, [], replace)
    return planned, replace


def _plan_block(block: dict, prior: Any, proposed: dict, config: dict) -> dict:
    creating = prior is None
    out = dict(proposed)
    for name, attr in attributes(block).items():
        cfg = config.get(name) if isinstance(config, dict) else None
        if computed_only(attr):
            out[name] = UNKNOWN if creating else prior.get(name)
        elif cfg is None and "default" in attr:
            out[name] = attr["default"]
        elif cfg is None and attr.get("computed"):
            out[name] = UNKNOWN if creating else prior.get(name)
    for name, nested in blocks(block).items():
        out[name] = _plan_nested(nested, None if creating else prior.get(name), proposed.get(name),
                                 config.get(name) if isinstance(config, dict) else None)
    return out


def _plan_nested(nested: dict, prior: Any, proposed: Any, config: Any) -> Any:
    inner = nested["block"]
    if proposed is None or isinstance(proposed, Unknown):
        return proposed
    if nested["nesting"] == "single":
        return _plan_block(inner, prior, proposed, config or {})
    config = config if isinstance(config, list) else []
    prior = prior if isinstance(prior, list) else []
    out = []
    for i, elem in enumerate(proposed):
        cfg = config[i] if i < len(config) and isinstance(config[i], dict) else {}
        if nested["nesting"] == "list":
            before = prior[i] if i < len(prior) else None
        else:  # a set element keeps the computed values of the prior element it configures
            before = next((p for p in prior if _same_config(inner, p, cfg)), None)
        out.append(_plan_block(inner, before, elem, cfg) if isinstance(elem, dict) else elem)
    return out


def _same_config(block: dict, prior: dict, config: dict) -> bool:
    return all(prior.get(n) == config.get(n) for n, a in attributes(block).items()
               if not a.get("computed") and config.get(n) is not None)


def _replace_paths(block: dict, prior: dict, planned: dict, path: list, out: list[list]) -> None:
    """ForceNew as the SDK applies it: an attribute that changes; on a list or set block, a change
    in the number of elements (schemaMap.diffList/diffSet give ForceNew to the count only);
    inside a block, the nested attributes' own ForceNew."""
    for name, attr in attributes(block).items():
        if attr.get("force_new") and _changed(prior.get(name), planned.get(name)):
            out.append(path + [name])
    for name, nested in blocks(block).items():
        before, after = prior.get(name), planned.get(name)
        if nested["nesting"] == "single":
            if isinstance(after, dict) and isinstance(before, dict):
                _replace_paths(nested["block"], before, after, path + [name], out)
            elif nested.get("force_new") and (before is None) != (after is None):
                out.append(path + [name])
            continue
        if not isinstance(after, list) or not isinstance(before, list):
            if nested.get("force_new") and _changed(before, after):
                out.append(path + [name])
            continue
        if len(before) != len(after) and (nested.get("force_new") or _has_force_new(nested["block"])):
            out.append(path + [name])
        elif nested["nesting"] == "list":
            for i, (b, a) in enumerate(zip(before, after)):
                _replace_paths(nested["block"], b, a, path + [name, i], out)
        elif _has_force_new(nested["block"]) and _forced_view(nested["block"], before) != _forced_view(nested["block"], after):
            out.append(path + [name])


def _changed(before: Any, after: Any) -> bool:
    """A value not known until apply may differ from the prior one: the SDK plans a replacement."""
    return has_unknown(after) or before != after


def _has_force_new(block: dict) -> bool:
    return any(a.get("force_new") for a in attributes(block).values()) or any(
        n.get("force_new") or _has_force_new(n["block"]) for n in blocks(block).values())


def _forced_view(block: dict, elems: Any) -> Any:
    if not isinstance(elems, list):
        return elems
    names = [n for n, a in attributes(block).items() if a.get("force_new")]
    return sorted(repr([e.get(n) for n in names]) for e in elems if isinstance(e, dict))
