"""The commit a file belongs to, read from the repository's files (no git binary is run).

    commit_of(path) -> str | None   the 40-hex commit HEAD names in the git checkout holding
                                    `path`, or None (no checkout, a bare or unreadable one)

Follows what git itself stores (git docs, "gitrepository-layout"): `.git` is a folder, or a file
`gitdir: PATH` (worktrees, submodules) whose folder may name a `commondir`; HEAD holds a commit
or `ref: refs/heads/NAME`, found as a loose ref file or a line of `packed-refs`.
"""

from __future__ import annotations

import re
from pathlib import Path

_HEX = re.compile(r"[0-9a-f]{40}|[0-9a-f]{64}")  # SHA-1 or SHA-256 object names


def commit_of(path: str | Path) -> str | None:
    """HEAD's commit of the checkout holding `path`; None when there is none or it is unreadable."""
    try:
        gitdir = _gitdir(Path(path).absolute())
        if gitdir is None:
            return None
        head = (gitdir / "HEAD").read_text().strip()
        if _HEX.fullmatch(head):
            return head
        if not head.startswith("ref: "):
            return None
        return _ref(gitdir, head[5:].strip())
    except (OSError, UnicodeDecodeError):
        return None


def _gitdir(start: Path) -> Path | None:
    for folder in [start, *start.parents]:
        dot = folder / ".git"
        if dot.is_dir():
            return dot
        if dot.is_file():
            text = dot.read_text().strip()
            if text.startswith("gitdir: "):
                found = Path(text[8:].strip())
                return found if found.is_absolute() else (folder / found).resolve()
            return None
    return None


def _ref(gitdir: Path, ref: str) -> str | None:
    common = gitdir
    if (gitdir / "commondir").is_file():  # a worktree: branches live in the main repository
        common = (gitdir / (gitdir / "commondir").read_text().strip()).resolve()
    for base in (gitdir, common):
        loose = base / ref
        if loose.is_file():
            value = loose.read_text().strip()
            return value if _HEX.fullmatch(value) else None
    packed = common / "packed-refs"
    if packed.is_file():
        for line in packed.read_text().splitlines():
            parts = line.split()
            if len(parts) == 2 and parts[1] == ref and _HEX.fullmatch(parts[0]):
                return parts[0]
    return None
