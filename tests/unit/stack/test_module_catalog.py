"""Each module's variables.tf against the catalog and the cloud's room, so the three cannot drift.

The module's validation blocks repeat what trainkit's Python knows: enum lists (`contains([...],
var.x)`) are the catalog's `choices`, size ranges (`var.x >= a && var.x <= b`) are the room's
documented limits and node_count the spec's bounds (disk sizes: the widest range over the categories/types the room lists), and the defaults are
the catalog's `defaults`. A value allowed on one side and refused on the other fails here.
"""

from __future__ import annotations

import re
import typing
from functools import lru_cache
from pathlib import Path

import hcl2
import pytest

from trainkit import clouds
from trainkit.catalog import load_catalog
from trainkit.spec.schema import ClusterSpec, NetworkSpec

REPO = Path(__file__).resolve().parents[3]
MODULES = REPO / "terraform" / "modules"
CLOUDS = clouds.TERRAFORM_TARGETS
CONTAINS = re.compile(r"contains\(\[([^\]]*)\],\s*var\.([\w.]+)\)")
RANGE = re.compile(r"var\.([\w.]+) >= (\d+) && var\.\1 <= (\d+)")


@lru_cache(maxsize=None)
def variables(cloud: str) -> dict[str, dict]:
    """The module's variable blocks, parsed once (callers only read them)."""
    parsed = hcl2.loads((MODULES / cloud / "variables.tf").read_text())
    return {name.strip('"'): body for item in parsed["variable"] for name, body in item.items()}


def validations(cloud: str) -> list[tuple[str, str]]:
    """(condition, error message) of every validation block in the module."""
    return [(v["condition"], v["error_message"].strip('"'))
            for body in variables(cloud).values() for v in body.get("validation", [])]


def enums(cloud: str) -> dict[str, tuple[list[str], str]]:
    """`contains([...], var.<path>)` -> {path: (values, error message)}."""
    found = {}
    for condition, message in validations(cloud):
        for values, path in CONTAINS.findall(condition):
            assert path not in found, f"{cloud}: two enum lists for {path}"
            found[path] = ([v.strip().strip('"') for v in values.split(",") if v.strip()], message)
    return found


def ranges(cloud: str) -> dict[str, tuple[tuple[int, int], str]]:
    """`var.<path> >= a && var.<path> <= b` -> {path: ((a, b), error message)}."""
    return {path: ((int(low), int(high)), message) for condition, message in validations(cloud)
            for path, low, high in RANGE.findall(condition)}


def unquote(value):
    return value.strip('"') if isinstance(value, str) else value


def spec_bounds(model, name: str) -> tuple[int, int]:
    """(ge, le) of a spec field."""
    meta = model.model_fields[name].metadata
    return (next(m.ge for m in meta if hasattr(m, "ge")), next(m.le for m in meta if hasattr(m, "le")))


def widest(limits: dict[str, tuple[int, int]]) -> tuple[int, int]:
    return min(low for low, _ in limits.values()), max(high for _, high in limits.values())


@pytest.mark.parametrize("cloud", CLOUDS)
def test_module_enum_lists_are_the_catalogs_choices(cloud):
    choices = load_catalog(clouds.get(cloud)).choices
    expected = {"public_ip": list(typing.get_args(NetworkSpec.model_fields["public_ip"].annotation)),
                "system_disk.category": choices["system_disk_categories"],
                "data_disk.category": choices["data_disk_categories"],
                "data_disk.performance_level": choices["performance_levels"],
                "nas.type": choices["nas_types"]}
    found = enums(cloud)
    assert {path: values for path, (values, _) in found.items()} == expected
    for path, (values, message) in found.items():  # the error message lists the same values
        assert ", ".join(values or ["none"]) in message, f"{cloud}: {path}: {message}"


@pytest.mark.parametrize("cloud", CLOUDS)
def test_module_defaults_are_the_catalogs_defaults(cloud):
    defaults, choices = load_catalog(clouds.get(cloud)).defaults, load_catalog(clouds.get(cloud)).choices
    tf = variables(cloud)
    assert unquote(tf["nas"]["default"]["type"]) == defaults["nas"]["type"]
    assert unquote(tf["ssh_user"]["default"]) == defaults["ssh_user"]
    assert unquote(tf["public_ip"]["default"]) == NetworkSpec.model_fields["public_ip"].default
    assert unquote(tf["nfs_mount_options"]["default"]) == clouds.get(cloud).nfs_mount_options
    assert defaults["system_disk"]["category"] in choices["system_disk_categories"]
    assert defaults["data_disk"]["category"] in choices["data_disk_categories"]
    assert defaults["data_disk"]["performance_level"] in [None, *choices["performance_levels"]]
    assert defaults["nas"]["type"] in choices["nas_types"]


@pytest.mark.parametrize("cloud", CLOUDS)
def test_module_size_ranges_are_the_rooms_limits(cloud):
    room = clouds.get(cloud)
    expected = {"node_count": spec_bounds(ClusterSpec, "nodes"),
                "system_disk.size_gb": room.disks.system_size,
                "data_disk.size_gb": widest(room.disks.data_size)}
    if room.nas and room.nas.size:
        expected["nas.size_gb"] = widest(room.nas.size)
    found = ranges(cloud)
    assert {path: limits for path, (limits, _) in found.items()} == expected
    for path, ((low, high), message) in found.items():
        assert f"from {low} to {high}" in message, f"{cloud}: {path}: {message}"


@pytest.mark.parametrize("cloud", CLOUDS)
def test_room_disk_and_nas_rules_name_only_catalog_choices(cloud):
    rules, nas, choices = clouds.get(cloud).disks, clouds.get(cloud).nas, load_catalog(clouds.get(cloud)).choices
    data, system = set(choices["data_disk_categories"]), set(choices["system_disk_categories"])
    assert set(rules.data_size) - {"*"} <= data
    assert set(rules.leveled_categories) <= data
    assert set(rules.level_min_size) == (set(choices["performance_levels"]) if rules.leveled_categories
                                         else set())
    for family, allowed in rules.family_categories.items():
        assert set(allowed) <= data & system, family
    assert set(nas.size if nas else {}) <= set(choices["nas_types"])


def test_the_parsers_see_every_kind_of_block():
    """The regexes above match the module's syntax: a module without them would pass vacuously."""
    for cloud in CLOUDS:
        assert len(enums(cloud)) == 5 and len(ranges(cloud)) >= 2, cloud


def test_the_alicloud_module_knows_the_rooms_erdma_types():
    """The module puts eRDMA types' NIC in HighPerformance mode with jumbo frames; the network role
    (from the room's erdma_types) sets them up: one list, kept equal here."""
    from trainkit import clouds

    main = hcl2.loads((MODULES / "alicloud" / "main.tf").read_text())
    prefixes = next(item["erdma_type_prefixes"] for item in main["locals"] if "erdma_type_prefixes" in item)
    assert tuple(p.strip('"') for p in prefixes) == clouds.get("alicloud").erdma_types

