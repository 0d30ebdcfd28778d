"""How `make test` spreads the tiers that start processes over pytest-xdist workers.

Not a test module: tests/conftest.py imports it. With `pytest -n N --dist loadfile`, each test
module runs whole on one worker (its module fixtures are built once). Modules that build hosts in
network namespaces (tests/e2e/netns.py) may run side by side: each has its own name prefix and
/24 (netns.names_for), so one never purges or shares another's hosts.

Groups start longest chain first (items are sorted on the workers, and xdist keeps that order
when `loadscopereorder` is off): namespace hosts, then the moto tests (they wait on the aws
provider's readiness polls and leave the CPU to the others), then dist, e2e and the rest.
"""

from __future__ import annotations

from functools import lru_cache
from pathlib import Path

from xdist.scheduler import LoadFileScheduling

# A module that names any builds namespace hosts: the fixture (tests/e2e/conftest.py), the class,
# or the fault matrix's bench (tests/e2e/faultbench.py).
NETNS_WORDS = ("netns_hosts", "NetnsCluster", "faultbench")


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
    if on_netns_hosts(path):  # the fault matrix's two modules are the longest of all (~10 min each)
        return 0 if file.name.startswith("test_fault_matrix") else 1
    if tier == "infra" and file.name.startswith("test_aws_"):
        return 2
    # dist before e2e: test_train_fsdp.py is the longest module after those two (629 s serial,
    # tests/README.md), the e2e modules are shorter and fill the end
    return {"dist": 3, "e2e": 4}.get(tier, 5)


class LongestFirstScheduling(LoadFileScheduling):
    """`--dist loadfile` keeping the workers' order (longest chains first)."""

    def __init__(self, config, log=None):
        config.option.loadscopereorder = False  # keep the workers' order (longest chain first)
        super().__init__(config, log)

