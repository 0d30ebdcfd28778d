"""Workspace owns its layout: the files it names, what destroy removes, the saved plan, the apply
time, the inventory write; nothing else in trainkit builds those paths, and inventory.py stays pure."""

from __future__ import annotations

import ast
import os
import re
from pathlib import Path

import pytest

from trainkit.workspace import Workspace


def test_remove_cluster_files_keeps_runs_and_the_review(tmp_path):
    ws = Workspace.for_cluster("demo", tmp_path / "ws").ensure()
    ws.save_plan({"resource_changes": []}, "abc")
    ws.plan_bin.write_bytes(b"plan")
    ws.mark_applied(123.0)
    ws.write_inventory({"all": {"vars": {}}})
    ws.rotate_log().write_text("log")
    ws.rotate_log()
    (ws.terraform_dir / "modules").mkdir(parents=True)
    ws.node_dir.mkdir()
    ws.review_md.write_text("# review")
    run = ws.new_run_dir()
    ws.remove_cluster_files()
    assert sorted(p.name for p in ws.root.iterdir()) == [".trainkit-workspace", "review.md", "runs"]
    assert run.is_dir()


def test_a_saved_plan_is_read_back_and_dropped_after_one_apply(tmp_path):
    ws = Workspace.for_cluster("demo", tmp_path).ensure()
    assert ws.saved_plan() is None
    ws.save_plan({"resource_changes": [{"address": "a"}]}, "f1")
    assert ws.saved_plan() is None  # no plan.bin yet: incomplete
    ws.plan_bin.write_bytes(b"x")
    assert ws.saved_plan() == ("f1", {"resource_changes": [{"address": "a"}]})
    ws.drop_saved_plan()
    assert ws.saved_plan() is None and ws.plan_json.exists()  # plan.json stays for the review


def test_the_apply_time_round_trips(tmp_path):
    ws = Workspace.for_cluster("demo", tmp_path).ensure()
    assert ws.applied_at() is None
    ws.mark_applied(1700000000.5)
    assert ws.applied_at() == 1700000000.5


def test_write_inventory_creates_the_workspace_and_writes_yaml(tmp_path):
    import yaml

    ws = Workspace.for_cluster("demo", tmp_path / "new")
    path = ws.write_inventory({"all": {"vars": {"x": 1}}})
    assert path == ws.inventory_yml and yaml.safe_load(path.read_text()) == {"all": {"vars": {"x": 1}}}


def test_no_module_but_workspace_names_the_workspace_files(repo):
    names = {n for n in Workspace.CLUSTER_FILES if "." in n} | {"terraform.log", "review.md"}  # not the
    # plain folder names (terraform/, ansible/, node/): package data has folders by those names too
    literal = re.compile(r"""['"](%s)['"]""" % "|".join(re.escape(n) for n in names))
    offenders = []
    for path in (repo / "trainkit").rglob("*.py"):
        if path.name == "workspace.py":
            continue
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Div) and isinstance(node.right, ast.Constant) \
                    and isinstance(node.right.value, str) and literal.fullmatch(repr(node.right.value)):
                offenders.append(f"{path.relative_to(repo)}:{node.lineno} / {node.right.value!r}")
    assert not offenders, offenders


def test_inventory_builds_data_and_writes_nothing(repo):
    tree = ast.parse((repo / "trainkit" / "provision" / "inventory.py").read_text())
    calls = {n.func.attr for n in ast.walk(tree) if isinstance(n, ast.Call) and isinstance(n.func, ast.Attribute)}
    assert not calls & {"write_text", "write_bytes", "mkdir", "ensure", "safe_dump", "open", "unlink"}


def test_the_review_of_a_target_without_terraform_has_the_review_shape():
    from trainkit.spec.resolve import load_cluster
    from trainkit.stack.review import changes, no_terraform_review

    rev = no_terraform_review(load_cluster("examples/clusters/local.yaml"))
    assert set(rev) == {"cluster", "cloud", "changes", "cost", "findings", "safety", "blocking", "note"}
    assert rev["changes"] == changes({}) and rev["changes"]["has_changes"] is False and not rev["blocking"]


def test_the_stack_fingerprint_follows_rendered_files_not_state(tmp_path):
    ws = Workspace.for_cluster("demo", tmp_path)
    ws.terraform_dir.mkdir(parents=True)
    (ws.terraform_dir / "main.tf").write_text("a")
    first = ws.stack_fingerprint()
    (ws.terraform_dir / "terraform.tfstate").write_text("{}")
    (ws.terraform_dir / ".terraform").mkdir()
    (ws.terraform_dir / ".terraform" / "x").write_text("y")
    assert ws.stack_fingerprint() == first
    (ws.terraform_dir / "main.tf").write_text("b")
    assert ws.stack_fingerprint() != first


@pytest.mark.parametrize("text", ['{"nodes": [', "[1]", ""])
def test_workspace_caches_edited_into_junk_are_named_not_a_crash(tmp_path, text):
    from trainkit.errors import InputError
    from trainkit.workspace import Workspace

    ws = Workspace(tmp_path).ensure()
    for path, read in ((ws.outputs_json, ws.read_outputs), (ws.applied_json, ws.applied_at)):
        path.write_text(text)
        with pytest.raises(InputError) as err:
            read()
        assert str(path) in err.value.message and "trainkit" in err.value.fix and err.value.exit_code == 2


def test_a_full_disk_is_named_not_an_internal_error_and_leaves_the_caches_whole(tmp_path, capsys, monkeypatch):
    import errno

    from trainkit.cli import main

    write_text = Path.write_text

    def full_disk(path, *args, **kwargs):  # a write to the inventory's temporary file: ENOSPC, no file named
        if path.name.startswith(".inventory.yml.tmp"):
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
        return write_text(path, *args, **kwargs)

    spec = tmp_path / "c.yaml"
    spec.write_text("name: local-demo\ncloud: local\nstorage: {data_disk: {enabled: false}}\n")
    ws = Workspace(tmp_path / "ws").ensure()
    ws.write_inventory({"all": {"vars": {"before": 1}}})
    before = ws.inventory_yml.read_text()
    monkeypatch.setattr(Path, "write_text", full_disk)
    with pytest.raises(SystemExit) as done:
        main(["apply", str(spec), "--workdir", str(ws.root), "--yes", "--no-provision"])
    err = capsys.readouterr().err
    assert done.value.code == 1 and "internal error" not in err, err
    assert f"No space left on device: {ws.inventory_yml}" in err and "free space" in err
    assert ws.inventory_yml.read_text() == before  # the previous version, whole
