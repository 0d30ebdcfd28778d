"""`train --attach RUN` (runs/record.py attachable, used by start.py and slurm_runs.py): only an
open run that has started something can be attached to; otherwise the error names the run, its
status and where its results are."""

from __future__ import annotations

import pytest

from trainkit.errors import InputError
from trainkit.runs import record as runs


@pytest.mark.parametrize("record, started, ok", [
    ({"status": "running", "attempts": [{"attempt": 1}]}, "attempts", True),
    ({"status": "starting", "attempts": []}, "attempts", False),          # nothing launched yet
    ({"status": "completed", "attempts": [{"attempt": 1}]}, "attempts", False),
    ({"status": "running", "slurm_job": "42"}, "slurm_job", True),
    ({"status": "running"}, "slurm_job", False),                          # not submitted
    ({"status": "cancelled", "slurm_job": "42"}, "slurm_job", False),
])
def test_only_an_open_started_run_is_attachable(tmp_path, record, started, ok):
    run_dir = tmp_path / "runs" / "digits-20261205-000000"
    runs.write_record(run_dir, {"run_id": run_dir.name, "name": "digits", "config": "/x/digits.yaml", **record})
    if ok:
        assert runs.attachable(tmp_path / "runs", "digits-2026", "lab.yaml", started) == \
            (run_dir, runs.read_record(run_dir))
        return
    with pytest.raises(InputError) as err:
        runs.attachable(tmp_path / "runs", "digits-2026", "lab.yaml", started)
    said = err.value.message
    assert said == f"run {run_dir.name} is {record['status']}: nothing to attach to", said
    assert str(run_dir) in err.value.fix and "trainkit runs lab.yaml" in err.value.fix
