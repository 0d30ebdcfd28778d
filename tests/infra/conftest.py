"""Fixtures of the infra tier: the fault proxy in front of the session's moto server, and the seed
clouds' provider stand-ins."""

from __future__ import annotations

import pytest
from fault_proxy import FaultProxy, Faults
from seed_clouds import SEED_API_ENV, SEED_ENV, SEED_KEYS
from standin.api import running_api
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
    reattaches to it: tests/standin/mirror.py), with an empty stand-in cloud behind them, and the
    clouds' own APIs (tests/standin/api.py) answering from the same cloud; yields the cloud's Store,
    whose `api_url` is the API server's URL. Credentials, TF_REATTACH_PROVIDERS and the URL
    (seed_clouds.SEED_API_ENV, which write_spec puts in every spec's `endpoints:`) are set in the
    environment, so every terraform and every API call trainkit makes in this test use them."""
    folder = tmp_path / "standin"
    folder.mkdir()
    with Reattached(folder, SEED_ENV) as served:
        store = Store(served.cloud)
        with running_api(store, SEED_KEYS) as url:
            for name, value in {**SEED_ENV, **served.env, SEED_API_ENV: url}.items():
                monkeypatch.setenv(name, value)
            store.api_url = url
            yield store
