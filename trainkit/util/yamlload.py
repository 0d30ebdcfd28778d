"""Reading user YAML (cluster specs, train configs) safely: one loader for both.

`load_file(path, what)` returns the parsed document or raises InputError (exit 2) naming the file,
the line where it can, and a fix. Beyond yaml.safe_load it refuses:

- files over MAX_BYTES, binary files (NUL bytes), UTF-16/UTF-32 and any bytes that are not UTF-8;
- a key given twice in one mapping (YAML 1.2 section 3.2.1.1 says keys are unique; PyYAML would
  silently keep the last);
- documents whose aliases expand to more than MAX_NODES nodes, and recursive aliases (the
  "billion laughs" shape: a few lines that expand exponentially once anything walks them);
- nesting deeper than Python's recursion allows.

`yaml12_floats(model, data)` reads `1e-4` as a number for a pydantic model's float fields:
YAML 1.1 (PyYAML) only resolves floats with a dot, YAML 1.2 (section 10.2.1.4) also `1e-4`.
"""

from __future__ import annotations

import re
import typing
from pathlib import Path
from typing import Any

import yaml
from yaml.nodes import MappingNode, Node, ScalarNode, SequenceNode

from trainkit.errors import InputError

# A cluster spec or train config is a few KB; 2 MiB leaves room for long comments and host lists.
MAX_BYTES = 2 * 1024 * 1024
# Nodes after alias expansion; real specs have hundreds. Bounds the work of anything that walks
# the result (validation, error messages, hashing).
MAX_NODES = 100_000
# YAML 1.2 core schema float (section 10.2.1.4), without .inf/.nan (not useful in a config).
_FLOAT_12 = re.compile(r"[-+]?(\.[0-9]+|[0-9]+(\.[0-9]*)?)([eE][-+]?[0-9]+)?")  # used with fullmatch
_MERGE = "tag:yaml.org,2002:merge"


class _Refused(Exception):
    def __init__(self, line: int | None, message: str, fix: str):
        super().__init__(message)
        self.line, self.message, self.fix = line, message, fix


_BOOL, _INT = "tag:yaml.org,2002:bool", "tag:yaml.org,2002:int"
_TRUE = ("yes", "on", "y")
_OCTAL_11 = re.compile(r"[-+]?0[0-9_]+")  # YAML 1.1 reads 0022 as octal 18
_SEXAGESIMAL = re.compile(r"[-+]?[0-9][0-9_]*(:[0-5]?[0-9])+")  # YAML 1.1 reads 1:30 as 90


def _refuse_yaml11(node: Node, checked: set[int]) -> None:
    """A plain integer YAML 1.1 converts to a number the text does not say (octal, base 60).

    `checked` holds the ids of the sequences already looked at: an alias is the same node object
    as its anchor, so each sequence is walked once (an alias bomb is not expanded here; its size
    is refused later by _check_expansion)."""
    if isinstance(node, SequenceNode):
        if id(node) in checked:
            return
        checked.add(id(node))
        for item in node.value:
            _refuse_yaml11(item, checked)
        return
    if not isinstance(node, ScalarNode) or node.tag != _INT or node.style is not None:
        return
    if _OCTAL_11.fullmatch(node.value) or _SEXAGESIMAL.fullmatch(node.value):
        value = yaml.SafeLoader.construct_yaml_int(yaml.SafeLoader(""), node)
        raise _Refused(node.start_mark.line + 1, f"{node.value} is read as {value} (a YAML 1.1 "
                       f"{'octal' if ':' not in node.value else 'base-60'} number), not as written",
                       f"write {node.value.lstrip('0') or '0'} for the number, or quote it for the text"
                       if ":" not in node.value else f"quote it: '{node.value}'")


class _Loader(yaml.SafeLoader):
    """SafeLoader that refuses duplicate keys at compose time (before merges are applied)."""

    def __init__(self, stream: Any) -> None:
        super().__init__(stream)
        self._yaml11_checked: set[int] = set()  # sequences _refuse_yaml11 has walked

    def compose_mapping_node(self, anchor: Any) -> MappingNode:
        node = super().compose_mapping_node(anchor)
        seen: dict[tuple[str, str], int] = {}
        for key, value in node.value:
            _refuse_yaml11(value, self._yaml11_checked)
            if not isinstance(key, ScalarNode) or key.tag == _MERGE:
                continue
            line = key.start_mark.line + 1
            if key.tag == _BOOL and key.style is None and key.value.lower() not in ("true", "false"):
                raise _Refused(line, f"key {key.value!r} is read as the boolean {str(key.value.lower() in _TRUE).lower()} "
                               "(YAML 1.1), not as the text it looks like",
                               f"quote it: '{key.value}': ...")
            first = seen.setdefault((key.tag, key.value), line)
            if first != line:
                raise _Refused(line, f"duplicate key {key.value!r} (first given on line {first})",
                               "keep one of them; YAML keeps only the last one silently")
        return node


def read_text(path: Path, what: str) -> str:
    """The file's text; InputError for a missing, huge, binary or non-UTF-8 file."""
    if not path.is_file():
        raise InputError(f"{path}: {what} {not_a_file(path)}", fix="check the path")
    size = path.stat().st_size
    if size > MAX_BYTES:
        raise InputError(f"{path}: {what} is {size:,} bytes; at most {MAX_BYTES:,} are read",
                         fix=f"a {what} is a few KB of YAML; is this the right file?")
    data = path.read_bytes()
    if data.startswith((b"\xff\xfe", b"\xfe\xff")) or (len(data) > 1 and (not data[0] or not data[1])):
        raise InputError(f"{path}: {what} is UTF-16 or UTF-32 encoded; trainkit reads UTF-8",
                         fix="save it as UTF-8 (e.g. iconv -f UTF-16 -t UTF-8)")
    if b"\0" in data:
        raise InputError(f"{path}: {what} is a binary file (it holds NUL bytes), not YAML",
                         fix="check the path points at the YAML file")
    try:
        return data.decode("utf-8").removeprefix("\ufeff")
    except UnicodeDecodeError as err:
        line = data[:err.start].count(b"\n") + 1
        raise InputError(f"{path}: line {line}: byte {data[err.start]:#04x} is not UTF-8; trainkit "
                         f"reads {what}s as UTF-8", fix="save the file as UTF-8") from None


def not_a_file(path: Path) -> str:
    """Why `path` is not a readable file, in words: 'not found', a folder, a FIFO, a link loop."""
    if path.is_symlink() and not path.exists():
        return "is a symbolic link to nothing (dangling, or a loop of links)"
    if path.is_dir():
        return "is a folder, not a file"
    if path.exists():
        return "is not a regular file (a FIFO, socket or device)"
    return "not found"


def load_file(path: str | Path, what: str = "YAML file") -> Any:
    """Parse `path` as one YAML document with the limits above; InputError names file and line."""
    path = Path(path)
    return load_text(read_text(path, what), str(path))


def load_text(text: str, source: str = "<yaml>") -> Any:
    """Parse YAML text with the limits above; InputError naming `source` and the line."""
    loader = _Loader(text)
    try:
        node = loader.get_single_node()
        if node is None:
            return None
        _check_expansion(node)
        return loader.construct_document(node)
    except _Refused as err:
        where = f"line {err.line}: " if err.line else ""
        raise InputError(f"{source}: {where}{err.message}", fix=err.fix) from None
    except yaml.YAMLError as err:
        mark = getattr(err, "problem_mark", None)
        where = f"line {mark.line + 1}, column {mark.column + 1}: " if mark else ""
        problem = getattr(err, "problem", None) or str(err).splitlines()[0]
        raise InputError(f"{source}: {where}not valid YAML ({problem})",
                         fix="fix the YAML syntax") from None
    except RecursionError:
        raise InputError(f"{source}: nested too deeply to read", fix="flatten the YAML") from None
    finally:
        loader.dispose()


def _check_expansion(root: Node) -> None:
    """Count nodes as if every alias were copied out; refuse cycles and more than MAX_NODES."""
    sizes: dict[int, int] = {}
    active: set[int] = set()
    stack: list[tuple[Node, bool]] = [(root, False)]
    while stack:
        node, done = stack.pop()
        key = id(node)
        if done:
            active.discard(key)
            sizes[key] = 1 + sum(sizes[id(c)] for c in _children(node))
            # Without aliases a subtree holds at most the distinct nodes seen so far.
            if sizes[key] > MAX_NODES and sizes[key] > len(sizes):
                raise _Refused(node.start_mark.line + 1,
                               f"aliases (*name) expand to more than {MAX_NODES:,} values",
                               "write the values out, or use fewer nested aliases")
            if sizes[key] > MAX_NODES:
                raise _Refused(None, f"more than {MAX_NODES:,} values; a cluster spec or train "
                               "config has hundreds", "is this the right file?")
            continue
        if key in sizes:
            continue
        if key in active:
            raise _Refused(node.start_mark.line + 1, "an alias refers to a value that contains it "
                           "(a recursive alias)", "remove the recursive alias")
        active.add(key)
        stack.append((node, True))
        stack.extend((c, False) for c in _children(node) if id(c) not in sizes)


def _children(node: Node) -> list[Node]:
    if isinstance(node, SequenceNode):
        return list(node.value)
    if isinstance(node, MappingNode):
        return [n for pair in node.value for n in pair]
    return []


def yaml12_floats(model: Any, data: Any) -> Any:
    """`data` with YAML 1.2 float strings (e.g. '1e-4') turned into floats where `model`'s field
    accepts a float; nested pydantic models are followed. Other values are left as they are."""
    if not isinstance(data, dict):
        return data
    fields = getattr(model, "model_fields", {})
    out = dict(data)
    for key, value in data.items():
        info = fields.get(key)
        if info is None:
            continue
        kinds = _kinds(info.annotation)
        if isinstance(value, str) and float in kinds and _FLOAT_12.fullmatch(value):
            out[key] = float(value)
        elif isinstance(value, dict):
            sub = next((k for k in kinds if isinstance(k, type) and hasattr(k, "model_fields")), None)
            if sub is not None:
                out[key] = yaml12_floats(sub, value)
    return out


def _kinds(annotation: Any) -> set[Any]:
    """The plain types inside an annotation (Optional/Union/Annotated unwrapped)."""
    args = typing.get_args(annotation)
    if not args:
        return {annotation}
    return set().union(*(_kinds(a) for a in args))
