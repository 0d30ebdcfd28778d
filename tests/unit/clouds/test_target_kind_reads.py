"""No Python outside trainkit/clouds/ asks which target it is (issue 40): the kind of target is read
from the room's capabilities (`cluster.room.has_module`, `node_source`, `replacement`, ...), never
asked by name. This scans the source: a comparison of a `cloud` name (`spec.cloud == "hosts"`,
`cloud not in ("local", "hosts")`, `cloud in TERRAFORM_TARGETS`), a comparison with a target's name
as a literal, or a call of `is_cloud(...)` anywhere in trainkit/ outside trainkit/clouds/ fails it."""

from __future__ import annotations

import ast
from pathlib import Path

from trainkit import clouds

PACKAGE = Path(clouds.__file__).resolve().parents[1]
ROOMS = PACKAGE / "clouds"


def _names(node: ast.AST) -> set[str]:
    """The string constants `node` is or holds (a tuple, list or set of them)."""
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return {node.value}
    if isinstance(node, (ast.Tuple, ast.List, ast.Set)):
        return {v for e in node.elts for v in _names(e)}
    return set()


def _is_cloud_name(node: ast.AST) -> bool:
    """`x.cloud`, `cloud` or `cloud_name`: a target's name."""
    name = node.attr if isinstance(node, ast.Attribute) else node.id if isinstance(node, ast.Name) else ""
    return name in ("cloud", "cloud_name")


def _is_target_list(node: ast.AST) -> bool:
    name = node.attr if isinstance(node, ast.Attribute) else node.id if isinstance(node, ast.Name) else ""
    return name in ("TERRAFORM_TARGETS", "OTHER_TARGETS", "TARGETS")


def target_kind_asks(source: str) -> list[tuple[int, str]]:
    """(line, what) of every place in `source` that asks the target's kind by its name."""
    found: list[tuple[int, str]] = []
    targets = set(clouds.TARGETS)
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Call):
            func = node.func
            name = func.attr if isinstance(func, ast.Attribute) else func.id if isinstance(func, ast.Name) else ""
            if name == "is_cloud":
                found.append((node.lineno, "is_cloud(...)"))
        if not isinstance(node, ast.Compare):
            continue
        sides = [node.left, *node.comparators]
        if not any(isinstance(op, (ast.Eq, ast.NotEq, ast.In, ast.NotIn)) for op in node.ops):
            continue
        if any(_is_cloud_name(s) for s in sides) and any(_names(s) or _is_target_list(s) for s in sides):
            found.append((node.lineno, f"a target's name compared: {ast.unparse(node)}"))
        elif any(_names(s) & targets for s in sides) and any(_is_cloud_name(s) or _is_target_list(s)
                                                             for s in sides):
            found.append((node.lineno, f"a target's name compared: {ast.unparse(node)}"))
    return found


def test_no_module_outside_the_rooms_asks_which_target_it_is():
    asks = [f"{path.relative_to(PACKAGE.parent)}:{line}: {what}"
            for path in sorted(PACKAGE.rglob("*.py")) if ROOMS not in path.parents
            for line, what in target_kind_asks(path.read_text())]
    assert asks == [], "read the room's capability instead (cluster.room / spec.room):\n" + "\n".join(asks)


def test_the_scan_finds_each_way_of_asking():
    """The scan itself: each shape the branches had before issue 40 is found, a capability read is not."""
    asked = ['if spec.cloud == "hosts": pass', 'if cluster.spec.cloud != "local": pass',
             'x = cloud not in ("local", "hosts")', 'x = s.cloud in clouds.TERRAFORM_TARGETS',
             'x = clouds.is_cloud(spec.cloud)', 'x = lifecycle.is_cloud(cluster)']
    for text in asked:
        assert len(target_kind_asks(text)) == 1, text
    read = ['x = cluster.room.has_module', 'x = cluster.room.node_source == NODES_HOSTS',
            'x = b.type == "local"', 'x = kind in ("a", "b")']
    for text in read:
        assert target_kind_asks(text) == [], text
