"""Data staging: bring a `data:` section's sources (trainkit/staging/section.py) onto the node's
data disk (or the NAS), once.

    data:
      target: disk            # disk (each node) | nas (once, on the head node)
      connections: 10         # parallel range requests in all (the field guide's 10)
      sources:
        - url: s3://bucket/datasets/digits/   # s3 oss cos obs (S3-compatible) or https
          name: digits                        # folder under the data root (default: last part)
          sha256: null                        # single objects: checked when given
          unpack: true                        # .tar .tar.gz .tgz .zip are unpacked in place

Contract of `stage(section, root)`: every object lands at root/<name>/<rel> complete and verified
(sha256 when given, else size + the ETag when it is a plain MD5, else size), or StageError is
raised and no partial file is left under its final name. Objects are split into `chunk_mb` ranges
fetched by a pool of `connections` threads (several objects at once, many ranges per object); each
finished range is recorded in <file>.part.json, so an interrupted run resumes where it stopped.
Files already present with a matching record in root/<name>/.trainkit-staged.json are skipped.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import sys
import tarfile
import threading
import time
import zipfile
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path, PurePosixPath
from typing import Any, Callable

from trainkit.errors import InputError, TrainkitError
from trainkit.staging.section import DataSection, Source, folder_name
from trainkit.staging.stores import Remote, open_store

MARKER = ".trainkit-staged.json"
ARCHIVES = (".tar.gz", ".tgz", ".tar", ".zip")


class StageError(TrainkitError):
    """A source could not be staged (unreachable, or its bytes failed the integrity check)."""


# ---------------------------------------------------------------- pure planning

def plan_ranges(size: int, chunk: int) -> list[tuple[int, int]]:
    """Inclusive byte ranges of at most `chunk` bytes covering [0, size)."""
    return [(s, min(s + chunk, size) - 1) for s in range(0, size, chunk)]


def destination(root: Path, src: Source, obj: Remote) -> Path:
    """root/<folder>/<rel>: where `obj` lands. StageError when a name from the store (an object
    key with '..' or a leading '/') or from the URL would put it outside that folder."""
    folder, rel = folder_name(src), PurePosixPath(obj.rel)
    if folder in (".", "..") or str(rel) in ("", ".") or rel.is_absolute() or ".." in rel.parts:
        raise StageError(f"{src.url}: object {obj.key!r} would be written outside {root / folder}; "
                         "nothing was downloaded",
                         fix="rename the object (no '..' or leading '/' in keys) or give the data "
                             "item a `name:`")
    return root / folder / rel


def is_archive(rel: str) -> bool:
    return rel.lower().endswith(ARCHIVES)


def expected_md5(etag: str | None) -> str | None:
    """The ETag is the object's MD5 only for single-part uploads: 32 hex digits, no '-N' suffix."""
    if etag and len(etag) == 32 and all(c in "0123456789abcdef" for c in etag.lower()):
        return etag.lower()
    return None


def record(obj: Remote, sha256: str | None) -> dict[str, Any]:
    return {"size": obj.size, "etag": obj.etag, "sha256": sha256}


# ---------------------------------------------------------------- the stager

class Progress:
    """Bytes done over the total, printed at most once a second (stderr)."""

    def __init__(self, total: int, out=None) -> None:
        self.total, self.done, self.out = total, 0, out or sys.stderr  # the stream now, not at import
        self.t0 = self.last = time.monotonic()
        self.lock = threading.Lock()

    def add(self, n: int) -> None:
        with self.lock:
            self.done += n
            now = time.monotonic()
            if now - self.last >= 1 or self.done >= self.total:
                self.last = now
                rate = self.done / max(now - self.t0, 1e-6) / 2**20
                print(f"  staged {self.done / 2**20:.1f} / {self.total / 2**20:.1f} MiB "
                      f"({rate:.1f} MiB/s)", file=self.out, flush=True)


def stage(section: DataSection, root: Path, store_factory: Callable = open_store) -> list[dict[str, Any]]:
    """Stage every source under `root`; returns one row per object (rel, size, status)."""
    jobs = []
    for src in section.sources:
        store = store_factory(src.url, src.endpoint, src.region)
        objects = store.list()
        if src.sha256 and len(objects) != 1:
            raise InputError(f"data source {src.url}: sha256 given but it names {len(objects)} objects",
                             fix="give sha256 only for a single object")
        jobs += [(src, store, obj) for obj in objects]
    rows, todo = [], []
    dests = [destination(root, src, obj) for src, _, obj in jobs]  # all checked before any download
    for (src, store, obj), dest in zip(jobs, dests):
        if _present(dest, obj, src.sha256):
            rows.append({"path": str(dest), "size": obj.size, "status": "present"})
        else:
            todo.append((src, store, obj, dest))
    chunk = max(1, int(section.chunk_mb * 2**20))
    progress = Progress(sum(o.size for _, _, o, _ in todo))
    with ThreadPoolExecutor(section.connections) as pool:
        pending = [(job, _start(pool, job[1], job[2], job[3], chunk, progress)) for job in todo]
        try:
            for (src, _, obj, dest), part in pending:
                part.wait()
                _finish(dest, obj, src, part)
                rows.append({"path": str(dest), "size": obj.size, "status": "downloaded",
                             "resumed_bytes": part.resumed})
        finally:  # an error: let in-flight ranges land (they are recorded for the resume), close files
            for _, part in pending:
                part.close()
    for src in section.sources:
        _unpack_all(root / folder_name(src), src)
    return rows


def _marker(folder: Path) -> dict[str, Any]:
    try:
        return json.loads((folder / MARKER).read_text())
    except (OSError, ValueError):
        return {}


def _present(dest: Path, obj: Remote, sha256: str | None) -> bool:
    """Already staged: the file has the right size and the marker records this very object."""
    folder = dest.parent
    rel = dest.name
    if not dest.is_file() or dest.stat().st_size != obj.size:
        return False
    rec = _marker(folder).get(rel)
    if rec is None or rec.get("size") != obj.size or rec.get("etag") != obj.etag:
        return False
    return sha256 is None or _hash(dest, "sha256") == sha256


def _hash(path: Path, algo: str) -> str:
    h = hashlib.new(algo)
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(2**20), b""):
            h.update(block)
    return h.hexdigest()


class _Part:
    """One object being downloaded into <dest>.part, with finished ranges in <dest>.part.json."""

    def __init__(self, dest: Path, obj: Remote) -> None:
        self.dest, self.obj = dest, obj
        self.path, self.state_path = Path(f"{dest}.part"), Path(f"{dest}.part.json")
        self.lock, self.futures, self.resumed = threading.Lock(), [], 0
        dest.parent.mkdir(parents=True, exist_ok=True)
        state = self._load_state()
        self.done: set[int] = set(state.get("done", [])) if state else set()
        if not state or not self.path.exists():
            self.done = set()
            with open(self.path, "wb") as f:
                f.truncate(obj.size)
        self.fd = os.open(self.path, os.O_RDWR)

    def _load_state(self) -> dict[str, Any] | None:
        try:
            state = json.loads(self.state_path.read_text())
        except (OSError, ValueError):
            return None
        same = state.get("size") == self.obj.size and state.get("etag") == self.obj.etag
        return state if same else None

    def write(self, start: int, data: bytes) -> None:
        os.pwrite(self.fd, data, start)
        with self.lock:
            self.done.add(start)
            tmp = Path(f"{self.state_path}.tmp")
            tmp.write_text(json.dumps({"size": self.obj.size, "etag": self.obj.etag,
                                       "done": sorted(self.done)}))
            os.replace(tmp, self.state_path)

    def wait(self) -> None:
        for fut in self.futures:
            fut.result()

    def close(self) -> None:
        for fut in self.futures:
            fut.exception()  # blocks until done; errors were raised by wait()
        if self.fd is not None:
            os.close(self.fd)
            self.fd = None


def _start(pool, store, obj: Remote, dest: Path, chunk: int, progress: Progress) -> _Part:
    part = _Part(dest, obj)

    def fetch(start: int, end: int) -> None:
        data = store.read(obj.key, start, end)
        if len(data) != end - start + 1:
            raise StageError(f"{obj.key}: range {start}-{end} returned {len(data)} bytes")
        part.write(start, data)
        progress.add(len(data))

    for start, end in plan_ranges(obj.size, chunk):
        if start in part.done:
            part.resumed += end - start + 1
            progress.add(end - start + 1)
        else:
            part.futures.append(pool.submit(fetch, start, end))
    return part


def _finish(dest: Path, obj: Remote, src: Source, part: _Part) -> None:
    """Verify the .part file, then rename it into place and record it in the folder's marker."""
    size = part.path.stat().st_size
    problem = None
    if size != obj.size:
        problem = f"size {size} != {obj.size}"
    elif src.sha256 and (got := _hash(part.path, "sha256")) != src.sha256:
        problem = f"sha256 {got} != {src.sha256}"
    elif not src.sha256 and (md5 := expected_md5(obj.etag)) and (got := _hash(part.path, "md5")) != md5:
        problem = f"MD5 {got} != ETag {md5}"
    if problem:
        part.path.unlink(missing_ok=True)
        part.state_path.unlink(missing_ok=True)
        raise StageError(f"{src.url} ({obj.rel}): corrupted download, {problem}; the partial file "
                         "was removed", fix="run stage again; if it persists, check the source")
    os.replace(part.path, dest)
    part.state_path.unlink(missing_ok=True)
    marker = _marker(dest.parent)
    marker[dest.name] = record(obj, src.sha256)
    (dest.parent / MARKER).write_text(json.dumps(marker, indent=1, sort_keys=True))


def _unpack(archive: Path, rel: str, tmp: Path, folder: Path) -> None:
    """Extract `archive` into `tmp`: the one boundary to tarfile and zipfile. A member that would
    land outside (`../`, an absolute path or link, a link out of the folder, a device) or a damaged
    archive is a StageError naming the archive; `tmp` is removed and nothing is written outside."""
    try:
        if rel.lower().endswith(".zip"):
            with zipfile.ZipFile(archive) as z:
                for name in z.namelist():
                    if name.startswith("/") or "\\" in name or ".." in PurePosixPath(name).parts:
                        raise StageError(f"{archive}: unsafe path {name!r} in the archive; nothing "
                                         "was unpacked", fix="rebuild the archive with relative paths")
                z.extractall(tmp)
        else:
            with tarfile.open(archive) as t:
                t.extractall(tmp, filter="data")  # PEP 706: refuses absolute paths, .., devices
    except (tarfile.TarError, zipfile.BadZipFile, zipfile.LargeZipFile, EOFError, ValueError) as err:
        shutil.rmtree(tmp, ignore_errors=True)
        raise StageError(f"{archive}: cannot be unpacked safely: {err}; nothing was unpacked into {folder}",
                         fix="rebuild the archive with relative member paths and no links out of it "
                             "(or set unpack: false to keep it packed)") from None
    except StageError:
        shutil.rmtree(tmp, ignore_errors=True)
        raise


def _unpack_all(folder: Path, src: Source) -> None:
    """Unpack each archive in `folder` once (marker key `unpacked:<name>`), refusing unsafe paths."""
    if not src.unpack or not folder.is_dir():
        return
    marker = _marker(folder)
    for rel, rec in list(marker.items()):
        if rel.startswith("unpacked:") or not is_archive(rel) or marker.get(f"unpacked:{rel}") == rec:
            continue
        archive = folder / rel
        tmp = folder / f".unpack-{rel}"
        shutil.rmtree(tmp, ignore_errors=True)
        _unpack(archive, rel, tmp, folder)
        for child in tmp.iterdir():
            target = folder / child.name
            if target.is_dir():
                shutil.rmtree(target)
            os.replace(child, target)
        tmp.rmdir()
        marker[f"unpacked:{rel}"] = rec
        (folder / MARKER).write_text(json.dumps(marker, indent=1, sort_keys=True))
