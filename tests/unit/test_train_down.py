"""`train --up --down` (trainkit/commands/down.py) and the Makefile's main job that runs it: the
destroy happens whatever the run does, a failure keeps its exit code, a busy cluster is left
alone, and a destroy that fails comes first with the run's failure in a note."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest
from cli_run import run_cli

from trainkit import errors
from trainkit.cli import main
from trainkit.workspace import Workspace


def _make_n(repo: Path, *goals: str) -> list[str]:
    """The trainkit command lines `make -n GOALS` would run (the venv step left out)."""
    proc = subprocess.run(["make", "-n", "-C", str(repo), *goals], capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr
    return [line for line in proc.stdout.splitlines() if "bin/trainkit " in line]


def test_the_main_job_is_one_command_that_destroys_whatever_happens(repo):
    (line,) = _make_n(repo, "cluster", "train", "destroy")  # no separate apply nor destroy
    assert " train " in line and "--up" in line and "--down" in line and "--yes" in line


def test_each_goal_alone_runs_its_own_command(repo):
    (apply,) = _make_n(repo, "cluster")
    (destroy,) = _make_n(repo, "destroy")
    (train,) = _make_n(repo, "train")
    assert " apply " in apply and " destroy " in destroy
    assert "--up" not in train and "--down" not in train
    (both,) = _make_n(repo, "cluster", "train")  # applied by train, nothing destroyed
    assert "--up" in both and "--down" not in both


def test_a_failed_run_is_torn_down_and_keeps_its_exit_code(repo, tmp_path, capsys):
    # never applied: the run fails with "apply first" (2); --down destroys (nothing there) all the same
    code, err = run_cli(capsys, "train", str(repo / "examples/clusters/local.yaml"), "--workdir", str(tmp_path),
                        "--down")
    assert code == errors.BAD_INPUT
    assert "has not been applied" in err
    assert "--down: destroying cluster local-demo (after a failure)" in err
    assert "note: --down: cluster local-demo was destroyed after this failure" in err


def test_a_destroy_that_fails_comes_first_and_names_the_run_failure(repo, tmp_path, capsys, monkeypatch):
    monkeypatch.setenv("TRAINKIT_TERRAFORM", str(tmp_path / "no-terraform"))  # both steps need terraform
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "testing")  # destroy checks credentials before terraform
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "testing")
    spec = str(repo / "examples/clusters/aws.yaml")  # an s3 backend: destroy must reach terraform
    code, err = run_cli(capsys, "train", spec, "--workdir", str(tmp_path / "ws"), "--down")
    assert code == errors.MISSING_TOOL
    assert "--down: destroying cluster aws-demo (after a failure)" in err
    assert "note: before the destroy: TRAINKIT_TERRAFORM=" in err  # the run's own failure
    assert f"--down could not destroy the cluster: it may still bill; finish it with `trainkit destroy {spec} " \
           f"--workdir {tmp_path / 'ws'} --yes`" in err


def test_a_busy_cluster_is_not_destroyed(repo, tmp_path, capsys):
    ws = Workspace.for_cluster("local-demo", str(tmp_path))
    ws.ensure()
    ws.inventory_yml.write_text("all: {hosts: {localhost: {}}}\n")  # as if applied: destroy would clean up
    with ws.lock("another command"):
        code, err = run_cli(capsys, "train", str(repo / "examples/clusters/local.yaml"), "--workdir",
                            str(tmp_path), "--down", "--no-doctor")
    assert code == errors.LOCKED
    assert "--down: destroying" not in err and ws.inventory_yml.exists()
    assert "--down destroyed nothing: another command or run is using the cluster" in err


def test_down_with_detach_is_a_usage_error(repo, tmp_path, capsys):
    code, err = run_cli(capsys, "train", str(repo / "examples/clusters/local.yaml"), "--workdir", str(tmp_path),
                        "--down", "--detach")
    assert code == 2 and "--down destroys the cluster when the run ends: drop --detach" in err


def test_apply_ends_with_what_to_run_next(repo, tmp_path, capsys):
    spec = str(repo / "examples/clusters/local.yaml")
    with pytest.raises(SystemExit) as done:
        main(["apply", spec, "--workdir", str(tmp_path / "ws"), "--yes", "--no-provision"])
    out = capsys.readouterr().out
    assert done.value.code == 0, out
    lines = out.splitlines()
    block = lines[lines.index("next:") + 1:]
    assert [line.split("  #")[0].strip() for line in block] == [
        f"trainkit train {spec} --workdir {tmp_path / 'ws'} --config digits",
        f"trainkit status {spec} --workdir {tmp_path / 'ws'}",
        f"trainkit destroy {spec} --workdir {tmp_path / 'ws'} --yes"]


def test_up_refuses_an_example_s_placeholders_before_anything_exists(repo, tmp_path, capsys):
    code, err = run_cli(capsys, "train", str(repo / "examples/clusters/aws.yaml"), "--workdir", str(tmp_path / "ws"),
                        "--up", "--down", "--yes")
    assert code == errors.BAD_INPUT and "network.admin_cidrs[0]" in err and "backend.bucket" in err
    assert "--down: destroying" not in err  # nothing was created, so nothing to tear down


def test_the_specs_down_is_the_default_of_down_only_where_a_run_is_followed_to_its_end(tmp_path, capsys):
    """spec `down: true` with a plain --detach (nobody follows the run): not a usage error, the
    spec's default does not apply; an explicit --down still is one."""
    key = tmp_path / "id_ed25519"
    key.write_text("-----BEGIN OPENSSH PRIVATE KEY-----\nx\n-----END OPENSSH PRIVATE KEY-----\n")
    spec = tmp_path / "lab.yaml"
    spec.write_text("name: lab\ncloud: hosts\ndown: true\nssh: {private_key: " + str(key) + "}\n"
                    "hosts: [{name: n0, address: 10.0.0.10}]\n")
    code, err = run_cli(capsys, "train", str(spec), "--workdir", str(tmp_path / "ws"), "--detach")
    assert code == 2 and "has not been applied" in err and "--down destroys" not in err, err
    code, err = run_cli(capsys, "train", str(spec), "--workdir", str(tmp_path / "ws"), "--detach", "--down")
    assert code == 2 and "--down destroys the cluster when the run ends: drop --detach" in err, err
