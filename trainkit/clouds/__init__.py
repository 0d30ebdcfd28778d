"""One room per cloud: `get(name)` returns the `Cloud` that knows everything about that cloud.

Rooms are found by name: `trainkit/clouds/<name>.py` defining `CLOUD`. `TERRAFORM_TARGETS` lists
the rooms shipped with trainkit; `hosts` and `local` are targets without a cloud (nothing to
provision) and have no room.
"""

from __future__ import annotations

import importlib
from functools import lru_cache

from trainkit.clouds.base import Cloud, CredentialSet

TERRAFORM_TARGETS: tuple[str, ...] = ("alicloud", "tencentcloud", "huaweicloud", "aws")
OTHER_TARGETS: tuple[str, ...] = ("hosts", "local")
TARGETS: tuple[str, ...] = TERRAFORM_TARGETS + OTHER_TARGETS

__all__ = ["Cloud", "CredentialSet", "TARGETS", "TERRAFORM_TARGETS", "OTHER_TARGETS", "get",
           "all_clouds"]


@lru_cache(maxsize=None)
def get(name: str) -> Cloud:
    """The room of cloud `name`. KeyError when trainkit has no such cloud."""
    if name not in TERRAFORM_TARGETS:
        raise KeyError(name)
    return importlib.import_module(f"trainkit.clouds.{name}").CLOUD


def all_clouds() -> list[Cloud]:
    """Every shipped cloud room, in TERRAFORM_TARGETS order."""
    return [get(n) for n in TERRAFORM_TARGETS]
