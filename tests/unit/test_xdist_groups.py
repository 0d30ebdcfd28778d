"""make test's scheduling (tests/xdist_groups.py): modules start longest first by their measured
time. A table that names a module that no longer exists (renamed, split) would quietly send its
successor to the end of the run with the default, as the fault matrix once ran last and made the
whole run wait for it."""

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


def test_every_measured_module_exists_and_the_longest_start_first():
    groups = _load(TESTS / "xdist_groups.py")
    assert all((TESTS / name).is_file() for name in groups.MEASURED_S), [
        n for n in groups.MEASURED_S if not (TESTS / n).is_file()]
    order = sorted((TESTS / n for n in [*groups.MEASURED_S, "infra/test_checkov.py"]),
                   key=lambda p: groups.rank(str(p)))
    assert order[0].name == "test_aws_faults.py"
    assert order[-1].name == "test_checkov.py"   # unlisted: the default, after every listed one
    assert min(groups.MEASURED_S.values()) > groups.DEFAULT_S

