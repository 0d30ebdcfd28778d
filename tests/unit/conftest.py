"""The unit tier runs with HOME in a temp folder (own_home). The guard that every test leaves the
machine as it found it outside its temp folders is tests/conftest.py's, for every tier."""

from __future__ import annotations

import pytest


@pytest.fixture(autouse=True, scope="session")
def own_home(tmp_path_factory):
    """The unit tier runs with HOME in a temp folder: no test reads the machine's own credential
    files (~/.aws, ~/.tccli), and SDKs that write into the home write there. The Huawei SDK does
    so when it is imported (huaweicloudsdkcore 3.1.219, http/user_agent.py: ~/.huaweicloud/
    application_id, a random id for its User-Agent); the real home is still watched (tests/conftest.py)."""
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("HOME", str(tmp_path_factory.mktemp("home")))
        yield
