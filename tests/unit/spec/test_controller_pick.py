"""Which controller and when (spec/controller_block.py controller_wanted, rendered, controller_type):
"auto" is on only for `train --recover --detach` on spot; the type is the spec's, checked against the
catalog, else the catalog's cheapest CPU-only type with >= 2 vCPU and >= 2 GiB; and the module input
(spec/resolve.py controller_variables) carries the type and the remote state the policy is scoped to."""

from __future__ import annotations

from dataclasses import replace

import pytest

from trainkit.catalog import Catalog, InstanceType, load_catalog
from trainkit.clouds import get
from trainkit.errors import InputError
from trainkit.spec.controller_block import controller_type, controller_wanted, rendered
from trainkit.spec.resolve import module_variables, resolve
from trainkit.spec.schema import ClusterSpec

AWS = {"name": "lab", "cloud": "aws", "region": "us-east-1", "zone": "us-east-1a",
       "instance": {"type": "g5.xlarge"}, "network": {"admin_cidrs": ["203.0.113.0/24"]}}
HOSTS = {"name": "lab", "cloud": "hosts", "hosts": [{"name": "n0", "address": "10.0.0.10"}]}
KEY = "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIBkRh4VOcYwCqMTmS1w1tJmXbH3v0xJ7lK0Zq2yC5FQK t"


def _spec(**changes) -> ClusterSpec:
    return ClusterSpec.model_validate({**AWS, **changes})


@pytest.mark.parametrize("enabled, spot, recover, detach, want", [
    (None, True, True, True, True),      # auto: --recover --detach on spot
    (None, False, True, True, False),    # auto: on-demand nodes need no controller
    (None, True, True, False, False),    # auto: attached, the user's machine runs the loop
    (None, True, False, True, False),    # auto: no recovery, nothing to run
    (True, False, False, False, True),   # on: always
    (False, True, True, True, False),    # off: never
])
def test_controller_wanted_follows_the_spec_then_recover_detach_on_spot(enabled, spot, recover, detach, want):
    spec = _spec(controller={"enabled": enabled}, spot={"enabled": spot})
    assert controller_wanted(spec, recover, detach) is want


def test_local_never_wants_a_controller_and_only_enabled_true_renders_one():
    local = ClusterSpec.model_validate({"name": "lab", "cloud": "local"})
    # a spec refuses controller.enabled on local; one built past validation still gets no controller
    forced = local.model_copy(update={"controller": local.controller.model_copy(update={"enabled": True})})
    assert controller_wanted(forced, True, True) is False
    assert rendered(_spec(controller={"enabled": True})) is True
    assert rendered(_spec()) is False          # auto is the runtime's decision
    hosts = ClusterSpec.model_validate({**HOSTS, "controller": {"host": "n0", "enabled": True}})
    assert rendered(hosts) is False            # a named host, not an instance


@pytest.mark.parametrize("cloud", ["aws", "alicloud", "tencentcloud", "huaweicloud"])
def test_the_default_type_is_a_cpu_type_of_the_catalog_with_2_vcpu_and_2_gib(cloud):
    catalog = load_catalog(get(cloud))
    spec = _spec()
    pick = controller_type(spec, catalog)
    assert pick in catalog.controllers and not pick.gpus
    assert pick.vcpus >= 2 and pick.ram_gb >= 2


def test_the_cheapest_fitting_type_wins_and_smaller_or_gpu_types_never_do():
    def cpu(t, v, r, p):
        return InstanceType(type=t, gpu="none", gpus=0, vcpus=v, ram_gb=r, on_demand=p)
    catalog = Catalog(cloud="aws", currency="USD", instances=(), controllers=(
        cpu("tiny", 1, 1, 0.001), cpu("narrow", 2, 1, 0.002), cpu("dear", 2, 4, 0.5), cpu("fit", 4, 8, 0.1),
        InstanceType(type="gpu", gpu="T4", gpus=1, vcpus=4, ram_gb=16, on_demand=0.01),
        cpu("unpriced", 2, 2, None)))
    assert controller_type(_spec(), catalog).type == "fit"
    # AWS's shipped catalog: t3a.small (2 vCPU, 2 GiB) is its cheapest on demand.
    assert controller_type(_spec(), load_catalog(get("aws"))).type == "t3a.small"


def test_a_named_type_is_checked_against_the_catalog_with_the_field_and_the_fix():
    catalog = load_catalog(get("aws"))
    assert controller_type(_spec(controller={"instance_type": "m5.large"}), catalog).type == "m5.large"
    with pytest.raises(InputError) as err:
        controller_type(_spec(controller={"instance_type": "t3.smal"}), catalog)
    assert err.value.message.startswith("controller.instance_type: 't3.smal' is not in the aws catalog")
    assert "t3.small" in err.value.fix
    with pytest.raises(InputError) as err:
        controller_type(_spec(), replace(catalog, controllers=()))
    assert err.value.message.startswith("controller.instance_type: the aws catalog lists no CPU type")


def test_the_module_input_carries_the_type_and_the_remote_state_and_is_absent_when_off():
    off = resolve(_spec())
    assert off.controller is None and "controller" not in module_variables(off, KEY)
    on = resolve(_spec(controller={"enabled": True},
                       backend={"type": "s3", "bucket": "tfstate", "dynamodb_table": "locks"}))
    assert module_variables(on, KEY)["controller"] == {
        "instance_type": "t3a.small", "state_bucket": "tfstate", "state_prefix": "lab", "lock_table": "locks"}
    local = resolve(_spec(controller={"enabled": True, "instance_type": "t3.small"}))
    assert module_variables(local, KEY)["controller"] == {
        "instance_type": "t3.small", "state_bucket": None, "state_prefix": None, "lock_table": None}


def test_a_named_type_is_checked_when_the_module_renders_no_controller_yet():
    """"auto" (enabled unset) renders nothing at apply, but a typo in controller.instance_type is
    said by `validate`/`apply`, not first at `train --recover --detach` with the cluster up."""
    with pytest.raises(InputError, match=r"controller.instance_type: 'nope.large' is not in the aws catalog"):
        resolve(_spec(controller={"instance_type": "nope.large"}))
    assert resolve(_spec(controller={"instance_type": "m5.large"})).controller is None   # still rendered by none
