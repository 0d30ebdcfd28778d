"""Spec + catalog -> `Cluster`: every default filled in, the instance type chosen, advice given.

`load_cluster(path)` is what commands call. `module_variables(cluster)` is the one place that maps
a cluster onto the Terraform module interface shared by every cloud (docs/design.md).
"""

from __future__ import annotations

import getpass
import math
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from trainkit.catalog import Catalog, InstanceType, load_catalog, matching, refreshed_price_file, select, with_prices
from trainkit.clouds import Cloud
from trainkit.clouds.base import NODES_SCHEDULER, USER_CATALOG, USER_CURRENT
from trainkit.clouds.checks import problems as cloud_problems
from trainkit.errors import InputError, SpecError
from trainkit.spec import controller_block, placeholders
from trainkit.spec.safety import check_ttl, parse_minutes
from trainkit.spec.schema import RESERVED_TAG, ClusterSpec, load_spec, node_count

# Sizing advice (docs/design.md, "Sizing advice"); warnings, never errors.
VCPU_PER_GPU = (6, 8)          # vCPUs per GPU to keep data loading ahead of the GPUs
RAM_PER_GPU_MEMORY = (4, 6)    # host RAM as a multiple of total GPU memory
MIN_MULTINODE_GBPS = 25        # network for multi-node gradient all-reduce
LARGE_MODEL_GPU_MEMORY_GB = 32


@dataclass(frozen=True)
class Cluster:
    spec: ClusterSpec
    source: str                              # the spec file, for messages
    instance: InstanceType | None = None     # None for hosts / local
    catalog: Catalog | None = None
    image: str | None = None
    ssh_user: str = "root"
    system_disk: dict[str, Any] = field(default_factory=dict)
    data_disk: dict[str, Any] = field(default_factory=dict)
    nas: dict[str, Any] = field(default_factory=dict)
    warnings: tuple[str, ...] = ()
    # Nodes placed apart from the cluster's zone/type/billing, {"1": {zone, subnet_cidr,
    # instance_type, spot}}: where a replacement at recovery came up (the workspace keeps it);
    # None = as the workspace has it (stack.state.with_node_placement).
    node_placement: dict[str, dict[str, Any]] | None = None
    # The target's room (trainkit.clouds): what every step asks instead of the target's name. Set
    # once by resolve(); a Cluster built without one takes its spec's.
    room: Cloud = None  # type: ignore[assignment]
    # The controller's instance type when the module renders one (controller_block.rendered), else
    # None; the runtime sets it for "auto" (dataclasses.replace with controller_block.controller_type).
    controller: InstanceType | None = None

    def __post_init__(self) -> None:
        if self.room is None:
            object.__setattr__(self, "room", self.spec.room)

    @property
    def name(self) -> str:
        return self.spec.name

    @property
    def nodes(self) -> int:
        return node_count(self.spec)

    @property
    def batch_jobs(self) -> bool:
        """Whether runs are batch jobs of a Slurm cluster (runs/slurm_runs.py): a scheduler's target
        (its room's NODES_SCHEDULER) or a provisioned cluster with `scheduler: slurm`."""
        return self.room.node_source == NODES_SCHEDULER or self.spec.scheduler == "slurm"

    @property
    def gpus_per_node(self) -> int:
        if self.instance is not None:
            return self.instance.gpus or 0
        return max((h.gpus for h in self.spec.hosts), default=0)


def load_cluster(path: str | Path, price_file: str | Path | None = None) -> Cluster:
    """Load, validate and resolve a spec file. SpecError names the file and the field. Placeholder
    values (trainkit.spec.placeholders) are warnings here; `apply` refuses them."""
    spec = load_spec(path)
    try:
        cluster = resolve(spec, str(path), price_file)
    except SpecError:
        raise
    except InputError as err:
        field_path, _, what = err.message.partition(": ")
        raise SpecError(str(path), [(field_path, what or err.message, err.fix)]) from None
    found = check(cluster)
    if found:
        raise SpecError(str(path), found)
    return replace(cluster, warnings=cluster.warnings + tuple(placeholders.warnings(spec)))


def check(cluster: Cluster) -> list[tuple[str, str, str | None]]:
    """What the cluster's cloud would refuse (the room's rules); [] for hosts and local."""
    spec = cluster.spec
    if cluster.instance is None or not cluster.room.has_catalog:
        return []
    return cloud_problems(cluster.room, spec, {
        "instance_type": cluster.instance.type, "image": cluster.image,
        "system_disk": cluster.system_disk, "data_disk": cluster.data_disk, "nas": cluster.nas})


def resolve(spec: ClusterSpec, source: str = "<spec>", price_file: str | Path | None = None) -> Cluster:
    """Fill defaults from the cloud's catalog and pick the instance type (pure, no I/O but the catalog)."""
    room = spec.room
    if not room.has_catalog:
        return Cluster(spec=spec, source=source, ssh_user=_ssh_user(spec, room, {}), room=room,
                       data_disk=spec.storage.data_disk.model_dump(),
                       nas=spec.storage.nas.model_dump(), warnings=())
    catalog = load_catalog(room)
    refreshed = refreshed_price_file(spec.cloud, spec.region)  # `trainkit prices refresh` output
    if refreshed:
        catalog = with_prices(catalog, refreshed)
    if price_file:
        catalog = with_prices(catalog, price_file)
    inst = _pick_instance(spec, catalog)
    for kind in spec.instance.type_candidates[1:]:  # each fallback type is one the catalog knows
        catalog.get(kind)
    spec = _requirement_candidates(spec, catalog)
    check_ttl(spec)
    d = catalog.defaults
    image = spec.image or d.get("image")  # None: the module looks the image up (its image.tf)
    system_disk = {"category": spec.storage.system_disk.category or d["system_disk"]["category"],
                   "size_gb": spec.storage.system_disk.size_gb}
    dd = spec.storage.data_disk
    data_disk = {"enabled": dd.enabled, "category": dd.category or d["data_disk"]["category"],
                 "performance_level": dd.performance_level or d["data_disk"].get("performance_level"),
                 "size_gb": dd.size_gb, "mount_point": dd.mount_point, "encrypted": dd.encrypted,
                 "kms_key_id": dd.kms_key_id}
    ns = spec.storage.nas
    nas = {"enabled": ns.enabled, "type": ns.type or d["nas"]["type"],
           "size_gb": ns.size_gb or d["nas"].get("size_gb"), "mount_point": ns.mount_point}
    _check_choices(catalog, system_disk, data_disk, nas)
    # a named controller type is checked even while the module renders none ("auto": a typo would
    # otherwise surface only at `train --recover --detach`, after the cluster is up)
    controller = controller_block.controller_type(spec, catalog) \
        if controller_block.rendered(spec) or spec.controller.instance_type else None
    return Cluster(spec=spec, source=source, instance=inst, catalog=catalog, image=image,
                   ssh_user=_ssh_user(spec, room, d), system_disk=system_disk,
                   data_disk=data_disk, nas=nas, room=room,
                   controller=controller if controller_block.rendered(spec) else None,
                   warnings=tuple(advise(inst, spec.nodes)))


def _pick_instance(spec: ClusterSpec, catalog: Catalog) -> InstanceType:
    if spec.instance.type:
        return catalog.get(spec.instance.type)
    return select(catalog, spec.instance.gpu, spec.instance.gpus_per_node,
                  spec.instance.min_gpu_memory_gb, spot=spec.spot.enabled)


def _requirement_candidates(spec: ClusterSpec, catalog: Catalog) -> ClusterSpec:
    """Requirements (`instance: {gpu: A100}`) -> every catalog type that meets them, cheapest
    first, as the type candidates apply fails over along (cluster/failover.py); the first is the
    type `_pick_instance` picked. A spec that names its type(s) is returned as it is."""
    want = spec.instance
    if want.type:
        return spec
    kinds = tuple(i.type for i in matching(catalog, want.gpu, want.gpus_per_node, want.min_gpu_memory_gb,
                                           spot=spec.spot.enabled))
    if len(kinds) < 2:
        return spec
    return spec.model_copy(update={"instance": want.model_copy(update={"type_candidates": kinds})})


def _check_choices(catalog: Catalog, system_disk: dict, data_disk: dict, nas: dict) -> None:
    c = catalog.choices
    checks = [("storage.system_disk.category", system_disk["category"], c["system_disk_categories"]),
              ("storage.data_disk.category", data_disk["category"], c["data_disk_categories"]),
              ("storage.nas.type", nas["type"], c["nas_types"])]
    if data_disk["performance_level"] is not None:
        checks.append(("storage.data_disk.performance_level", data_disk["performance_level"],
                       c["performance_levels"]))
    for field_path, value, allowed in checks:
        if value not in allowed:
            hint = f"{catalog.cloud} accepts: {', '.join(allowed)}" if allowed else \
                f"{catalog.cloud} has no such setting; remove it"
            raise InputError(f"{field_path}: {value!r} is not valid for {catalog.cloud}", fix=hint)


def advise(inst: InstanceType, nodes: int) -> list[str]:
    """Sizing warnings for a node type (project seed: vCPU 6-8x GPUs, RAM 4-6x GPU memory, ...)."""
    out: list[str] = []
    if not inst.gpus:
        return out
    if inst.vcpus is not None and inst.vcpus < VCPU_PER_GPU[0] * inst.gpus:
        out.append(f"{inst.type}: {inst.vcpus} vCPUs for {inst.gpus} GPU(s); "
                   f"{VCPU_PER_GPU[0]}-{VCPU_PER_GPU[1]} per GPU keeps data loading ahead")
    total_mem = (inst.gpu_memory_gb or 0) * inst.gpus
    if inst.ram_gb is not None and total_mem and inst.ram_gb < RAM_PER_GPU_MEMORY[0] * total_mem:
        out.append(f"{inst.type}: {inst.ram_gb:g} GB RAM for {total_mem} GB of GPU memory; "
                   f"{RAM_PER_GPU_MEMORY[0]}-{RAM_PER_GPU_MEMORY[1]}x is recommended")
    if nodes > 1 and inst.network_gbps is not None and inst.network_gbps < MIN_MULTINODE_GBPS:
        out.append(f"{inst.type}: {inst.network_gbps:g} Gbit/s network for {nodes} nodes; "
                   f">= {MIN_MULTINODE_GBPS} Gbit/s is recommended for multi-node training")
    if inst.gpu_memory_gb is not None and inst.gpu_memory_gb < LARGE_MODEL_GPU_MEMORY_GB:
        out.append(f"{inst.type}: {inst.gpu_memory_gb} GB per GPU; >= {LARGE_MODEL_GPU_MEMORY_GB} GB "
                   "is recommended for large-model training")
    return out


def tags(spec: ClusterSpec) -> dict[str, str]:
    """User tags plus the `trainkit-cluster` tag every taggable resource carries."""
    return {**dict(sorted(spec.tags.items())), RESERVED_TAG: spec.name}


def module_variables(cluster: Cluster, ssh_public_key: str) -> dict[str, Any]:
    """The Terraform module inputs (same names for every cloud; see docs/design.md)."""
    s = cluster.spec
    if cluster.instance is None:
        raise InputError(f"cloud {s.cloud} has no Terraform module")
    return {
        "name": s.name,
        "zone": s.zone,
        "vpc_cidr": s.network.vpc_cidr,
        "subnet_cidr": s.network.subnet_cidr,
        "admin_cidrs": list(s.network.admin_cidrs),
        "node_count": s.nodes,
        "instance_type": cluster.instance.type,
        "image_id": cluster.image,
        "ssh_public_key": ssh_public_key,
        "ssh_user": cluster.ssh_user,
        "public_ip": s.network.public_ip,
        "nat_gateway": nat_gateway(s),
        "placement_group": s.network.placement_group,
        "spot": {"enabled": s.spot.enabled, "max_price": s.spot.max_price},
        "system_disk": cluster.system_disk,
        "data_disk": {k: cluster.data_disk[k] for k in
                      ("enabled", "category", "performance_level", "size_gb", "encrypted",
                       "kms_key_id")},
        "nas": {k: cluster.nas[k] for k in ("enabled", "type", "size_gb")},
        "nfs_mount_options": cluster.room.nfs_mount_options,
        "tags": tags(s),
        "node_placement": cluster.node_placement or {},
        **safety_variables(cluster),
        **controller_variables(cluster),
    }


def controller_variables(cluster: Cluster) -> dict[str, Any]:
    """{"controller": {instance_type, state_bucket, state_prefix, lock_table}} when the cluster has a
    controller, else {} (the module's default, null: no controller, and every stack rendered before
    issue 42 stays byte-identical). The state fields scope the controller's policy to the spec's
    remote state (the objects under `<bucket>/<prefix>/`, the lock table); null with a local backend."""
    if cluster.controller is None:
        return {}
    s, b = cluster.spec, cluster.spec.backend
    remote = b.type != "local"
    return {"controller": {
        "instance_type": cluster.controller.type,
        "state_bucket": b.bucket if remote else None,
        "state_prefix": (b.prefix or s.name) if remote else None,
        "lock_table": (b.dynamodb_table or b.tablestore_table) if remote else None,
    }}


def safety_variables(cluster: Cluster) -> dict[str, Any]:
    """ttl_minutes for clouds with a release-at argument (else the node-side guard does it), and
    whether a node's own shutdown terminates it (the guard's ttl/idle timers rely on that)."""

    s, room = cluster.spec, cluster.room
    ttl = None if s.ttl is None else math.ceil(parse_minutes(s.ttl))
    return {"ttl_minutes": ttl if room.ttl_argument else None,
            "node_shutdown_terminates": room.shutdown_terminates and (s.ttl is not None or s.idle is not None)}


def nat_gateway(spec: ClusterSpec) -> bool:
    """Whether the module creates a NAT gateway: `network.nat_gateway`, or when unset, exactly when
    some node has no public IP (public_ip none, or head with workers). Such nodes have no other
    route to the internet, and provisioning installs packages (apt, pip) on every node."""
    net = spec.network
    if net.nat_gateway is not None:
        return net.nat_gateway
    return net.public_ip == "none" or (net.public_ip == "head" and spec.nodes > 1)


def _ssh_user(spec: ClusterSpec, room: Cloud, defaults: dict[str, Any]) -> str:
    """The spec's `ssh.user`, else the room's default: the catalog's (root when it names none),
    a fixed name, or whoever runs trainkit."""
    if spec.ssh.user:
        return spec.ssh.user
    if room.default_ssh_user == USER_CATALOG:
        return defaults.get("ssh_user", "root")
    return getpass.getuser() if room.default_ssh_user == USER_CURRENT else room.default_ssh_user
