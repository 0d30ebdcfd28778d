"""Bad input from outside in the workspace, through the real CLI entry point (`trainkit.cli.main`):
a --workdir that is someone else's folder, another cluster's or cannot exist, and workspace files
edited, truncated or replaced by hand. Each exits 2 naming the folder or file, prints no traceback
and loses no file."""

from __future__ import annotations

import pytest
from cli_run import run_cli as run

from trainkit.cli import main


def main_code(args: list[str]) -> int:
    with pytest.raises(SystemExit) as exc:
        main(args)
    return exc.value.code


@pytest.fixture
def project(tmp_path):
    """A folder of the user's own that happens to hold terraform/, ansible/ and ssh/ folders."""
    root = tmp_path / "infra"
    for rel in ("terraform/main.tf", "ansible/site.yml", "ssh/id_rsa", "node/notes"):
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_text(f"the user's {rel}\n")
    return root


@pytest.mark.parametrize("command,spec", [("destroy", "local.yaml"), ("apply", "local.yaml"),
                                          ("render", "aws.yaml")])
def test_a_workdir_holding_the_users_files_is_refused_and_nothing_is_lost(
        capsys, repo, project, command, spec):
    before = {p: p.read_text() for p in project.rglob("*") if p.is_file()}
    args = [command, str(repo / "examples/clusters" / spec), "--workdir", str(project)]
    code, err = run(capsys, *args, *(["--yes"] if command != "render" else []))
    assert code == 2, err
    assert f"workspace {project}: ssh, ansible, node, terraform here were not written by trainkit" in err
    assert ".trainkit-workspace marker" in err
    assert {p: p.read_text() for p in project.rglob("*") if p.is_file()} == before


def test_a_workdir_under_a_file_names_the_workdir(capsys, repo, tmp_path):
    (tmp_path / "afile").write_text("x")
    code, err = run(capsys, "render", str(repo / "examples/clusters/aws.yaml"),
                    "--workdir", str(tmp_path / "afile" / "ws"))
    assert code == 2, err
    assert f"workspace {tmp_path / 'afile' / 'ws'}: cannot create it" in err


GOOD_INVENTORY = ("all:\n  vars: {}\n  children:\n    head:\n      hosts:\n        localhost: {ansible_connection: local}\n"
                  "    workers:\n      hosts: {}\n")
RECORD = '{"run_id": "digits-1", "config": "/x/digits.yaml", "attempts": []}'

# (id, workspace files {relative path: text}, command after SPEC, the file the error must name)
WORKSPACE_FILES = [
    ("inventory-truncated", {"inventory.yml": "all:\n  children: [\n"}, ["top", "--once"], "inventory.yml"),
    ("inventory-hand-edited", {"inventory.yml": "all:\n  hosts: {localhost: {}}\n"}, ["top", "--once"],
     "inventory.yml: not an inventory as trainkit writes it (no 'children' in it"),
    ("inventory-a-list", {"inventory.yml": "- localhost\n"}, ["train", "--detach"], "inventory.yml"),
    ("inventory-user-an-option", {"inventory.yml": GOOD_INVENTORY.replace(
        "{ansible_connection: local}", "{ansible_host: 10.0.0.1, ansible_user: '-oProxyCommand=x'}")},
     ["top", "--once"], "inventory.yml: host localhost: ansible_user: '-oProxyCommand=x' is not a POSIX login name"),
    ("group-vars-bad-yaml", {"inventory.yml": GOOD_INVENTORY, "group_vars/all.yml": "a: [\n"},
     ["train", "--detach"], "group_vars/all.yml"),
    ("run-json-truncated", {"inventory.yml": GOOD_INVENTORY, "runs/digits-1/run.json": RECORD[:30]},
     ["train", "--attach", "digits-1"], "runs/digits-1/run.json: the run's record is unreadable"),
    ("run-json-truncated-resume", {"inventory.yml": GOOD_INVENTORY, "runs/digits-1/run.json": RECORD[:30]},
     ["train", "--resume", "digits-1"], "runs/digits-1/run.json"),
    ("run-json-a-list", {"inventory.yml": GOOD_INVENTORY, "runs/digits-1/run.json": "[]"},
     ["cancel", "digits-1"], "runs/digits-1/run.json"),
    ("run-json-newest-truncated", {"inventory.yml": GOOD_INVENTORY, "runs/digits-1/run.json": "{"},
     ["logs"], "runs/digits-1/run.json"),
]


@pytest.mark.parametrize("case,files,command,expected", WORKSPACE_FILES, ids=[w[0] for w in WORKSPACE_FILES])
def test_a_damaged_workspace_file_is_named_with_a_fix(capsys, repo, tmp_path, case, files, command, expected):
    ws = tmp_path / "ws"
    (ws / "lock").parent.mkdir(parents=True)
    (ws / ".trainkit-workspace").write_text("local-demo\n")
    for rel, text in files.items():
        (ws / rel).parent.mkdir(parents=True, exist_ok=True)
        (ws / rel).write_text(text)
    before = {p: p.read_text() for p in ws.rglob("*") if p.is_file() and p.name != "lock"}
    code, err = run(capsys, command[0], str(repo / "examples/clusters/local.yaml"), "--workdir", str(ws),
                    *command[1:])
    assert code == 2, err
    assert f"{ws}/{expected}" in err, err
    assert "fix:" in err
    assert {p: p.read_text() for p in before} == before  # nothing rewritten


@pytest.mark.parametrize("name,text", [("outputs.json", '{"nodes": [{"na'), ("outputs.json", "[1, 2]"),
                                       ("applied.json", '{"applied_at": '), ("applied.json", '{"applied_at": "x"}'),
                                       ("plan.json", "\xff{")])
def test_the_workspace_caches_name_themselves_when_damaged(tmp_path, name, text):
    from trainkit.errors import InputError
    from trainkit.workspace import Workspace

    ws = Workspace.for_cluster("demo", tmp_path / "ws").ensure()
    for rel in ("plan.bin", "plan.fingerprint"):
        (ws.root / rel).write_text("x")
    (ws.root / name).write_text(text)
    read = {"outputs.json": ws.read_outputs, "applied.json": ws.applied_at, "plan.json": ws.saved_plan}[name]
    with pytest.raises(InputError) as err:
        read()
    assert str(ws.root / name) in err.value.message and "trainkit" in err.value.fix


def test_logs_for_a_rank_the_cluster_does_not_run_says_so(capsys, repo, tmp_path):
    ws = tmp_path / "ws"
    (ws / "runs" / "digits-1").mkdir(parents=True)
    (ws / ".trainkit-workspace").write_text("")
    (ws / "inventory.yml").write_text(GOOD_INVENTORY)
    (ws / "runs" / "digits-1" / "run.json").write_text(RECORD.replace('"attempts"', '"status": "running", "attempts"'))
    code, err = run(capsys, "logs", str(repo / "examples/clusters/local.yaml"), "--workdir", str(ws), "--rank", "99")
    assert code == 2, err  # it printed nothing and exited 0
    assert "--rank 99: the cluster runs 1 rank(s)" in err and "--rank 0 to 0" in err


def test_a_workdir_of_another_cluster_is_refused_and_its_stack_kept(capsys, repo, tmp_path):
    ws, clusters = tmp_path / "ws", repo / "examples/clusters"
    assert main_code(["render", str(clusters / "aws.yaml"), "--workdir", str(ws)]) == 0
    before = {p: p.read_bytes() for p in ws.rglob("*") if p.is_file()}
    capsys.readouterr()
    for args in (["render", str(clusters / "alicloud.yaml")], ["destroy", str(clusters / "local.yaml"), "-y"]):
        code, err = run(capsys, *args, "--workdir", str(ws))
        assert code == 2, err  # render replaced aws-demo's stack; destroy deleted it
        assert f"workspace {ws} belongs to cluster 'aws-demo', not" in err
    assert {p: p.read_bytes() for p in ws.rglob("*") if p.is_file()} == before


def test_a_cut_short_events_line_is_skipped_not_fatal(tmp_path):
    from trainkit.runs import record as runs

    (tmp_path / "events.jsonl").write_text('{"event": "started", "time": 1}\n{"event": "resumed", "time": 2}\n'
                                           '{"event": "resu')  # the controller was killed mid-append
    assert [e["event"] for e in runs.read_events(tmp_path)] == ["started", "resumed"]


def test_a_truncated_hosts_json_is_named(capsys, repo, tmp_path):
    ws = tmp_path / "ws"
    ws.mkdir()
    (ws / ".trainkit-workspace").write_text("")
    (ws / "inventory.yml").write_text(GOOD_INVENTORY)
    (ws / "hosts.json").write_text('{"active": ["gpu-')
    spec = tmp_path / "hosts.yaml"
    spec.write_text("name: lab\ncloud: hosts\nstorage: {data_disk: {enabled: false}}\nssh: {user: ops}\n"
                    "hosts: [{name: gpu-a, address: 10.0.0.1}]\n")
    code, err = run(capsys, "train", str(spec), "--workdir", str(ws), "--detach")
    assert code == 2, err
    assert f"{ws / 'hosts.json'}: unreadable or truncated" in err


def test_a_lock_that_is_a_folder_is_named(capsys, repo, tmp_path):
    (tmp_path / "ws" / "lock").mkdir(parents=True)
    (tmp_path / "ws" / ".trainkit-workspace").write_text("local-demo\n")
    code, err = run(capsys, "plan", str(repo / "examples/clusters/local.yaml"), "--workdir", str(tmp_path / "ws"))
    assert code == 2, err  # IsADirectoryError, exit 1
    assert f"{tmp_path / 'ws' / 'lock'}: cannot open the workspace lock" in err


def test_a_quoted_tilde_workdir_means_home_not_a_folder_named_tilde(capsys, monkeypatch, repo, tmp_path):
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    monkeypatch.chdir(tmp_path)
    assert main_code(["render", str(repo / "examples/clusters/aws.yaml"), "--workdir", "~/ws"]) == 0
    assert (tmp_path / "home" / "ws" / "terraform" / "main.tf").is_file()
    assert not (tmp_path / "~").exists()


def test_render_while_another_command_holds_the_workspace_waits_its_turn_with_exit_8(capsys, repo, tmp_path):
    from trainkit.workspace import Workspace

    ws = Workspace.for_cluster("aws-demo", tmp_path / "ws")
    with ws.lock("apply"):
        code, err = run(capsys, "render", str(repo / "examples/clusters/aws.yaml"), "--workdir", str(ws.root))
    assert code == 8, err  # it rewrote the stack under a running apply
    assert "in use by `trainkit apply`" in err
    assert not ws.terraform_dir.exists()
