"""Helpers for the infra tests that drive trainkit against the seed clouds' provider stand-ins
(tests/standin): specs from the shipped examples, the trainkit CLI, and the stand-in cloud's store.

Not a test module: imported by test_seed_*.py (pytest puts this folder on sys.path).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import yaml

from trainkit import clouds

CLOUDS = ("alicloud", "tencentcloud", "huaweicloud")

# Credentials as a user sets them, in the environment (tests/standin/rules_*.py CREDENTIALS): the
# stand-ins refuse to configure without them, as the real providers do.
# HW_PROJECT_ID: the region's project, which trainkit's Huawei sweeper needs (32 hex digits, as Huawei's
# project ids are).
SEED_ENV = {"ALICLOUD_ACCESS_KEY": "standin-ak", "ALICLOUD_SECRET_KEY": "standin-sk",
            "TENCENTCLOUD_SECRET_ID": "standin-id", "TENCENTCLOUD_SECRET_KEY": "standin-key",
            "HW_ACCESS_KEY": "standin-ak", "HW_SECRET_KEY": "standin-sk",
            "HW_PROJECT_ID": "0a1b2c3d4e5f60718293a4b5c6d7e8f9"}
# What the stand-in APIs (tests/standin/api.py) accept: each cloud's access key id, and Huawei's project
# (the region of examples/clusters/huaweicloud.yaml).
SEED_KEYS = {"alicloud": SEED_ENV["ALICLOUD_ACCESS_KEY"], "tencentcloud": SEED_ENV["TENCENTCLOUD_SECRET_ID"],
             "huaweicloud": SEED_ENV["HW_ACCESS_KEY"], "huaweicloud-project": {SEED_ENV["HW_PROJECT_ID"]: "cn-north-4"}}
# Where the `seed_cloud` fixture tells write_spec its stand-in API server listens.
SEED_API_ENV = "TRAINKIT_TEST_SEED_API"

# An SSH source range that is neither the examples' documentation range nor open to the world.
ADMIN_CIDR = "100.64.10.0/24"


def write_spec(repo: Path, folder: Path, cloud: str, endpoints: str | None = None, **changes) -> Path:
    """examples/clusters/<cloud>.yaml with local state (no bucket), a real admin range, every API
    endpoint trainkit calls itself (the room's endpoint_keys) at `endpoints` (default: the `seed_cloud`
    fixture's stand-in API server; none outside it), and `changes` (a dotted key such as
    "network.public_ip" sets a nested field; None removes it)."""
    spec = yaml.safe_load((repo / f"examples/clusters/{cloud}.yaml").read_text())
    spec.pop("backend", None)
    spec["network"]["admin_cidrs"] = [ADMIN_CIDR]
    url = endpoints or os.environ.get(SEED_API_ENV)
    if url:
        spec["endpoints"] = {key: url for key in clouds.get(cloud).endpoint_keys}
    for key, value in changes.items():
        *parents, leaf = key.split(".")
        node = spec
        for p in parents:
            node = node.setdefault(p, {})
        if value is None:
            node.pop(leaf, None)
        else:
            node[leaf] = value
    path = folder / f"{cloud}.yaml"
    path.write_text(yaml.safe_dump(spec))
    return path


def trainkit(*args, check_rc: int | None = 0, **kw) -> subprocess.CompletedProcess:
    """Run the trainkit CLI (the stand-ins' environment comes from the `seed_cloud` fixture)."""
    env = {k: v for k, v in os.environ.items() if k != "CHECKOV"}
    proc = subprocess.run([sys.executable, "-m", "trainkit", *map(str, args)], capture_output=True, text=True,
                          env=env, timeout=600, **kw)
    if check_rc is not None:
        assert proc.returncode == check_rc, proc.stdout + proc.stderr
    return proc


def plan_actions(workdir: Path) -> dict[str, list[str]]:
    """address -> terraform's actions (["create"], ["update"], ["delete", "create"], ...) of every
    change in the workspace's plan.json (terraform show -json of the saved plan)."""
    plan = json.loads((workdir / "plan.json").read_text())
    return {c["address"]: c["change"]["actions"] for c in plan.get("resource_changes", [])
            if c["change"]["actions"] != ["no-op"] and c["change"]["actions"] != ["read"]}
