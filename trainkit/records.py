"""Every record trainkit writes and reads back: one schema each, one checked loader.

A crash mid-write, an editor, an older or newer trainkit or a full disk can leave any of them
damaged, and the user needs trainkit most exactly then. Each JSON record has a pydantic model here
(strict types: a string where a number belongs is damage, not a value to guess at; fields trainkit
does not know are kept) and a `version` (VERSION; a record without one is from before versions,
read as 1). `load(path, model, fix)` returns the record, None when it is absent, or raises
InputError (exit 2) naming the file, what is wrong with it and `fix`: missing where required,
unreadable, not UTF-8, not JSON (truncated), the wrong top-level shape, a field of the wrong type,
a newer version. It never deletes or rewrites anything. Text records (the workspace marker, the
render manifest, the plan fingerprint) have no version: they go through `load_text` (UTF-8 or
named); the lock's text is only shown, decoded whatever its bytes.

    record                 model / loader     written by
    .trainkit-workspace    load_text          Workspace.ensure
    terraform/.trainkit-rendered  load_text   stack.render.write_files
    plan.fingerprint       load_text          Workspace.save_plan
    applied.json           Applied            Workspace.mark_applied
    outputs.json           Outputs            Workspace.write_outputs (terraform's outputs)
    hosts.json             Hosts              cluster.replace
    placement.json         Placement          cluster.failover
    capacity-refusals.json Refusals           cluster.failover
    doctor.json            Doctor             cluster.doctor
    runs/<id>/run.json     RunRecord          runs.record.write_record
    runs/<id>/events.jsonl Event (per line)   runs.record.event
    runs/<id>/summary.json Summary            the engine on the nodes (fetched; kept by runs.recover)
    <state dir>/clusters.json Clusters        cluster.registry (the workspaces this machine knows)
    lock                   (read for its holder's name only, never trusted)
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Optional, TypeVar

from pydantic import BaseModel, ConfigDict, ValidationError

from trainkit.errors import InputError

VERSION = 1  # the record version this trainkit writes and reads (every record: one number)

REAPPLY = ("trainkit writes this file from the cluster's state: delete it and run `trainkit apply SPEC` "
           "again, which rewrites it without changing the cluster")
REPLAN = "delete plan.bin, plan.json and plan.fingerprint and run `trainkit plan SPEC` again"
NEWER = "use the trainkit that wrote it (or a newer one: pip install -U trainkit-clusters); this one does not guess"


class Record(BaseModel):
    """A record trainkit writes: strict types, unknown fields kept, a version."""

    model_config = ConfigDict(extra="allow", strict=True)
    version: int = VERSION


class _Part(BaseModel):
    model_config = ConfigDict(extra="allow", strict=True)


class Applied(Record):
    applied_at: float


class OutputNode(_Part):
    name: str
    private_ip: Optional[str] = None
    public_ip: Optional[str] = None


class Outputs(Record):
    """outputs.json: terraform's outputs `{name: value}` (or `{name: {value, ...}}`) and the record's
    `version` (no module output has that name); `nodes` is a list of {name, private_ip, public_ip}."""

    nodes: Optional[list[OutputNode]] = None
    ssh_user: Optional[str] = None


class Hosts(Record):
    active: list[str] = []
    replaced: dict[str, str] = {}


class PlacedNode(_Part):
    zone: Optional[str] = None
    subnet_cidr: Optional[str] = None
    instance_type: Optional[str] = None
    spot: Optional[bool] = None


class Placement(Record):
    zone: Optional[str] = None
    type: Optional[str] = None
    spot: Optional[bool] = None
    nodes: dict[str, PlacedNode] = {}


class Refusal(_Part):
    zone: str
    type: str
    spot: bool
    at: float


class Refusals(Record):
    refusals: list[Refusal] = []


class DoctorCheck(_Part):
    name: str
    figure: Optional[float] = None


class DoctorNode(_Part):
    node: str
    checks: list[DoctorCheck] = []
    verdict: str = ""


class NetworkWorld(_Part):
    busbw_gbs: float


class Network(_Part):
    backend: str = ""
    world: Optional[NetworkWorld] = None


class Doctor(Record):
    cluster: Optional[str] = None
    time: float = 0.0
    nodes: list[DoctorNode] = []
    network: Optional[Network] = None
    failed: list[str] = []


class Attempt(_Part):
    attempt: Optional[int] = None
    nodes: list[str] = []
    started_at: Optional[float] = None
    ended_at: Optional[float] = None
    outcome: Optional[str] = None


class RunRecord(Record):
    run_id: Optional[str] = None
    name: Optional[str] = None
    config: Optional[str] = None
    overrides: list[str] = []
    config_hash: Optional[str] = None
    mode: Optional[str] = None
    created_at: float = 0.0
    ended_at: Optional[float] = None
    status: Optional[str] = None
    attempts: list[Attempt] = []
    nproc_per_node: Optional[int] = None
    shared: bool = False
    node_run_dir: Optional[str] = None
    checkpoint_dir: Optional[str] = None
    fault: Optional[str] = None        # a storage fault that ended it (trainkit/runs/storage_faults.py)


class Summary(Record):
    """summary.json: the engine's (docs/training.md; it writes no version: 1), as the controller
    keeps it in runs/<id>/ (with the version)."""

    status: Optional[str] = None
    steps: Optional[int] = None
    val_acc: Optional[float] = None
    best_val_acc: Optional[float] = None
    onnx: Optional[str] = None
    checkpoint: Optional[str] = None
    checkpoint_dir: Optional[str] = None
    on_nodes: dict[str, str] = {}


class Event(Record):
    """One line of events.jsonl (a line of a newer version is skipped like a line cut short)."""

    time: float
    event: str


class KnownCluster(_Part):
    """One workspace in the registry (cluster/registry.py): its folder (absolute), the cluster's
    name, the spec's absolute path and sha256 at the last apply, the target as `status` shows it,
    when the last apply started and when the last destroy ended (Unix seconds)."""

    workspace: str
    name: str
    spec: str
    spec_sha256: str = ""
    target: str = ""
    apply_started_at: Optional[float] = None
    destroyed_at: Optional[float] = None


class Clusters(Record):
    clusters: list[KnownCluster] = []


M = TypeVar("M", bound=BaseModel)


def load(path: Path, model: type[M], fix: str, *, required: bool = False, legacy_list: str = "") -> M | None:
    """`path` parsed and checked as `model`; None when it does not exist (InputError when
    `required`). `legacy_list`: a field an older trainkit wrote as the whole file (a bare list).
    InputError (exit 2) naming the file, what is wrong and `fix` for any damage."""
    data = read_json(path, fix, required=required)
    if data is None:
        return None
    if legacy_list and isinstance(data, list):
        data = {"version": VERSION, legacy_list: data}
    return check(data, path, model, fix)


def load_dict(path: Path, model: type[BaseModel], fix: str, *, required: bool = False) -> dict[str, Any] | None:
    """As `load`, but the record as written (a dict, checked against `model`), for callers that
    update it and write it back without adding the defaults."""
    data = read_json(path, fix, required=required)
    if data is not None:
        check(data, path, model, fix)
    return data


def read_json(path: Path, fix: str, required: bool = True) -> Any:
    """A JSON file parsed (None when absent and not `required`); InputError naming the file when it
    cannot be read, is not UTF-8 or is not JSON (truncated, edited)."""
    text = load_text(path, fix, required=required)
    if text is None:
        return None
    try:
        return json.loads(text)
    except ValueError as err:
        raise InputError(f"{path}: unreadable or truncated: not JSON ({err})", fix=fix) from None


def check(data: Any, path: Path, model: type[M], fix: str) -> M:
    """`data` (read from `path`) as `model`; InputError naming the field and the file."""
    if not isinstance(data, dict):
        raise InputError(f"{path}: a JSON {type(data).__name__}, not the object trainkit writes there "
                         "(edited by hand, or another program's file)", fix=fix)
    version = data.get("version", VERSION)
    if issubclass(model, Record) and isinstance(version, int) and version > VERSION:
        raise InputError(f"{path}: written by a newer trainkit (record version {version}; this one reads "
                         f"version {VERSION})", fix=NEWER)
    try:
        return model.model_validate(data)
    except ValidationError as err:
        problems = [f"{'.'.join(str(p) for p in e['loc']) or '<top level>'}: {e['msg'].lower()} "
                    f"(got {_shown(e.get('input'))})" for e in err.errors()[:3]]
        raise InputError(f"{path}: not the record trainkit writes: " + "; ".join(problems), fix=fix) from None


def load_text(path: Path, fix: str, required: bool = True) -> str | None:
    """A text record's content (None when absent and not `required`); InputError naming the file
    when it is missing, cannot be read or is not UTF-8."""
    try:
        raw = path.read_bytes()
    except (FileNotFoundError, NotADirectoryError):  # absent, or a folder above it is a file
        if not required:
            return None
        raise InputError(f"{path}: missing", fix=fix) from None
    except OSError as err:
        raise InputError(f"{path}: cannot be read ({err.strerror})", fix=fix) from None
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError as err:
        raise InputError(f"{path}: not UTF-8 text (byte {err.start}: damaged, or written by another "
                         "program)", fix=fix) from None


def dump(record: BaseModel | dict[str, Any], **kwargs: Any) -> str:
    """A record as the JSON text trainkit writes, with the current version."""
    data = record.model_dump(mode="json") if isinstance(record, BaseModel) else dict(record)
    return json.dumps({**data, "version": VERSION}, **kwargs)


def _shown(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 40 else text[:37] + "..."
