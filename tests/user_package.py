"""A user's own package of builders, importable for one test (as `pkg.module:builder` names it)."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Iterator


def installed(root: Path, monkeypatch, package: str, module: str, source: str) -> Iterator[str]:
    """Write root/package/module.py, put root on sys.path, yield 'package.module'; forget it after."""
    (root / package).mkdir()
    (root / package / "__init__.py").write_text("")
    (root / package / f"{module}.py").write_text(source)
    monkeypatch.syspath_prepend(str(root))
    yield f"{package}.{module}"
    for name in [m for m in sys.modules if m == package or m.startswith(package + ".")]:
        del sys.modules[name]
