"""`--json` on every command, errors included: each command's failure path, run with --json
through the real entry point, prints one JSON document on stdout, {format_version, error, fix,
notes, exit_code}, whose exit_code is the process's (trainkit.errors.TrainkitError.as_json)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from test_cli_conventions import commands, options_of, run

from trainkit import errors


def _failing(repo: Path, tmp: Path) -> dict[str, list[str]]:
    """A command line that fails, per command (a bad spec where the command takes one)."""
    bad = tmp / "bad.yaml"
    bad.write_text("name: x\ncloud: local\n")  # the name is too short
    local = str(repo / "examples/clusters/local.yaml")
    ws = ["--workdir", str(tmp / "ws")]
    (tmp / "a-file").write_text("")
    (tmp / "nodata.yaml").write_text("name: x\n")
    (tmp / "empty").mkdir()
    return {
        "check": ["check", "--cloud", "aws"],
        "examples": ["examples", "--copy", str(tmp / "a-file")],
        "docs": ["docs", "no-such-guide"],
        "validate": ["validate", str(bad)],
        "catalog": ["catalog", "--prices", str(bad)],
        "render": ["render", str(bad)],
        "plan": ["plan", str(bad), *ws],
        "apply": ["apply", str(repo / "examples/clusters/aws.yaml"), *ws, "--yes"],  # placeholders
        "train": ["train", local, *ws],  # apply first
        "runs": ["runs", str(bad)],
        "logs": ["logs", str(bad)],
        "cancel": ["cancel", local, "no-such-run", *ws],
        "destroy": ["destroy", str(bad), "--yes"],
        "status": ["status", str(bad)],
        "ssh": ["ssh", local, *ws],  # the local target is this machine
        "cost": ["cost", str(bad)],
        "prices refresh": ["prices", "refresh", "--cloud", "nowhere", "--region", "x"],
        "run": ["run", str(tmp / "no-such-config.yaml")],
        "export": ["export", str(tmp / "empty")],  # nothing to export
        "stage": ["stage", str(tmp / "nodata.yaml"), "--root", str(tmp / "root")],
        "top": ["top", local, *ws, "--once"],
        "doctor": ["doctor", local, *ws],
    }


NAMES = ("check", "examples", "docs", "validate", "catalog", "render", "plan", "apply", "train", "runs", "logs",
         "cancel", "destroy", "status", "ssh", "cost", "prices refresh", "run", "export", "stage", "top", "doctor")


def test_every_command_has_a_failure_case_here(repo, tmp_path):
    assert set(_failing(repo, tmp_path)) == set(NAMES) == set(commands())


def test_every_command_takes_json():
    missing = [name for name, cmd in commands().items()
               if "--json" not in {o for opts in options_of(cmd) for o in opts}]
    assert not missing, missing


@pytest.mark.parametrize("name", NAMES)
def test_a_failure_with_json_is_one_json_document_on_stdout(name, repo, tmp_path, capsys, monkeypatch):
    for var in ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_PROFILE", "AWS_SESSION_TOKEN"):
        monkeypatch.delenv(var, raising=False)
    monkeypatch.setenv("AWS_SHARED_CREDENTIALS_FILE", str(tmp_path / "none"))
    monkeypatch.setenv("AWS_CONFIG_FILE", str(tmp_path / "none"))
    argv = _failing(repo, tmp_path)[name]
    code, out, err = run([*argv, "--json"], capsys)
    assert code != 0, (name, out, err)
    doc = json.loads(out)  # the whole of stdout: one document
    assert doc["format_version"] == errors.FORMAT_VERSION
    assert doc["exit_code"] == code and doc["error"] and set(doc) >= {"fix", "notes"}
    assert "Traceback" not in err and "internal error" not in err, err
    assert doc["error"].split("\n")[0][:40] in err  # the same message for people, on stderr


def test_a_failure_without_json_prints_nothing_on_stdout(repo, tmp_path, capsys):
    code, out, err = run(["docs", "no-such-guide"], capsys)
    assert code == errors.BAD_INPUT and out == "" and "no guide named" in err


def test_a_usage_error_with_json_is_json_too(capsys):
    code, out, _ = run(["runs", "--json"], capsys)  # SPEC missing (`status` alone lists the clusters)
    assert code == 2 and json.loads(out)["exit_code"] == 2 and "SPEC" in json.loads(out)["error"]


def test_a_success_object_carries_the_format_version(repo, capsys):
    code, out, _ = run(["validate", str(repo / "examples/clusters/local.yaml"), "--json"], capsys)
    assert code == 0 and json.loads(out)["format_version"] == errors.FORMAT_VERSION
