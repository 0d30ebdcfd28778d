"""The one place user paths are normalised before any rule judges them.

A rule such as "never a system folder" or "at least two levels deep" is only as good as the
spelling it sees: `/./opt`, `//etc`, `/etc/.` and `/opt/` all name a system folder. Every path
field goes through one of these first and the rules apply to what comes out.

    node_path(value)   a path on a node (not on this machine): `//`, `.` and a trailing `/`
                       collapsed lexically; `..` is kept for the caller to refuse (on the node a
                       symlink may make `a/..` something other than the folder `a` is in)
    local_path(value)  a path on this machine: `~` expanded, made absolute, `..`, `.` and `//`
                       resolved and symlinks followed where they exist
    check_workdir(root, given)  InputError for a --workdir that is /, the home folder, or the
                       current folder or one above it
"""

from __future__ import annotations

import os
import re
from pathlib import Path

from trainkit.errors import InputError

_SLASHES = re.compile(r"/{2,}")


def node_path(value: str) -> str:
    """`value` with repeated slashes, `.` components and a trailing slash removed (lexical only)."""
    parts = [p for p in _SLASHES.sub("/", value).split("/") if p not in ("", ".")]
    lead = "/" if value.startswith("/") else ""
    return (lead + "/".join(parts)) or ("/" if lead else ".")


def local_path(value: str | os.PathLike) -> Path:
    """`value` as the folder it really is on this machine: `~` expanded, absolute, symlinks and
    `..` resolved (components that do not exist yet are kept as spelled, normalised)."""
    return Path(os.path.realpath(os.path.expanduser(os.fspath(value))))


def check_workdir(root: Path, given: str | os.PathLike) -> None:
    """InputError when `root` (a --workdir, resolved) is /, the home folder, or the current folder
    or one above it: destroy removes what it wrote there, and those folders hold everything else."""
    home, here = local_path("~"), local_path(".")
    why = ("/" if root == Path("/") else "your home folder" if root == home
           else "a folder above your home folder" if root in home.parents
           else "the current folder" if root == here
           else "a folder above the current folder" if root in here.parents else "")
    if why:
        shown = f"{given} (= {root})" if str(given) != str(root) else str(root)
        raise InputError(f"--workdir {shown} is {why}; a workspace must be a folder of its own",
                         fix="give --workdir a new folder, e.g. --workdir .trainkit/<cluster name> "
                             "(or drop --workdir)")
