"""The clusters this machine knows: a small registry of workspaces, so that every command takes a
cluster NAME where it takes a SPEC, and `trainkit status` alone lists them (as `sky status` does).

Where: `$TRAINKIT_STATE_DIR/clusters.json`, else `$XDG_STATE_HOME/trainkit/clusters.json`, else
`~/.local/state/trainkit/clusters.json` (the XDG Base Directory Specification's state home: "data
that should persist between restarts but is not important or portable enough" for the data home).

What: one entry per workspace folder (records.KnownCluster): the folder, the cluster's name, the
spec's absolute path and sha256 at the last apply, the target, when the last apply started and
when the last destroy ended. `apply` writes an entry before it creates anything (a failed apply is
listed: it may bill), `destroy` stamps it; an entry whose folder is gone is pruned when the list is
read for `trainkit status`. A workspace's own records stay the truth about the cluster; this file
only says where the workspaces are, and is never needed to run a command on a spec path.

Names are data: a NAME typed on the command line is only compared with the names stored here; the
folder it leads to is the one the entry holds (absolute, checked when read), never a path built
from the name. The same name in two folders (two checkouts, a --workdir) is two entries: `find`
takes the one --workdir names, else the current folder's default `.trainkit/NAME`, else refuses,
listing both.

Reading never crashes on a damaged file (InputError naming it and the fix) and never calls a cloud.
"""

from __future__ import annotations

import contextlib
import difflib
import fcntl
import hashlib
import os
import re
import time
from pathlib import Path
from typing import Callable, Iterator

from trainkit import records
from trainkit.errors import InputError
from trainkit.records import Clusters, KnownCluster
from trainkit.util.paths import local_path
from trainkit.workspace import DEFAULT_BASE, write_atomic

# The spec's `name:` rule (trainkit/spec/schema.py ClusterSpec.name): a word that matches it and is
# not an existing file is looked up as a cluster name; anything else is a path.
NAME = re.compile(r"[a-z][a-z0-9-]{1,28}[a-z0-9]")

FIX = ("clusters.json is trainkit's list of the workspaces on this machine (no cluster is in it): "
       "delete it, or restore it from a backup; a cluster reappears in the list when you next run "
       "`trainkit apply SPEC` (commands given a spec path work without it)")


def state_dir() -> Path:
    """$TRAINKIT_STATE_DIR, else $XDG_STATE_HOME/trainkit, else ~/.local/state/trainkit."""
    env = os.environ.get("TRAINKIT_STATE_DIR")
    if env:
        return local_path(env)
    base = os.environ.get("XDG_STATE_HOME") or os.path.join(os.path.expanduser("~"), ".local", "state")
    return local_path(base) / "trainkit"


def path() -> Path:
    return state_dir() / "clusters.json"


def is_name(word: str) -> bool:
    """Whether `word` can be a cluster name (the spec's `name:` rule); a path never is one that
    exists, and the caller tries the path first."""
    return NAME.fullmatch(word) is not None


def read() -> list[KnownCluster]:
    """The entries as written ([] when there is no file); InputError naming the file for any damage:
    not JSON, the wrong shape, a newer version, an entry whose name or folder is not one trainkit
    writes (a relative folder, `..`, a name that is no cluster name)."""
    file = path()
    known = records.load(file, Clusters, FIX)
    entries = known.clusters if known else []
    for i, entry in enumerate(entries):
        folder = Path(entry.workspace)
        if not is_name(entry.name) or not folder.is_absolute() or ".." in folder.parts \
                or not Path(entry.spec).is_absolute():
            raise InputError(f"{file}: entry {i} ({entry.name!r} in {entry.workspace!r}) is not one trainkit "
                             "writes (a cluster name, an absolute workspace folder and spec path)", fix=FIX)
    return entries


def known_names() -> set[str]:
    """The names of the clusters whose workspace is still there; empty when the file is damaged
    (for guesses about a word typed, never for acting on a cluster)."""
    try:
        return {e.name for e in read() if Path(e.workspace).is_dir()}
    except InputError:
        return set()


@contextlib.contextmanager
def _locked() -> Iterator[None]:
    """Hold clusters.lock (flock) while a read-modify-write runs: two applies at once keep both."""
    folder = state_dir()
    try:
        folder.mkdir(parents=True, exist_ok=True, mode=0o700)
        fh = open(folder / "clusters.lock", "a")
    except OSError as err:
        raise InputError(f"{folder}: cannot write trainkit's list of clusters there ({err.strerror})",
                         fix="make it a folder you can write, or set TRAINKIT_STATE_DIR to one") from None
    with fh:
        fcntl.flock(fh, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(fh, fcntl.LOCK_UN)


def _update(change: Callable[[list[KnownCluster]], list[KnownCluster]]) -> list[KnownCluster]:
    """Read, change and write back the entries under the lock; returns them as written (the file is
    not rewritten when nothing changed)."""
    with _locked():
        entries = read()
        changed = change([e.model_copy() for e in entries])
        if changed != entries:
            write_atomic(path(), records.dump(Clusters(clusters=changed), indent=1, sort_keys=True))
        return changed


def _key(folder: str | Path) -> str:
    """A workspace folder as entries hold it: absolute, links resolved (a folder reached through a
    symbolic link, as /tmp is on some systems, is one entry)."""
    return str(local_path(folder))


def sha256(spec: Path) -> str:
    """The spec file's sha256 ("" when it cannot be read)."""
    try:
        return hashlib.sha256(spec.read_bytes()).hexdigest()
    except OSError:
        return ""


def remember_apply(name: str, workspace: Path, spec: str | Path, target: str,
                   now: float | None = None) -> KnownCluster | None:
    """Record that `apply` starts for cluster `name` in `workspace` from `spec` (its absolute path
    and sha256 are kept; an entry for the folder is replaced). Returns the entry it replaced, or
    None (for `restore`, when the apply turns out to change nothing)."""
    spec_path = Path(spec).absolute()
    entry = KnownCluster(workspace=_key(workspace), name=name, spec=str(spec_path), spec_sha256=sha256(spec_path),
                         target=target, apply_started_at=time.time() if now is None else now)

    before: list[KnownCluster] = []

    def change(entries: list[KnownCluster]) -> list[KnownCluster]:
        before[:] = [e for e in entries if e.workspace == _key(workspace)]
        return [e for e in entries if e.workspace != _key(workspace)] + [entry]
    _update(change)
    return before[0] if before else None


def restore(workspace: Path, entry: KnownCluster | None) -> None:
    """Put back the entry of `workspace` as it was before `remember_apply` (None: no entry)."""
    def change(entries: list[KnownCluster]) -> list[KnownCluster]:
        return [e for e in entries if e.workspace != _key(workspace)] + ([entry] if entry else [])
    _update(change)


def remember_destroy(workspace: Path, now: float | None = None) -> None:
    """Stamp the entry of `workspace` (if any) with the end of a destroy that left nothing."""
    when = time.time() if now is None else now

    def change(entries: list[KnownCluster]) -> list[KnownCluster]:
        for e in entries:
            if e.workspace == _key(workspace):
                e.destroyed_at = when
        return entries
    _update(change)


def repoint(workspace: Path, spec: str | Path) -> bool:
    """When the spec remembered for `workspace` is gone and a command was given `spec` for that
    workspace, remember `spec` from now on (a moved spec is followed once named). True if changed."""
    spec_path = str(Path(spec).absolute())
    if not any(e.workspace == _key(workspace) and e.spec != spec_path and not Path(e.spec).exists()
               for e in read()):
        return False  # the common case: nothing to write, no lock taken
    moved: list[bool] = []

    def change(entries: list[KnownCluster]) -> list[KnownCluster]:
        for e in entries:
            if e.workspace == _key(workspace) and e.spec != spec_path and not Path(e.spec).exists():
                e.spec = spec_path
                moved.append(True)
        return entries
    _update(change)
    return bool(moved)


def listed() -> list[KnownCluster]:
    """The entries whose workspace folder still exists, by name then folder; the others are pruned
    from the file (a removed workspace is a forgotten cluster). No file: [] (nothing is created)."""
    if not path().exists():
        return []
    entries = _update(lambda entries: [e for e in entries if Path(e.workspace).is_dir()])
    return sorted(entries, key=lambda e: (e.name, e.workspace))


def find(name: str, workdir: str | Path | None = None, cwd: Path | None = None) -> KnownCluster:
    """The entry for cluster `name` (read only; folders that are gone are skipped). With `workdir`:
    the entry of that folder. Two folders with the name: the current folder's default workspace
    (`.trainkit/NAME` under `cwd`), else InputError listing both. No entry: InputError naming the
    close names (difflib) and the known ones."""
    entries = [e for e in read() if Path(e.workspace).is_dir()]
    found = [e for e in entries if e.name == name]
    if workdir:
        found = [e for e in found if _key(e.workspace) == _key(workdir)]
    if not found:
        raise InputError(*_unknown(name, workdir, entries))
    if len(found) > 1:
        here = _key(local_path(cwd or Path.cwd()) / DEFAULT_BASE / name)
        found = [e for e in found if _key(e.workspace) == here] or found
    if len(found) > 1:
        folders = ", ".join(e.workspace for e in found)
        raise InputError(f"cluster name {name!r} is known in {len(found)} workspaces: {folders}",
                         fix=f"say which: add --workdir {found[0].workspace} (or give the spec's path)")
    return found[0]


def _unknown(name: str, workdir, entries: list[KnownCluster]) -> tuple[str, str]:
    names = sorted({e.name for e in entries})
    where = f" in workspace {local_path(workdir)}" if workdir else ""
    close = difflib.get_close_matches(name, names, n=3, cutoff=0.6)
    hint = f"did you mean {', '.join(close)}? " if close else ""
    known = f"known clusters: {', '.join(names)}" if names else \
        "no cluster is known on this machine yet (`trainkit apply SPEC` adds one)"
    return (f"{name!r} is neither a spec file nor a cluster known{where} on this machine",
            f"{hint}{known}; or give the spec file's path")


def spec_of(entry: KnownCluster) -> tuple[Path, str]:
    """(the spec's path, a note: "" or what changed since the last apply). InputError when the
    spec is gone (moved or deleted): commands need it, and guessing another file would be worse."""
    spec = Path(entry.spec)
    if not spec.is_file():
        raise InputError(f"cluster {entry.name}: its spec {spec} is gone (moved or deleted since it was "
                         f"applied{_when(entry.apply_started_at)})",
                         fix=f"give the spec's new path once, e.g. `trainkit status NEW/PATH.yaml --workdir "
                             f"{entry.workspace}`, and the name {entry.name} follows it from then on")
    if entry.spec_sha256 and sha256(spec) != entry.spec_sha256:
        return spec, (f"{spec} changed since cluster {entry.name} was applied{_when(entry.apply_started_at)}: "
                      "this command uses it as it is now (`trainkit plan` shows what the change does)")
    return spec, ""


def _when(at: float | None) -> str:
    return f" at {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime(at))}" if at else ""
