"""`trainkit top` on a Slurm cluster (trainkit/cluster/scheduler_top.py): a row per open run from
one ssh's output (squeue -o '%T|%M|%N', then the last `step` record of metrics.jsonl), rendered by
cluster/top.py's table with the node counters as `-`."""

from __future__ import annotations

import json

from rich.console import Console

from trainkit.cluster.scheduler_top import row
from trainkit.cluster.top import cells, view

STEP = {"kind": "step", "step": 40, "loss": 0.54637, "samples_per_s": 2683.2, "data_wait_pct": 1.7, "time": 100.0}


def test_a_running_job_shows_its_state_nodes_and_the_engine_s_progress():
    r = row("digits-1", "12", f"RUNNING|1:02|tk-[1-2]\n\n{json.dumps(STEP)}\n", now=103.5)
    assert r["verdict"] == "RUNNING 1:02 on tk-[1-2]: step 40, loss 0.5464" and not r["flagged"]
    assert r["job"] == {"step": 40, "loss": 0.54637, "samples_per_s": 2683.2, "data_wait_pct": 1.7, "age_s": 3.5}
    text = cells(r)
    assert (text["NODE"], text["SMP/s"], text["WAIT"], text["GPU%"], text["CPU%"]) == \
        ("digits-1 (job 12)", "2683", "1.7%", "-", "-")


def test_a_pending_job_with_no_step_is_flagged_and_says_so():
    r = row("digits-1", "12", "PENDING|0:00|\n\n", now=0.0)
    assert r["flagged"] and r["verdict"] == "PENDING: no step logged yet"
    r = row("digits-1", "12", "\n\n", now=0.0)   # squeue no longer lists it
    assert r["verdict"] == "gone from squeue: no step logged yet"


def test_a_data_bound_job_is_flagged_and_a_cut_line_is_no_step():
    r = row("d", "3", f"RUNNING|0:10|n1\n\n{json.dumps({**STEP, 'data_wait_pct': 40.0})}\n", now=100.0)
    assert r["flagged"]
    r = row("d", "3", 'RUNNING|0:10|n1\n\n{"kind": "step", "st\n', now=100.0)
    assert r["verdict"] == "RUNNING 0:10 on n1: no step logged yet"


def test_the_rows_render_in_top_s_table():
    rows = [row("digits-1", "12", f"RUNNING|1:02|tk-[1-2]\n\n{json.dumps(STEP)}\n", now=103.5)]
    console = Console(width=160, record=True)
    console.print(view(rows, "lab: 1 run(s) in the scheduler's queue", 160))
    out = console.export_text()
    assert "digits-1 (job 12)" in out and "step 40, loss 0.5464" in out, out
