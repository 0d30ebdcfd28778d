"""`trainkit check` and credential-error translation, per cloud. Credentials are faked in the
test's environment and HOME; nothing is contacted. No value of a variable may ever be printed."""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

import pytest
from click.testing import CliRunner

from trainkit import clouds, errors
from trainkit.cli import main
from trainkit.clouds.credentials import explain_failure

REPO = Path(__file__).resolve().parents[3]
# examples/clusters/<cloud>.yaml exists for every cloud, and each names a remote state backend.
SECRET = "S3cr3t-value-never-printed"


def every_variable() -> set[str]:
    names = set()
    for room in clouds.all_clouds():
        names.update(room.credential_variables())
        names.update(room.region_variables)
    return names


@dataclass
class Ran:
    exit_code: int
    output: str


def run_check(args, env: dict[str, str], home: Path) -> Ran:
    """`trainkit check ARGS` through the real entry point (its error rendering and exit codes)."""
    base = {n: "" for n in every_variable()}  # hide whatever the machine has
    runner = CliRunner()
    with runner.isolation(env={**base, **env, "HOME": str(home)}) as streams:
        out, err = streams[0], streams[1]
        try:
            main(["check", *args])
            code = 0
        except SystemExit as stop:
            code = stop.code or 0
        return Ran(code, out.getvalue().decode() + err.getvalue().decode())


def full_env(room) -> dict[str, str]:
    """The first alternative of every variable of the room's provider and backend sets."""
    env = {}
    for cs in (room.credentials[0], *room.backend_credentials[:1]):
        for alternatives in cs.variables:
            env[alternatives[0]] = SECRET + alternatives[0]
    return env


@pytest.mark.parametrize("cloud", clouds.TERRAFORM_TARGETS)
def test_check_passes_when_the_clouds_variables_are_set_and_prints_no_value(cloud, tmp_path):
    room = clouds.get(cloud)
    res = run_check([str(REPO / "examples/clusters" / f"{cloud}.yaml")], full_env(room), tmp_path)
    assert res.exit_code == 0, res.output
    assert SECRET not in res.output
    assert f"ok  {room.title}" in res.output
    for name in full_env(room):
        assert name in res.output  # named as present


@pytest.mark.parametrize("cloud", clouds.TERRAFORM_TARGETS)
def test_check_fails_with_the_variables_to_set_when_they_are_missing(cloud, tmp_path):
    room = clouds.get(cloud)
    res = run_check([str(REPO / "examples/clusters" / f"{cloud}.yaml")], {}, tmp_path)
    assert res.exit_code == errors.CREDENTIALS == 13, res.output  # as plan/apply exit for this cause
    assert f"missing: {room.title}: no credentials for the provider" in res.output
    assert room.credentials[0].variables[0][0] in res.output.split("missing:")[1]  # the fix names it
    assert f"{room.backend_type} state backend" in res.output


@pytest.mark.parametrize("cloud", clouds.TERRAFORM_TARGETS)
def test_check_json_reports_names_only(cloud, tmp_path):
    room = clouds.get(cloud)
    env = full_env(room)
    first = next(iter(env))
    res = run_check(["--cloud", cloud, "--json"], {first: env[first]}, tmp_path)
    assert SECRET not in res.output
    failure = json.loads(res.output[:res.output.rindex("}") + 1])  # stdout: one document, the error's
    assert failure["exit_code"] == errors.CREDENTIALS and "missing" in failure["error"]
    row = failure["result"]["clouds"][0]
    assert row["cloud"] == cloud and row["provider"]["ok"] is False
    assert row["provider"]["sets"][0]["variables"][first] is True
    assert res.exit_code == errors.CREDENTIALS


def test_a_profile_file_satisfies_the_clouds_that_read_one(tmp_path):
    for room in clouds.all_clouds():
        files = [f for cs in room.credentials for f in cs.files]
        if not files:
            continue
        home = tmp_path / room.name
        profile = home / files[0].removeprefix("~/")
        profile.parent.mkdir(parents=True)
        profile.write_text("[default]\n")
        assert run_check(["--cloud", room.name], {}, home).exit_code == 0, room.name


def test_huawei_obs_backend_needs_aws_variables_holding_huawei_keys(tmp_path):
    room = clouds.get("huaweicloud")
    provider_only = {alt[0]: SECRET for alt in room.credentials[0].variables}
    res = run_check([str(REPO / "examples/clusters/huaweicloud.yaml")], provider_only, tmp_path)
    assert res.exit_code == errors.CREDENTIALS
    assert "AWS_ACCESS_KEY_ID" in res.output and "obs state backend" in res.output
    assert SECRET not in res.output


def test_local_spec_needs_no_cloud_and_no_terraform(tmp_path):
    res = run_check([str(REPO / "examples/clusters/local.yaml")], {}, tmp_path)
    assert res.exit_code == 0, res.output
    assert "terraform" not in res.output


def test_too_old_terraform_fails_with_the_minimum(tmp_path):
    # A stand-in binary: an old Terraform cannot be installed here (only 1.11.4 is).
    fake = tmp_path / "terraform"
    fake.write_text('#!/bin/sh\necho \'{"terraform_version": "1.6.3"}\'\n')
    fake.chmod(0o755)
    res = run_check([str(REPO / "examples/clusters/aws-moto.yaml")],
                    {**full_env(clouds.get("aws")), "TRAINKIT_TERRAFORM": str(fake)}, tmp_path)
    assert res.exit_code == errors.MISSING_TOOL
    assert "terraform 1.6.3 is older than 1.10.0" in res.output


# Provider/backend error text as the providers and APIs document it (see each room's source).
FAILURES = {
    "aws": ["Error: No valid credential sources found",
            "api error InvalidClientTokenId: The security token included in the request is invalid.",
            "operation error ec2imds: GetMetadata, http response error StatusCode: 403"],
    "alicloud": ["ErrorCode: InvalidAccessKeyId.NotFound Message: Specified access key is not found.",
                 "SDKError: Code: SignatureDoesNotMatch"],
    "tencentcloud": ["[TencentCloudSDKError] Code=AuthFailure.SecretIdNotFound, Message=The SecretId is not found"],
    "huaweicloud": ['{"error_code":"APIGW.0301","error_msg":"Incorrect IAM authentication information"}',
                    "failed to authenticate:\nno auth means provided. Token, AK/SK or username/password "
                    "are required for authentication"],
}


@pytest.mark.parametrize("cloud,text", [(c, t) for c, ts in FAILURES.items() for t in ts])
def test_credential_errors_become_one_message_naming_the_clouds_variables(cloud, text):
    output = f"Initializing...\n╷\n│ Error: something\n│ {text}\n╵\n"
    err = explain_failure(cloud, output)
    assert err is not None
    room = clouds.get(cloud)
    assert room.title in err.message and "credentials" in err.message
    assert room.credentials[0].variables[0][0] in err.fix
    assert f"trainkit check --cloud {cloud}" in err.fix


@pytest.mark.parametrize("cloud,text", [("aws", "api error UnauthorizedOperation: You are not authorized"),
                                        ("aws", "AccessDenied: User is not authorized to perform: s3:GetObject"),
                                        ("tencentcloud", "Code=UnauthorizedOperation, Message=no permission")])
def test_permission_errors_say_the_credentials_work_but_lack_a_permission(cloud, text):
    err = explain_failure(cloud, text)
    assert err is not None and "lack a permission" in err.message


def test_other_failures_are_left_alone():
    for cloud in clouds.TERRAFORM_TARGETS:
        assert explain_failure(cloud, "Error: Unsupported argument\n  on main.tf line 3") is None
    assert explain_failure("local", "AuthFailure") is None
