"""Links are never written or deleted through: a symbolic link inside a workspace (or under an
`examples --copy` destination) that trainkit did not make is refused with exit 2 naming it, and the
files it points to stay as they were. One test per writer: render (the CLI and its writer),
destroy (the CLI and the workspace's cleanup), `examples --copy`."""

from __future__ import annotations

import os

import pytest
from cli_run import run_cli as run

from trainkit.cli import main
from trainkit.errors import InputError


def snapshot(folder):
    return {p: p.read_bytes() for p in folder.rglob("*") if p.is_file()}


@pytest.fixture
def users_modules(tmp_path):
    """The user's own module folder, with a main.tf render would overwrite."""
    mine = tmp_path / "my-modules" / "aws"
    mine.mkdir(parents=True)
    (mine / "main.tf").write_text("# the user's own module\n")
    return mine.parent


@pytest.fixture
def linked_ws(repo, tmp_path, users_modules):
    """A rendered aws workspace whose terraform/modules was replaced by a link to the user's modules."""
    ws = tmp_path / "ws"
    with pytest.raises(SystemExit) as exc:
        main(["render", str(repo / "examples/clusters/aws.yaml"), "--workdir", str(ws)])
    assert exc.value.code == 0
    import shutil
    shutil.rmtree(ws / "terraform" / "modules")
    (ws / "terraform" / "modules").symlink_to(users_modules)
    return ws


def test_render_refuses_a_linked_modules_folder_and_leaves_the_users_module(capsys, repo, linked_ws, users_modules):
    before = snapshot(users_modules)
    code, err = run(capsys, "render", str(repo / "examples/clusters/aws.yaml"), "--workdir", str(linked_ws))
    assert code == 2, err  # it overwrote the user's main.tf and added seven files
    assert f"{linked_ws / 'terraform' / 'modules'} (a link to {users_modules})" in err
    assert f"rm {linked_ws / 'terraform' / 'modules'}" in err
    assert snapshot(users_modules) == before


def test_destroy_refuses_a_linked_modules_folder_and_deletes_nothing_through_it(capsys, repo, linked_ws,
                                                                                 users_modules):
    before = snapshot(users_modules)
    code, err = run(capsys, "destroy", str(repo / "examples/clusters/aws.yaml"), "--workdir", str(linked_ws), "-y")
    assert code == 2, err
    assert f"{linked_ws / 'terraform' / 'modules'} (a link to {users_modules})" in err
    assert snapshot(users_modules) == before and (linked_ws / "terraform" / "modules").is_symlink()


def test_the_workspace_cleanup_never_unlinks_through_a_link(linked_ws, users_modules):
    from trainkit.workspace import Workspace

    ws = Workspace(linked_ws, "aws-demo")
    (users_modules / "aws" / "outputs.tf").write_text("# the user's outputs\n")  # a name the manifest lists
    before = snapshot(users_modules)
    with pytest.raises(InputError) as err:
        ws.remove_cluster_files()
    assert "terraform/modules" in err.value.message
    ws._remove_stack(ws._rendered())  # even past check_ours: the link is skipped, never entered
    assert snapshot(users_modules) == before


def test_the_render_writer_refuses_a_link_on_any_path_it_writes(tmp_path, users_modules):
    from trainkit.stack.render import write_files

    root = tmp_path / "terraform"
    root.mkdir()
    (root / "modules").symlink_to(users_modules)
    before = snapshot(users_modules)
    with pytest.raises(InputError) as err:
        write_files({"main.tf": "x\n", "modules/aws/main.tf": "overwritten\n", "modules/aws/new.tf": "y\n"}, root)
    assert str(root / "modules") in err.value.message and err.value.exit_code == 2
    assert snapshot(users_modules) == before and not (root / "main.tf").exists()


@pytest.mark.parametrize("link", ["file", "folder"])
def test_examples_copy_refuses_a_link_under_the_destination(capsys, tmp_path, link):
    dest, elsewhere = tmp_path / "ex", tmp_path / "elsewhere"
    (dest / "clusters").mkdir(parents=True)
    elsewhere.mkdir()
    if link == "file":  # dangling: exists() is False, and a plain copy writes the file it names
        os.symlink(elsewhere / "written-through.yaml", dest / "clusters" / "local.yaml")
        shown = dest / "clusters" / "local.yaml"
    else:
        os.symlink(elsewhere, dest / "train")
        shown = dest / "train"
    code, err = run(capsys, "examples", "--copy", str(dest))
    assert code == 2, err
    assert f"{shown} (a link to {elsewhere}" in err and "fix: remove the link" in err
    assert list(elsewhere.iterdir()) == []


def test_a_link_in_a_workspace_is_refused_before_any_command_runs(capsys, repo, tmp_path):
    ws = tmp_path / "ws"
    (ws / "runs").mkdir(parents=True)
    (ws / ".trainkit-workspace").write_text("local-demo\n")
    (tmp_path / "mine.txt").write_text("mine\n")
    (ws / "inventory.yml").symlink_to(tmp_path / "mine.txt")
    code, err = run(capsys, "apply", str(repo / "examples/clusters/local.yaml"), "--workdir", str(ws), "--yes")
    assert code == 2, err
    assert f"{ws / 'inventory.yml'} (a link to {tmp_path / 'mine.txt'})" in err
    assert (tmp_path / "mine.txt").read_text() == "mine\n"
