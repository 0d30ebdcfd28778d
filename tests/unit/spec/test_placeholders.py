"""Examples that cannot bill by mistake (trainkit/spec/placeholders.py): a documentation address
range, an example bucket or AWS's example key is a warning at validate and refused by apply, naming
the field, on every cloud example; an emulator spec (every endpoint on loopback) keeps its
placeholders and applies (tests/infra against moto)."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml
from cli_run import run_cli

from trainkit import clouds, errors
from trainkit.cli import main
from trainkit.spec import placeholders
from trainkit.spec.schema import load_spec

CLOUD_EXAMPLES = clouds.TERRAFORM_TARGETS   # the shipped rooms with a Terraform module


def _spec(tmp_path: Path, repo: Path, example: str, **changes) -> Path:
    data = yaml.safe_load((repo / f"examples/clusters/{example}.yaml").read_text())
    for dotted, value in changes.items():
        where = data
        *parents, last = dotted.split("__")
        for key in parents:
            where = where.setdefault(key, {})
        where[last] = value
    path = tmp_path / f"{example}.yaml"
    path.write_text(yaml.safe_dump(data))
    return path


@pytest.mark.parametrize("example", CLOUD_EXAMPLES)
def test_validate_warns_about_each_placeholder_of_a_cloud_example(example, repo, capsys):
    code, err = run_cli(capsys, "validate", str(repo / f"examples/clusters/{example}.yaml"))
    assert code == 0  # a warning: the example is still a good example
    assert "warning: network.admin_cidrs[0]: '203.0.113.0/24' is in the documentation range" in err
    assert "warning: backend.bucket: " in err and "replace it before `trainkit apply`" in err


@pytest.mark.parametrize("example", CLOUD_EXAMPLES)
def test_apply_refuses_a_cloud_example_until_its_placeholders_are_replaced(example, repo, tmp_path, capsys):
    code, err = run_cli(capsys, "apply", str(repo / f"examples/clusters/{example}.yaml"), "--workdir",
                        str(tmp_path / "ws"), "--yes")
    assert code == errors.BAD_INPUT, err
    assert "network.admin_cidrs[0]: '203.0.113.0/24' is in the documentation range 203.0.113.0/24 (RFC 5737)" in err
    assert "backend.bucket: " in err and "replace it with a bucket of your own" in err
    assert not (tmp_path / "ws" / "terraform").exists()  # nothing rendered, planned or created


def test_apply_names_only_the_placeholder_left(repo, tmp_path, capsys):
    spec = _spec(tmp_path, repo, "aws", backend__bucket="acme-ml-tfstate")
    code, err = run_cli(capsys, "apply", str(spec), "--workdir", str(tmp_path / "ws"), "--yes")
    assert code == errors.BAD_INPUT and "1 problem(s)" in err and "network.admin_cidrs[0]" in err
    assert "backend.bucket" not in err


@pytest.mark.parametrize("value, found", [
    ("198.51.100.7/32", True), ("192.0.2.0/28", True), ("2001:db8::/48", True), ("203.0.0.0/8", True),
    ("10.0.0.0/8", False), ("100.64.1.0/24", False), ("2001:db9::/32", False),
])
def test_documentation_ranges_are_found_and_nothing_else(value, found, repo, tmp_path):
    spec = load_spec(_spec(tmp_path, repo, "aws", backend__bucket="acme", network__admin_cidrs=[value]))
    assert bool(placeholders.placeholders(spec)) is found


@pytest.mark.parametrize("field, value", [
    ("backend__bucket", "tfstate-1250000000"),
    ("data__sources", [{"url": "s3://my-bucket/digits/", "name": "digits"}]),
    ("backend__endpoint", "https://state.example.com"),
    ("tags", {"owner": "AKIAIOSFODNN7EXAMPLE"}),
])
def test_buckets_hosts_and_keys_from_the_docs_are_placeholders(field, value, repo, tmp_path):
    example = "tencentcloud" if value == "tfstate-1250000000" else "aws"
    spec = load_spec(_spec(tmp_path, repo, example, network__admin_cidrs=["10.1.0.0/16"],
                           **({"backend__bucket": "acme"} if field != "backend__bucket" else {}), **{field: value}))
    (found,) = placeholders.placeholders(spec)
    assert found[0].startswith(field.replace("__", ".").split("[")[0])


def test_an_emulator_spec_keeps_its_placeholders(repo):
    moto = load_spec(repo / "examples/clusters/aws-moto.yaml")
    assert placeholders.is_emulator(moto) and moto.network.admin_cidrs == ("203.0.113.0/24",)
    assert placeholders.placeholders(moto) == []


def test_one_endpoint_off_this_machine_is_no_emulator(repo, tmp_path):
    spec = _spec(tmp_path, repo, "aws-moto", endpoints={"ec2": "http://127.0.0.1:5000", "s3": "https://s3.amazonaws.com"})
    loaded = load_spec(spec)
    assert not placeholders.is_emulator(loaded)
    assert [p[0] for p in placeholders.placeholders(loaded)] == ["network.admin_cidrs[0]"]


def test_hosts_and_local_create_nothing_and_are_not_checked(repo):
    for example in ("hosts", "local"):
        assert placeholders.placeholders(load_spec(repo / f"examples/clusters/{example}.yaml")) == []


def test_validate_json_lists_the_placeholders_as_warnings(repo, capsys):
    with pytest.raises(SystemExit):
        main(["validate", str(repo / "examples/clusters/aws.yaml"), "--json"])
    import json

    out = json.loads(capsys.readouterr().out)
    assert any(w.startswith("backend.bucket: 'my-tfstate-bucket'") for w in out["warnings"])
