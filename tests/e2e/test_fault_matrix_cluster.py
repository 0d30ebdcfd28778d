"""The fault matrix's cluster-side rows on the `hosts` target (issue 39, defects 6 and 9), on the bench of
faultbench.py (four SSH machines in network namespaces, two of them spares):

- the worker is killed and a spare takes its place (check_row: exit 0, one recovery, kill -> first
  resumed step losing at most one checkpoint interval, the same weights as the uninterrupted run,
  nothing left running);
- `destroy` while that worker is still gone: the hosts that answer are cleaned (launch.root
  removed), the one that does not is named with the command that cleans it (a warning, exit 0:
  nothing bills), and the record of active hosts (hosts.json) ends with the cluster;
- the host back, `apply` again, and the same fault: the inventory, launch and the spare choice read
  one list, so the recovery completes (it crashed with a ValueError in `active.index`, exit 1, the
  run left `running`, when hosts.json outlived destroy).

The AWS rows (a lost RunInstances answer, a third zone) are tests/infra/test_aws_replace_leaks.py.
"""

from __future__ import annotations

import pytest
from faultbench import Row, build_bench, check_row


@pytest.fixture(scope="module")
def bench(request, tmp_path_factory):
    return build_bench(request, tmp_path_factory)


def test_destroy_with_a_node_gone_names_it_and_destroy_apply_recover_reads_one_list(bench):
    b = bench
    head, worker = b.active()
    check_row(b, Row("worker", ("worker",)))
    active = b.active()
    assert worker not in active and head in active, active

    destroyed = b.tk("destroy", *b.common, "--yes")   # the killed worker is still gone
    assert destroyed.returncode == 0, destroyed.stdout
    assert f"warning: host {worker} " in destroyed.stdout and "was not cleaned" in destroyed.stdout, destroyed.stdout
    assert "rm -rf" in destroyed.stdout and "Traceback" not in destroyed.stdout
    assert all(f"host {name} " not in destroyed.stdout for name in active), destroyed.stdout
    for name in active:                                # cleaned: launch.root is gone there
        assert not (b.host(name).dir / "local" / "trainkit").exists(), name
    assert (b.host(worker).dir / "local" / "trainkit").exists()   # left, and named above
    assert not (b.ws / "hosts.json").exists()

    b.revive_all()
    applied = b.tk("apply", *b.common, "--yes")
    assert applied.returncode == 0, applied.stdout
    assert b.active() == [head, worker]                # a new cluster: the spec's hosts
    check_row(b, Row("worker", ("worker",)))           # one list: the recovery completes
