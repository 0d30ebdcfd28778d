"""Which nodes `train --recover` replaces on a cluster trainkit provisions with `scheduler: slurm`
(trainkit/runs/slurm_nodes.py): the active nodes Slurm has set down or failed (sinfo(1) NODE
STATE CODES), not one that only stopped answering, never a drained one; only where the room
replaces nodes."""

from __future__ import annotations

import pytest

from trainkit.clouds import get
from trainkit.runs.slurm_nodes import NodeWatch, lost, replaces_nodes, slurm_names

ACTIVE = ["head", "n1", "n2"]


@pytest.mark.parametrize("sinfo, expected", [
    ("head|idle|none\nn1|allocated|none\nn2|mixed|none\n", []),
    ("head|allocated|none\nn1|down*|Not responding\nn2|allocated|none\n", ["n1"]),
    ("head|allocated|none\nn1|down|Not responding\nn2|idle*|none\n", ["n1"]),   # idle*: not DOWN yet
    ("n2|fail|bad disk\nhead|idle|none\nn1|down*|none\n", ["n1", "n2"]),        # active order
    ("head|idle|none\nn1|allocated*|none\nn2|completing*|none\n", []),         # not answering, not DOWN
    ("head|idle|none\nn1|drained|ecc-test\nn2|draining|health\n", []),                  # drained: not lost
    ("head|idle|none\nold-node|down*|gone\n", []),                                     # not an active node
    ("head|idle|none\nn1; rm -rf /|down|x\n", []),                                     # not a node name
    ("", []),
])
def test_lost_reads_the_active_nodes_slurm_gave_up_on(sinfo, expected):
    assert lost(sinfo, ACTIVE) == expected


class _Cluster:
    def __init__(self, room: str):
        self.room = get(room)


@pytest.mark.parametrize("room, replaces", [("aws", True), ("alicloud", True), ("hosts", True), ("slurm", False)])
def test_only_rooms_that_replace_nodes_watch_them(room, replaces):
    """A site's own Slurm (`cloud: slurm`): its admins own the machines, trainkit replaces nothing."""
    assert replaces_nodes(_Cluster(room)) is replaces


def test_nothing_is_read_or_replaced_while_the_job_is_completing():
    """slurmctld still waits for the lost node while the job is COMPLETING: a replacement then left
    the requeued job COMPLETING with no nodes for good (Slurm 22.05, measured). The watch reads
    nothing then (a workspace of None would fail on any read)."""
    watch = NodeWatch(_Cluster("hosts"), None, None, lambda m: None)
    watch.check("COMPLETING")
    with pytest.raises(AttributeError):
        watch.check("PENDING")   # any other state reads the inventory and sinfo


def test_slurm_names_are_places_in_rank_order():
    assert slurm_names("lab", ["h1", "spare"]) == {"lab-n0": "h1", "lab-n1": "spare"}
    assert lost("lab-n0|idle|none\nlab-n1|down*|Not responding\n", list(slurm_names("lab", ["h1", "h2"]))) == \
        ["lab-n1"]
