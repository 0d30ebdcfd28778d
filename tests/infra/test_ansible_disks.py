"""The disks role for real, on a loop device: format once, mount, never reformat.

Needs root and loop devices (losetup). Every test writes a scratch fstab (disks_fstab), so
/etc/fstab is never touched; mounts and loop devices are torn down in finalizers.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
ROLE = REPO / "ansible" / "roles" / "disks"
SIZE_MIB = 97  # an odd size, so the size-based fallback finds only this disk

pytestmark = pytest.mark.skipif(os.geteuid() != 0 or not shutil.which("losetup"),
                                reason="needs root and losetup")


def _sh(*cmd: str) -> str:
    return subprocess.run(cmd, check=True, capture_output=True, text=True).stdout.strip()


def _blkid(dev: str, tag: str) -> str:
    out = subprocess.run(["blkid", "-p", "-o", "value", "-s", tag, dev], capture_output=True, text=True)
    return out.stdout.strip()


def _mounted(path: Path) -> bool:
    return subprocess.run(["findmnt", "--mountpoint", str(path)], capture_output=True).returncode == 0


@contextlib.contextmanager
def _loop_disk(tmp_path: Path, size_mib: int):
    """A loop device over a sparse file of `size_mib`; unmounted and detached afterwards (a
    leftover of the same size would make the size-based fallback see two disks)."""
    image = tmp_path / "disk.img"
    with open(image, "wb") as fh:
        fh.truncate(size_mib * 1024 * 1024)
    try:
        dev = _sh("losetup", "--find", "--show", str(image))
    except subprocess.CalledProcessError as err:
        pytest.skip(f"no loop device available: {err.stderr}")
    mnt = tmp_path / "mnt"
    try:
        yield dev, mnt, tmp_path / "fstab"
    finally:
        for _ in range(10):
            if not _mounted(mnt):
                break
            subprocess.run(["umount", str(mnt)], capture_output=True)
            time.sleep(0.5)
        subprocess.run(["losetup", "-d", dev], capture_output=True)


@pytest.fixture
def loopdev(tmp_path):
    with _loop_disk(tmp_path, SIZE_MIB) as disk:
        yield disk


def run_role(tmp_path: Path, **role_vars):
    """Apply the disks role to this machine with ansible-runner; returns (runner, changed count)."""
    import ansible_runner
    play = tmp_path / "play.yml"
    play.write_text(f"- hosts: all\n  roles:\n    - role: {ROLE}\n")
    inventory = f"localhost ansible_connection=local ansible_python_interpreter={sys.executable}\n"
    env = {"PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}",
           "ANSIBLE_CONFIG": str(REPO / "ansible" / "ansible.cfg")}
    (tmp_path / "runner").mkdir(exist_ok=True)
    r = ansible_runner.run(private_data_dir=str(tmp_path / "runner"), playbook=str(play),
                           inventory=inventory, extravars=role_vars, envvars=env, quiet=True,
                           suppress_env_files=True)
    changed = sum((r.stats or {}).get("changed", {}).values())
    return r, changed


def _failure_text(r) -> str:
    return " ".join(str(e["event_data"].get("res", {}).get("msg", "")) for e in r.events
                    if e.get("event") == "runner_on_failed")


def disk_vars(dev: str, mnt: Path, fstab: Path, **more):
    return {"disks_device": dev, "disks_mount_point": str(mnt), "disks_fstab": str(fstab),
            "disks_fstype": "ext4", **more}


def test_disks_role_formats_an_empty_disk_once_and_mounts_it_with_nofail(loopdev, tmp_path):
    dev, mnt, fstab = loopdev
    r, changed = run_role(tmp_path, **disk_vars(dev, mnt, fstab))
    assert r.rc == 0, _failure_text(r)
    assert changed >= 2  # mkfs + mount
    uuid = _blkid(dev, "UUID")
    assert _blkid(dev, "TYPE") == "ext4" and uuid
    assert _mounted(mnt)
    line = next(ln for ln in fstab.read_text().splitlines() if str(mnt) in ln)
    assert f"UUID={uuid}" in line and "nofail" in line
    (mnt / "keep.txt").write_text("data")

    r2, changed2 = run_role(tmp_path, **disk_vars(dev, mnt, fstab))
    assert r2.rc == 0, _failure_text(r2)
    assert changed2 == 0
    assert _blkid(dev, "UUID") == uuid
    assert (mnt / "keep.txt").read_text() == "data"


def test_disks_role_never_reformats_a_disk_with_another_filesystem(loopdev, tmp_path):
    dev, mnt, fstab = loopdev
    _sh("mkfs.ext2", "-q", "-F", dev)
    uuid = _blkid(dev, "UUID")

    r, _ = run_role(tmp_path, **disk_vars(dev, mnt, fstab, disks_on_other_filesystem="fail"))
    assert r.rc != 0 and "never reformatted" in _failure_text(r)
    assert _blkid(dev, "UUID") == uuid and _blkid(dev, "TYPE") == "ext2"

    r, _ = run_role(tmp_path, **disk_vars(dev, mnt, fstab))  # default: mount it as it is
    assert r.rc == 0, _failure_text(r)
    assert _blkid(dev, "UUID") == uuid and _blkid(dev, "TYPE") == "ext2"
    assert _mounted(mnt)
    assert "ext2" in fstab.read_text()


def test_disks_role_finds_the_only_disk_of_the_expected_size_when_the_named_device_is_absent(tmp_path):
    # a size of its own (4 MiB over the others', past the 1% tolerance): a disk another test of this
    # module left attached (a busy unmount) is not a second candidate
    with _loop_disk(tmp_path, SIZE_MIB + 4) as (dev, mnt, fstab):
        r, _ = run_role(tmp_path, **disk_vars(
            "/dev/trainkit-no-such-disk", mnt, fstab, disks_expected_size_gb=(SIZE_MIB + 4) / 1024,
            disks_size_tolerance_pct=1, disks_candidate_exclude="^(ram|sr|zram|dm-|md|nbd)"))
        assert r.rc == 0, _failure_text(r)
        assert _blkid(dev, "TYPE") == "ext4"
        assert _mounted(mnt)


def test_disks_role_skips_with_a_message_when_no_disk_is_found_and_none_is_required(tmp_path):
    fstab = tmp_path / "fstab"
    r, changed = run_role(tmp_path, disks_device="/dev/trainkit-no-such-disk", disks_required=False,
                          disks_expected_size_gb=12345, disks_mount_point=str(tmp_path / "m"),
                          disks_fstab=str(fstab))
    assert r.rc == 0, _failure_text(r)
    assert changed == 0
    assert not fstab.exists()


def test_disks_cleanup_unmounts_and_removes_the_fstab_entry(loopdev, tmp_path):
    dev, mnt, fstab = loopdev
    r, _ = run_role(tmp_path, **disk_vars(dev, mnt, fstab))
    assert r.rc == 0, _failure_text(r)
    r, _ = run_role(tmp_path, **disk_vars(dev, mnt, fstab, disks_state="absent"))
    assert r.rc == 0, _failure_text(r)
    assert not _mounted(mnt)
    assert str(mnt) not in fstab.read_text()


def test_disks_role_finds_the_disk_by_its_serial_link_whatever_the_device_name(loopdev, tmp_path):
    """The module outputs each node's disk serial; the role follows the by-id link that ends with
    it (here a scratch by-id folder), even when the named device does not exist and no disk has
    the expected size."""
    dev, mnt, fstab = loopdev
    by_id = tmp_path / "by-id"
    by_id.mkdir()
    (by_id / "virtio-bp1serial0001").symlink_to(dev)
    (by_id / "virtio-bp1other0002").symlink_to("/dev/null")
    r, _ = run_role(tmp_path, **disk_vars("/dev/trainkit-no-such-disk", mnt, fstab,
                                          disks_serial="bp1serial0001", disks_by_id_dir=str(by_id),
                                          disks_expected_size_gb=12345))
    assert r.rc == 0, _failure_text(r)
    assert _mounted(mnt) and _blkid(dev, "TYPE") == "ext4"
