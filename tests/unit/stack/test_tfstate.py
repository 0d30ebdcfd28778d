"""Terraform's own state: a damaged local terraform.tfstate (0 bytes, garbage, not UTF-8, the wrong
shape, a newer format) stops every command before terraform reads it, with exit 3 naming the file
and terraform's backup, and nothing deleted; every terraform call whose output trainkit parses
runs with -no-color, proven against a terraform that colours everything without it (real
terraform colours "No state file was found!", which was read as resource addresses)."""

from __future__ import annotations

import json
import os
import stat
import sys

import pytest
from cli_run import run_cli as run

from trainkit.errors import TrainkitError
from trainkit.stack.terraform import TerraformRunner, terraform_path, terraform_version
from trainkit.stack.tfstate import check_state, state_problem

GOOD = {"version": 4, "serial": 3, "lineage": "x", "terraform_version": "1.11.4",
        "resources": [{"mode": "managed", "type": "aws_vpc", "name": "this", "provider": "p",
                       "instances": [{"attributes": {"id": "vpc-1"}}]}], "outputs": {}}
DAMAGE = {  # name -> bytes of terraform.tfstate
    "empty": b"", "blank": b"\n\n", "truncated": json.dumps(GOOD).encode()[:40], "garbage": b"\x00garbage",
    "not-utf8": b'{"version": 4, "x": "\xff\xfe"}', "a-list": b"[]", "no-version": b"{}",
    "newer": json.dumps({**GOOD, "version": 5}).encode(), "resources-a-map": json.dumps({**GOOD, "resources": {}}).encode(),
}

# A terraform stand-in: answers each parsed command as terraform does, and colours every line
# unless -no-color is given (terraform colours by default, whatever stdout is). Every call is logged.
FAKE = r'''#!{python}
import json, os, sys
args = sys.argv[1:]
with open(os.environ["FAKE_TF_LOG"], "a") as log:
    log.write(" ".join(args) + "\n")
state = os.path.join(os.getcwd(), "terraform.tfstate")
held = json.load(open(state)) if os.path.exists(state) else None
if args[:2] == ["state", "list"]:
    out, rc = (["aws_vpc.this"], 0) if held else (["No state file was found!", "", "State management commands require a state file."], 1)
elif args[:2] == ["state", "pull"]:
    out, rc = ([json.dumps(held)] if held else []), 0
elif args[:1] == ["output"]:
    out, rc = [json.dumps({{"nodes": {{"value": [], "type": "list", "sensitive": False}}}})], 0
elif args[:1] == ["version"]:
    out, rc = [json.dumps({{"terraform_version": "1.11.4"}})], 0
elif args[:1] == ["show"]:
    out, rc = [json.dumps({{"format_version": "1.2", "resource_changes": []}})], 0
else:
    out, rc = [], 0
colour = "-no-color" not in args
for line in out:
    print("\x1b[31m" + line + "\x1b[0m" if colour and line else line)
sys.exit(rc)
'''


@pytest.fixture
def fake_terraform(tmp_path, monkeypatch):
    path, log = tmp_path / "terraform", tmp_path / "terraform-calls"
    path.write_text(FAKE.format(python=sys.executable))
    path.chmod(path.stat().st_mode | stat.S_IXUSR)
    log.write_text("")
    monkeypatch.setenv("TRAINKIT_TERRAFORM", str(path))
    monkeypatch.setenv("FAKE_TF_LOG", str(log))
    return log


@pytest.fixture
def runner(tmp_path, fake_terraform):
    folder = tmp_path / "stack"
    folder.mkdir()
    return TerraformRunner(folder, tmp_path / "terraform.log", cloud="aws")


@pytest.mark.parametrize("name", DAMAGE)
def test_a_damaged_state_is_named_before_terraform_runs(runner, fake_terraform, name):
    state = runner.workdir / "terraform.tfstate"
    state.write_bytes(DAMAGE[name])
    assert state_problem(state)
    for call in (runner.state_list, runner.state_json, runner.outputs, runner.init, runner.destroy):
        with pytest.raises(TrainkitError) as err:
            call()
        assert err.value.exit_code == 3 and f"terraform state {state}" in err.value.message
        assert "terraform.tfstate.backup" in err.value.fix
    assert fake_terraform.read_text() == ""  # terraform never ran on it
    assert state.read_bytes() == DAMAGE[name]


def test_the_fix_restores_terraforms_backup_when_it_is_whole(tmp_path):
    (tmp_path / "terraform.tfstate").write_bytes(b"")
    (tmp_path / "terraform.tfstate.backup").write_text(json.dumps(GOOD))
    with pytest.raises(TrainkitError) as err:
        check_state(tmp_path)
    assert "is empty (0 bytes): terraform would read it as no state at all" in err.value.message
    assert f"cp {tmp_path}/terraform.tfstate.backup {tmp_path}/terraform.tfstate" in err.value.fix
    assert "(1 resource(s))" in err.value.fix
    (tmp_path / "terraform.tfstate.backup").write_bytes(b"\xff")
    with pytest.raises(TrainkitError) as err:
        check_state(tmp_path)
    assert "is damaged too" in err.value.fix and "cp " not in err.value.fix
    assert sorted(p.name for p in tmp_path.iterdir()) == ["terraform.tfstate", "terraform.tfstate.backup"]


@pytest.mark.parametrize("state", [None, GOOD, {"version": 3, "serial": 1, "modules": []}])
def test_no_state_or_a_whole_one_passes(tmp_path, state):
    if state is not None:
        (tmp_path / "terraform.tfstate").write_text(json.dumps(state))
    check_state(tmp_path)


@pytest.mark.parametrize("forced", ["", "-no-color=false"])
def test_every_parsed_call_reads_terraforms_answer_when_colour_is_on_by_default(runner, fake_terraform, monkeypatch,
                                                                              forced):
    monkeypatch.setenv("TF_CLI_ARGS", forced)  # nothing in the environment turns colour off
    assert runner.state_list() == []  # no state: not "No state file was found!" as an address
    (runner.workdir / "terraform.tfstate").write_text(json.dumps(GOOD))
    assert runner.state_list() == ["aws_vpc.this"]
    assert runner.state_json()["values"]["root_module"]["resources"][0]["values"] == {"id": "vpc-1"}
    assert runner.outputs() == {"nodes": {"value": [], "type": "list", "sensitive": False}}
    assert runner.show_json(runner.workdir / "plan.bin") == {"format_version": "1.2", "resource_changes": []}
    assert terraform_version(terraform_path()) == "1.11.4"
    calls = fake_terraform.read_text().splitlines()
    assert len(calls) == 6 and all("-no-color" in call.split() for call in calls), calls


@pytest.mark.parametrize("command", [["destroy", "-y"], ["status"]])
def test_status_and_destroy_on_a_damaged_state_exit_3_and_delete_nothing(capsys, repo, tmp_path, fake_terraform,
                                                                         command):
    ws = tmp_path / "ws"
    assert run(capsys, "render", str(repo / "examples/clusters/aws.yaml"), "--workdir", str(ws))[0] == 0
    state = ws / "terraform" / "terraform.tfstate"
    state.write_bytes(b"")
    before = {p for p in ws.rglob("*") if p.is_file() and not p.name.startswith("terraform.log")}
    code, err = run(capsys, command[0], str(repo / "examples/clusters/aws.yaml"), "--workdir", str(ws), *command[1:])
    assert code == 3, err  # destroy said "nothing to destroy" and removed the workspace
    assert f"terraform state {state} is empty (0 bytes)" in err and "terraform.tfstate.backup" in err
    assert before <= {p for p in ws.rglob("*") if p.is_file()} and state.read_bytes() == b""
    assert os.environ.get("FAKE_TF_LOG") and fake_terraform.read_text() == ""


@pytest.mark.parametrize("command", [["doctor"], ["ssh"]])
def test_a_cloud_cluster_never_applied_is_not_called_half_there(capsys, repo, tmp_path, fake_terraform, command):
    """terraform colours "No state file was found!" by default: read without -no-color, its lines
    were resource addresses, and a cluster never applied was "half there ... may still bill"."""
    ws = tmp_path / "ws"
    code, err = run(capsys, command[0], str(repo / "examples/clusters/aws.yaml"), "--workdir", str(ws))
    assert code == 2, err
    assert "does not exist" in err and "apply first" in err and "half there" not in err
    assert any(call.startswith("state list -no-color") for call in fake_terraform.read_text().splitlines())
