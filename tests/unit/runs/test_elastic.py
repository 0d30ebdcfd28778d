"""recover.elastic's pure parts: the config key, when the survivors can carry a run, the smaller
world's ranks, and the background replacement (trainkit/runs/elastic.py). The whole path runs on
namespace hosts in tests/e2e/test_fault_matrix.py (faultbench.check_elastic_row)."""

from __future__ import annotations

import threading
from pathlib import Path

import pytest

from trainkit.errors import InputError, TrainkitError
from trainkit.provision.node import Node
from trainkit.runs import elastic
from trainkit.runs import record as runs
from trainkit.runs.attempt import subset

pytestmark = pytest.mark.unit


def job(tmp_path: Path, text: str) -> runs.Job:
    path = tmp_path / "job.yaml"
    path.write_text(text)
    return runs.load_job(path)


def test_recover_elastic_is_a_launch_key_off_by_default(tmp_path):
    assert job(tmp_path, "epochs: 3\n").elastic is False
    on = job(tmp_path, "epochs: 3\nrecover: {elastic: true}\n")
    assert on.elastic is True and "recover" not in on.engine_config   # the engine never sees it
    assert on.fingerprint() == job(tmp_path, "epochs: 3\n").fingerprint()   # it computes the same run


@pytest.mark.parametrize("text, words", [
    ("recover: true\n", "recover: expected"), ("recover: {elastic: yes please}\n", "recover.elastic"),
    ("recover: {elastic: true, spares: 2}\n", "keys are elastic and hang_after_s"),
    ("command: python t.py\nrecover: {elastic: true}\n", "only the built-in engine")])
def test_bad_recover_sections_name_the_field(tmp_path, text, words):
    with pytest.raises(InputError) as err:
        job(tmp_path, text)
    assert words in f"{err.value.message} {err.value.fix}" and err.value.exit_code == 2


def test_the_survivors_carry_the_run_only_when_the_global_batch_splits_over_them(tmp_path):
    assert elastic.why_not(job(tmp_path, "batch: 64\n"), 1) is None
    assert elastic.why_not(job(tmp_path, "batch: 64\n"), 2) is None
    assert "not divisible by world size 3" in elastic.why_not(job(tmp_path, "batch: 64\n"), 3)
    assert "does not divide the per-rank batch" in elastic.why_not(job(tmp_path, "batch: 64\ngrad_accum: 3\n"), 1)
    assert elastic.why_not(job(tmp_path, "batch: 64\n"), 0) == "no node survived"


def test_the_survivors_are_ranked_again_from_zero_in_their_order():
    nodes = [Node("h0", 0), Node("h1", 1), Node("h2", 2)]
    assert [(n.name, n.rank) for n in subset(nodes, ["h2", "h1"])] == [("h1", 0), ("h2", 1)]
    assert [(n.name, n.rank) for n in subset(nodes, ["h0", "h2"])] == [("h0", 0), ("h2", 1)]


def test_the_replacement_runs_in_the_background_and_keeps_its_result_or_error():
    gate = threading.Event()
    r = elastic.Replacing(lambda: gate.wait(5) and "cluster")
    assert not r.done
    gate.set()
    r.join()
    assert r.done and r.result == "cluster" and r.error is None

    def fails():
        raise TrainkitError("no spare host answers on SSH")
    r = elastic.Replacing(fails)
    r.join()
    assert r.done and r.result is None and "no spare" in r.error.message


def test_survivors_gone_before_a_step_of_their_own_end_at_the_run_s_last_step():
    """elastic.last_step_before: the newest last step of an earlier attempt (the survivors'
    attempt that logged none is recorded with it, never null)."""
    record = {"attempts": [{"attempt": 1, "last_step": 14}, {"attempt": 2, "last_step": None},
                           {"attempt": 3, "last_step": None}]}
    assert elastic.last_step_before(record, 3) == 14
    assert elastic.last_step_before(record, 1) is None and elastic.last_step_before({}, 2) is None
