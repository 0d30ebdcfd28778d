"""How `make test` spreads the tiers that start processes over pytest-xdist workers.

Not a test module: tests/conftest.py imports it. With `pytest -n N --dist loadfile`, each test
module runs whole on one worker (its module fixtures are built once), and every module that
builds hosts in network namespaces (tests/e2e/netns.py) joins one group that runs on one worker,
one test at a time: those hosts share one name prefix and one /24 (tests/e2e/conftest.py), so
two of them must never exist at once.

xdist's own `--dist loadgroup` (the `xdist_group` mark) cannot do this here: with pytest 9 the
suffix it appends to a test's node id (`item._nodeid`) is never read back (pytest 9 derives
`nodeid` from `item._id`), so every marked test would be scheduled alone. The grouping is done
by the scheduler instead, through xdist's `pytest_xdist_make_scheduler` hook.

Groups start longest chain first (items are sorted on the workers, and xdist keeps that order
when `loadscopereorder` is off): namespace hosts, then the moto tests (they wait on the aws
provider's readiness polls and leave the CPU to the others), then dist, e2e and the rest.
"""

from __future__ import annotations

from functools import lru_cache
from pathlib import Path

from xdist.scheduler import LoadFileScheduling

NETNS_GROUP = "tests/e2e (network-namespace hosts)"
# A module that names either builds namespace hosts: the fixture (tests/e2e/conftest.py) or the class.
NETNS_WORDS = ("netns_hosts", "NetnsCluster")


@lru_cache(maxsize=None)
def on_netns_hosts(path: str) -> bool:
    """Whether the test module at `path` builds network-namespace hosts."""
    file = Path(path)
    if file.name in ("netns.py", "conftest.py") or not file.name.startswith("test_"):
        return False
    try:
        text = file.read_text()
    except OSError:
        return False
    return any(word in text for word in NETNS_WORDS)


def rank(path: str) -> int:
    """Start order of a module's group: lower starts first."""
    file = Path(path)
    tier = file.parent.name
    if on_netns_hosts(path):
        return 0
    if tier == "infra" and file.name.startswith("test_aws_"):
        return 1
    # dist before e2e: test_train_fsdp.py is the longest module after those two (629 s serial,
    # tests/README.md), the e2e modules are shorter and fill the end
    return {"dist": 2, "e2e": 3}.get(tier, 4)


class FileAndNetnsScheduling(LoadFileScheduling):
    """`--dist loadfile`, with all namespace-host modules in one scope."""

    def __init__(self, config, log=None):
        config.option.loadscopereorder = False  # keep the workers' order (longest chain first)
        super().__init__(config, log)
        self.root = Path(config.rootpath)

    def _split_scope(self, nodeid: str) -> str:
        path = super()._split_scope(nodeid)
        return NETNS_GROUP if on_netns_hosts(str(self.root / path)) else path
