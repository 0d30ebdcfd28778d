"""The distribution users install: its name (not `trainkit`, an unrelated project on the package
index), and extras that carry what each command needs per cloud: every third-party module a
cloud's leftover check, placement preflight and price adapter import is installed by that cloud's
extra (or what it depends on). The wheel itself and the CI pipelines: tests/e2e/test_wheel.py."""

from __future__ import annotations

import ast
import importlib.metadata as md
import re
import sys
from pathlib import Path

import pytest
import tomllib

from trainkit import clouds
from trainkit.util import dist

REPO = Path(__file__).resolve().parents[2]


def _project() -> dict:
    return tomllib.loads((REPO / "pyproject.toml").read_text())["project"]


def _name(requirement: str) -> str:
    return re.split(r"[\s\[<>=!~;]", requirement, maxsplit=1)[0].lower().replace("_", "-")


def _closure(requirements: list[str]) -> set[str]:
    """The distributions `requirements` install, with what they depend on (installed metadata)."""
    seen: set[str] = set()
    todo = [r for r in requirements if "extra ==" not in r]
    while todo:
        name = _name(todo.pop())
        if name in seen:
            continue
        seen.add(name)
        try:
            todo += [r for r in (md.requires(name) or []) if "extra ==" not in r]
        except md.PackageNotFoundError:
            pass
    return seen


def _third_party_imports(module: str) -> set[str]:
    """Top-level names of the modules `module`'s source imports, anywhere in it, but trainkit's
    own and the standard library's."""
    path = Path(sys.modules["trainkit"].__file__).parent.parent / (module.replace(".", "/") + ".py")
    found = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            found |= {a.name.split(".")[0] for a in node.names}
        elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
            found.add(node.module.split(".")[0])
    return {m for m in found if m != "trainkit" and m not in sys.stdlib_module_names and m != "__future__"}


def test_the_distribution_name_is_the_one_messages_use():
    assert _project()["name"] == dist.DISTRIBUTION != "trainkit"
    assert _project()["scripts"] == {"trainkit": "trainkit.cli:main"}  # the command stays trainkit
    assert dist.pip_install("control", "aws") == "pip install 'trainkit-clusters[control,aws]'"


def test_every_cloud_has_an_extra_and_prices_carries_them_all():
    extras = _project()["optional-dependencies"]
    assert set(clouds.TERRAFORM_TARGETS) <= set(extras)  # one extra per cloud, named as the cloud
    assert {"control", "train", "prices"} <= set(extras)
    (prices,) = extras["prices"]
    assert _name(prices) == dist.DISTRIBUTION and set(prices.split("[")[1].rstrip("]").split(",")) == set(clouds.TERRAFORM_TARGETS)


@pytest.mark.parametrize("cloud", clouds.TERRAFORM_TARGETS)
def test_a_cloud_s_extra_installs_every_sdk_its_commands_import(cloud):
    room = clouds.get(cloud)
    installed = _closure(_project()["optional-dependencies"][cloud])
    by_module = md.packages_distributions()
    modules = [m for m in (room.tag_sweeper, room.offers_adapter, room.price_adapter) if m]
    assert modules, cloud
    for module in modules:
        for top in _third_party_imports(module):
            dists = {d.lower().replace("_", "-") for d in by_module.get(top, [])}
            assert dists, f"{module} imports {top}, which no installed distribution provides"
            assert dists & installed, f"{module} imports {top} ({dists}): not in the {cloud!r} extra"
