"""trainkit/node/slurm_health.py: Slurm's HealthCheckProgram judges doctor's node probe on the node
and drains it by an argv with fixed reasons; the node name is checked before it reaches scontrol."""

from __future__ import annotations

import os

import pytest

from trainkit.node.slurm_health import drain_argv, failures, main

HEALTHY = {"shared": {"ok": True}, "gpus": [{"index": 0, "ecc_uncorrected": 0, "remap_pending": False,
                                              "remap_failed": False}]}


@pytest.mark.parametrize("probe,gpus,reasons", [
    (HEALTHY, 1, []),
    ({**HEALTHY, "shared": None}, 1, []),   # no shared path given: nothing to check
    ({**HEALTHY, "shared": {"ok": False, "error": "missing"}}, 1, ["shared-storage-not-writable"]),
    (HEALTHY, 2, ["gpus-missing"]),
    ({"shared": {"ok": True}, "gpus": [{"ecc_uncorrected": 3}]}, 1, ["gpu-uncorrected-ecc"]),
    ({"shared": {"ok": True}, "gpus": [{"remap_failed": True}]}, 1, ["gpu-row-remap"]),
    ({"shared": {"ok": True}, "gpus": []}, 0, []),   # a CPU node
])
def test_each_failed_check_is_one_fixed_reason(probe, gpus, reasons):
    assert failures(probe, gpus) == reasons


def test_the_drain_is_an_scontrol_argv_and_a_bad_node_name_never_reaches_it():
    assert drain_argv("n-1", ["gpus-missing", "gpu-row-remap"]) == [
        "scontrol", "update", "NodeName=n-1", "State=DRAIN", "Reason=trainkit-health:gpus-missing,gpu-row-remap"]
    for bad in ("n 1", "n\nState=IDLE", "", "-n"):
        with pytest.raises(ValueError):
            drain_argv(bad, ["x"])


def test_a_healthy_node_exits_0_and_leaves_no_marker_on_the_shared_folder(tmp_path):
    assert main(["--node", "n-1", f"--shared={tmp_path}"]) == 0
    assert [p.name for p in tmp_path.rglob("*") if p.is_file()] == []


def test_an_unwritable_shared_folder_exits_1_after_running_scontrol_drain(tmp_path, monkeypatch):
    """scontrol here is a script on PATH that writes down its arguments (no slurmctld to ask)."""
    said = tmp_path / "argv"
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    (bin_dir / "scontrol").write_text(f'#!/bin/sh\nprintf "%s\\n" "$@" > {said}\n')
    (bin_dir / "scontrol").chmod(0o755)
    monkeypatch.setenv("PATH", f"{bin_dir}:{os.environ['PATH']}")
    assert main(["--node", "n-1", f"--shared={tmp_path / 'gone'}"]) == 1
    assert said.read_text().splitlines() == drain_argv("n-1", ["shared-storage-not-writable"])[1:]
