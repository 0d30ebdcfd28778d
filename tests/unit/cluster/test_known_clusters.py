"""The registry of known clusters (trainkit/cluster/registry.py), SPEC resolved as a path or a
cluster NAME (commands/options.py resolve_spec), and the list `trainkit status` prints alone
(cluster/listing.py): damaged files named with their fix, moved and changed specs, one name in two
folders, a name that is data. `apply --no-provision` on `local` is the real apply (no Ansible)."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import click
import pytest
import yaml
from cli_run import run_cli
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from trainkit.cluster import listing, registry
from trainkit.commands.options import resolve_spec
from trainkit.errors import InputError
from trainkit.workspace import Workspace

LOCAL = "name: {name}\ncloud: local\nstorage: {{data_disk: {{enabled: false}}, nas: {{enabled: false}}}}\n"


@pytest.fixture
def here(tmp_path, monkeypatch) -> Path:
    """A folder of its own as the current one, with its own registry."""
    monkeypatch.setenv("TRAINKIT_STATE_DIR", str(tmp_path / "state"))
    monkeypatch.chdir(tmp_path)
    return tmp_path


def spec(folder: Path, name: str, file: str = "") -> Path:
    path = folder / (file or f"{name}.yaml")
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(LOCAL.format(name=name))
    return path


def applied(capsys, path: Path, *args: str) -> None:
    code, err = run_cli(capsys, "apply", str(path), "--yes", "--no-provision", *args)
    assert code == 0, err


def cli(capsys, *args: str) -> tuple[int, str, str]:
    """(exit code, stdout, stderr) of `trainkit ARGS` in this process."""
    from trainkit.cli import main

    with pytest.raises(SystemExit) as exc:
        main(list(args))
    out, err = capsys.readouterr()
    assert "Traceback" not in err and "internal error" not in err, err
    return exc.value.code, out, err


def rows(capsys) -> dict[str, dict]:
    code, out, err = cli(capsys, "status", "--json")
    assert code == 0, err
    doc = json.loads(out)
    assert doc["format_version"] == "1"
    return {(r["name"], r["workspace"]): r for r in doc["clusters"]}


# ------------------------------------------------------------------ by name, listed

def test_applied_clusters_are_listed_and_reached_by_name_from_any_folder(here, capsys):
    applied(capsys, spec(here, "aa-one"))
    applied(capsys, spec(here, "bb-two"), "--workdir", str(here / "elsewhere"))
    got = rows(capsys)
    one, two = got[("aa-one", str(here / ".trainkit/aa-one"))], got[("bb-two", str(here / "elsewhere"))]
    assert (one["status"], one["target"], one["nodes"], one["spec"]) == ("UP", "local", 1, str(here / "aa-one.yaml"))
    assert two["status"] == "UP" and two["launched"]

    os.chdir(here / "elsewhere")  # names work from anywhere: the workspace comes from the registry
    code, out, err = cli(capsys, "status", "bb-two", "--json")
    assert code == 0 and json.loads(out)["workspace"] == str(here / "elsewhere"), err
    code, out, err = cli(capsys, "status")
    assert code == 0 and out.splitlines()[0].split()[:4] == ["NAME", "TARGET", "NODES", "STATUS"]
    assert [line.split()[0] for line in out.splitlines()[1:3]] == ["aa-one", "bb-two"]


def test_an_unknown_name_lists_the_close_and_known_names_and_reads_no_file(here, capsys):
    applied(capsys, spec(here, "aa-one"))
    code, out, err = cli(capsys, "runs", "aa-onr")
    assert code == 2 and "'aa-onr' is neither a spec file nor a cluster known" in err
    assert "did you mean aa-one?" in err and "known clusters: aa-one" in err
    code, out, err = cli(capsys, "status", "zz-nothing", "--json")
    assert code == 2 and "known clusters: aa-one" in json.loads(out)["fix"]


def test_a_path_that_exists_wins_over_a_name(here, capsys):
    applied(capsys, spec(here, "aa-one"))
    spec(here, "cc-three", file="aa-one")  # a file named like the cluster, holding another spec
    assert resolve_spec("aa-one", None) == ("aa-one", None, None)
    code, out, err = cli(capsys, "status", "aa-one", "--json")
    assert code == 0 and json.loads(out)["cluster"] == "cc-three", err


@pytest.mark.parametrize("word", ["../aa-one", "aa-one/..", "/aa-one", "AA-ONE", "aa_one", ".."])
def test_a_word_that_is_no_cluster_name_is_a_path_and_never_looked_up(here, capsys, word):
    applied(capsys, spec(here, "aa-one"))
    assert resolve_spec(word, None) == (word, None, None)
    code, out, err = cli(capsys, "status", word)
    assert code == 2 and "known on this machine" not in err  # the spec loader's "file not found"


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(word=st.text(min_size=1, max_size=40))
def test_any_word_typed_as_spec_is_a_path_or_a_name_looked_up_never_a_path_built(here, word):
    """Whatever is typed: a word that can be a name holds no path piece, and resolving it against
    an empty registry names it as unknown; any other word comes back unchanged, as the path."""
    if registry.is_name(word):
        assert "/" not in word and ".." not in word and "\0" not in word
        if not Path(word).exists():
            with pytest.raises(InputError, match="neither a spec file nor a cluster known"):
                resolve_spec(word, None)
    else:
        assert resolve_spec(word, None) == (word, None, None)


def test_a_registry_entry_is_checked_before_its_folder_is_used(here, capsys):
    state = here / "state"
    state.mkdir()
    bad = {"version": 1, "clusters": [{"name": "aa-one", "workspace": "/tmp/../etc", "spec": "/x.yaml"}]}
    (state / "clusters.json").write_text(json.dumps(bad))
    code, out, err = cli(capsys, "status", "aa-one")
    assert code == 2 and f"{state / 'clusters.json'}: entry 0" in err and "delete it" in err


# ------------------------------------------------------------------ one name, two folders

def test_one_name_in_two_folders_is_told_apart_by_workdir_then_by_the_current_folder(here, capsys):
    first, second = here / "one", here / "two"
    for folder in (first, second):
        folder.mkdir()
        os.chdir(folder)
        applied(capsys, spec(folder, "aa-one"))
    os.chdir(here)  # neither folder's default workspace: ambiguous, both named
    with pytest.raises(InputError) as both:
        registry.find("aa-one")
    assert str(first / ".trainkit/aa-one") in both.value.message and str(second / ".trainkit/aa-one") in both.value.message
    assert "--workdir" in both.value.fix
    code, out, err = cli(capsys, "status", "aa-one", "--workdir", str(second / ".trainkit/aa-one"), "--json")
    assert code == 0 and json.loads(out)["workspace"] == str(second / ".trainkit/aa-one"), err
    os.chdir(first)  # the current folder's own .trainkit/aa-one, as `trainkit status aa-one.yaml` here
    assert registry.find("aa-one").workspace == str(first / ".trainkit/aa-one")
    assert len([r for r in rows(capsys) if r[0] == "aa-one"]) == 2  # both listed


def test_a_workspace_reached_through_a_link_is_one_entry(here, capsys):
    (here / "real").mkdir()
    (here / "link").symlink_to(here / "real")
    os.chdir(here / "link")  # the default workspace is spelled through the link
    applied(capsys, spec(here / "link", "aa-one"))
    applied(capsys, spec(here / "link", "aa-one"))
    entries = json.loads((here / "state/clusters.json").read_text())["clusters"]
    assert [e["workspace"] for e in entries] == [str(here / "real/.trainkit/aa-one")]
    assert registry.find("aa-one", workdir=here / "link/.trainkit/aa-one").name == "aa-one"


# ------------------------------------------------------------------ the spec moved or changed

def test_a_moved_spec_is_named_and_the_name_follows_its_new_path_once_given(here, capsys):
    path = spec(here, "aa-one")
    applied(capsys, path)
    moved = here / "specs" / "aa-one.yaml"
    moved.parent.mkdir()
    path.rename(moved)
    code, out, err = cli(capsys, "runs", "aa-one")
    assert code == 2 and f"its spec {path} is gone (moved or deleted" in err and "--workdir" in err
    row = rows(capsys)[("aa-one", str(here / ".trainkit/aa-one"))]
    assert row["status"] == "UP" and "is gone" in row["problem"]  # listed still, with the reason

    code, out, err = cli(capsys, "status", str(moved))  # the new path, once
    assert code == 0 and "now reached by name" in err, err
    code, out, err = cli(capsys, "status", "aa-one", "--json")
    assert code == 0 and json.loads(out)["cluster"] == "aa-one", err


def test_a_changed_spec_is_said_and_a_renamed_one_is_refused(here, capsys):
    path = spec(here, "aa-one")
    applied(capsys, path)
    path.write_text(path.read_text() + "# edited\n")
    code, out, err = cli(capsys, "status", "aa-one")
    assert code == 0 and f"note: {path} changed since cluster aa-one was applied" in err
    assert rows(capsys)[("aa-one", str(here / ".trainkit/aa-one"))]["notes"] == ["spec changed since apply"]
    path.write_text(LOCAL.format(name="dd-four"))
    code, out, err = cli(capsys, "status", "aa-one")
    assert code == 2 and "now names cluster 'dd-four'" in err and "name: aa-one" in err
    applied(capsys, path)  # applying it again is dd-four's own entry; aa-one's stays with its folder
    assert {name for name, _ in rows(capsys)} == {"aa-one", "dd-four"}


# ------------------------------------------------------------------ damage never crashes

@pytest.mark.parametrize("text,said", [
    ("{not json", "not JSON"),
    ("[]", "a JSON list, not the object"),
    ('{"version": 1, "clusters": [{"name": "aa-one"}]}', "clusters.0.workspace: field required"),
    ('{"version": 1, "clusters": [{"name": "a", "workspace": "/w", "spec": "/s.yaml"}]}', "entry 0"),
    ('{"version": 1, "clusters": [{"name": "aa-one", "workspace": "w", "spec": "/s.yaml"}]}', "entry 0"),
    ('{"version": 99, "clusters": []}', "written by a newer trainkit"),
    (b"\xff\xfe", "not UTF-8")])
def test_a_damaged_registry_is_named_with_its_fix_and_never_stops_a_spec_path(here, capsys, text, said):
    path = spec(here, "aa-one")
    applied(capsys, path)
    file = here / "state" / "clusters.json"
    file.write_bytes(text if isinstance(text, bytes) else text.encode())
    for args in (["status"], ["status", "--json"], ["runs", "aa-one"]):
        code, out, err = cli(capsys, *args)
        assert code == 2 and str(file) in err and said in err, (args, err)
        assert "delete it" in err or "newer" in said, err
    code, out, err = cli(capsys, "status", str(path), "--json")  # the spec path works, with a warning
    assert code == 0 and json.loads(out)["exists"] and f"warning: {file}" in err
    assert file.read_bytes() == (text if isinstance(text, bytes) else text.encode())  # never rewritten


def test_a_row_whose_workspace_is_damaged_keeps_the_others(here, capsys):
    applied(capsys, spec(here, "aa-one"))
    applied(capsys, spec(here, "bb-two"))
    ws = here / ".trainkit/aa-one"
    (ws / "inventory.yml").unlink()
    registry.remember_apply("aa-one", ws, here / "aa-one.yaml", "aws/us-east-1")  # as a cloud's row
    (ws / "outputs.json").write_text("{trunc")
    got = rows(capsys)
    assert "outputs.json: unreadable or truncated" in got[("aa-one", str(ws))]["problem"]
    assert got[("bb-two", str(here / ".trainkit/bb-two"))]["status"] == "UP"


# ------------------------------------------------------------------ status from records only

def test_status_words_come_from_the_workspace_records(here, tmp_path):
    ws = Workspace(tmp_path / "ws", "aa-one").ensure()
    spec_path = spec(here, "aa-one")
    registry.remember_apply("aa-one", ws.root, spec_path, "local", now=100.0)
    [row] = listing.rows(registry.listed(), now=200.0)
    assert row["status"] == "INIT"  # an apply started, no nodes, no destroy since: it may bill
    registry.remember_destroy(ws.root, now=150.0)
    assert listing.rows(registry.listed())[0]["status"] == "DOWN"
    ws.inventory_yml.write_text("{}")
    assert listing.rows(registry.listed())[0]["status"] == "UP"


def test_an_apply_refused_before_anything_changed_leaves_no_init_row(repo, here, capsys):
    applied(capsys, spec(here, "aa-one"))
    shutil.copy(repo / "examples/clusters/aws.yaml", here / "aws.yaml")  # its placeholders: apply refuses
    code, out, err = cli(capsys, "apply", str(here / "aws.yaml"), "--yes")
    assert code == 2 and "placeholder" in err.lower(), err
    assert {name for name, _ in rows(capsys)} == {"aa-one"}
    assert (here / "state/clusters.json").is_file()


def test_a_cloud_row_has_its_cost_ttl_and_idle_from_the_workspace_cache(repo, here, tmp_path):
    source = repo / "examples/clusters/aws.yaml"
    name = yaml.safe_load(source.read_text())["name"]
    ws = Workspace(tmp_path / "ws", name).ensure()
    ws.write_outputs({"nodes": [{"name": "n0", "private_ip": "10.0.0.1", "public_ip": None},
                                {"name": "n1", "private_ip": "10.0.0.2", "public_ip": None}]})
    now = time.time()
    ws.mark_applied(now - 2 * 3600)
    registry.remember_apply(name, ws.root, source, "aws")
    [row] = listing.rows(registry.listed(), now=now)
    assert row["status"] == "UP" and row["nodes"] == 2 and row["target"].startswith("aws/")
    assert row["per_hour"] > 0 and row["cost_so_far"] == pytest.approx(2 * row["per_hour"], rel=0.01)
    assert row["as_of"] and row["launched"]
    text = listing.table([row])
    assert f"{name}  " in text and "as of the last command" in text


def test_a_removed_workspace_is_pruned_from_the_list(here, capsys):
    applied(capsys, spec(here, "aa-one"))
    applied(capsys, spec(here, "bb-two"))
    shutil.rmtree(here / ".trainkit/aa-one")
    assert {n for n, _ in rows(capsys)} == {"bb-two"}
    kept = json.loads((here / "state/clusters.json").read_text())["clusters"]
    assert [e["name"] for e in kept] == ["bb-two"]


def test_status_alone_with_no_registry_creates_nothing(here, capsys):
    code, out, err = cli(capsys, "status")
    assert code == 0 and out == "" and "no clusters on this machine yet" in err
    assert not (here / "state").exists()


def test_every_command_that_takes_a_spec_says_it_takes_a_name_before_its_example(capsys):
    from trainkit.cli import COMMANDS, cli

    ctx = click.Context(cli)
    taking = [name for name in COMMANDS if any(p.name == "spec" for p in cli.get_command(ctx, name).params)]
    assert {"status", "apply", "destroy", "train", "runs", "logs", "cancel", "validate", "check", "cost"} <= set(taking)
    for name in taking:
        text = cli.get_command(ctx, name).get_help(click.Context(cli.get_command(ctx, name), info_name=name))
        assert "or the NAME of a cluster applied on this machine" in " ".join(text.split("Example:")[0].split()), name


# ------------------------------------------------------------------ completion

def complete(words: str, cwd: Path) -> list[str]:
    parts = words.split(" ")
    env = {**os.environ, "COMP_WORDS": words, "COMP_CWORD": str(len(parts) - 1),
           "_TRAINKIT_COMPLETE": "bash_complete"}
    proc = subprocess.run([sys.executable, "-m", "trainkit"], env=env, capture_output=True, text=True,
                          timeout=60, cwd=cwd)
    assert proc.returncode == 0 and "Traceback" not in proc.stderr, proc.stderr
    return proc.stdout.split()


def test_cluster_names_complete_wherever_a_spec_is_taken_and_run_ids_after_a_name(here, capsys):
    applied(capsys, spec(here, "aa-one"))
    applied(capsys, spec(here, "ab-two"))
    for command in ("status", "runs", "destroy", "train", "validate", "cost"):
        assert complete(f"trainkit {command} a", here) == ["plain,aa-one", "plain,ab-two", "file,a"], command
    assert complete("trainkit logs ab", here) == ["plain,ab-two", "file,ab"]
    run = here / ".trainkit/aa-one/runs/digits-20260101-120000"
    run.mkdir(parents=True)
    (run / "run.json").write_text("{}")
    assert complete("trainkit train aa-one --resume d", here) == ["plain,digits-20260101-120000"]
    assert complete("trainkit cancel aa-one ", here) == ["plain,digits-20260101-120000"]
    (here / "state/clusters.json").write_text("{broken")
    assert complete("trainkit status a", here) == ["file,a"]  # damaged: files only, no traceback
