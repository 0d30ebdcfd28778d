"""Symbolic links in folders trainkit writes: found before a write, never followed by one.

A workspace, a rendered stack and an `examples --copy` destination are folders trainkit fills and
empties. A link inside one that trainkit did not make (`terraform/modules` pointing at the user's
own module folder, a dangling `clusters/local.yaml`) would turn a write or an unlink there into one
in the folder it points at: the user's files overwritten or deleted. The folder itself is the
user's choice and may be a link; everything below it is checked.

    link_below(root, rel)       the first link among root/rel's components below root, or None
    links_under(root, skip)     every link under root (not descending into links or `skip` names)
    refuse_link(root, rel, ...) InputError (exit 2) naming the link and the fix, when there is one
"""

from __future__ import annotations

import os
from pathlib import Path

from trainkit.errors import InputError


def link_below(root: Path, rel: str | os.PathLike) -> Path | None:
    """The first component of `root/rel` below `root` that is a symbolic link (dangling or not),
    or None. Components that do not exist yet are not links."""
    path = root
    for part in Path(rel).parts:
        path = path / part
        if path.is_symlink():
            return path
    return None


def links_under(root: Path, skip: tuple[str, ...] = ()) -> list[Path]:
    """Every symbolic link under `root`, sorted; links are not followed, and folders named in
    `skip` (at any depth) are not entered. [] when root is not a folder."""
    found: list[Path] = []
    if root.is_symlink() or not root.is_dir():
        return found
    for folder, dirs, files in os.walk(root):  # os.walk lists a linked folder in dirs, never enters it
        for name in sorted(dirs + files):
            path = Path(folder) / name
            if path.is_symlink():
                found.append(path)
        dirs[:] = [d for d in dirs if d not in skip and not (Path(folder) / d).is_symlink()]
    return sorted(found)


def describe(link: Path) -> str:
    """`path (a link to TARGET)` for messages."""
    try:
        target = os.readlink(link)
    except OSError:
        target = "?"
    return f"{link} (a link to {target})"


def refuse_link(root: Path, rel: str | os.PathLike, what: str) -> None:
    """InputError (exit 2) when a component of `root/rel` below `root` is a symbolic link: `what`
    (e.g. "render writes the module copy there") says what trainkit would have done through it."""
    link = link_below(root, rel)
    if link is not None:
        raise InputError(f"{describe(link)}: {what}, and trainkit never writes or deletes through a "
                         "link it did not make (the files it points to would be overwritten or deleted)",
                         fix=f"remove the link (`rm {link}` removes only the link, not what it points "
                             "to) or replace it with a copy, then run the command again")
