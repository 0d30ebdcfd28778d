"""The controller's key leaves the hosts with the controller (trainkit/runs/controller_keys.py and
the scripts in controller.py): the authorize and revoke scripts run for real in sh on
authorized_keys files, revoke over hosts one of which does not answer, when the controller's own
train takes its key away (at_the_end), and which controller folder a record may name."""

from __future__ import annotations

import shlex
import subprocess
from contextlib import nullcontext

import click
import pytest

from trainkit.errors import DESTROY, INTERRUPTED, LOCKED, OK, PREEMPTED, TRAIN, TrainkitError
from trainkit.provision.node import Node
from trainkit.runs import controller as ctl
from trainkit.runs import controller_keys
from trainkit.workspace import Workspace

KEY = "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIBq3dOUWsGzL1t0M2K3bTtY4P2sYvE8rZ6M9Kp7cQ1aB trainkit-controller-r1"
OTHERS = ["ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIG9user0000000000000000000000000000000000000 me@laptop",
          f'from="10.0.0.0/8" {KEY}',            # the same key with options: another line, not ours
          f"{KEY} and more",                      # a longer line that starts with it
          "# a comment"]


def _sh(script: str) -> None:
    subprocess.run(["sh", "-c", script], check=True, timeout=60)


def test_authorized_once_then_exactly_that_line_taken_out_the_file_kept(tmp_path):
    keys = tmp_path / "my ssh" / "authorized_keys"
    word = shlex.quote(str(keys))
    _sh(ctl.authorize_script(word, OTHERS[0]))            # made with its folder, 0600
    assert oct(keys.stat().st_mode & 0o777) == "0o600"
    keys.write_text("\n".join(OTHERS) + "\n")
    _sh(ctl.authorize_script(word, KEY))
    _sh(ctl.authorize_script(word, KEY))                  # a second hand-off of the same key: still one line
    assert keys.read_text().splitlines() == [*OTHERS, KEY]
    inode = keys.stat().st_ino
    _sh(ctl.revoke_script(word, KEY))
    assert keys.read_text().splitlines() == OTHERS       # only the exact line went
    assert keys.stat().st_ino == inode and oct(keys.stat().st_mode & 0o777) == "0o600"
    assert not list(keys.parent.glob("*.trainkit*"))
    _sh(ctl.revoke_script(word, KEY))                     # again: nothing to take, nothing else touched
    assert keys.read_text().splitlines() == OTHERS
    missing = tmp_path / "none" / "authorized_keys"
    _sh(ctl.revoke_script(shlex.quote(str(missing)), KEY))
    assert not missing.parent.exists()


def test_revoke_names_the_hosts_that_keep_the_line(tmp_path):
    files = [tmp_path / f"h{i}" / "authorized_keys" for i in range(2)]
    for f in files:
        f.parent.mkdir()
        f.write_text(f"{OTHERS[0]}\n{KEY}\n")
    hosts = [(Node(f"h{i}", i, local=True), shlex.quote(str(f))) for i, f in enumerate(files)]
    lost = Node("lost", 2, address="127.0.0.1", port=1, key_file=str(tmp_path / "none"))   # nothing listens on port 1
    kept = controller_keys.revoke([*hosts, (lost, '"$HOME"/.ssh/authorized_keys')], KEY)
    assert kept == ["lost"]
    assert all(f.read_text().splitlines() == [OTHERS[0]] for f in files)


@pytest.mark.parametrize("raised, revoked", [
    (None, True),                                                  # completed
    (TrainkitError("failed", exit_code=TRAIN), True),              # failed past its restarts
    (TrainkitError("preempted", exit_code=PREEMPTED), True),       # past max recoveries
    (TrainkitError("destroy failed", exit_code=DESTROY), True),    # --down could not destroy: nothing retries
    (TrainkitError("busy", exit_code=LOCKED), True),               # another controller holds the run
    (click.UsageError("bad"), True),                               # exit 2: the loop does not restart it
    (TrainkitError("interrupted", exit_code=INTERRUPTED), False),  # restarted: it needs its key
    (KeyboardInterrupt(), False),
    (RuntimeError("a bug"), False),                                # exit 1: restarted
])
def test_the_controllers_train_takes_its_key_away_only_when_the_run_ends_for_good(raised, revoked):
    calls = []
    with pytest.raises(type(raised)) if raised else nullcontext():
        with controller_keys.at_the_end(lambda: calls.append("revoked")):
            if raised:
                raise raised
    assert calls == (["revoked"] if revoked else [])
    assert ctl.ends_for_good(OK) and not ctl.ends_for_good(137)


def test_no_revoker_anywhere_but_the_controllers_own_workspace(tmp_path):
    run_id = "digits-20260101-120000"
    own = tmp_path / "root-controller" / run_id
    (own / "ws" / "runs" / run_id).mkdir(parents=True)
    (own / "ws" / "runs" / run_id / "run.json").write_text(f'{{"controller": {{"dir": "{own}"}}}}')
    assert controller_keys.revoker(None, Workspace(own / "ws", "c"), run_id) is not None
    user = tmp_path / "ws"      # the user's workspace has the same record: not the controller's
    (user / "runs" / run_id).mkdir(parents=True)
    (user / "runs" / run_id / "run.json").write_text(f'{{"controller": {{"dir": "{own}"}}}}')
    assert controller_keys.revoker(None, Workspace(user, "c"), run_id) is None
    assert controller_keys.revoker(None, Workspace(own / "ws", "c"), "../x") is None
    with controller_keys.at_the_end(None):   # no revoker: nothing happens
        pass


@pytest.mark.parametrize("folder, run_id, expected", [
    ("/opt/trainkit-controller/r-20260101-120000", "r-20260101-120000", "/opt/trainkit-controller/r-20260101-120000/ssh"),
    ("/opt/trainkit-controller/other-20260101-120000", "r-20260101-120000", None),   # another run's
    ("/opt/trainkit/r-20260101-120000", "r-20260101-120000", None),                  # not a controller folder
    ("relative-controller/r-20260101-120000", "r-20260101-120000", None),
    ("/opt/x-controller/../../etc-controller/r-20260101-120000", "r-20260101-120000", None),
    ("", "r-20260101-120000", None),
])
def test_a_records_controller_folder_is_checked_before_its_key_pair_is_removed(folder, run_id, expected):
    assert ctl.key_dir({"dir": folder}, run_id) == expected
