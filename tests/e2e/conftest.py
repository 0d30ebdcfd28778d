"""Fixtures for whole-job tests: namespace hosts reached over SSH (see netns.py)."""

from __future__ import annotations

import pytest
from netns import NetnsCluster, missing_tools, names_for


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
    prefix, subnet = names_for(request.module.__name__)  # its own names: modules run side by side
    cluster = NetnsCluster(base, count=2, prefix=prefix, local_root=base / "node-local", subnet=subnet)
    request.addfinalizer(cluster.stop)
    return cluster.start()
