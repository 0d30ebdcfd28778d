"""A failed `terraform init` blames what failed: the state backend only when terraform was reaching
it; a terraform that prints nothing, or a broken CLI configuration, is named as such (both were
reported as "the state backend could not be read")."""

from __future__ import annotations

import stat

import pytest
from cli_run import run_cli as run

from trainkit.stack.state import init_stage

CLI_CONFIG = ("There are some problems with the CLI configuration:\n╷\n│ Error: Error parsing /x/bad.tfrc: At 1:10: "
              "expected: IDENT | STRING got: LBRACE\n│\n╵\n\nAs a result of the above problems, Terraform may not "
              "behave as intended.\n\n\nInitializing the backend...\nInitializing provider plugins...\n\n"
              "Error: Failed to query available provider packages\n")
WARNING_ONLY = ("There are some problems with the CLI configuration:\n╷\n│ Warning: Unable to open CLI configuration "
                "file\n│\n╵\n\n\nInitializing the backend...\n\nError: Failed to get existing workspaces: "
                "S3 bucket \"no-such-bucket\" does not exist.\n")
PROVIDERS = ("Initializing the backend...\nInitializing provider plugins...\n- Finding x...\n\n"
             "Error: Failed to query available provider packages\n")


@pytest.mark.parametrize("output,stage", [("", "silent"), ("\n  \n", "silent"), (CLI_CONFIG, "cli-config"),
                                          (WARNING_ONLY, "backend"), (PROVIDERS, "providers"),
                                          ("Initializing modules...\n\nError: Module not installed\n", "modules"),
                                          ("Initializing the backend...\nInitializing modules...\n\nError: Failed to "
                                           "get existing workspaces: S3 bucket\n", "backend")])
def test_the_stage_a_failed_init_stopped_at(output, stage):
    assert init_stage(output) == stage


@pytest.mark.parametrize("script,said", [
    ("exit 1", "terraform init failed without printing anything"),
    (f"printf '{CLI_CONFIG}' | sed 's/%/%%/g'; exit 1", "terraform's CLI configuration"),
])
def test_status_names_a_silent_terraform_or_its_cli_config_not_the_backend(capsys, monkeypatch, repo, tmp_path,
                                                                          script, said):
    fake = tmp_path / "terraform"
    fake.write_text(f"#!/bin/sh\n{script}\n")
    fake.chmod(fake.stat().st_mode | stat.S_IXUSR)
    monkeypatch.setenv("TRAINKIT_TERRAFORM", str(fake))
    code, err = run(capsys, "status", str(repo / "examples/clusters/aws.yaml"), "--workdir", str(tmp_path / "ws"))
    assert code != 0 and said in err, err
    assert "state backend" not in err and "check `backend:`" not in err
