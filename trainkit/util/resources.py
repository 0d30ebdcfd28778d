"""Where trainkit's data lives: Terraform modules, templates, Ansible playbooks, examples.

An installed trainkit (a wheel) carries them as package data under `trainkit/_data/`, laid out like
the repository root (`terraform/`, `templates/`, `ansible/`, `examples/`; setup.py copies them in
at build time). A source checkout or an editable install has no `_data/`: the repository root is
used. Nothing here depends on the current folder.

    data_root()          -> Path      the folder holding terraform/ templates/ ansible/ examples/
    source_tree()        -> Path|None the repository root when running from a checkout
    data_path(*parts)    -> Path      a path under it (MissingToolError when absent: a broken install)
    examples()           -> dict      {"clusters": {name: Path}, "train": {name: Path}}
    copy_examples(dest)  -> list      copy them under dest (`examples --copy`), never through a link
    train_config(value)  -> Path      a file path, or the name of a built-in training config
"""

from __future__ import annotations

import os
import shutil
from importlib import resources
from pathlib import Path

from trainkit.errors import InputError, MissingToolError
from trainkit.util.links import refuse_link

DATA_FOLDERS = ("terraform", "templates", "ansible", "examples", "docs")
DEFAULT_TRAIN_CONFIG = "digits"   # examples/train/digits.yaml, shipped with the package


def data_root() -> Path:
    """The packaged `_data/` folder when it exists, else the source tree this module sits in."""
    packaged = Path(str(resources.files("trainkit") / "_data"))
    if (packaged / "terraform").is_dir():
        return packaged
    return source_tree() or packaged


def source_tree() -> Path | None:
    """The repository root when trainkit runs from a checkout (pyproject.toml beside the package)."""
    root = Path(__file__).resolve().parents[2]  # trainkit/util/resources.py -> the checkout
    return root if (root / "pyproject.toml").is_file() and (root / "trainkit").is_dir() else None


def data_path(*parts: str) -> Path:
    """`data_root()/parts...`; MissingToolError when that file or folder is not there."""
    path = data_root().joinpath(*parts)
    if not path.exists():
        raise MissingToolError(f"trainkit's package data is incomplete: {path} is missing",
                               fix="reinstall trainkit from a wheel built by `pip wheel .` in the "
                                   "repository, or run it from a full checkout")
    return path


def examples() -> dict[str, dict[str, Path]]:
    """The built-in example files by kind and name: {"clusters": {"local": Path, ...}, "train": ...}."""
    root = data_root() / "examples"
    return {kind: {p.stem: p for p in sorted((root / kind).glob("*.yaml"))}
            for kind in ("clusters", "train")}


def example_files() -> dict[str, Path]:
    """Every file the examples folder ships, by its path under examples/ ("clusters/local.yaml",
    "custom/train.py", "ci/gitlab-ci.yml", ...): what `trainkit examples --copy` copies."""
    root = data_root() / "examples"
    return {p.relative_to(root).as_posix(): p for p in sorted(root.rglob("*"))
            if p.is_file() and "__pycache__" not in p.parts}


def copy_examples(dest: Path) -> list[str]:
    """Copy every example file (example_files) under `dest`, keeping files already there; returns
    the paths copied. InputError (exit 2), before writing that file, when a link lies on its path
    below `dest` (a dangling `dest/clusters/local.yaml` would be written through to where it
    points); the file is created with O_EXCL, which never follows a link either. OSError passes."""
    copied = []
    for rel, src in example_files().items():
        refuse_link(dest, rel, "`examples --copy` would write an example there")
        target = dest / rel
        target.parent.mkdir(parents=True, exist_ok=True)
        try:
            fd = os.open(target, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644)
        except FileExistsError:
            continue  # the user's copy is kept
        with os.fdopen(fd, "wb") as out, open(src, "rb") as data:
            shutil.copyfileobj(data, out)
        shutil.copystat(src, target)
        copied.append(rel)
    return copied


def docs() -> dict[str, Path]:
    """The guides shipped with trainkit by name ("training" -> docs/training.md): `trainkit docs`."""
    return {p.stem: p for p in sorted((data_root() / "docs").glob("*.md"))}


def train_config(value: str | Path | None) -> Path:
    """A training config: an existing file, else a built-in name (`digits`); None = the default.

    InputError naming the value and the built-in names when it is neither.
    """
    value = DEFAULT_TRAIN_CONFIG if value is None else value
    path = Path(value).expanduser()
    if path.is_file():
        return path
    builtin = examples()["train"]
    if str(value) in builtin:
        return builtin[str(value)]
    raise InputError(f"--config {value}: no such file and no built-in training config of that name",
                     fix=f"give a YAML file, or one of: {', '.join(builtin) or '(none shipped)'} "
                         "(`trainkit examples` lists them)")
