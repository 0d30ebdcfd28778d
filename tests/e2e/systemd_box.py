"""A real systemd as PID 1, in namespaces of its own, for the controller's systemd path
(trainkit/runs/controller.py: start_script's transient unit, alive_script, stop_script).

systemd (this machine's /lib/systemd/systemd) boots in new mount, pid, net, uts, ipc and cgroup
namespaces, as a container manager would start it (`container=` in its environment: systemd(1),
"Environment"), in a cgroup of its own under this machine's cgroup2 hierarchy. It must touch
nothing this machine shares, so before it starts:

- every mount it inherits is made read-only in its mount namespace, but one folder (`box`) where
  the test's files are; /proc/sys too;
- /run is a private tmpfs (sd_booted(3): /run/systemd/system exists there, not here);
- every unit that any target of this machine wants is masked (/run/systemd/system.control, which
  takes precedence over /etc and /lib: systemd.unit(5), "Unit File Load Path"), so that a
  transient service's default dependencies (sysinit.target, basic.target) start nothing:
  systemd-tmpfiles-setup.service would otherwise empty /tmp (tmp.conf's `D /tmp`), udev and
  sysctl would act on the shared kernel;
- it boots to an empty target (`--unit=`), so nothing else runs.

`Box.sh(script)` runs a POSIX sh script in its namespaces (nsenter), as root, as the controller's
ssh session would on a host where systemd is PID 1.
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import time
from pathlib import Path

SYSTEMD = Path("/lib/systemd/systemd")
TOOLS = ("unshare", "nsenter", "findmnt", "systemctl", "systemd-run")

BOOT = r"""set -e
BOX=$1
mount --make-rprivate /
mount --bind "$BOX" "$BOX"
findmnt -rno TARGET | while read -r m; do
  case "$m" in "$BOX"|/proc|/proc/*|/dev/pts|/dev/shm) continue;; esac
  mount -o bind,remount,ro "$m" 2>/dev/null || true
done
mount -o bind,remount,rw "$BOX"
mount --bind /proc/sys /proc/sys
mount -o bind,remount,ro /proc/sys
umount -R /sys/fs/cgroup 2>/dev/null || umount -l /sys/fs/cgroup
mount -t cgroup2 none /sys/fs/cgroup
mount -t tmpfs -o mode=755 tmpfs /run
mkdir -p /run/systemd/system.control /run/systemd/system
for d in /lib/systemd/system/*.wants /lib/systemd/system/*.requires /etc/systemd/system/*.wants \
         /etc/systemd/system/*.requires /usr/lib/systemd/system/*.wants /usr/lib/systemd/system/*.requires; do
  [ -d "$d" ] || continue
  for u in "$d"/*; do
    n=${u##*/}
    case "$n" in *.target) ;; *) ln -sf /dev/null "/run/systemd/system.control/$n";; esac
  done
done
printf '[Unit]\nDescription=trainkit test box\n' > /run/systemd/system/trainkit-box.target
exec env container=trainkit-test "$2" --system --unit=trainkit-box.target --log-target=console
"""


def missing() -> list[str]:
    """What this machine lacks to boot the box (root, the tools, systemd, a cgroup2 hierarchy)."""
    out = [t for t in TOOLS if shutil.which(t) is None]
    if os.geteuid() != 0:
        out.append("root")
    if not SYSTEMD.is_file():
        out.append(str(SYSTEMD))
    if _cgroup2() is None:
        out.append("a cgroup2 mount")
    return out


def _cgroup2() -> Path | None:
    """This process's cgroup in the cgroup2 hierarchy (proc(5): mountinfo, cgroup), or None."""
    mounts = [line.split() for line in Path("/proc/self/mountinfo").read_text().splitlines()]
    root = next((Path(f[4]) for f in mounts if f[f.index("-") + 1] == "cgroup2"), None)
    own = next((line[3:] for line in Path("/proc/self/cgroup").read_text().splitlines() if line.startswith("0::")), None)
    return None if root is None or own is None else root / own.lstrip("/")


class Box:
    def __init__(self, folder: Path):
        self.box = folder / "box"
        self.box.mkdir(parents=True)
        self.console = folder / "console.log"
        self.cgroup = _cgroup2() / f"trainkit-box-{os.getpid()}-{time.monotonic_ns()}"
        self.proc: subprocess.Popen | None = None
        self.pid1 = 0

    def start(self, timeout_s: float = 120) -> "Box":
        """Boot it and wait until systemd says running; RuntimeError with its console if it never does."""
        (self.box.parent / "boot.sh").write_text(BOOT)
        self.cgroup.mkdir()
        enter = (f"echo $$ > {self.cgroup / 'cgroup.procs'} && exec unshare --mount --pid --fork --net --uts --ipc "
                 f"--cgroup --mount-proc sh {self.box.parent / 'boot.sh'} {self.box} {SYSTEMD}")
        with self.console.open("wb") as log:
            self.proc = subprocess.Popen(["sh", "-c", enter], stdout=log, stderr=subprocess.STDOUT,
                                         stdin=subprocess.DEVNULL, start_new_session=True)
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            self.pid1 = self.pid1 or self._child()
            if self.pid1 and self.sh("systemctl is-system-running").stdout.strip() in ("running", "degraded"):
                return self
            if self.proc.poll() is not None:
                break
            time.sleep(0.5)
        raise RuntimeError(f"systemd never came up in the box:\n{self.console.read_text()[-3000:]}")

    def _child(self) -> int:
        """unshare's child: systemd, PID 1 of the new pid namespace."""
        try:
            kids = Path(f"/proc/{self.proc.pid}/task/{self.proc.pid}/children").read_text().split()
        except OSError:
            return 0
        pid = int(kids[0]) if kids else 0
        try:
            return pid if Path(f"/proc/{pid}/exe").resolve() == SYSTEMD.resolve() else 0
        except OSError:
            return 0

    def sh(self, script: str, timeout: float = 60) -> subprocess.CompletedProcess:
        """`script` run by sh as root inside the box; text out."""
        return subprocess.run(["nsenter", "-t", str(self.pid1), "-m", "-p", "-n", "-u", "-i", "-C", "sh", "-c", script],
                              capture_output=True, text=True, timeout=timeout, cwd="/")

    def stop(self) -> None:
        """SIGKILL to its PID 1 ends the pid namespace (every process in it) and with it the mounts;
        then its cgroups are removed."""
        if self.pid1:
            try:
                os.kill(self.pid1, signal.SIGKILL)
            except ProcessLookupError:
                pass
        if self.proc is not None:
            try:
                self.proc.wait(timeout=60)
            except subprocess.TimeoutExpired:
                os.killpg(self.proc.pid, signal.SIGKILL)
                self.proc.wait(timeout=60)
        deadline = time.monotonic() + 60
        while self.cgroup.exists() and time.monotonic() < deadline:
            for d in sorted((p for p in self.cgroup.rglob("*") if p.is_dir()), key=lambda p: -len(p.parts)):
                _rmdir(d)
            _rmdir(self.cgroup)
            time.sleep(0.2)


def _rmdir(path: Path) -> None:
    try:
        path.rmdir()   # a cgroup folder goes with rmdir once no process is left in it
    except OSError:
        pass
