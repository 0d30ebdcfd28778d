"""CLI conventions, through the real entry point `trainkit.cli.main`: -y is --yes, --json is
--format json, shared options are declared once, "apply first" exits 2, sizing warnings show once
and never on destroy/status/ssh."""

from __future__ import annotations

import importlib
import json
import re
from pathlib import Path

import click
import pytest

from trainkit.cli import COMMANDS, main


def run(argv: list[str], capsys) -> tuple[int, str, str]:
    """(exit code, stdout, stderr) of `trainkit ARGV` in this process."""
    with pytest.raises(SystemExit) as exited:
        main(argv)
    out, err = capsys.readouterr()
    return exited.value.code or 0, out, err


def commands() -> dict[str, click.Command]:
    found = {}
    for name, target in COMMANDS.items():
        module, attr = target.split(":")
        cmd = getattr(importlib.import_module(module), attr)
        subs = cmd.commands.items() if isinstance(cmd, click.Group) else [(None, cmd)]
        for sub, c in subs:
            found[f"{name} {sub}" if sub else name] = c
    return found


def options_of(cmd: click.Command) -> list[set[str]]:
    return [set(p.opts) for p in cmd.params if isinstance(p, click.Option)]


def test_every_yes_flag_also_answers_to_dash_y():
    with_yes = {name: opts for name, c in commands().items() for opts in options_of(c) if "--yes" in opts}
    assert {"apply", "destroy"} <= set(with_yes)
    assert all("-y" in opts for opts in with_yes.values()), with_yes


def test_every_json_flag_comes_with_format_and_the_other_way_round():
    for name, cmd in commands().items():
        flat = {o for opts in options_of(cmd) for o in opts}
        if name == "run":  # `run --json` prints summary.json after training: not an output format
            continue
        assert ("--json" in flat) == ("--format" in flat), name
    flat = {o for opts in options_of(commands()["plan"]) for o in opts}
    assert {"--json", "--format"} <= flat


def test_shared_options_are_declared_in_one_module(repo):
    for path in (repo / "trainkit" / "commands").glob("*.py"):
        if path.name == "options.py":
            continue
        text = path.read_text()
        shared = ('"--workdir"', '"--prices"', '"--yes"', '"--format"') + (() if path.name == "run.py" else ('"--json"',))
        for option in shared:
            assert option not in text, f"{path.name} declares {option} again: use trainkit.commands.options"


def test_json_is_short_for_format_json(repo, capsys):
    spec = str(repo / "examples/clusters/aws-moto.yaml")
    code_a, short, _ = run(["validate", spec, "--json"], capsys)
    code_b, long, _ = run(["validate", spec, "--format", "json"], capsys)
    assert code_a == code_b == 0 and short == long and json.loads(short)["cloud"]
    code, cat_short, _ = run(["catalog", "--cloud", "aws", "--json"], capsys)
    assert code == 0 and json.loads(cat_short) == json.loads(run(["catalog", "--cloud", "aws", "--format",
                                                                   "json"], capsys)[1])


def test_json_with_another_format_is_a_usage_error(repo, capsys, tmp_path):
    code, _, err = run(["plan", str(repo / "examples/clusters/local.yaml"), "--workdir", str(tmp_path),
                        "--format", "markdown", "--json"], capsys)
    assert code == 2 and "--json is --format json" in err


def test_plan_takes_json_too(repo, capsys, tmp_path):
    code, out, _ = run(["plan", str(repo / "examples/clusters/local.yaml"), "--workdir", str(tmp_path), "--json"],
                       capsys)
    assert code == 0 and json.loads(out)["cluster"] == "local-demo"


@pytest.mark.parametrize("command", [["train"], ["top", "--once"]])
def test_commands_on_a_never_applied_local_cluster_say_apply_first(command, repo, capsys, tmp_path):
    spec = str(repo / "examples/clusters/local.yaml")
    code, _, err = run([command[0], spec, "--workdir", str(tmp_path / "ws"), *command[1:]], capsys)
    assert code == 2, err
    assert "apply first" in err and "trainkit apply" in err
    assert not (tmp_path / "ws" / "runs").exists()  # nothing started


def hosts_spec(tmp_path: Path) -> Path:
    key = tmp_path / "id_ed25519"
    key.write_text("not read here\n")
    key.chmod(0o600)
    spec = tmp_path / "hosts.yaml"
    spec.write_text(f"name: pair\ncloud: hosts\nhosts:\n  - {{name: a, address: 10.9.0.1}}\n"
                    f"ssh: {{user: ubuntu, private_key: {key}}}\n"
                    "storage: {data_disk: {enabled: false}, nas: {enabled: false}}\n")
    return spec


@pytest.mark.parametrize("command", ["ssh", "train"])
def test_commands_on_never_applied_hosts_say_apply_first(command, capsys, tmp_path):
    code, _, err = run([command, str(hosts_spec(tmp_path)), "--workdir", str(tmp_path / "ws")], capsys)
    assert code == 2, err
    assert "apply first" in err


@pytest.mark.parametrize("target", ["local", "hosts"])
def test_status_of_a_never_applied_cluster_is_not_created_and_exits_0(target, repo, capsys, tmp_path):
    # the same answer as a cloud target whose state holds nothing (tests/infra/test_aws_lifecycle.py)
    spec = str(repo / "examples/clusters/local.yaml") if target == "local" else str(hosts_spec(tmp_path))
    code, out, err = run(["status", spec, "--workdir", str(tmp_path / "ws")], capsys)
    assert code == 0, err
    assert f"({target}): not created" in out
    code, out, _ = run(["status", spec, "--workdir", str(tmp_path / "ws"), "--json"], capsys)
    assert code == 0 and json.loads(out)["exists"] is False and json.loads(out)["nodes"] == []


def test_sizing_warnings_show_once_on_validate_and_render_and_never_on_destroy(repo, capsys, tmp_path,
                                                                                 monkeypatch):
    for name in ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN", "AWS_PROFILE"):
        monkeypatch.delenv(name, raising=False)  # destroy's leftover check must not reach a real cloud
    monkeypatch.setenv("AWS_SHARED_CREDENTIALS_FILE", str(tmp_path / "none"))
    monkeypatch.setenv("AWS_CONFIG_FILE", str(tmp_path / "none"))
    monkeypatch.setenv("AWS_EC2_METADATA_DISABLED", "true")
    spec = str(repo / "examples/clusters/aws-moto.yaml")
    code, _, err = run(["validate", spec], capsys)
    warnings = [line for line in err.splitlines() if line.startswith("warning:")]
    assert code == 0 and warnings and len(warnings) == len(set(warnings))
    code, _, err = run(["render", spec, "--workdir", str(tmp_path)], capsys)
    assert code == 0 and sorted(re.findall(r"^warning: .*$", err, re.M)) == sorted(warnings)
    code, out, err = run(["destroy", spec, "--workdir", str(tmp_path), "-y"], capsys)
    # no credentials here: the leftover check cannot ask the cloud, so destroy fails and keeps the
    # workspace (exit 13, missing credentials, as plan and apply) instead of claiming nothing is left
    assert code == 13 and "cannot ask AWS" in err and "no credentials" in err, err
    assert not [w for w in warnings if w in err + out]


def test_destroy_dash_y_does_not_prompt(repo, capsys, tmp_path):
    (tmp_path / "runs").mkdir(parents=True)
    (tmp_path / ".trainkit-workspace").write_text("local-demo\n")  # a workspace trainkit made
    code, out, err = run(["destroy", str(repo / "examples/clusters/local.yaml"), "--workdir", str(tmp_path), "-y"],
                         capsys)
    assert code == 0, err
    assert "Type the cluster name" not in err and "nothing to destroy" in out  # never applied there


def test_runs_and_logs_on_a_cluster_with_no_runs_agree(repo, capsys, tmp_path):
    spec, ws = str(repo / "examples/clusters/local.yaml"), str(tmp_path / "ws")
    said = {}
    for command in ("runs", "logs"):
        code, out, err = run([command, spec, "--workdir", ws], capsys)
        said[command] = (code, err.strip())
        assert "Traceback" not in err and out == "", out
    assert said["runs"] == said["logs"] and said["runs"][0] == 0, said
    assert "no runs on this cluster yet" in said["runs"][1] and "trainkit train" in said["runs"][1]


def test_validate_given_a_train_config_as_the_spec_says_use_config(repo, capsys):
    code, _, err = run(["validate", str(repo / "examples/train/digits.yaml")], capsys)
    assert code == 2, err
    assert "this is a train config" in err and "--config" in err
    assert "unknown field" not in err and err.count("\n") <= 3, err  # one problem, not one per key
    code, _, err = run(["validate", str(repo / "examples/clusters/local.yaml")], capsys)  # a spec still is one
    assert code == 0, err
