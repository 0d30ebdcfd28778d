"""make test's scheduling (tests/xdist_groups.py): every module that builds namespace hosts starts
in the first group. A module that does not (the fault matrix's, which build them through
tests/e2e/faultbench.py, once ranked with the short e2e modules) ran last and made the whole
run wait for it."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.unit

TESTS = Path(__file__).resolve().parents[1]


def _load(path: Path):
    spec = importlib.util.spec_from_file_location(path.stem + "_under_test", path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module   # its dataclasses look their module up there
    spec.loader.exec_module(module)
    return module


def test_every_module_with_a_netns_slot_starts_first_and_the_fault_matrix_before_the_rest():
    groups = _load(TESTS / "xdist_groups.py")
    slots = _load(TESTS / "e2e" / "netns.py").MODULE_SLOTS
    ranks = {name: groups.rank(str(TESTS / "e2e" / f"{name}.py")) for name in slots}
    assert all((TESTS / "e2e" / f"{name}.py").is_file() for name in slots), slots
    assert {n: r for n, r in ranks.items() if n.startswith("test_fault_matrix")} == {
        "test_fault_matrix": 0, "test_fault_matrix_control": 0}
    assert max(ranks.values()) <= 1, ranks
    assert groups.rank(str(TESTS / "infra" / "test_aws_faults.py")) > 1   # the moto modules come after
