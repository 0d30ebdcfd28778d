"""Failover at apply (issue: capacity-aware placement) on moto behind the fault proxy
(tests/infra/fault_proxy.py): every candidate zone refused. A module of its own so that pytest-xdist
runs it beside tests/infra/test_aws_faults.py (each moto apply costs minutes).
"""

from __future__ import annotations

import pytest
from fault_proxy import Faults
from moto_aws import assert_nothing_left, trainkit, write_spec

from trainkit import errors

pytestmark = pytest.mark.usefixtures("tf_cli_config")


def test_every_candidate_refused_lists_the_attempts_and_leaves_nothing(repo, tmp_path, faulty_moto):
    """A new cluster whose every zone is refused: one message listing each attempt, exit 4, and
    what the attempts created (network, key pair) destroyed again."""
    moto, proxy = faulty_moto
    proxy.faults = Faults(no_capacity={("*", "g5.12xlarge")})
    spec = write_spec(repo, tmp_path, proxy.url, nodes=1, zone=["us-east-1a", "us-east-1b"],
                      storage={"data_disk": {"enabled": False}, "nas": {"enabled": False}})
    refused = trainkit("apply", spec, "--workdir", tmp_path / "ws", "--no-provision", "--yes",
                       check_rc=errors.APPLY)
    assert "every candidate was refused (2 tried)" in refused.stderr, refused.stderr
    assert "1. g5.12xlarge in us-east-1a: no capacity" in refused.stderr
    assert "2. g5.12xlarge in us-east-1b: no capacity" in refused.stderr and "Traceback" not in refused.stderr
    assert {zone for what, _ in proxy.faults_done if what.startswith("capacity:")
            for zone in [what.partition(":")[2]]} == {"us-east-1a", "us-east-1b"}
    assert_nothing_left(moto, "aws-moto")
