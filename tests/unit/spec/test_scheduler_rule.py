"""The spec's `scheduler: slurm` (spec/target_rules.py, read from each room's Cloud.schedulers):
accepted on the targets trainkit provisions or reaches over SSH, refused with the field named on
`local` and on `cloud: slurm`; a `slurm:` block beside it sets only partition/time/signal_s; the
jobs' folders need the shared storage."""

from __future__ import annotations

import pytest
from pydantic import ValidationError

from trainkit import clouds
from trainkit.spec.schema import ClusterSpec

HOSTS = {"name": "lab", "cloud": "hosts", "scheduler": "slurm",
         "hosts": [{"name": "n0", "address": "10.0.0.10"}, {"name": "n1", "address": "10.0.0.11"}],
         "storage": {"nas": {"enabled": True, "mount_point": "/mnt/shared"}}}
AWS = {"name": "lab", "cloud": "aws", "region": "us-east-1", "zone": "us-east-1a", "scheduler": "slurm",
       "instance": {"type": "g5.xlarge"}, "network": {"admin_cidrs": ["203.0.113.0/24"]},
       "storage": {"nas": {"enabled": True}}}


def _problems(data: dict) -> str:
    with pytest.raises(ValidationError) as err:
        ClusterSpec.model_validate(data)
    return str(err.value)


def test_scheduler_slurm_is_taken_on_hosts_and_on_every_terraform_cloud():
    assert ClusterSpec.model_validate(HOSTS).scheduler == "slurm"
    assert ClusterSpec.model_validate({k: v for k, v in HOSTS.items() if k != "scheduler"}).scheduler == "none"
    for cloud in clouds.terraform_targets():
        assert "slurm" in clouds.get(cloud).schedulers
    assert ClusterSpec.model_validate(AWS).scheduler == "slurm"
    assert clouds.scheduler_targets("slurm") == (*clouds.terraform_targets(), "hosts")


def test_scheduler_slurm_is_refused_on_local_and_on_a_sites_slurm_naming_the_field():
    said = _problems({"name": "lab", "cloud": "local", "scheduler": "slurm"})
    assert "scheduler: trainkit installs no scheduler on this machine (cloud: local)" in said
    said = _problems({"name": "lab", "cloud": "slurm", "scheduler": "slurm", "nodes": 2,
                      "slurm": {"login": {"address": "10.0.0.1"}, "workdir": "/shared"}})
    assert "scheduler: trainkit installs no scheduler on a Slurm cluster (cloud: slurm)" in said
    assert "remove `scheduler`" in said
    assert "Input should be 'none' or 'slurm'" in _problems({**HOSTS, "scheduler": "pbs"})


def test_a_slurm_block_beside_it_sets_only_partition_time_and_signal():
    spec = ClusterSpec.model_validate({**HOSTS, "slurm": {"partition": "gpu", "time": "4:00:00", "signal_s": 120}})
    assert (spec.slurm.partition, spec.slurm.time, spec.slurm.signal_s) == ("gpu", "4:00:00", 120)
    for field, value in (("workdir", "/x"), ("login", {"address": "10.0.0.1"}), ("account", "a")):
        said = _problems({**HOSTS, "slurm": {field: value}})
        assert f"slurm.{field}: with scheduler: slurm the cluster gives it" in said, said
    said = _problems({**HOSTS, "slurm": {"partition": "gpu", "login": {"address": "10.0.0.1"}, "account": "a"}})
    assert "slurm.account: with scheduler" in said and "slurm.login: with scheduler" in said, said   # each named
    assert "slurm: only for a target whose nodes a scheduler allocates" in \
        _problems({**HOSTS, "scheduler": "none", "slurm": {"partition": "gpu"}})
    assert "is not a Slurm partition name" in _problems({**HOSTS, "slurm": {"partition": "a\nb"}})


def test_scheduler_slurm_needs_the_shared_storage_and_a_sites_slurm_still_needs_login_and_workdir():
    said = _problems({**HOSTS, "storage": {}})
    assert "storage.nas.enabled: scheduler: slurm keeps its jobs' folders on the cluster's shared storage" in said
    said = _problems({"name": "lab", "cloud": "slurm", "nodes": 2, "slurm": {"workdir": "/shared"}})
    assert "slurm.login: required for cloud: slurm" in said
