"""Fixtures for whole-job tests: namespace hosts reached over SSH (see netns.py)."""

from __future__ import annotations

import os

import pytest
from netns import NetnsCluster, missing_tools

# Names of the namespaces and links (<prefix>-h1, <prefix>-br, ...); change it to run two
# sessions side by side. A crashed earlier run with the same prefix is cleaned up first.
NETNS_PREFIX = os.environ.get("TRAINKIT_E2E_NETNS_PREFIX", "tke2e")
# The /24 they use (first three octets); a second session side by side needs another one.
NETNS_SUBNET = os.environ.get("TRAINKIT_E2E_NETNS_SUBNET", "198.51.100")


@pytest.fixture
def netns_hosts(request, tmp_path_factory) -> NetnsCluster:
    """Two SSH hosts in network namespaces, joined by a bridge the root namespace is on.

    `cluster.local_root` is one path that is node-local on each host (a bind mount in the host's
    mount namespace); the rest of the filesystem is shared by all hosts. Everything started is
    killed and every namespace/link deleted at the end, also when the test fails or start() does.
    """
    missing = missing_tools()
    if missing:
        pytest.fail("namespace hosts need: " + ", ".join(missing) + " (run as root; .ci/run installs "
                    "openssh-server and iproute2)")
    base = tmp_path_factory.mktemp("nn")  # short: ssh control sockets must fit in 108 bytes
    cluster = NetnsCluster(base, count=2, prefix=NETNS_PREFIX, local_root=base / "node-local",
                           subnet=NETNS_SUBNET)
    request.addfinalizer(cluster.stop)
    return cluster.start()
