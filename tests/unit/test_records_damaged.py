"""Every record trainkit keeps between commands, damaged every way, read by what reads it.

For each record (trainkit/records.py) and each kind of damage (cut short at any byte, a byte that
is not UTF-8, the wrong top-level shape, each field of the wrong type, a newer version), the
readers and the commands that read it either say which file is damaged, what is wrong and the fix
(exit 2), or carry on without it where it only informs (a listing, the zone order, top's busbw
line); never a traceback, and nothing in the workspace deleted or rewritten."""

from __future__ import annotations

import json
import time
import typing
from pathlib import Path

import pytest
from cli_run import run_cli as run
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from trainkit import records
from trainkit.errors import InputError
from trainkit.workspace import Workspace

PROPS = settings(max_examples=25, deadline=None, database=None,
                 suppress_health_check=[HealthCheck.function_scoped_fixture])
INVENTORY = ("all:\n  vars: {}\n  children:\n    head:\n      hosts:\n        localhost: {ansible_connection: local}\n"
             "    workers:\n      hosts: {}\n")
NOW = time.time()
GOOD = {  # record file -> (model, a record as trainkit writes it)
    "runs/digits-1/run.json": (records.RunRecord, {
        "version": 1, "run_id": "digits-1", "name": "digits", "config": "/x/digits.yaml", "overrides": [],
        "config_hash": "abc", "mode": "engine", "created_at": 1.0, "status": "completed", "ended_at": 2.0,
        "attempts": [{"attempt": 1, "nodes": ["localhost"], "started_at": 1.0, "ended_at": 2.0}],
        "nproc_per_node": 1, "shared": True, "node_run_dir": "/w/runs/digits-1", "checkpoint_dir": "/w/c"}),
    "runs/digits-1/summary.json": (records.Summary, {"status": "completed", "steps": 10, "val_acc": 0.9,
                                                     "best_val_acc": 0.9, "onnx": None, "on_nodes": {}}),
    "doctor.json": (records.Doctor, {
        "version": 1, "cluster": "local-demo", "time": 1.0, "failed": [],
        "nodes": [{"node": "localhost", "verdict": "ok", "checks": [{"name": "network", "figure": 1.5}]}],
        "network": {"backend": "gloo", "world": {"busbw_gbs": 1.0}}}),
    "hosts.json": (records.Hosts, {"version": 1, "active": ["a", "b"], "replaced": {"x": "a"}}),
    "placement.json": (records.Placement, {"version": 1, "zone": "us-east-1a", "type": "g5.xlarge", "spot": False,
                                           "nodes": {"1": {"zone": "us-east-1b"}}}),
    "capacity-refusals.json": (records.Refusals, {"version": 1, "refusals": [
        {"zone": "us-east-1a", "type": "g5.xlarge", "spot": True, "at": NOW}]}),
    "applied.json": (records.Applied, {"version": 1, "applied_at": 1.0}),
    "outputs.json": (records.Outputs, {"nodes": [{"name": "n0", "private_ip": "10.0.0.1", "public_ip": None}],
                                       "ssh_user": "ubuntu"}),
}


def wrong_value(model: type, field: str):
    """A value of a type the field does not take: text where a model or a mapping belongs, a
    mapping anywhere else (no scalar or list field takes one)."""
    annotation = model.model_fields[field].annotation
    kinds = typing.get_args(annotation) or (annotation,)
    takes_mapping = any(typing.get_origin(k) is dict or isinstance(k, type) and issubclass(k, records.BaseModel)
                        for k in kinds)
    return "x" if takes_mapping else {"wrong": True}


def damages(name: str) -> list[tuple[str, bytes]]:
    model, good = GOOD[name]
    text = json.dumps(good).encode()
    out = [("empty", b""), ("cut", text[: len(text) // 2]), ("not-utf8", text.replace(b'"', b'"\xff', 1)),
           ("a-list", b"[]"), ("a-string", b'"x"'), ("a-number", b"3")]
    out += [(f"field-{f}", json.dumps({**good, f: wrong_value(model, f)}).encode())
            for f in model.model_fields if f != "version"]
    if issubclass(model, records.Record):
        out.append(("newer", json.dumps({**good, "version": records.VERSION + 1}).encode()))
    return out


CASES = [(name, kind, data) for name in GOOD for kind, data in damages(name)]


@pytest.fixture
def ws(tmp_path):
    ws = Workspace(tmp_path / "ws", "local-demo").ensure()
    (ws.root / "inventory.yml").write_text(INVENTORY)
    (ws.runs_dir / "digits-1").mkdir(parents=True)
    (ws.runs_dir / "digits-1" / "run.json").write_text(json.dumps(GOOD["runs/digits-1/run.json"][1]))
    return ws


def files(root: Path) -> dict[Path, bytes]:
    return {p: p.read_bytes() for p in root.rglob("*") if p.is_file() and p.name != "lock"}


def readers(ws: Workspace, repo: Path) -> dict[str, list]:
    """record -> [(reader, "error" | "recover")]: what reads it and how it must answer damage."""
    from trainkit.cluster import doctor, failover, replace
    from trainkit.runs import record
    from trainkit.spec.resolve import load_cluster

    run_dir = ws.runs_dir / "digits-1"
    hosts = load_cluster(str(repo / "examples/clusters/hosts.yaml"))
    aws = load_cluster(str(repo / "examples/clusters/aws.yaml"))
    return {
        "runs/digits-1/run.json": [(lambda: record.check_record(run_dir), "error"),
                                   (lambda: record.summarize(run_dir), "recover")],
        "runs/digits-1/summary.json": [(lambda: record.summarize(run_dir), "recover")],
        "doctor.json": [(lambda: doctor.last_report(ws), "error")],
        "hosts.json": [(lambda: replace.effective_cluster(hosts, ws), "error")],
        "placement.json": [(ws.node_placement, "error"), (lambda: failover.remembered(aws, ws), "error")],
        "capacity-refusals.json": [(lambda: failover.recent_refusals(ws, NOW), "recover")],
        "applied.json": [(ws.applied_at, "error")],
        "outputs.json": [(ws.read_outputs, "error")],
    }


def test_every_record_reads_back_whole(ws, repo):
    for name, (_, good) in GOOD.items():
        (ws.root / name).write_text(json.dumps(good))
    for calls in readers(ws, repo).values():
        for call, _ in calls:
            call()  # no error for a record as trainkit writes it
    assert ws.node_placement() == {"1": {"zone": "us-east-1b"}} and ws.applied_at() == 1.0


@pytest.mark.parametrize("name,kind,data", CASES, ids=[f"{n}-{k}" for n, k, _ in CASES])
def test_a_damaged_record_is_named_or_left_aside_and_nothing_is_deleted(ws, repo, name, kind, data):
    path = ws.root / name
    path.write_bytes(data)
    before = files(ws.root)
    for call, answer in readers(ws, repo)[name]:
        if answer == "error":
            with pytest.raises(InputError) as err:
                call()
            assert str(path) in err.value.message and err.value.fix and err.value.exit_code == 2, err.value.message
        else:
            call()  # carries on without it
    assert files(ws.root) == before


@PROPS
@given(data=st.data())
def test_a_record_cut_at_any_byte_is_named(ws, repo, data):
    name = data.draw(st.sampled_from([n for n in GOOD if n != "runs/digits-1/summary.json"]))
    text = json.dumps(GOOD[name][1]).encode()
    path = ws.root / name
    path.write_bytes(text[: data.draw(st.integers(0, len(text) - 1))])
    for call, answer in readers(ws, repo)[name]:
        if answer == "error":
            with pytest.raises(InputError) as err:
                call()
            assert str(path) in err.value.message


@pytest.mark.parametrize("kind", ["cut", "not-utf8", "field-attempts", "field-created_at", "field-nproc_per_node",
                                  "newer", "a-list"])
def test_commands_on_a_damaged_run_record_name_it(capsys, repo, ws, kind):
    path = ws.runs_dir / "digits-1" / "run.json"
    path.write_bytes(dict(damages("runs/digits-1/run.json"))[kind])
    before, spec = files(ws.root), str(repo / "examples/clusters/local.yaml")
    code, out = run(capsys, "runs", spec, "--workdir", str(ws.root))
    assert code == 0, out  # the listing shows it as unreadable
    for args in (["logs"], ["cancel", "digits-1"], ["train", "--resume", "digits-1"]):
        code, err = run(capsys, args[0], spec, "--workdir", str(ws.root), *args[1:])
        assert code == 2 and f"{path}: the run's record is unreadable" in err and "fix:" in err, err
    assert files(ws.root) == before


@pytest.mark.parametrize("kind", ["empty", "not-utf8", "a-list", "field-steps"])
def test_runs_lists_a_run_whose_summary_is_damaged(capsys, repo, ws, kind):
    (ws.runs_dir / "digits-1" / "summary.json").write_bytes(dict(damages("runs/digits-1/summary.json"))[kind])
    code, err = run(capsys, "runs", str(repo / "examples/clusters/local.yaml"), "--workdir", str(ws.root))
    assert code == 0, err


@pytest.mark.parametrize("kind", ["not-utf8", "field-nodes", "newer"])
def test_top_watches_the_nodes_when_the_doctor_report_is_damaged(capsys, repo, ws, kind):
    (ws.root / "doctor.json").write_bytes(dict(damages("doctor.json"))[kind])
    code, err = run(capsys, "top", str(repo / "examples/clusters/local.yaml"), "--workdir", str(ws.root),
                    "--once", "--json")
    assert code == 0 and f"warning: {ws.root / 'doctor.json'}" in err and "fix: " in err, err


@pytest.mark.parametrize("record,command", [(".trainkit-workspace", ["destroy", "-y"]),
                                            ("terraform/.trainkit-rendered", ["render"])])
def test_a_text_record_that_is_not_utf8_is_named(capsys, repo, tmp_path, record, command):
    ws = tmp_path / "ws"
    spec = str(repo / "examples/clusters" / ("aws.yaml" if command == ["render"] else "local.yaml"))
    if command == ["render"]:
        assert run(capsys, "render", spec, "--workdir", str(ws))[0] == 0
    else:
        Workspace(ws, "local-demo").ensure()
    (ws / record).write_bytes(b"\xff\xfe name\n")
    before = files(ws)
    code, err = run(capsys, command[0], spec, "--workdir", str(ws), *command[1:])
    assert code == 2 and f"{ws / record}: not UTF-8 text" in err and "fix:" in err, err
    assert files(ws) == before


def test_the_plan_fingerprint_and_the_lock_holder_are_read_whatever_their_bytes(tmp_path):
    import fcntl

    from trainkit.errors import LockedError

    ws = Workspace(tmp_path / "ws", "demo").ensure()
    for rel in ("plan.bin", "plan.json"):
        (ws.root / rel).write_text("{}")
    ws.plan_fingerprint.write_bytes(b"\xff" * 64)
    with pytest.raises(InputError) as err:
        ws.saved_plan()
    assert f"{ws.plan_fingerprint}: not UTF-8" in err.value.message and "trainkit plan" in err.value.fix
    ws.lock_path.write_bytes(b"\xff held")
    with open(ws.lock_path) as held:
        fcntl.flock(held, fcntl.LOCK_EX)
        with pytest.raises(LockedError) as err, ws.lock("status"):
            pass
    assert "held" in err.value.message


def test_a_workspace_whose_runs_is_a_file_is_named(capsys, repo, tmp_path):
    ws = Workspace(tmp_path / "ws", "local-demo").ensure()
    ws.runs_dir.write_text("not a folder\n")
    code, err = run(capsys, "runs", str(repo / "examples/clusters/local.yaml"), "--workdir", str(ws.root))
    assert code == 2 and f"{ws.runs_dir} is a file" in err, err


def test_an_emptied_render_manifest_is_named_not_trainkits_files_called_the_users(capsys, repo, tmp_path):
    ws, spec = tmp_path / "ws", str(repo / "examples/clusters/aws.yaml")
    assert run(capsys, "render", spec, "--workdir", str(ws))[0] == 0
    (ws / "terraform" / ".trainkit-rendered").write_text("")
    before = files(ws)
    code, err = run(capsys, "render", spec, "--workdir", str(ws))
    assert code == 2 and "terraform/.trainkit-rendered, render's list of the files it wrote, is missing or empty" in err
    assert "were not written by trainkit" not in err and "never terraform.tfstate" in err
    assert files(ws) == before
