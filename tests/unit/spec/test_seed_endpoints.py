"""`endpoints:` for Alibaba, Tencent and Huawei: only the APIs trainkit calls itself (the sweepers'
products, each room's `endpoint_keys`), each an http(s)://host[:port] URL, and never a change to the
rendered Terraform (the provider blocks and backends of these clouds take no endpoints from the spec)."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from trainkit import clouds
from trainkit.errors import SpecError
from trainkit.spec.resolve import load_cluster
from trainkit.stack.render import render_stack

REPO = Path(__file__).resolve().parents[3]
SEEDS = ("alicloud", "tencentcloud", "huaweicloud")
SSH_KEY = "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIBkRh4VOcYwCqMTmS1w1tJmXbH3v0xJ7lK0Zq2yC5FQK trainkit-test"


def _spec(tmp_path: Path, cloud: str, endpoints: dict | None) -> Path:
    spec = yaml.safe_load((REPO / f"examples/clusters/{cloud}.yaml").read_text())
    if endpoints is not None:
        spec["endpoints"] = endpoints
    path = tmp_path / f"{cloud}.yaml"
    path.write_text(yaml.safe_dump(spec))
    return path


@pytest.mark.parametrize("cloud", SEEDS)
def test_every_product_key_is_accepted_and_the_terraform_does_not_change(tmp_path, cloud):
    keys = clouds.get(cloud).endpoint_keys
    assert keys and all(k.isidentifier() for k in keys)  # keys are HCL-safe names (render, checks._text)
    plain = render_stack(load_cluster(_spec(tmp_path, cloud, None)), SSH_KEY)
    pointed = load_cluster(_spec(tmp_path, cloud, {k: "http://127.0.0.1:8080" for k in keys}))
    assert pointed.spec.endpoints == {k: "http://127.0.0.1:8080" for k in keys}
    assert render_stack(pointed, SSH_KEY) == plain


@pytest.mark.parametrize("value", ["127.0.0.1:8080", "ftp://host", "http://host/path", "http://host:99999",
                                   "http://host?x=1", "http://", "https://user@host"])
def test_a_value_that_is_not_an_endpoint_is_refused_naming_the_field(tmp_path, value):
    with pytest.raises(SpecError) as err:
        load_cluster(_spec(tmp_path, "tencentcloud", {"cvm": value}))
    message = str(err.value)  # (a user@ part is shown as ***: trainkit never prints credentials)
    assert "endpoints.cvm: '" in message and "' is not an endpoint; give http(s)://host[:port]" in message


@pytest.mark.parametrize("cloud,key", [("alicloud", "ec2"), ("tencentcloud", "cos"), ("huaweicloud", "sfs-turbo")])
def test_a_key_trainkit_does_not_call_is_refused_naming_the_keys(tmp_path, cloud, key):
    with pytest.raises(SpecError) as err:
        load_cluster(_spec(tmp_path, cloud, {key: "https://api.example.com"}))
    assert f"endpoints.{key}: trainkit calls no {clouds.get(cloud).title} API by that name; the keys are " \
           + ", ".join(clouds.get(cloud).endpoint_keys) in str(err.value)
