"""Every unit test leaves the machine as it found it outside its temp folder: the folders a wrong
path would hit first (/, /opt, the real home, the repository) gain and lose no entry."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
WATCHED = ("/", "/opt", os.path.expanduser("~"), str(REPO))
# pytest, hypothesis and coverage write their caches into the repository on purpose
TOOL_CACHES = (".pytest", ".coverage", ".hypothesis")


def _listing() -> dict[str, set[str]]:
    return {f: set(os.listdir(f)) if os.path.isdir(f) else set() for f in WATCHED}


@pytest.fixture(autouse=True, scope="session")
def own_home(tmp_path_factory):
    """The unit tier runs with HOME in a temp folder: no test reads the machine's own credential
    files (~/.aws, ~/.tccli), and SDKs that write into the home write there. The Huawei SDK does
    so when it is imported (huaweicloudsdkcore 3.1.219, http/user_agent.py: ~/.huaweicloud/
    application_id, a random id for its User-Agent); the real home is still watched below."""
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("HOME", str(tmp_path_factory.mktemp("home")))
        yield


@pytest.fixture(autouse=True)
def nothing_outside_tmp_is_touched():
    before = _listing()
    yield
    after = _listing()
    for folder in WATCHED:
        created = {n for n in after[folder] - before[folder] if not n.startswith(TOOL_CACHES)}
        deleted = before[folder] - after[folder]
        assert not created and not deleted, f"{folder}: created {sorted(created)}, deleted {sorted(deleted)}"
