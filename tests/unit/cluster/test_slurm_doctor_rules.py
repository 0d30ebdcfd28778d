"""`trainkit doctor` on a Slurm cluster, its pure parts (trainkit/cluster/scheduler_doctor.py):
sinfo's node states (sinfo(1) NODE STATE CODES, long form) judged, the srun that probes the idle
nodes (every value one word), and the probes read back."""

from __future__ import annotations

import json
import shlex

import pytest
import yaml

from trainkit.cluster import doctor_verdict as v
from trainkit.cluster.scheduler_doctor import node_states, parse_probes, probe_command, triage
from trainkit.spec.resolve import load_cluster


def test_sinfo_lines_become_one_row_per_node_with_its_reason():
    text = "tk-1|idle|none\ntk-2|drained|bad gpu 3\ntk-2|drained|bad gpu 3\ntk-3|down*|Not responding\n\n"
    assert node_states(text) == [("tk-1", "idle", ""), ("tk-2", "drained", "bad gpu 3"),
                                 ("tk-3", "down*", "Not responding")]


@pytest.mark.parametrize("state, reason, kind, status", [
    ("idle", "", "idle", None),
    ("drained", "bad gpu 3", "failed", v.FAILED),
    ("draining", "hc failed", "failed", v.FAILED),
    ("down*", "Not responding", "failed", v.FAILED),
    ("idle*", "", "failed", v.FAILED),          # `*`: the node does not answer slurmctld
    ("mixed+drain", "maint", "failed", v.FAILED),
    ("fail", "", "failed", v.FAILED),
    ("inval", "Low RealMemory", "failed", v.FAILED),
    ("allocated", "", "busy", v.SKIPPED),
    ("mixed", "", "busy", v.SKIPPED),
    ("completing", "", "busy", v.SKIPPED),
    ("idle~", "", "idle", None),                # powered down, idle: Slurm powers it up for a job
    ("unknown", "", "busy", v.WARN),
])
def test_a_node_state_is_idle_busy_or_failed_with_its_reason(state, reason, kind, status):
    got, check = triage(state, reason)
    assert got == kind and (check.status if check else None) == status
    if status == v.FAILED and reason:
        assert f"(Reason: {reason})" in check.detail



def test_the_probe_srun_keeps_every_value_one_word(tmp_path):
    """The spec's grammar already refuses shell characters in paths and names (spec/slurm_block.py);
    what passes still reaches srun only as single words, the probe's own arguments positional."""
    spec = {"name": "lab", "cloud": "slurm", "nodes": 2,
            "slurm": {"login": {"address": "10.0.0.1"}, "partition": "gpu", "account": "ml-team",
                      "workdir": "/shared/alice,x=1", "python": "/opt/py+3/bin/python"}}
    (tmp_path / "lab.yaml").write_text(yaml.safe_dump(spec))
    cluster = load_cluster(tmp_path / "lab.yaml")
    words = shlex.split(probe_command(cluster, ["tk-1", "tk-2"], "/shared/.trainkit/lab/doctor/p.py"))
    assert words[0] == "srun" and "--nodelist=tk-1,tk-2" in words and "--nodes=2" in words
    assert "--partition=gpu" in words and "--account=ml-team" in words and "--immediate=60" in words
    assert words[-3:] == ["/opt/py+3/bin/python", "/shared/.trainkit/lab/doctor/p.py", "/shared/alice,x=1"]
    assert words[-5] == "-c" and '"$0" "$1" --data="$2"' in words[-4]


def test_probe_lines_are_read_back_per_node():
    p = {"nvml": False, "gpus": [], "data": {"path": "/shared", "free_bytes": 9 * 2**30, "total_bytes": 1}}
    text = f"TRAINKIT-PROBE tk-1 {json.dumps(p)}\nsrun: warning: x\nTRAINKIT-PROBE tk-2 {{cut\n"
    assert parse_probes(text) == {"tk-1": p}
