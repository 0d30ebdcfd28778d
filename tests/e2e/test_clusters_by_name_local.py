"""Clusters by name on the `local` target, as a user meets them: two clusters applied (one in the
default workspace, one with --workdir), `trainkit status` alone lists both, a run started and a
destroy done by NAME from another folder, and the list shows the destroyed one DOWN. Real
processes: the trainkit command, the run's supervisor (a `command:` job), Ansible's teardown."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

TRAINKIT = Path(sys.executable).parent / "trainkit"
REPO = Path(__file__).resolve().parents[2]
SPEC = "name: {name}\ncloud: local\nstorage: {{data_disk: {{enabled: false}}, nas: {{enabled: false}}}}\n"
JOB = """name: job
command: |
  mkdir -p "$TRAINKIT_RUN_DIR/weights" && echo w > "$TRAINKIT_RUN_DIR/weights/best.pt"
"""


def test_two_clusters_are_listed_run_and_destroyed_by_name(tmp_path):
    env = {**os.environ, "PYTHONPATH": str(REPO), "TRAINKIT_STATE_DIR": str(tmp_path / "state")}

    def tk(*args: str, cwd: Path = tmp_path) -> subprocess.CompletedProcess:
        proc = subprocess.run([str(TRAINKIT), *args], cwd=cwd, capture_output=True, text=True, timeout=300, env=env)
        assert "Traceback" not in proc.stderr and "internal error" not in proc.stderr, proc.stderr
        return proc

    def listed(cwd: Path = tmp_path) -> dict[str, dict]:
        proc = tk("status", "--json", cwd=cwd)
        assert proc.returncode == 0, proc.stderr
        return {r["name"]: r for r in json.loads(proc.stdout)["clusters"]}

    for name in ("byname-one", "byname-two"):
        (tmp_path / f"{name}.yaml").write_text(SPEC.format(name=name))
    (tmp_path / "job.yaml").write_text(JOB)
    other = tmp_path / "other"
    other.mkdir()
    assert tk("apply", "byname-one.yaml", "--yes", "--no-provision").returncode == 0
    assert tk("apply", "byname-two.yaml", "--workdir", str(tmp_path / "ws2"), "--yes", "--no-provision").returncode == 0

    rows = listed(cwd=other)  # from another folder: the registry, not the current folder, knows them
    assert {n: (r["status"], r["workspace"]) for n, r in rows.items()} == {
        "byname-one": ("UP", str(tmp_path / ".trainkit/byname-one")), "byname-two": ("UP", str(tmp_path / "ws2"))}

    run = tk("train", "byname-two", "--config", str(tmp_path / "job.yaml"), "--no-doctor", "--json", cwd=other)
    assert run.returncode == 0, run.stderr
    result = json.loads(run.stdout)
    assert Path(result["run_dir"]).parent == tmp_path / "ws2" / "runs"  # the name's own workspace
    assert (Path(result["run_dir"]) / "weights" / "best.pt").read_text() == "w\n"
    runs = tk("runs", "byname-two", "--json", cwd=other)
    assert [r["status"] for r in json.loads(runs.stdout)] == ["completed"], runs.stderr

    gone = tk("destroy", "byname-two", "--yes", cwd=other)
    assert gone.returncode == 0 and "cluster byname-two destroyed" in gone.stdout, gone.stderr
    rows = listed(cwd=other)
    assert (rows["byname-one"]["status"], rows["byname-two"]["status"]) == ("UP", "DOWN")
    table = tk("status", cwd=other).stdout.splitlines()
    assert [line.split()[:4] for line in table[:3]] == [
        ["NAME", "TARGET", "NODES", "STATUS"], ["byname-one", "local", "1", "UP"], ["byname-two", "local", "-", "DOWN"]]
    assert (tmp_path / "ws2" / "runs").is_dir()  # the results stay, and the name still reaches them
    assert tk("runs", "byname-two", cwd=other).returncode == 0
