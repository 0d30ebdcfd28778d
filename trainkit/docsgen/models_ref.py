"""Reference pages from the pydantic models: the cluster spec (trainkit.spec.schema.ClusterSpec)
and the train config (trainkit.train.config.TrainConfig), one table row per field with its dotted
path, type, default, bounds and description; and the spec's JSON Schema for editors.

Fields the model sets itself (`zone_candidates`, `type_candidates`, `zone_auto`: their description
starts with "Set ") are left out of the tables and of the schema: a user writes `zone:` and
`instance.type:`, which take a string or a list (the schema says so).
"""

from __future__ import annotations

import json
import types
import typing
from typing import Any

from pydantic import BaseModel
from pydantic_core import PydanticUndefined

SCHEMA_ID = "cluster-spec.json"  # docs/schema/cluster-spec.json; the site publishes it at schema/
BOUNDS = (("ge", ">="), ("gt", ">"), ("le", "<="), ("lt", "<"), ("min_length", "min length"),
          ("max_length", "max length"), ("pattern", "pattern"))


def _derived(field: Any) -> bool:
    return (field.description or "").startswith("Set ")


def _model_in(annotation: Any) -> type[BaseModel] | None:
    """The model a field holds (itself, or the items of a tuple/list of models), else None."""
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return annotation
    args = [a for a in typing.get_args(annotation) if a is not Ellipsis]
    if typing.get_origin(annotation) in (tuple, list) and len(args) == 1:
        return _model_in(args[0])
    return None


def type_name(annotation: Any) -> str:
    """A short, readable type: `int`, `str or null`, `"disk" | "nas"`, `list of Source`."""
    origin, args = typing.get_origin(annotation), typing.get_args(annotation)
    if annotation is type(None):
        return "null"
    if origin is typing.Literal:
        return " \\| ".join(json.dumps(a) for a in args)
    if origin in (typing.Union, types.UnionType):
        return " or ".join(type_name(a) for a in args)
    if origin is typing.Annotated:
        return type_name(args[0])
    if origin in (tuple, list):
        return f"list of {type_name(next(a for a in args if a is not Ellipsis))}" if args else "list"
    if origin is dict:
        return f"map of {type_name(args[0])} to {type_name(args[1])}" if args else "map"
    if isinstance(annotation, type):
        return "section" if issubclass(annotation, BaseModel) else annotation.__name__
    return str(annotation).replace("typing.", "")


def _bounds(field: Any) -> str:
    found = []
    for meta in field.metadata:
        for attr, word in BOUNDS:
            value = getattr(meta, attr, None)
            if value is not None:
                found.append(f"{word} `{value}`")
    return ", ".join(found)


def _default(field: Any) -> str:
    if field.is_required():
        return "**required**"
    value = field.default_factory() if field.default is PydanticUndefined else field.default
    if isinstance(value, BaseModel):
        return ""
    return f"`{json.dumps(value, default=str)}`"


def field_rows(model: type[BaseModel], prefix: str = "") -> list[str]:
    """Markdown table rows, one per field of `model` and of the models it holds, depth first."""
    rows = []
    for name, field in model.model_fields.items():
        if _derived(field):
            continue
        path = f"{prefix}{name}"
        inner = _model_in(field.annotation)
        doc = (inner.__doc__ or "").strip().split("\n\n")[0] if inner is not None and not field.description else ""
        text = (field.description or " ".join(doc.split())).replace("|", "\\|").replace("\n", " ")
        rows.append(f"| `{path}` | {type_name(field.annotation)} | {_default(field)} | {_bounds(field)} | {text} |")
        if inner is not None:
            item = "[]." if typing.get_origin(field.annotation) in (tuple, list) else "."
            rows += field_rows(inner, path + item)
    return rows


def table(model: type[BaseModel]) -> list[str]:
    return ["| field | type | default | bounds | meaning |", "|---|---|---|---|---|", *field_rows(model), ""]


def spec_page(note: str) -> str:
    """docs/spec-fields.md: every field of a cluster spec."""
    from trainkit.spec.schema import ClusterSpec

    return "\n".join([
        "# Cluster spec fields\n", note.format(source="trainkit/spec/schema.py (pydantic models)"),
        "Every field of a cluster spec (`examples/clusters/*.yaml`), nested sections as dotted paths "
        "(`hosts[].address`: a field of each item of the list). A field unknown here is refused "
        "with the closest name. Which values a cloud accepts (regions, zones, disk categories) is "
        "checked by the cloud's room after these: [Writing a cluster spec](spec.md).\n",
        "`zone:` and `instance.type:` also take a list (tried in order when the cloud has no "
        "capacity), and `zone: auto` tries every zone trainkit lists for the region.\n",
        "Editors that read JSON Schema (VS Code's YAML extension, JetBrains IDEs) complete and check "
        "a spec from [schema/cluster-spec.json](schema/cluster-spec.json): put "
        "`# yaml-language-server: $schema=<path or URL of cluster-spec.json>` on the first line, as "
        "the shipped examples do.\n",
        *table(ClusterSpec)]).rstrip() + "\n"


def train_page(note: str) -> str:
    """docs/train-config.md: every key the engine reads, plus the launcher's keys."""
    from trainkit.train.config import LAUNCH_KEYS, TrainConfig

    launch = ", ".join(f"`{k}`" for k in LAUNCH_KEYS)
    return "\n".join([
        "# Train config keys\n", note.format(source="trainkit/train/config.py (pydantic models)"),
        "Every key of a training config (`examples/train/digits.yaml` is the annotated example), "
        "sections as dotted paths. `batch` is the global batch; [Training](training.md) explains "
        "batch, LR scaling, checkpoints and export. Any key can be overridden on the command line "
        "(`trainkit train SPEC --config digits epochs=5 checkpoint.keep=4`).\n",
        f"The launcher reads {launch} (the run's name, your own command and its code, the job's "
        "data, recovery); the engine ignores them: [Runs](runs.md) and [Data](data.md).\n",
        *table(TrainConfig)]).rstrip() + "\n"


def _prune(schema: Any) -> Any:
    """The schema without the derived fields (see the module docstring)."""
    if isinstance(schema, dict):
        props = schema.get("properties")
        if isinstance(props, dict):
            for name in [n for n, p in props.items() if str(p.get("description", "")).startswith("Set ")]:
                del props[name]
        return {k: _prune(v) for k, v in schema.items()}
    if isinstance(schema, list):
        return [_prune(v) for v in schema]
    return schema


def _also_a_list(prop: dict[str, Any]) -> dict[str, Any]:
    """`zone`, `instance.type`: the string the model declares, or a list of strings."""
    return {**{k: v for k, v in prop.items() if k not in ("anyOf", "type")},
            "anyOf": [*prop.get("anyOf", [{"type": prop.get("type", "string")}]),
                      {"type": "array", "items": {"type": "string"}, "minItems": 1}]}


def spec_schema() -> dict[str, Any]:
    """ClusterSpec's JSON Schema (validation mode), pruned, with list forms where the model takes them."""
    from trainkit.spec.schema import ClusterSpec

    schema = _prune(ClusterSpec.model_json_schema())
    schema["properties"]["zone"] = _also_a_list(schema["properties"]["zone"])
    instance = schema["$defs"]["InstanceSpec"]["properties"]
    instance["type"] = _also_a_list(instance["type"])
    return {**schema, "$schema": "https://json-schema.org/draft/2020-12/schema", "$id": SCHEMA_ID,
            "title": "trainkit cluster spec"}


def spec_schema_json() -> str:
    return json.dumps(spec_schema(), indent=2, sort_keys=True) + "\n"
