"""`local`: this machine, the embedded default target (the main job runs anywhere with no account).

A room like the clouds' (SkyPilot's sky/clouds/local.py is one too): what differs is data. Nothing
is provisioned (no module, no catalog, no state backend); the one node is this machine, reached
without ssh, running trainkit from the controller's own interpreter; nothing replaces a lost node;
trainkit never shuts this machine down (no ttl/idle: `safety_nets`), mounts no shared filesystem
(`shared_storage`) and takes exactly one node (`node_limits`); spec/schema.py reads all three.
"""

from __future__ import annotations

from trainkit.clouds.base import NODES_LOCAL, REPLACE_NONE, USER_CURRENT, Cloud

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
    schedulers=(),
)
