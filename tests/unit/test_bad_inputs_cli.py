"""Bad input from outside, through the real CLI entry point (`trainkit.cli.main`): a --workdir that
is someone else's folder or cannot exist, workspace files edited or truncated by hand, options and
values the commands do not take. Each exits with its code from trainkit/errors.py, names the field
or file, prints no traceback and loses no file."""

from __future__ import annotations

import pytest

from trainkit.cli import main


def run(capsys, *args: str) -> tuple[int, str]:
    """(exit code, stderr) of `trainkit ARGS`; fails on a traceback or an internal error."""
    with pytest.raises(SystemExit) as exc:
        main(list(args))
    _, err = capsys.readouterr()
    assert "Traceback" not in err and "internal error" not in err, err
    return exc.value.code, err


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
    assert f"--workdir {project}: ssh, ansible, node, terraform here were not written by trainkit" in err
    assert {p: p.read_text() for p in project.rglob("*") if p.is_file()} == before


def test_a_workdir_under_a_file_names_the_workdir(capsys, repo, tmp_path):
    (tmp_path / "afile").write_text("x")
    code, err = run(capsys, "render", str(repo / "examples/clusters/aws.yaml"),
                    "--workdir", str(tmp_path / "afile" / "ws"))
    assert code == 2, err
    assert f"--workdir {tmp_path / 'afile' / 'ws'}: cannot create the workspace" in err
