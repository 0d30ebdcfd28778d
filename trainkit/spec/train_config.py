"""Train configs checked on the control side, before any node is touched, without importing torch
where it can be avoided.

`check_train_config(path, overrides, world_size)` loads the config exactly as the nodes will
(trainkit.train.config.load_config: types, ranges, unknown keys with suggestions) and adds what
only a whole view can tell:

- `model` / `data` name a built-in or an import path `pkg.module:builder` whose module is found
  (importlib.util.find_spec) on this machine;
- `model_args` / `data_args` fit the builder's signature. The signature is read from the
  module's source (ast) so nothing is imported; a builder that is not a plain function or class
  there (decorated, re-exported) is imported for this one check, and the result says so;
- the global batch splits over the world size (when a cluster spec says how many ranks) with
  `grad_accum` and `micro_batch` (trainkit.train.schedule.plan_batch, the rule the engine uses).

Raises InputError (exit 2) listing every problem with its key path; returns the config and notes.
"""

from __future__ import annotations

import ast
import difflib
import importlib
import importlib.util
import inspect
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from trainkit.errors import InputError, capped
from trainkit.train.config import TrainConfig, load_config
from trainkit.train.schedule import plan_batch

# Built-in names -> where their builders live (trainkit.train.model.BUILTIN_MODELS and
# trainkit.train.data.BUILTIN_DATA, which import torch; a unit test keeps the two in step).
BUILTINS = {"model": {"digits_cnn": "trainkit.train.model:DigitsCNN", "gpt": "trainkit.train.model:_gpt"},
            "data": {"digits": "trainkit.train.data:digits_dataset",
                     "folder": "trainkit.train.data:folder_dataset",
                     "pydoc_text": "trainkit.train.data:_pydoc_text"}}
# Keyword arguments trainkit itself passes to a builder (data: builder(seed=..., **data_args)).
PASSED = {"model": (), "data": ("seed",)}


@dataclass
class Params:
    """What a builder accepts by keyword: names, the required ones, and whether **kwargs."""

    names: set[str] = field(default_factory=set)
    required: set[str] = field(default_factory=set)
    var_kw: bool = False
    types: dict[str, tuple[str, bool]] = field(default_factory=dict)  # name -> (int|float|str|bool, None ok)


@dataclass
class TrainCheck:
    config: TrainConfig
    notes: list[str] = field(default_factory=list)


def check_train_config(path: str | Path | None, overrides: list[str] | tuple[str, ...] = (),
                       world_size: int | None = None) -> TrainCheck:
    """Load and check a train config as above. InputError (exit 2) with every problem."""
    cfg = load_config(path, overrides)
    problems: list[str] = []
    notes: list[str] = []
    for key in ("model", "data"):
        p, n = builder_problems(key, getattr(cfg, key), getattr(cfg, f"{key}_args"))
        problems += p
        notes += n
    problems += _batch_problems(cfg, world_size)
    if problems:
        raise InputError(f"{path or '<defaults>'}: {len(problems)} problem(s)\n  "
                         + "\n  ".join(capped(problems)),
                         fix="see `trainkit docs train-config` for every key, its type and default")
    return TrainCheck(cfg, notes)


def _batch_problems(cfg: TrainConfig, world_size: int | None) -> list[str]:
    world = world_size or 1
    try:
        plan_batch(cfg.batch, world, cfg.micro_batch, cfg.grad_accum)
    except InputError as err:
        key = "grad_accum" if "grad_accum" in err.message and "divisible" not in err.message else \
            "micro_batch" if "exceeds" in err.message else "batch"
        where = f" on {world} rank(s) (nodes x nproc_per_node of the cluster)" if world_size else ""
        return [f"{key}: {err.message}{where}" + (f"; {err.fix}" if err.fix else "")]
    return []


def builder_problems(key: str, target: str, args: dict[str, Any]) -> tuple[list[str], list[str]]:
    """Problems with `key` (model/data) naming `target` called with `args`, and notes."""
    builtins = BUILTINS[key]
    if ":" not in target:
        if target in builtins:
            return _builtin_problems(key, target, builtins[target], args)
        else:
            close = difflib.get_close_matches(target, list(builtins), n=1)
            hint = f"; did you mean {close[0]!r}?" if close else ""
            return [f"{key}: {target!r} is neither a built-in ({', '.join(builtins)}) nor an import "
                    f"path 'pkg.module:function'{hint}"], []
    module, _, attr = target.partition(":")
    if not all(p.isidentifier() for p in module.split(".")) or not attr.isidentifier():
        return [f"{key}: {target!r} is not an import path 'pkg.module:function' (dotted module "
                "name, one colon, a function or class name)"], []
    try:
        found = importlib.util.find_spec(module)
    except ModuleNotFoundError:
        found = None
    except Exception as err:  # noqa: BLE001 - a parent package's __init__ may raise anything
        return [f"{key}: cannot look up module {module!r} ({type(err).__name__}: {err})"], []
    if found is None:
        return [f"{key}: module {module!r} is not found on this machine; install it (here and on "
                "the nodes) or fix the name"], []
    params = static_params(found.origin, attr)
    notes: list[str] = []
    if params is None:
        params, problem = _imported_params(module, attr, key)
        if problem:
            return [problem], []
        notes.append(f"{key}: imported {module} to read the signature of {attr} (not a plain "
                     "function or class in its source)")
    return _arg_problems(key, target, args, params), notes


def _builtin_problems(key: str, name: str, target: str, args: dict[str, Any]) -> tuple[list[str], list[str]]:
    module, _, attr = target.partition(":")
    found = importlib.util.find_spec(module)
    params = static_params(found.origin if found else None, attr)
    if params is None:  # trainkit's own source is always readable; a unit test keeps it so
        return [], [f"{key}: could not read the signature of built-in {name!r}; {key}_args unchecked"]
    return _arg_problems(key, name, args, params), []


def _arg_problems(key: str, target: str, args: dict[str, Any], params: Params) -> list[str]:
    out = []
    for name in args:
        if name in PASSED[key]:
            out.append(f"{key}_args.{name}: trainkit passes {name} itself (from the top-level `{name}`); "
                       f"remove it from {key}_args")
        elif name not in params.names and not params.var_kw:
            close = difflib.get_close_matches(name, sorted(params.names), n=1)
            hint = f"did you mean {close[0]!r}?" if close else \
                f"it takes: {', '.join(sorted(params.names - set(PASSED[key]))) or 'no arguments'}"
            out.append(f"{key}_args.{name}: {target} has no parameter {name!r}; {hint}")
    out += [f"{key}_args.{name}: {target} takes {kind}{' or null' if none_ok else ''} (got {args[name]!r})"
            for name, (kind, none_ok) in sorted(params.types.items())
            if name in args and not _fits(args[name], kind, none_ok)]
    missing = sorted(params.required - set(args) - set(PASSED[key]))
    if missing:
        out.append(f"{key}_args: {target} needs {', '.join(missing)}; add them to {key}_args")
    return out


def _fits(value: Any, kind: str, none_ok: bool) -> bool:
    """A YAML value for a parameter annotated `kind` (YAML's 1 is also a float; true is no int)."""
    if value is None:
        return none_ok
    if isinstance(value, bool):
        return kind == "bool"
    return {"int": isinstance(value, int), "float": isinstance(value, (int, float)),
            "str": isinstance(value, str), "bool": False}[kind]


def _simple_type(annotation: ast.expr | None) -> tuple[str, bool] | None:
    """`int`, `float`, `str`, `bool`, or one of them `| None` / `Optional[...]`; None for the rest."""
    if isinstance(annotation, ast.Constant) and isinstance(annotation.value, str):
        try:
            annotation = ast.parse(annotation.value, mode="eval").body  # a quoted annotation
        except SyntaxError:
            return None
    if isinstance(annotation, ast.Name) and annotation.id in ("int", "float", "str", "bool"):
        return annotation.id, False
    if isinstance(annotation, ast.BinOp) and isinstance(annotation.op, ast.BitOr):
        sides = [annotation.left, annotation.right]
        nones = [x for x in sides if isinstance(x, ast.Constant) and x.value is None]
        rest = [x for x in sides if x not in nones]
        inner = _simple_type(rest[0]) if len(nones) == 1 and len(rest) == 1 else None
        return (inner[0], True) if inner else None
    if (isinstance(annotation, ast.Subscript) and isinstance(annotation.value, ast.Name)
            and annotation.value.id == "Optional"):
        inner = _simple_type(annotation.slice)
        return (inner[0], True) if inner else None
    return None


def static_params(origin: str | None, name: str) -> Params | None:
    """The keyword parameters of top-level function or class `name` in the source file `origin`,
    read with ast (nothing imported); None when the source cannot tell."""
    if not origin or not origin.endswith(".py"):
        return None
    try:
        tree = ast.parse(Path(origin).read_text(encoding="utf-8"))
    except (OSError, SyntaxError, UnicodeDecodeError, ValueError):
        return None
    defs = [n for n in tree.body if getattr(n, "name", None) == name]
    if len(defs) != 1 or getattr(defs[0], "decorator_list", None):
        return None
    node = defs[0]
    if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
        return _from_arguments(node.args, skip_first=False)
    if isinstance(node, ast.ClassDef):
        inits = [n for n in node.body if isinstance(n, ast.FunctionDef) and n.name == "__init__"]
        if len(inits) == 1 and not inits[0].decorator_list:
            return _from_arguments(inits[0].args, skip_first=True)
    return None


def _from_arguments(a: ast.arguments, skip_first: bool) -> Params:
    positional = a.posonlyargs + a.args
    n_required = len(positional) - len(a.defaults)
    out = Params(var_kw=a.kwarg is not None)
    for i, arg in enumerate(positional):
        if skip_first and i == 0:
            continue
        if _simple_type(arg.annotation):
            out.types[arg.arg] = _simple_type(arg.annotation)
        if i >= len(a.posonlyargs):
            out.names.add(arg.arg)
        if i < n_required:
            out.required.add(arg.arg)
    for arg, default in zip(a.kwonlyargs, a.kw_defaults):
        out.names.add(arg.arg)
        if _simple_type(arg.annotation):
            out.types[arg.arg] = _simple_type(arg.annotation)
        if default is None:
            out.required.add(arg.arg)
    return out


def _imported_params(module: str, attr: str, key: str) -> tuple[Params, str | None]:
    try:
        obj = getattr(importlib.import_module(module), attr)
        sig = inspect.signature(obj)
    except AttributeError:
        return Params(), f"{key}: module {module!r} has no {attr!r}"
    except (TypeError, ValueError):
        return Params(var_kw=True), None  # no signature to read (a builtin): accept the args
    except Exception as err:  # noqa: BLE001 - the user's module may raise anything on import
        return Params(), f"{key}: importing {module} failed ({type(err).__name__}: {err})"
    out = Params()
    for p in sig.parameters.values():
        if p.kind is p.VAR_KEYWORD:
            out.var_kw = True
        elif p.kind in (p.POSITIONAL_OR_KEYWORD, p.KEYWORD_ONLY):
            out.names.add(p.name)
            if p.default is p.empty:
                out.required.add(p.name)
    return out, None


def world_size(cluster: Any) -> int:
    """Ranks of a resolved cluster: nodes x (launch.nproc_per_node, else GPUs per node, else 1),
    the same rule the inventory gives torchrun."""
    nproc = cluster.spec.launch.nproc_per_node
    if cluster.spec.hosts:
        return sum(nproc or h.gpus or 1 for h in cluster.spec.hosts if not h.spare)  # spares wait
    return cluster.nodes * (nproc or cluster.gpus_per_node or 1)

