"""The node-side doctor probe on this machine (a CPU node): honest "no GPU", free disk, the shared
mount written + read back + deleted with a marker left for the cross-node check, and a missing
mount reported as missing; it runs as `python3 - ARGS` with the standard library alone."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest

from trainkit.cluster.doctor import node_paths
from trainkit.node import doctor_probe
from trainkit.provision.node import node_from_vars

pytestmark = pytest.mark.unit

PROBE = Path(doctor_probe.__file__)


def test_probe_on_a_cpu_node_reports_disks_and_a_working_shared_mount(tmp_path):
    shared = tmp_path / "nas"
    shared.mkdir()
    row = json.loads(subprocess.run(["/usr/bin/python3", "-", "--data", str(tmp_path), "--shared", str(shared),
                                     "--tag", "t1", "--mark", "node-0"], input=PROBE.read_text(),
                                    capture_output=True, text=True, check=True).stdout)
    if not row["nvml"]:
        assert row["gpus"] == []
    assert row["data"]["free_bytes"] > 0 and row["shared_disk"]["total_bytes"] > 0
    assert row["shared"]["ok"] and row["shared"]["mark"] == str(shared / ".trainkit-doctor" / "t1" / "node-0")
    assert [p.name for p in shared.iterdir()] == [".trainkit-doctor"]  # the probe file itself is gone
    assert isinstance(row["time"], float)


def test_a_missing_shared_mount_or_data_path_is_reported_not_raised(tmp_path):
    row = doctor_probe.probe(str(tmp_path / "nope"), str(tmp_path / "gone"), "t", "node-1")
    assert row["shared"] == {"path": str(tmp_path / "gone"), "ok": False, "error": "missing", "mark": None}
    assert row["data"]["error"] and "shared_disk" not in row
    (tmp_path / "file").write_text("x")
    assert doctor_probe.shared(str(tmp_path / "file"), "t", "n")["error"] == "not a directory"


def test_node_paths_come_from_the_inventory_vars():
    node = node_from_vars("a", 0, {"disks_enabled": True, "disks_mount_point": "/data", "nas_enabled": True,
                                   "nas_mount_point": "/mnt/shared", "trainkit_root": "/opt/trainkit"})
    assert node_paths(node) == ("/data", "/mnt/shared")
    bare = node_from_vars("b", 1, {"disks_enabled": False, "trainkit_root": "/opt/tk",
                                   "trainkit_shared_work_dir": False})
    assert node_paths(bare) == ("/opt/tk", None)


def test_a_folder_the_job_creates_counts_its_parent_a_missing_mount_point_does_not(tmp_path):
    assert doctor_probe.disk(str(tmp_path / "a" / "b"), created_on_demand=True)["free_bytes"] > 0
    assert "error" in doctor_probe.disk(str(tmp_path / "a" / "b"))
