"""Fixtures of the infra tier: the fault proxy in front of the session's moto server."""

from __future__ import annotations

import pytest
from fault_proxy import FaultProxy, Faults


@pytest.fixture(scope="session")
def fault_proxy_server(moto_server):
    """One fault proxy for the session, in front of the session's moto server."""
    with FaultProxy(moto_server) as proxy:
        yield proxy


@pytest.fixture
def faulty_moto(moto, fault_proxy_server):
    """(moto URL, proxy): the moto server reset to empty, the proxy forwarding with no faults.
    Give trainkit `proxy.url` and set `proxy.faults` (see tests/infra/fault_proxy.py); check what
    the emulator holds at the moto URL (behind no proxy)."""
    fault_proxy_server.reset(Faults())
    yield moto, fault_proxy_server
    fault_proxy_server.reset(Faults())
