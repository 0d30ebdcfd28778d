"""`local`: this machine, the embedded default target (the main job runs anywhere with no account).

A room like the clouds' (SkyPilot's sky/clouds/local.py is one too): what differs is data. Nothing
is provisioned (no module, no catalog, no state backend); the one node is this machine, reached
without ssh, running trainkit from the controller's own interpreter; nothing replaces a lost node;
trainkit never shuts this machine down (no ttl/idle) and mounts no shared filesystem.
"""

from __future__ import annotations

from typing import Any

from trainkit.clouds.base import NODES_LOCAL, REPLACE_NONE, USER_CURRENT, Cloud


def _read_rules(s: Any) -> list[str]:
    """What `cloud: local` refuses as the spec is read; each string names its field first."""
    out: list[str] = []
    if s.ttl or s.idle:
        out.append("ttl: the local target is this machine; trainkit will not shut it down "
                   "(ttl and idle are for clouds and hosts)")
    if s.storage.nas.enabled:
        out.append("storage.nas.enabled: the local target mounts no shared filesystem and keeps runs "
                   "in its workspace; set storage.nas.enabled: false")
    return out


CLOUD = Cloud(
    name="local",
    title="this machine",
    provider_source="",
    provider_version="",
    has_module=False,
    has_catalog=False,
    node_source=NODES_LOCAL,
    replacement=REPLACE_NONE,
    venv_mode="reuse",
    default_ssh_user=USER_CURRENT,
    installs_key=False,
    node_limits=(1, 1),
    nodes_limit_text="the local target is this one machine; set nodes: 1 or use cloud: hosts",
    shared_storage=False,
    safety_nets=False,
    read_rules=_read_rules,
)
