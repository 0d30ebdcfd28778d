"""A real Slurm on namespace hosts (netns.py): Debian's slurm-wlm 22.05 and munge, no systemd.

`SlurmCluster(cluster, workdir).start()` on a started `NetnsCluster`:

    every host   /etc/slurm is a bind mount (in the host's own mount namespace) of one folder
                 under workdir holding slurm.conf and cgroup.conf, so sbatch, squeue, srun and the
                 daemons all read the test's configuration from the path a real site uses;
                 munged as user munge with one test key, everything under the host's own /run/munge
                 (a tmpfs per host: netns.py), where Slurm's auth/munge finds the socket;
                 slurmd -N <host name>, its pid and log under workdir (%n per node), its spool
                 in the host's own /run/slurmd
    host 1       also slurmctld (the login node and controller in one): state under workdir

Daemons are started over ssh, so they live in the hosts' network namespaces and
`NetnsCluster.stop()` kills them with everything else. What the configuration needs here (measured
with slurm-wlm 22.05.8): `CgroupPlugin=cgroup/v1` in cgroup.conf (autodetect fails: "No filesystem
mounted on /sys/fs/cgroup"), `ProctrackType=proctrack/linuxproc`, `TaskPlugin=task/none`. CPU cost:
four daemons idling; each node offers one CPU (CPUs=1), so one job per node at a time.
"""

from __future__ import annotations

import os
import shlex
import time
from pathlib import Path

from netns import Host, NetnsCluster

MUNGED, SLURMCTLD, SLURMD = "/usr/sbin/munged", "/usr/sbin/slurmctld", "/usr/sbin/slurmd"
READY_TIMEOUT_S = 60
PARTITION = "debug"


def missing_tools() -> list[str]:
    """What this machine lacks to run the Slurm fixture (empty: all there)."""
    out = [t for t in (MUNGED, SLURMCTLD, SLURMD, "/usr/bin/sbatch", "/usr/bin/srun") if not os.access(t, os.X_OK)]
    return [f"{t} (apt-get install slurm-wlm munge; .ci/run does)" for t in out]


class SlurmCluster:
    def __init__(self, cluster: NetnsCluster, workdir: Path) -> None:
        self.cluster = cluster
        self.dir = Path(workdir)
        self.etc = self.dir / "etc"
        self.hosts: list[Host] = cluster.hosts
        self.login = cluster.hosts[0]

    def start(self) -> "SlurmCluster":
        """Write the configuration, start munged and slurmd on every host and slurmctld on the
        first; returns once every node is idle in the partition."""
        self._write_config()
        key = self.dir / "munge.key"
        key.write_bytes(os.urandom(1024))  # munged(8): a key of 32 to 1024 bytes, one per test
        os.chmod(key, 0o600)
        for host in self.hosts:
            self._munged(host, key)
        self.sh(self.login, f"{SLURMCTLD}")
        for host in self.hosts:
            self.sh(host, f"{SLURMD} -N {host.name}")
        self._wait_idle()
        return self

    def rejoin(self, host: Host) -> None:
        """A host booted again (`NetnsCluster.revive`: a fresh mount namespace and /run) back in the
        partition: /etc/slurm, munged and slurmd as start() made them; returns once every node is
        idle (ReturnToService=2 lets a node that was DOWN register again)."""
        self._munged(host, self.dir / "munge.key")
        self.sh(host, f"{SLURMD} -N {host.name}")
        self._wait_idle()

    def sh(self, host: Host, command: str, timeout: float = 60) -> str:
        res = self.cluster.ssh(host, command, check=False, timeout=timeout)
        if res.returncode != 0:
            raise RuntimeError(f"{host.name}: {command}: exit {res.returncode}: {res.stderr[-800:]}\n"
                               f"{self.logs()}")
        return res.stdout

    def logs(self) -> str:
        """The daemons' log tails, for a failure message."""
        return "\n".join(f"--- {p.name}\n{p.read_text(errors='replace')[-1500:]}"
                         for p in sorted(self.dir.glob("*.log")))

    def _munged(self, host: Host, key: Path) -> None:
        run = "/run/munge"
        self.sh(host, "; ".join([
            "set -e", f"mkdir -p /etc/slurm && mount --bind {shlex.quote(str(self.etc))} /etc/slurm",
            f"mkdir -p {run} && install -o munge -g munge -m 0400 {shlex.quote(str(key))} {run}/munge.key",
            f"chown munge:munge {run} && chmod 0755 {run}",
            f"runuser -u munge -- {MUNGED} --key-file={run}/munge.key --pid-file={run}/munged.pid "
            f"--seed-file={run}/seed --log-file={run}/munged.log --socket={run}/munge.socket.2"]))

    def _write_config(self) -> None:
        d = self.dir
        for sub in ("etc", "state"):
            (d / sub).mkdir(parents=True, exist_ok=True)
        nodes = [f"NodeName={h.name} NodeAddr={h.address} CPUs=1 RealMemory=1000 State=UNKNOWN"
                 for h in self.hosts]
        conf = [
            "ClusterName=tk", f"SlurmctldHost={self.login.name}({self.login.address})",
            "SlurmUser=root", "SlurmdUser=root", "AuthType=auth/munge", "CredType=cred/munge",
            # the spool under the host's own /run (a tmpfs per host: netns.py), not under pytest's tmp dir:
            # slurmd's step sockets there are <spool>/<node>_<job>.<step>, and a Unix socket path
            # holds at most 108 bytes (unix(7)); a deep tmp dir went over (110, measured)
            f"StateSaveLocation={d}/state", "SlurmdSpoolDir=/run/slurmd",
            f"SlurmctldPidFile={d}/slurmctld.pid", f"SlurmdPidFile={d}/slurmd-%n.pid",
            f"SlurmctldLogFile={d}/slurmctld.log", f"SlurmdLogFile={d}/slurmd-%n.log",
            "ProctrackType=proctrack/linuxproc", "TaskPlugin=task/none", "MpiDefault=none",
            "SelectType=select/cons_tres", "SelectTypeParameters=CR_CPU", "SchedulerType=sched/backfill",
            "AccountingStorageType=accounting_storage/none", "JobAcctGatherType=jobacct_gather/none",
            "JobCompType=jobcomp/none", "MailProg=/bin/true", "ReturnToService=2",
            # seconds: a node silent this long is DOWN and its job requeued (slurm.conf(5) SlurmdTimeout)
            "SlurmctldTimeout=30", "SlurmdTimeout=30", "InactiveLimit=0", "KillWait=30", "MinJobAge=300",
            *nodes, f"PartitionName={PARTITION} Nodes=ALL Default=YES MaxTime=INFINITE State=UP", ""]
        (d / "etc" / "slurm.conf").write_text("\n".join(conf))
        (d / "etc" / "cgroup.conf").write_text("CgroupPlugin=cgroup/v1\n")

    def _wait_idle(self) -> None:
        deadline = time.monotonic() + READY_TIMEOUT_S
        states = ""
        while time.monotonic() < deadline:
            states = self.cluster.ssh(self.login, "sinfo -h -N -o '%N %T'", check=False).stdout
            if states.count("idle") == len(self.hosts):
                return
            time.sleep(0.5)
        raise RuntimeError(f"Slurm nodes not idle after {READY_TIMEOUT_S} s: {states!r}\n{self.logs()}")
