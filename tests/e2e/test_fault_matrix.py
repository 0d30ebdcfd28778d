"""The fault matrix of `train --recover` on the `hosts` target, node faults (the bench, and what
every row must end with: faultbench.py):

- worker: every process of the rank-1 machine is killed (sshd too: the machine is gone);
- head: the rank-0 machine is killed; the rendezvous must form around a new head that the
  survivor's /etc/hosts has never heard of (torchrun --local-addr: the head's IP, not its name);
- spare_dies: the worker is killed, and the spare put in its place (hosts.json names it) is
  killed while it is being provisioned: recovery goes on with the next spare;
- two_nodes: both active machines are killed at once; both spares take over;
- during_write: the worker is killed while a checkpoint is in flight (held before its commit by
  the engine's slow-save hook): the run resumes from a complete one, still losing at most one
  interval (the engine commits a save before the next step counts: checkpoint.overlap_steps 1).

The controller's faults and the run lock: test_fault_matrix_control.py.
"""

from __future__ import annotations

import pytest
from faultbench import Row, build_bench, check_elastic_row, check_row


@pytest.fixture(scope="module")
def bench(request, tmp_path_factory):
    return build_bench(request, tmp_path_factory)

ROWS = [Row("worker", ("worker",)), Row("head", ("head",)),
        Row("spare_dies", ("worker",), kill_spare=True), Row("two_nodes", ("head", "worker")),
        Row("during_write", ("worker",), during_write=True)]


@pytest.mark.parametrize("row", ROWS, ids=[r.id for r in ROWS])
def test_fault_matrix_every_row_ends_complete_with_one_interval_lost_and_nothing_left(bench, row):
    check_row(bench, row)


def test_elastic_the_survivor_trains_on_while_the_spare_comes_up_then_the_run_grows_back(bench):
    """recover.elastic (faultbench.check_elastic_row), the head killed: the worker resumes alone at
    world 1 as rank 0 (the rendezvous moves to it), the spare is provisioned meanwhile, the worker
    stops at a checkpoint and both resume. (The worker's loss takes the same path with the ranks
    kept; unit-tested in tests/unit/runs/test_elastic.py.)"""
    check_elastic_row(bench, "head")
