"""Fixtures of the infra tier: the fault proxy in front of the session's moto server, and the seed
clouds' provider stand-ins."""

from __future__ import annotations

import pytest
from fault_proxy import FaultProxy, Faults
from seed_clouds import SEED_ENV
from standin.cloud import Store
from standin.mirror import Reattached


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


@pytest.fixture
def seed_cloud(tmp_path, tf_cli_config, monkeypatch):
    """The seed clouds' provider stand-ins, started once for the test in one process (terraform
    reattaches to it: tests/standin/mirror.py), with an empty stand-in cloud behind them; yields
    the cloud's Store. Credentials and TF_REATTACH_PROVIDERS are set in the environment, so every
    terraform that trainkit runs in this test uses them."""
    folder = tmp_path / "standin"
    folder.mkdir()
    with Reattached(folder, SEED_ENV) as served:
        for name, value in {**SEED_ENV, **served.env}.items():
            monkeypatch.setenv(name, value)
        yield Store(served.cloud)
