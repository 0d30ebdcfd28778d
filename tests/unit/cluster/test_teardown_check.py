"""destroy's leftover check must run before the workspace goes: when it cannot (the cloud SDK
cannot be imported, a real condition on a control machine without `trainkit[aws]`), destroy
exits 7 and keeps the workspace."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from trainkit import errors
from trainkit.cluster import teardown
from trainkit.errors import TrainkitError
from trainkit.spec.resolve import load_cluster
from trainkit.workspace import Workspace

REPO = Path(__file__).resolve().parents[3]


def test_destroy_fails_and_keeps_the_workspace_when_the_leftover_check_cannot_run(tmp_path, monkeypatch):
    # aws-moto has a local backend; with no state file destroy skips terraform and goes straight
    # to the leftover check, which needs boto3.
    cluster = load_cluster(REPO / "examples" / "clusters" / "aws-moto.yaml")
    ws = Workspace(tmp_path / "ws").ensure()
    (ws.root / "outputs.json").write_text("{}")
    monkeypatch.setitem(sys.modules, "boto3", None)  # `import boto3` raises ImportError
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "fake-id-4test")  # credentials set: the SDK is what is missing
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "fake-secret-4test")
    with pytest.raises(TrainkitError) as caught:
        teardown.destroy(cluster, ws)
    err = caught.value
    assert err.exit_code == errors.DESTROY
    assert "could not ask the cloud" in err.message and "boto3 is not installed" in err.message
    assert "trainkit destroy" in err.fix and "pip install" in err.fix
    assert (ws.root / "outputs.json").exists()  # kept


def test_destroy_without_credentials_exits_12_as_plan_and_apply_do_and_keeps_the_workspace(tmp_path, monkeypatch):
    for name in ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN", "AWS_PROFILE"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("HOME", str(tmp_path))  # no ~/.aws profile either
    cluster = load_cluster(REPO / "examples" / "clusters" / "aws-moto.yaml")
    ws = Workspace(tmp_path / "ws").ensure()
    (ws.root / "outputs.json").write_text("{}")
    with pytest.raises(TrainkitError) as caught:
        teardown.destroy(cluster, ws)
    assert caught.value.exit_code == errors.CREDENTIALS == 13
    assert "AWS_ACCESS_KEY_ID" in caught.value.fix and (ws.root / "outputs.json").exists()
