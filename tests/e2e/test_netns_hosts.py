"""The namespace-host harness itself: two machines reached over SSH, and nothing left afterwards."""

from __future__ import annotations

import subprocess

from netns import NetnsCluster


def test_two_netns_hosts_answer_ssh_with_own_hostnames_and_leave_nothing_behind(netns_hosts: NetnsCluster):
    cluster = netns_hosts
    h1, h2 = cluster.hosts
    names = [cluster.ssh(h, "hostname").stdout.strip() for h in (h1, h2)]
    assert names == [h1.name, h2.name] and names[0] != names[1]

    # Key-only: the same login without the cluster key is refused.
    no_key = [a for a in cluster.ssh_argv(h1) if a != str(cluster.key)]
    no_key[no_key.index("-i")] = "-oIdentityAgent=none"
    assert subprocess.run(no_key + ["true"], capture_output=True, timeout=30).returncode == 255

    # Shared filesystem (the NAS) except the node-local root; the hosts reach each other.
    shared = cluster.workdir / "shared-probe"
    cluster.ssh(h1, f"echo from-h1 > {shared}")
    assert cluster.ssh(h2, f"cat {shared}").stdout.strip() == "from-h1"
    cluster.ssh(h1, f"echo h1 > {cluster.local_root}/mine")
    assert cluster.ssh(h2, f"ls {cluster.local_root}").stdout.strip() == ""
    assert (h1.dir / "local" / "mine").read_text().strip() == "h1"
    probe = f"python3 -c 'import socket; socket.create_connection((\"{h1.address}\", 22), 3).close()'"
    cluster.ssh(h2, probe)

    # An Ansible-style ControlPersist master in the root namespace is found and killed too.
    cluster.control_path_dir.mkdir(exist_ok=True)
    master = cluster.ssh_argv(h2)
    master[master.index("ControlMaster=no")] = "ControlMaster=auto"
    master[master.index("ControlPath=none")] = f"ControlPath={cluster.control_path_dir}/%C"
    subprocess.run(master[:1] + ["-o", "ControlPersist=600"] + master[1:] + ["true"], check=True,
                   capture_output=True, timeout=30)
    pids = {h.name: h.pids() for h in (h1, h2)}
    assert h1.pid in pids[h1.name] and len(pids[h2.name]) >= 2  # listener + the master's session
    assert cluster.leftovers()

    cluster.stop()
    assert cluster.leftovers() == []
    for pid in [h1.pid, h2.pid] + pids[h2.name]:
        assert not _exists(pid)
    cluster.stop()  # idempotent: the fixture's finalizer calls it again


def _exists(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as fh:
            return fh.read().rsplit(")", 1)[-1].split()[0] != "Z"
    except OSError:
        return False
