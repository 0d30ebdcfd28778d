"""A real `trainkit plan` (real terraform and AWS provider) with no AWS credentials in the
environment, against the moto server's endpoints: one message naming the variables, printed once."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest
import yaml

from trainkit import errors

pytestmark = pytest.mark.usefixtures("tf_cli_config")


def test_plan_without_credentials_names_the_variables_once(repo, tmp_path, moto, monkeypatch):
    spec = yaml.safe_load((repo / "examples/clusters/aws-moto.yaml").read_text())
    spec["endpoints"] = {k: moto for k in spec["endpoints"]}
    path = tmp_path / "cluster.yaml"
    path.write_text(yaml.safe_dump(spec))
    env = {k: v for k, v in os.environ.items() if not k.startswith("AWS_")}
    env.update(HOME=str(tmp_path), NO_PROXY="127.0.0.1,localhost")  # no ~/.aws profile either
    proc = subprocess.run([sys.executable, "-m", "trainkit", "plan", str(path), "--workdir",
                           str(tmp_path / "ws")], capture_output=True, text=True, env=env, timeout=300)
    out = proc.stdout + proc.stderr
    assert proc.returncode == errors.CREDENTIALS, out
    assert "AWS credentials are missing or were rejected" in out
    assert "AWS_ACCESS_KEY_ID" in out and "trainkit check --cloud aws" in out
    assert out.count("No valid credential sources") == 1, out


def test_missing_credentials_are_one_exit_code_in_check_plan_apply_and_destroy(repo, tmp_path, moto):
    spec = yaml.safe_load((repo / "examples/clusters/aws-moto.yaml").read_text())
    spec["endpoints"] = {k: moto for k in spec["endpoints"]}
    path = tmp_path / "cluster.yaml"
    path.write_text(yaml.safe_dump(spec))
    env = {k: v for k, v in os.environ.items() if not k.startswith("AWS_")}
    env.update(HOME=str(tmp_path), NO_PROXY="127.0.0.1,localhost")
    codes = {}
    for args in (["check"], ["plan"], ["apply", "--yes"], ["destroy", "--yes"]):
        where = [] if args == ["check"] else ["--workdir", str(tmp_path / "ws")]
        proc = subprocess.run([sys.executable, "-m", "trainkit", args[0], str(path), *args[1:], *where],
                              capture_output=True, text=True, env=env, timeout=300)
        assert "Traceback" not in proc.stderr, proc.stderr
        codes[args[0]] = proc.returncode
    assert codes == dict.fromkeys(codes, errors.CREDENTIALS), codes
