"""The trainkit wheel an installed trainkit ships to the nodes (no source tree needed).

A source checkout builds its wheel with pip (`node_wheel`). An installed
trainkit has no pyproject.toml to build from, but its site-packages files ARE an unpacked wheel
(PEP 427: the package plus its .dist-info with METADATA, WHEEL and entry points): `repack_installed`
zips them again with a fresh RECORD. Same installed files -> same wheel path (cached by digest).
"""

from __future__ import annotations

import base64
import hashlib
import re
import shutil
import subprocess
import sys
import tempfile
import zipfile
from importlib import metadata
from pathlib import Path

from trainkit.errors import PROVISION, TrainkitError
from trainkit.util import resources
from trainkit.util.dist import DISTRIBUTION

# Written by the installer, not part of the wheel (PEP 376 / PEP 610 / PEP 627).
INSTALLER_FILES = ("RECORD", "INSTALLER", "REQUESTED", "direct_url.json")


def _wheel_files(dist: metadata.Distribution) -> list[tuple[str, Path]]:
    """(archive name, installed path) of every file of the wheel, sorted."""
    out = []
    for rel in dist.files or []:
        name = str(rel).replace("\\", "/")
        if name.startswith("..") or "__pycache__" in name or name.endswith(".pyc"):
            continue  # scripts outside site-packages and bytecode the installer compiled
        if ".dist-info/" in name and name.rsplit("/", 1)[-1] in INSTALLER_FILES:
            continue
        path = Path(str(dist.locate_file(rel)))
        if path.is_file():
            out.append((name, path))
    return sorted(out)


def _record_hash(data: bytes) -> str:
    digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
    return f"sha256={digest}"


def repack_installed(out_root: Path, name: str = DISTRIBUTION) -> Path:
    """The installed distribution `name` as a wheel under out_root/<digest>/; reused when present."""
    dist = metadata.distribution(name)
    files = _wheel_files(dist)
    h = hashlib.sha256()
    for arc, path in files:
        h.update(arc.encode() + b"\0" + path.read_bytes() + b"\0")
    out = out_root / h.hexdigest()[:16]
    wheel = out / f"{_wheel_name(name)}-{dist.version}-py3-none-any.whl"
    if wheel.is_file():
        return wheel
    dist_info = next(arc.split("/", 1)[0] for arc, _ in files if ".dist-info/" in arc)
    out.mkdir(parents=True, exist_ok=True)
    tmp = wheel.with_suffix(".tmp")
    records = []
    with zipfile.ZipFile(tmp, "w", zipfile.ZIP_DEFLATED) as zf:
        for arc, path in files:
            data = path.read_bytes()
            zf.writestr(arc, data)
            records.append(f"{arc},{_record_hash(data)},{len(data)}")
        records.append(f"{dist_info}/RECORD,,")
        zf.writestr(f"{dist_info}/RECORD", "\n".join(records) + "\n")
    tmp.replace(wheel)
    return wheel


def node_wheel(out_root: Path, source: Path | None = None) -> Path:
    """The trainkit wheel for the nodes under `out_root/<hash>/`: built with pip from a clean copy
    of the source tree (no stale build/ leftovers), or, for an installed trainkit with no source
    tree, its installed files repacked (repack_installed). Reused while the sources are unchanged."""
    source = source or resources.source_tree()
    if source is None:
        return repack_installed(out_root)
    digest = _source_digest(source)
    out = out_root / digest
    found = sorted(out.glob(f"{_wheel_name(DISTRIBUTION)}-*.whl")) if out.is_dir() else []
    if found:
        return found[0]
    with tempfile.TemporaryDirectory(prefix="trainkit-wheel-") as tmp:
        src = Path(tmp) / "src"
        shutil.copytree(source / "trainkit", src / "trainkit",
                        ignore=shutil.ignore_patterns("__pycache__", "*.pyc"))
        for name in ("pyproject.toml", "README.md"):
            if (source / name).is_file():
                shutil.copy2(source / name, src / name)
        proc = subprocess.run([sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation",
                               "--no-index", "-q", "-w", str(Path(tmp) / "dist"), str(src)],
                              capture_output=True, text=True)
        wheels = sorted((Path(tmp) / "dist").glob(f"{_wheel_name(DISTRIBUTION)}-*.whl"))
        if proc.returncode != 0 or not wheels:
            raise TrainkitError(f"building the trainkit wheel failed: {proc.stderr.strip()[-800:]}",
                                fix="pip install setuptools wheel into this Python", exit_code=PROVISION)
        out.mkdir(parents=True, exist_ok=True)
        return Path(shutil.copy2(wheels[0], out / wheels[0].name))


def _wheel_name(distribution: str) -> str:
    """A distribution's name as its wheel file spells it (PEP 427: runs of -_. become _)."""
    return re.sub(r"[-_.]+", "_", distribution)


def _source_digest(source: Path) -> str:
    h = hashlib.sha256()
    files = sorted(p for p in (source / "trainkit").rglob("*")
                   if p.is_file() and "__pycache__" not in p.parts and p.suffix != ".pyc")
    for p in files + [source / "pyproject.toml"]:
        h.update(str(p.relative_to(source)).encode() + b"\0" + p.read_bytes() + b"\0")
    return h.hexdigest()[:16]
