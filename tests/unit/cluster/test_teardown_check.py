"""destroy's leftover check must run before the workspace goes: when it cannot (the cloud SDK
cannot be imported, a real condition on a control machine without `trainkit-clusters[aws]`), destroy
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


class _Runner:
    """terraform as destroy sees it: a state holding one instance; destroy fails the way the aws
    provider does when a copy the state never recorded still uses the subnet."""

    on_line = None

    def __init__(self, events: list[str]):
        self.events = events

    def state_list(self):
        return ["module.cluster.aws_instance.node[0]"]

    def state_json(self):
        return {"values": {"root_module": {"child_modules": [{"resources": [
            {"values": {"id": "i-tracked", "subnet_id": "subnet-1"}}]}]}}}

    def destroy(self):
        self.events.append("terraform destroy")
        raise TrainkitError("terraform destroy failed: DependencyViolation: subnet-1 has dependencies",
                            fix="run it again", exit_code=errors.DESTROY)


class _Sweeper:
    def __init__(self, events: list[str]):
        self.events = events

    def find(self, cluster):
        self.events.append("find")
        return [{"type": "ec2 instance", "id": "i-tracked"}, {"type": "ec2 instance", "id": "i-lost-copy"}]

    def delete(self, cluster, found):  # pragma: no cover - plain destroy must not delete
        raise AssertionError("plain destroy deleted tagged resources")


def test_plain_destroy_names_untracked_copies_before_terraform_waits_behind_them(tmp_path, monkeypatch, capsys):
    # A lost create response left i-lost-copy in the cloud, tagged, not in the state: the provider
    # retries the subnet's delete for minutes. Without --sweep destroy says so first, and its error
    # names --sweep; nothing is deleted by tag and the workspace is kept.
    cluster = load_cluster(REPO / "examples" / "clusters" / "aws-moto.yaml")
    ws = Workspace(tmp_path / "ws").ensure()
    ws.terraform_dir.mkdir(parents=True, exist_ok=True)
    (ws.terraform_dir / "terraform.tfstate").write_text("{}")
    (ws.root / "outputs.json").write_text("{}")
    events: list[str] = []
    monkeypatch.setattr(teardown, "render_and_init", lambda *a, **kw: (_Runner(events), None))
    monkeypatch.setattr(teardown, "tag_sweeper", lambda cloud: _Sweeper(events))
    monkeypatch.setattr(teardown.progress, "info", lambda text: events.append(text))
    with pytest.raises(TrainkitError) as caught:
        teardown.destroy(cluster, ws)
    warning = next(e for e in events if e.startswith("warning:"))
    assert events.index(warning) < events.index("terraform destroy")
    assert "i-lost-copy" in warning and "i-tracked" not in warning and "--sweep" in warning
    assert caught.value.exit_code == errors.DESTROY and "DependencyViolation" in caught.value.message
    assert "--sweep" in caught.value.fix and "(1 tagged resource(s)" in caught.value.fix
    assert (ws.root / "outputs.json").exists()


class _NetworkSweeper(_Sweeper):
    """The AWS sweeper's shape: it can tell which untracked copies sit in the state's VPC."""

    def __init__(self, events: list[str]):
        super().__init__(events)
        self.deleted: list[str] = []

    def find(self, cluster):
        self.events.append("find")
        found = [{"type": "instance", "id": "i-tracked"}, {"type": "volume", "id": "vol-lost"}]
        return found + ([] if self.deleted else [{"type": "route-table", "id": "rtb-lost-copy"}])

    def in_network(self, cluster, found, values):
        assert values["root_module"]  # the state's values, read once by destroy
        return [r for r in found if r["type"] == "route-table"]

    def delete(self, cluster, found):
        self.events.append("delete " + ",".join(r["id"] for r in found))
        self.deleted += [r["id"] for r in found]


def test_plain_destroy_deletes_untracked_copies_in_the_clusters_network_first(tmp_path, monkeypatch):
    # rtb-lost-copy (tagged, in the state's VPC) would block DeleteVpc: plain destroy deletes it
    # before terraform destroy; vol-lost is outside the VPC: only named, left to --sweep
    cluster = load_cluster(REPO / "examples" / "clusters" / "aws-moto.yaml")
    ws = Workspace(tmp_path / "ws").ensure()
    ws.terraform_dir.mkdir(parents=True, exist_ok=True)
    (ws.terraform_dir / "terraform.tfstate").write_text("{}")
    events: list[str] = []
    sweeper = _NetworkSweeper(events)
    monkeypatch.setattr(teardown, "render_and_init", lambda *a, **kw: (_Runner(events), None))
    monkeypatch.setattr(teardown, "tag_sweeper", lambda cloud: sweeper)
    monkeypatch.setattr(teardown.progress, "info", lambda text: events.append(text))
    with pytest.raises(TrainkitError):
        teardown.destroy(cluster, ws)
    assert events.index("delete rtb-lost-copy") < events.index("terraform destroy")
    warning = next(e for e in events if e.startswith("warning:"))
    assert "vol-lost" in warning and "rtb-lost-copy" not in warning and "--sweep" in warning
    assert sweeper.deleted == ["rtb-lost-copy"]
