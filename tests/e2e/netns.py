"""Machines for multi-node tests: network namespaces on one bridge, each running its own sshd.

`NetnsCluster(workdir, count, prefix).start()` builds, as root:

    root namespace   bridge <prefix>-br <subnet>.1/24 (default 198.51.100.0/24, RFC 5737 TEST-NET-2;
                     addresses only on links created here, traffic only to them), a veth per host
    namespace <prefix>-hN   tk0 = <subnet>.(10+N)/24 and lo, no default route (nothing leaves);
                     its own UTS namespace (`hostname` = <prefix>-hN) and mount namespace, where
                     /etc/hosts and /run are the host's own (a copy under workdir; a tmpfs) and
                     `local_root` (a path on the shared filesystem) is bind-mounted from
                     workdir/<prefix>-hN/local, so that one path is node-local on every host,
                     like /opt on real machines. Everything else is shared: a folder under
                     workdir plays the NAS.
                     /usr/sbin/sshd -D with key-only auth, its own host key, config, pid file and
                     log under workdir/<prefix>-hN/.

`stop()` (idempotent, safe after a half-finished start) kills by PID every process whose network
namespace is one of ours (`ip netns pids`: sshd listener, `sshd: root@notty` sessions, training)
and every ssh ControlPersist master whose control socket is under `control_path_dir` (Ansible's
masters live in the root namespace and keep the sessions alive), then deletes namespaces, veths
and bridge. `purge(prefix)` does the same for what a crashed earlier run left with these names.
"""

from __future__ import annotations

import os
import shlex
import shutil
import signal
import socket
import subprocess
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

SUBNET_PREFIX = "198.51.100"  # RFC 5737 TEST-NET-2 /24; this machine's own eth0 is on TEST-NET-1
NS_IFNAME = "tk0"
SSHD = "/usr/sbin/sshd"
READY_TIMEOUT_S = 20


# Every test module that builds hosts gets its own names and /24 (names_for), so pytest-xdist can
# run those modules side by side: a purge or teardown touches only its own prefix.
MODULE_SLOTS = {"test_netns_hosts": 1, "test_hosts_multinode": 2, "test_recover_hosts": 3,
                "test_doctor_hosts": 4, "test_fault_matrix": 5,
                "test_fault_matrix_control": 6, "test_fault_matrix_cluster": 8,
                "test_fault_matrix_node": 9, "test_slurm_job": 10,
                "test_slurm_provisioned": 11, "test_controller_hosts": 12, "test_controller_cloud": 13}


def names_for(module: str) -> tuple[str, str]:
    """(prefix, subnet) of the namespace hosts that test module `module` builds.

    The prefix is $TRAINKIT_E2E_NETNS_PREFIX (default tke2e) + the module's slot; the subnet is the
    slot-th /24 after $TRAINKIT_E2E_NETNS_SUBNET (default 198.18.0, in RFC 2544's 198.18.0.0/15,
    which is never routed). A second session side by side sets both variables to other values.
    A module missing from MODULE_SLOTS is an error, not a silent clash with another module.
    """
    name = module.rsplit(".", 1)[-1]
    if name not in MODULE_SLOTS:
        raise KeyError(f"{name} builds namespace hosts: give it a slot in netns.MODULE_SLOTS")
    slot = MODULE_SLOTS[name]
    a, b, c = os.environ.get("TRAINKIT_E2E_NETNS_SUBNET", "198.18.0").split(".")
    return os.environ.get("TRAINKIT_E2E_NETNS_PREFIX", "tke2e") + str(slot), f"{a}.{b}.{int(c) + slot}"


def sh(*argv: str, check: bool = True) -> subprocess.CompletedProcess:
    return subprocess.run(argv, check=check, capture_output=True, text=True)


def missing_tools() -> list[str]:
    """What this machine lacks to build namespace hosts (empty list: all there)."""
    out = [] if os.geteuid() == 0 else ["root"]
    out += [t for t in ("ip", "unshare", "ssh", "ssh-keygen", "mount") if not shutil.which(t)]
    return out + ([] if os.access(SSHD, os.X_OK) else [f"{SSHD} (apt-get install openssh-server)"])


@dataclass
class Host:
    name: str            # namespace name = hostname = the spec's host name
    address: str
    port: int
    dir: Path            # sshd config, host key, log, private /etc/hosts, local root
    pid: int | None = None

    @property
    def netns(self) -> str:
        return self.name

    def pids(self) -> list[int]:
        """PIDs of every process in this host's network namespace."""
        out = sh("ip", "netns", "pids", self.netns, check=False).stdout.split()
        return [int(p) for p in out if p.isdigit()]


@dataclass
class NetnsCluster:
    workdir: Path
    count: int = 2
    prefix: str = "tke2e"
    local_root: Path | None = None   # bind-mounted per host (node-local); None = all shared
    subnet: str = SUBNET_PREFIX      # first three octets of the /24 (one per concurrent cluster)
    listen_any: bool = False         # sshd on every address of its namespace (add_address's too)
    hosts: list[Host] = field(default_factory=list)

    def __post_init__(self) -> None:
        self.workdir = Path(self.workdir)
        self.bridge = f"{self.prefix}-br"
        # Ansible's ssh ControlPath dir. Short and under /tmp: a control socket's path (dir, a 40-char
        # %C hash and ssh's 17-char temporary suffix) must fit sun_path's 108 bytes (unix(7)); under
        # pytest's popen-gwN tmp dirs it did not, and ssh exited 255. The prefix is machine-unique
        # already (it names the namespaces), so the dir is too.
        self.control_path_dir = Path(tempfile.gettempdir()) / f"{self.prefix}-cp"
        self.key = self.workdir / "ssh" / "id_ed25519"
        self.known_hosts = self.workdir / "ssh" / "known_hosts"
        self.hosts = [Host(f"{self.prefix}-h{i}", f"{self.subnet}.{10 + i}", 22,
                           self.workdir / f"{self.prefix}-h{i}") for i in range(1, self.count + 1)]

    # ------------------------------------------------------------------ start

    def start(self) -> "NetnsCluster":
        """Build the network and start every sshd; returns once each accepts the key."""
        purge(self.prefix, self.count)
        self.control_path_dir.mkdir(parents=True, exist_ok=True)
        self._client_key()
        sh("ip", "link", "add", self.bridge, "type", "bridge")
        sh("ip", "addr", "add", f"{self.subnet}.1/24", "dev", self.bridge)
        sh("ip", "link", "set", self.bridge, "up")
        for i, host in enumerate(self.hosts, 1):
            self._network(host, i)
            self._sshd(host)
        for host in self.hosts:
            self._wait_ready(host)
        return self

    def _client_key(self) -> None:
        self.key.parent.mkdir(parents=True, exist_ok=True)
        os.chmod(self.key.parent, 0o700)
        if not self.key.exists():
            sh("ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-C", "trainkit-e2e", "-f", str(self.key))

    def _network(self, host: Host, i: int) -> None:
        veth, peer = f"{self.prefix}-v{i}", f"{self.prefix}-p{i}"
        sh("ip", "netns", "add", host.netns)
        sh("ip", "link", "add", veth, "type", "veth", "peer", "name", peer)
        sh("ip", "link", "set", peer, "netns", host.netns)
        sh("ip", "link", "set", veth, "master", self.bridge)
        sh("ip", "link", "set", veth, "up")
        sh("ip", "-n", host.netns, "link", "set", peer, "name", NS_IFNAME)
        sh("ip", "-n", host.netns, "addr", "add", f"{host.address}/24", "dev", NS_IFNAME)
        sh("ip", "-n", host.netns, "link", "set", NS_IFNAME, "up")
        sh("ip", "-n", host.netns, "link", "set", "lo", "up")

    def _sshd(self, host: Host) -> None:
        d = host.dir
        (d / "local").mkdir(parents=True, exist_ok=True)
        hostkey = d / "ssh_host_ed25519_key"
        if not hostkey.exists():
            sh("ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", str(hostkey))
        (d / "authorized_keys").write_text(self.key.with_suffix(".pub").read_text())
        # A fresh machine knows localhost and itself; the base role adds the other nodes.
        (d / "hosts").write_text(f"127.0.0.1 localhost\n{host.address} {host.name}\n")
        config = d / "sshd_config"
        config.write_text("\n".join([
            f"ListenAddress {'0.0.0.0' if self.listen_any else host.address}:{host.port}", f"HostKey {hostkey}",
            f"PidFile {d / 'sshd.pid'}", f"AuthorizedKeysFile {self._authorized_keys(d)}",
            "PasswordAuthentication no", "KbdInteractiveAuthentication no", "PubkeyAuthentication yes",
            "UsePAM no", "StrictModes no", "PermitRootLogin prohibit-password", "UseDNS no",
            "X11Forwarding no", "PrintMotd no", "MaxSessions 32", "MaxStartups 32:50:64",
            "Subsystem sftp internal-sftp", "LogLevel VERBOSE", ""]))
        # A fresh node: root's ~/.bashrc of THIS machine (which bash reads for every ssh command)
        # is hidden, so a tool hook in it (e.g. pyenv's rehash waiting on a stale lock) cannot
        # hang the hosts' sessions.
        (d / "bashrc").write_text("")
        bashrc = Path.home() / ".bashrc"
        mounts = [f"mount --bind {shlex.quote(str(d / 'hosts'))} /etc/hosts",
                  *([f"mount --bind {shlex.quote(str(d / 'bashrc'))} {shlex.quote(str(bashrc))}"]
                    if bashrc.is_file() else []),
                  "mount -t tmpfs -o mode=0755 tmpfs /run", "mkdir -p /run/sshd"]
        if self.local_root is not None:
            Path(self.local_root).mkdir(parents=True, exist_ok=True)
            mounts.append(f"mount --bind {shlex.quote(str(d / 'local'))} {shlex.quote(str(self.local_root))}")
        script = "; ".join(["set -e", f"hostname {host.name}", *mounts,
                            f"exec {SSHD} -D -f {shlex.quote(str(config))} -E {shlex.quote(str(d / 'sshd.log'))}"])
        # ip netns exec, unshare (no --fork) and `exec sshd` all exec: the PID is sshd's.
        proc = subprocess.Popen(["ip", "netns", "exec", host.netns, "unshare", "--uts", "--mount",
                                 "--propagation", "private", "sh", "-c", script],
                                stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                                stderr=open(d / "start.log", "wb"), start_new_session=True)
        host.pid = proc.pid

    def _authorized_keys(self, d: Path) -> str:
        """sshd's AuthorizedKeysFile: the test key's file, and (with a local_root) the host's
        node-local `authorized_keys` there, where a test's provisioning may add keys (the
        `trainkit_authorized_keys_file` group var): root's real ~/.ssh is this machine's."""
        extra = f" {self.local_root}/authorized_keys" if self.local_root is not None else ""
        return f"{d / 'authorized_keys'}{extra}"

    def _wait_ready(self, host: Host) -> None:
        deadline = time.monotonic() + READY_TIMEOUT_S
        while time.monotonic() < deadline:
            try:
                socket.create_connection((host.address, host.port), timeout=1).close()
                if self.ssh(host, "true", check=False).returncode == 0:
                    return
            except OSError:
                pass
            time.sleep(0.2)
        log = "".join(p.read_text(errors="replace")[-800:] for p in (host.dir / "start.log",
                                                                     host.dir / "sshd.log") if p.exists())
        raise RuntimeError(f"sshd on {host.name} ({host.address}) did not accept the key: {log}")

    def kill(self, host: Host) -> int:
        """The machine is gone, as a spot reclaim leaves it: SIGKILL every process of its network
        namespace (sshd, sessions, training). Returns how many there were."""
        pids = host.pids()
        for pid in pids:
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        return len(pids)

    def add_address(self, host: Host, address: str) -> None:
        """Give `host` one more address, as a cloud gives an instance the IPs its API reports (a
        /32 on its tk0), reached from the root namespace and from every other host by an on-link
        /32 route over the bridge (gone with the bridge at stop()). sshd answers there with
        `listen_any`."""
        sh("ip", "-n", host.netns, "addr", "add", f"{address}/32", "dev", NS_IFNAME)
        sh("ip", "route", "replace", f"{address}/32", "dev", self.bridge)
        for other in self.hosts:
            if other is not host:
                sh("ip", "-n", other.netns, "route", "replace", f"{address}/32", "dev", NS_IFNAME)

    def partition(self, host: Host, cut: bool = True) -> None:
        """Cut `host` off the network (its veth's bridge end down: nothing in or out, processes
        untouched, as a switch or a security group failing); `cut=False` heals it."""
        i = self.hosts.index(host) + 1
        sh("ip", "link", "set", f"{self.prefix}-v{i}", "down" if cut else "up")

    def revive(self, host: Host) -> None:
        """Boot a killed host again: a fresh mount namespace (its /etc/hosts as a new machine
        has it, its node-local folder kept) and sshd, back once it accepts the key."""
        self._sshd(host)
        self._wait_ready(host)

    # ------------------------------------------------------------------ use

    def ssh_argv(self, host: Host) -> list[str]:
        """ssh to `host` with the cluster key; no user config, no multiplexing."""
        return ["ssh", "-F", "/dev/null", "-i", str(self.key), "-p", str(host.port),
                "-o", "BatchMode=yes", "-o", "IdentitiesOnly=yes", "-o", "ConnectTimeout=5",
                "-o", "StrictHostKeyChecking=accept-new", "-o", f"UserKnownHostsFile={self.known_hosts}",
                "-o", "ControlMaster=no", "-o", "ControlPath=none", f"root@{host.address}"]

    def ssh(self, host: Host, command: str, check: bool = True, timeout: float = 60
            ) -> subprocess.CompletedProcess:
        return subprocess.run(self.ssh_argv(host) + [command], capture_output=True, text=True,
                              check=check, timeout=timeout, stdin=subprocess.DEVNULL)

    def ansible_env(self) -> dict[str, str]:
        """Environment for Ansible runs against these hosts: its ssh control sockets under our
        workdir (so stop() finds the ControlPersist masters)."""
        return {"ANSIBLE_SSH_CONTROL_PATH_DIR": str(self.control_path_dir)}

    def ansible_fact_cache(self) -> dict[str, str]:
        """Environment that keeps gathered facts between playbooks (ansible.cfg gathers `smart`),
        so later ones (stage.yml, cleanup.yml) reuse what site.yml gathered: seconds per playbook."""
        return {"ANSIBLE_CACHE_PLUGIN": "jsonfile",
                "ANSIBLE_CACHE_PLUGIN_CONNECTION": str(self.workdir / "facts"),
                "ANSIBLE_CACHE_PLUGIN_TIMEOUT": "3600"}

    # ------------------------------------------------------------------ stop

    def leftovers(self) -> list[str]:
        """Namespaces, links and processes of ours that still exist (empty after stop())."""
        out = [f"netns {n}" for n in _our_netns(self.prefix)]
        out += [f"link {n}" for n in _our_links(self.prefix)]
        out += [f"pid {p}" for p in _masters(self.control_path_dir)]
        return out

    def stop(self) -> None:
        _kill(_masters(self.control_path_dir))
        purge(self.prefix, self.count)
        shutil.rmtree(self.control_path_dir, ignore_errors=True)


# ---------------------------------------------------------------------- teardown helpers

def purge(prefix: str, count: int = 2) -> None:
    """Remove every namespace, link and process a run with this prefix created (crash or not)."""
    _kill(_masters(f"/{prefix}-cp/"))
    for ns in _our_netns(prefix):
        pids = [int(p) for p in sh("ip", "netns", "pids", ns, check=False).stdout.split() if p.isdigit()]
        _kill(pids)
        sh("ip", "netns", "del", ns, check=False)
    for link in _our_links(prefix):
        sh("ip", "link", "del", link, check=False)


def _our_netns(prefix: str) -> list[str]:
    names = [line.split()[0] for line in sh("ip", "netns", "list", check=False).stdout.splitlines()
             if line.strip()]
    return [n for n in names if n.startswith(f"{prefix}-h")]


def _our_links(prefix: str) -> list[str]:
    names = []
    for line in sh("ip", "-o", "link", "show", check=False).stdout.splitlines():
        parts = line.split(":", 2)
        if len(parts) > 1:
            names.append(parts[1].strip().split("@")[0])
    return [n for n in names if n.startswith(f"{prefix}-")]


def _masters(control_dir: Path | str) -> list[int]:
    """ssh processes (ControlPersist masters, clients) whose command line names `control_dir`."""
    needle = str(control_dir).encode()
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit() or int(entry.name) == os.getpid():
            continue
        try:
            cmdline = (entry / "cmdline").read_bytes()
        except OSError:
            continue
        argv0 = cmdline.split(b"\0")[0]
        # a master renames itself "ssh: <control path> [mux]"; clients are plain "ssh ..."
        if needle in cmdline and (argv0.startswith(b"ssh") or argv0.rsplit(b"/", 1)[-1] == b"ssh"):
            found.append(int(entry.name))
    return found


def _kill(pids: list[int], grace_s: float = 3.0) -> None:
    """SIGTERM, then SIGKILL whatever is still alive after `grace_s`."""
    for sig in (signal.SIGTERM, signal.SIGKILL):
        alive = []
        for pid in pids:
            try:
                os.kill(pid, sig)
                alive.append(pid)
            except ProcessLookupError:
                pass
        deadline = time.monotonic() + grace_s
        while alive and time.monotonic() < deadline:
            alive = [p for p in alive if _alive(p)]
            time.sleep(0.05)
        pids = alive
        if not pids:
            return


def _alive(pid: int) -> bool:
    try:
        os.waitpid(pid, os.WNOHANG)   # reap our own children (sshd was started by us)
    except ChildProcessError:
        pass
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return False
    return stat.rsplit(")", 1)[-1].split()[0] != "Z"
