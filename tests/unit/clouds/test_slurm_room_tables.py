"""The `slurm` room through the tables of docs/design.md "Adding a target kind" (issue 41): its
inventory is the login node alone (the `scheduler` row of NODE_SOURCES), its teardown cleans
trainkit's folder on the shared storage instead of running cleanup.yml on the hosts, and `apply`
against a login node that does not answer says so naming `slurm.login`, recording nothing. The
real scheduler side (sbatch, squeue, scancel) is tests/e2e/test_slurm_job.py."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from trainkit import clouds
from trainkit.cli import main
from trainkit.cluster import teardown
from trainkit.cluster.replace import REPLACEMENTS
from trainkit.cluster.scheduler import remote_root
from trainkit.provision.inventory import NODE_SOURCES, inventory_for, inventory_hosts
from trainkit.provision.playbook import prepare_inventory
from trainkit.runs import record as runs
from trainkit.spec.resolve import load_cluster
from trainkit.util import resources
from trainkit.workspace import Workspace

SPEC = {"name": "lab", "cloud": "slurm", "nodes": 2,
        "slurm": {"login": {"address": "127.0.0.1", "port": 1, "user": "alice", "key": "/keys/id_lab"},
                  "partition": "gpu", "workdir": "/shared/alice"}}


@pytest.fixture
def lab(tmp_path) -> Path:
    path = tmp_path / "lab.yaml"
    path.write_text(yaml.safe_dump(SPEC))
    return path


def _cli(capsys, *args: str) -> tuple[int, str]:
    with pytest.raises(SystemExit) as done:
        main(list(args))
    out, err = capsys.readouterr()
    assert "Traceback" not in err, err
    return done.value.code, out + err


def test_every_shipped_room_has_a_row_in_each_table():
    for name in clouds.TARGETS:
        room = clouds.get(name)
        assert room.node_source in NODE_SOURCES and room.replacement in REPLACEMENTS, name
        assert teardown.teardown_kind(room) in teardown.TEARDOWNS, name


def test_a_slurm_cluster_s_inventory_is_its_login_node_alone(lab, tmp_path):
    cluster = load_cluster(lab)
    ws = Workspace.for_cluster("lab", tmp_path / "ws")
    hosts = inventory_hosts(inventory_for(cluster, None, ws))
    assert list(hosts) == ["login"]
    login = hosts["login"]
    assert (login["ansible_host"], login["ansible_port"], login["ansible_user"]) == ("127.0.0.1", 1, "alice")
    assert login["ansible_ssh_private_key_file"] == "/keys/id_lab"
    assert str(ws.ssh_dir / "known_hosts") in login["ansible_ssh_common_args"]
    # destroy removes trainkit's own folder under slurm.workdir, never the workdir itself
    assert remote_root(cluster) == "/shared/alice/.trainkit/lab"
    assert teardown.TEARDOWNS[teardown.teardown_kind(cluster.room)] is teardown._clean_scheduler


def test_apply_against_a_login_node_that_does_not_answer_names_slurm_login(lab, tmp_path, capsys):
    ws = tmp_path / "ws"
    code, text = _cli(capsys, "apply", str(lab), "--yes", "--workdir", str(ws))
    assert code == 2 and "slurm.login: 127.0.0.1 did not run `sbatch --version`" in text, text
    assert not (ws / "inventory.yml").exists()
    code, text = _cli(capsys, "train", str(lab), "--config", "digits", "--workdir", str(ws))
    assert code == 2 and "apply first" in text, text
    code, text = _cli(capsys, "destroy", str(lab), "--yes", "--workdir", str(ws))
    assert code == 0 and "nothing to destroy" in text, text


def test_what_the_scheduler_path_refuses_is_refused_before_any_ssh(lab, tmp_path, capsys):
    """With the login node recorded (as `apply` records it; port 1: nothing answers there),
    `--resume` of a completed run and `--recover --detach` stop with exit 2 naming why, before any
    ssh; a run whose job ended is read from its record alone (runs, cancel)."""
    cluster = load_cluster(lab)
    ws = Workspace.for_cluster("lab", tmp_path / "ws")
    prepare_inventory(cluster, ws)
    code, text = _cli(capsys, "train", str(lab), "--config", "digits", "--recover", "--detach",
                      "--workdir", str(ws.root))
    assert code == 2 and "--recover needs a controller that stays" in text, text
    run_dir = ws.runs_dir / "digits-20260101-000000"
    runs.write_record(run_dir, {"run_id": run_dir.name, "status": "completed", "slurm_job": "7",
                                "config": str(resources.train_config("digits")), "created_at": 1.0,
                                "attempts": [], "remote_dir": "/shared/alice/.trainkit/lab/runs/x"})
    code, text = _cli(capsys, "runs", str(lab), "--json", "--workdir", str(ws.root))
    assert code == 0 and '"status": "completed"' in text, text
    code, text = _cli(capsys, "cancel", str(lab), run_dir.name, "--workdir", str(ws.root))
    assert code == 0 and "already completed: nothing to cancel" in text, text
    code, text = _cli(capsys, "train", str(lab), "--resume", run_dir.name, "--recover", "--workdir", str(ws.root))
    assert code == 2 and f"run {run_dir.name} completed: there is nothing to resume" in text, text
