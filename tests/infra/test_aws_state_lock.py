"""The state backend's lock held by another run (a colleague's apply, a CI job, a crashed one).

Real `trainkit` CLI and `terraform` with the s3 backend (S3-native lock file) against a moto
server on 127.0.0.1. The other run is stood in for by its lock object, written with boto3 exactly
where terraform's `use_lockfile` puts it (<key>.tflock), with the fields terraform writes.
"""

from __future__ import annotations

import json
import os
import subprocess

import pytest
from moto_aws import AWS_ENV, aws, trainkit, write_spec

from trainkit import errors

pytestmark = pytest.mark.usefixtures("tf_cli_config")


def test_a_held_state_lock_is_exit_8_naming_the_holder_and_the_unlock_command(repo, tmp_path, moto):
    s3 = aws(moto, "s3")
    s3.create_bucket(Bucket="tfstate")
    spec = write_spec(repo, tmp_path, moto, nodes=1, backend={"type": "s3", "bucket": "tfstate", "region": "us-east-1"})
    s3.put_object(Bucket="tfstate", Key="aws-moto/terraform.tfstate.tflock", Body=json.dumps(
        {"ID": "5d3c-lock", "Operation": "OperationTypeApply", "Who": "ci@runner-7", "Version": "1.11.4",
         "Created": "2026-12-01T00:00:00Z", "Path": "tfstate/aws-moto/terraform.tfstate", "Info": ""}))
    ws = tmp_path / "ws"
    for command in (("plan",), ("apply", "--yes", "--no-provision")):
        proc = trainkit(*command, spec, "--workdir", ws, check_rc=errors.LOCKED)
        assert "state is locked by another run" in proc.stderr and "ci@runner-7" in proc.stderr, proc.stderr
        assert "nothing was changed" in proc.stderr and "Traceback" not in proc.stderr
        assert f"terraform -chdir={ws / 'terraform'} force-unlock 5d3c-lock" in proc.stderr

    # the advice works: once the holder is known dead, unlocking lets the next command through
    unlock = subprocess.run(["terraform", f"-chdir={ws / 'terraform'}", "force-unlock", "-force", "5d3c-lock"],
                            capture_output=True, text=True, env={**os.environ, **AWS_ENV})
    assert unlock.returncode == 0, unlock.stdout + unlock.stderr
    trainkit("plan", spec, "--workdir", ws)
