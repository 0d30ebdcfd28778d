"""The spec's `controller:` and `down:` (spec/controller_block.py): a cloud target's controller is
an instance (instance_type), target hosts' a named host that is not a spare; `local` and `slurm`
run none; every refusal names its field and the fix."""

from __future__ import annotations

import pytest
from pydantic import ValidationError

from trainkit.spec.schema import ClusterSpec

HOSTS = {"name": "lab", "cloud": "hosts",
         "hosts": [{"name": "n0", "address": "10.0.0.10"}, {"name": "n1", "address": "10.0.0.11"},
                   {"name": "sp", "address": "10.0.0.12", "spare": True}]}
AWS = {"name": "lab", "cloud": "aws", "region": "us-east-1", "zone": "us-east-1a",
       "instance": {"type": "g5.xlarge"}, "network": {"admin_cidrs": ["203.0.113.0/24"]}}
SLURM = {"name": "lab", "cloud": "slurm", "nodes": 2,
         "slurm": {"login": {"address": "10.0.0.1"}, "workdir": "/shared"}}


def _problems(data: dict) -> str:
    with pytest.raises(ValidationError) as err:
        ClusterSpec.model_validate(data)
    return str(err.value)


def test_unset_the_controller_is_automatic_and_down_is_off():
    spec = ClusterSpec.model_validate(AWS)
    assert (spec.controller.enabled, spec.controller.instance_type, spec.controller.host, spec.down) == \
        (None, None, None, False)


def test_a_cloud_takes_an_instance_type_and_hosts_a_named_host():
    spec = ClusterSpec.model_validate({**AWS, "controller": {"enabled": True, "instance_type": "t3.small"},
                                       "down": True})
    assert (spec.controller.instance_type, spec.down) == ("t3.small", True)
    spec = ClusterSpec.model_validate({**HOSTS, "controller": {"host": "n1"}})
    assert spec.controller.host == "n1"


def test_hosts_needs_a_host_that_is_listed_and_not_a_spare():
    assert "controller.host: target hosts runs the controller on a host you name" in \
        _problems({**HOSTS, "controller": {"enabled": True}})
    said = _problems({**HOSTS, "controller": {"host": "ctl"}})
    assert "controller.host: 'ctl' is not one of hosts: (n0, n1, sp)" in said, said
    assert "controller.host: 'sp' is a spare" in _problems({**HOSTS, "controller": {"host": "sp"}})
    assert "controller.instance_type: the hosts target provisions no instance" in \
        _problems({**HOSTS, "controller": {"host": "n0", "instance_type": "t3.small"}})


def test_a_cloud_refuses_a_host_and_local_and_slurm_refuse_the_block():
    assert "controller.host: only target hosts runs the controller on one of its hosts" in \
        _problems({**AWS, "controller": {"host": "n0"}})
    said = _problems({"name": "lab", "cloud": "local", "controller": {"enabled": True}})
    assert "controller: the local target runs no controller (this machine is the cluster); remove" in said, said
    said = _problems({**SLURM, "controller": {"enabled": True}, "down": True})
    assert "controller: the slurm target runs no controller (the scheduler keeps the job)" in said, said
    assert "down: trainkit does not destroy a local target's machines" in \
        _problems({"name": "lab", "cloud": "local", "down": True})
    assert "Extra inputs are not permitted" in _problems({**AWS, "controller": {"type": "t3.small"}})
    assert ClusterSpec.model_validate({"name": "lab", "cloud": "local", "controller": {"enabled": False}})
