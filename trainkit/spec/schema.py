"""The cluster spec: one YAML file -> a validated, frozen `ClusterSpec`.

`load_spec(path)` is the only entry point the rest of trainkit uses. It raises `SpecError`
listing every problem with its field path and a fix; it never returns a half-valid spec.
Checks that need the instance catalog (instance type exists, requirements can be met) live in
`trainkit.spec.resolve`, which turns a spec into a `Cluster` (spec + chosen instance + defaults).
"""

from __future__ import annotations

import difflib
import ipaddress
import re
import typing
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator

from trainkit import clouds
from trainkit.clouds.base import NODES_HOSTS
from trainkit.errors import SpecError
from trainkit.spec import checks, sshkeys, target_rules
from trainkit.spec.controller_block import ControllerSpec
from trainkit.spec.problems import pydantic_problems, train_config_given_as_spec
from trainkit.spec.safety import parse_minutes
from trainkit.spec.slurm_block import SlurmSpec
from trainkit.staging.section import DataSection
from trainkit.train.config import LAUNCH_KEYS, TrainConfig
from trainkit.util import grammar, yamlload

RESERVED_TAG = "trainkit-cluster"


class _Model(BaseModel):
    """Unknown keys, .inf/.nan and true/false for a number are errors (pydantic's lax mode would
    read `nodes: true` as 1 and pass `max_price: .inf` on to Terraform, which has no literal for it)."""

    model_config = ConfigDict(extra="forbid", frozen=True, allow_inf_nan=False)

    @model_validator(mode="before")
    @classmethod
    def _no_bool_numbers(cls, data: Any) -> Any:
        if isinstance(data, dict):
            bad = [f"{name}: expected a number, got {str(data[name]).lower()}"
                   for name, info in cls.model_fields.items()
                   if isinstance(data.get(name), bool) and _is_number(info.annotation)]
            if bad:
                raise ValueError("\n".join(bad))
        return data


def _candidates(data: Any, key: str, label: str, example: str) -> Any:
    """`key: [a, b]` -> key a (the preferred candidate) and `<key>_candidates` (a, b), in order."""
    if not isinstance(data, dict) or not isinstance(data.get(key), list):
        return data
    items = data[key]
    if not items or not all(isinstance(i, str) and i for i in items) or len(set(items)) != len(items):
        raise ValueError(f"{label}: give one value or a list of distinct names in order of preference, "
                         f"e.g. [{example}]")
    return {**data, key: items[0], f"{key}_candidates": tuple(items)}


def _auto_zones(data: Any) -> Any:
    """`zone: auto` -> every zone the cloud room lists for the region, in the room's order (its
    regions file, trainkit/clouds/data/<cloud>-regions.yaml): apply tries them in turn, moving on
    from a zone without capacity (cluster/failover.py)."""
    if not isinstance(data, dict) or data.get("zone") != "auto":
        return data
    cloud, region = data.get("cloud"), data.get("region")
    room = _room_of(cloud) if isinstance(cloud, str) and cloud in clouds.targets() else None
    if room is None or not room.has_catalog or not isinstance(region, str):
        raise ValueError("zone: auto needs a cloud target and its region")
    zones = list(room.regions.get(region) or ())
    if not zones:
        raise ValueError(f"zone: auto: trainkit lists no zones for region {region!r} of {cloud}; "
                         f"give them in order of preference, e.g. zone: [{region}a, {region}b]")
    return {**data, "zone": zones if len(zones) > 1 else zones[0], "zone_auto": True}


def _room_of(target: str) -> clouds.Cloud:
    """The room of `cloud:` (KeyError for a name trainkit has no room for): the one lookup by name
    of the spec side; everything after asks `spec.room` / `cluster.room`."""
    return clouds.get(target)


def _is_number(annotation: Any) -> bool:
    """int, float or an Optional of one (bool is an int subclass, so it is excluded by name)."""
    return annotation in (int, float) or any(a in (int, float) for a in typing.get_args(annotation))


class InstanceSpec(_Model):
    """Either an explicit `type`, or requirements the catalog picks the cheapest type for."""

    type: str | None = Field(None, description="Instance type, e.g. ecs.gn7i-c8g1.2xlarge, or an ordered "
                                               "list of types to fall back on when the cloud has no capacity")
    type_candidates: tuple[str, ...] = Field((), description="Set from a list in `type:` (first = preferred)")
    gpu: str | None = Field(None, description="GPU model wanted, e.g. A100 (case-insensitive)")
    gpus_per_node: int | None = Field(None, ge=1, le=16)
    min_gpu_memory_gb: int | None = Field(None, ge=1, le=1024, description="Per GPU")

    @model_validator(mode="before")
    @classmethod
    def _type_list(cls, data: Any) -> Any:
        return _candidates(data, "type", "instance.type", "g5.12xlarge, g5.24xlarge")

    @model_validator(mode="after")
    def _type_or_requirements(self) -> "InstanceSpec":
        if self.type and (self.gpu or self.gpus_per_node or self.min_gpu_memory_gb):
            raise ValueError("give either `type` or requirements (gpu, gpus_per_node, "
                             "min_gpu_memory_gb), not both")
        return self


class SpotSpec(_Model):
    enabled: bool = False
    max_price: float | None = Field(None, gt=0, le=1e6, description="Per node-hour; empty = up to on-demand")
    fallback: Literal["none", "on_demand"] = Field(
        "none", description="on_demand: when the cloud refuses spot capacity for every zone/type "
                            "candidate at apply, try them again on-demand (each attempt is reviewed)")


class SystemDiskSpec(_Model):
    category: str | None = None
    size_gb: int = Field(200, ge=20, le=2048)


class DataDiskSpec(_Model):
    enabled: bool = True
    category: str | None = None
    performance_level: str | None = None
    size_gb: int = Field(500, ge=20, le=65536)
    mount_point: str = "/data"
    encrypted: bool = True
    kms_key_id: str | None = Field(None, description="KMS key to encrypt with; required where the "
                                                      "cloud encrypts only with a key")

    @field_validator("mount_point")
    @classmethod
    def _mount_point(cls, v: str) -> str:
        return grammar.check_mount_point(v)


class NasSpec(_Model):
    enabled: bool = False
    type: str | None = None
    size_gb: int | None = Field(None, ge=1, le=1_048_576)
    mount_point: str = "/mnt/shared"

    @field_validator("mount_point")
    @classmethod
    def _mount_point(cls, v: str) -> str:
        return grammar.check_mount_point(v)


class StorageSpec(_Model):
    system_disk: SystemDiskSpec = SystemDiskSpec()
    data_disk: DataDiskSpec = DataDiskSpec()
    nas: NasSpec = NasSpec()


class NetworkSpec(_Model):
    vpc_cidr: str = "10.42.0.0/16"
    subnet_cidr: str = "10.42.1.0/24"
    admin_cidrs: tuple[str, ...] = ()
    allow_ssh_from_anywhere: bool = Field(
        False, description="Must be true to accept 0.0.0.0/0 in admin_cidrs")
    public_ip: Literal["head", "all", "none"] = "head"
    placement_group: bool = Field(True, description="Place nodes close together where the cloud can")
    nat_gateway: bool | None = Field(
        None, description="Outbound internet (packages) for nodes without a public IP through a NAT "
                          "gateway, billed hourly; null = on exactly when some node has no public IP")

    @field_validator("vpc_cidr", "subnet_cidr")
    @classmethod
    def _cidr(cls, v: str) -> str:
        return _parse_cidr(v)

    @field_validator("admin_cidrs")
    @classmethod
    def _cidrs(cls, v: tuple[str, ...]) -> tuple[str, ...]:
        return tuple(_parse_cidr(c) for c in v)

    @model_validator(mode="after")
    def _subnet_inside_vpc(self) -> "NetworkSpec":
        problems = checks.network_problems(self)
        if self.nat_gateway and self.public_ip == "all":
            problems.append("nat_gateway: true with public_ip: all: every node already has a public "
                            "IP, so the NAT gateway would only cost money; drop nat_gateway")
        if checks.whole_internet(self.admin_cidrs) and not self.allow_ssh_from_anywhere:
            problems.append(f"admin_cidrs: {', '.join(checks.whole_internet(self.admin_cidrs))} opens SSH to "
                            "the whole internet; list your office/VPN CIDRs, or set "
                            "network.allow_ssh_from_anywhere: true if you really mean it")
        if problems:
            raise ValueError("\n".join(problems))
        return self


class SshSpec(_Model):
    user: str | None = Field(None, description="Login user; default per cloud image")
    public_key: str | None = Field(None, description="Path to a public key; empty = generate one "
                                                     "per cluster in the workspace")
    private_key: str | None = Field(None, description="Path to the matching private key; default = "
                                                      "public_key without .pub")

    @field_validator("user")
    @classmethod
    def _user(cls, v: str | None) -> str | None:
        return v if v is None else grammar.check_user(v)

    @field_validator("public_key", "private_key")
    @classmethod
    def _key_path(cls, v: str | None) -> str | None:
        return v if v is None else grammar.check_key_path(v)


class BackendSpec(_Model):
    """Terraform state backend. Credentials always come from the environment, never from here."""

    type: str = Field("local", description="local, or the backend of the spec's cloud (its room's "
                                            "backend_type)")
    bucket: str | None = None
    key: str = "terraform.tfstate"
    prefix: str | None = None
    region: str | None = None
    endpoint: str | None = None
    encrypt: bool = True
    tablestore_endpoint: str | None = None
    tablestore_table: str | None = None
    dynamodb_table: str | None = None

    @model_validator(mode="after")
    def _remote_needs_bucket(self) -> "BackendSpec":
        if self.type != "local" and not self.bucket:
            raise ValueError(f"backend type {self.type!r} needs `bucket`")
        if self.type == "cos" and self.bucket and not re.search(r"-\d+$", self.bucket):
            raise ValueError(f"cos bucket {self.bucket!r} must end with your APPID, "
                             "e.g. tfstate-1250000000")
        if self.tablestore_table and not self.tablestore_endpoint and self.type == "oss":
            raise ValueError("tablestore_table needs tablestore_endpoint")
        return self


class HostSpec(_Model):
    """A machine you already have (target `hosts`), reached over SSH."""

    name: str = Field(pattern=r"^[A-Za-z0-9][A-Za-z0-9._-]{0,62}$",
                      description="1-63 letters, digits, '.', '_' and '-', starting with a letter or digit")
    address: str = Field(description="Where SSH connects (IP or DNS name)")
    private_ip: str | None = Field(None, description="Address other nodes use; default = address")
    port: int = Field(22, ge=1, le=65535)
    user: str | None = None
    gpus: int = Field(0, ge=0, le=16)
    spare: bool = Field(False, description="Held in reserve: `train --recover` puts it in place of "
                                           "an unreachable host (`trainkit docs runs`)")

    @field_validator("address", "private_ip")
    @classmethod
    def _address(cls, v: str | None) -> str | None:
        return v if v is None else grammar.check_address(v)

    @field_validator("user")
    @classmethod
    def _user(cls, v: str | None) -> str | None:
        return v if v is None else grammar.check_user(v)


class LaunchSpec(_Model):
    """How torchrun is started on each node."""

    nproc_per_node: int | None = Field(None, ge=1, le=64,
                                       description="Default: GPUs per node, or 1 on CPU-only nodes")
    rdzv_port: int = Field(29400, ge=1024, le=65535,
                           description="torchrun's default c10d rendezvous port")
    python: str = Field("/usr/bin/python3", description="System Python used to create the node venv")
    root: str = Field("/opt/trainkit", description="Install and work folder on each node")

    @field_validator("python")
    @classmethod
    def _python(cls, v: str) -> str:
        return grammar.check_path(v)

    @field_validator("root")
    @classmethod
    def _root(cls, v: str) -> str:
        given, v = v, grammar.check_path(v)  # normalised: /./opt and //opt/ are /opt
        if len([p for p in v.split("/") if p]) < 2 or v in grammar.SYSTEM_DIRS:
            shown = repr(given) if given == v else f"{given!r} (= {v!r})"
            raise ValueError(f"{shown} is too close to /: `trainkit destroy` removes launch.root, so it "
                             "must be a folder of its own at least two levels deep, e.g. /opt/trainkit")
        return v


class BudgetSpec(_Model):
    max_per_hour: float | None = Field(None, gt=0, le=1e6, description="Whole cluster, catalog currency")


class ClusterSpec(_Model):
    name: str = Field(pattern=r"^[a-z][a-z0-9-]{1,28}[a-z0-9]$",
                      description="3-30 lowercase letters, digits and '-', starting with a letter "
                                  "and ending with a letter or digit, e.g. llm-a100")
    cloud: str = Field(description="A target: a cloud with a room (trainkit.clouds) or hosts/local")
    region: str | None = None
    zone: str | None = Field(None, description="Zone, or an ordered list of zones to fall back on when the "
                                               "cloud has no capacity in the first, or auto (every zone "
                                               "trainkit lists for the region)")
    zone_candidates: tuple[str, ...] = Field((), description="Set from a list in `zone:` (first = preferred)")
    zone_auto: bool = Field(False, description="Set by `zone: auto`: apply orders the zones itself")
    nodes: int = Field(1, ge=1, le=64)
    instance: InstanceSpec = InstanceSpec()
    spot: SpotSpec = SpotSpec()
    image: str | None = Field(None, description="Image id; default per cloud from the catalog")
    storage: StorageSpec = StorageSpec()
    network: NetworkSpec = NetworkSpec()
    ssh: SshSpec = SshSpec()
    backend: BackendSpec = BackendSpec()
    tags: dict[str, str] = {}
    hosts: tuple[HostSpec, ...] = ()
    scheduler: Literal["none", "slurm"] = Field("none", description="A batch scheduler trainkit installs "
                                                "on the cluster it provisions (ansible/roles/slurm): "
                                                "none, or slurm (train then submits batch jobs)")
    slurm: SlurmSpec | None = Field(None, description="Target slurm: the login node and what the "
                                                      "batch job asks the scheduler for; with "
                                                      "scheduler: slurm, partition/time/signal_s only")
    endpoints: dict[str, str] = Field({}, description="Custom API endpoints (emulators), where "
                                                      "the cloud's room allows them")
    launch: LaunchSpec = LaunchSpec()
    budget: BudgetSpec = BudgetSpec()
    data: DataSection = Field(DataSection(), description="Data staged before every job (trainkit/staging/fetch.py)")
    ttl: str | None = Field(None, description="Release the cluster this long after it is created, "
                                              "e.g. 12h (see docs: safety nets)")
    idle: str | None = Field(None, description="Shut a node down after this long with no training "
                                               "process and idle CPU/GPU, e.g. 30m")
    controller: ControllerSpec = Field(ControllerSpec(), description="Where `train --recover --detach` "
                                       "runs the recovery loop (spec/controller_block.py)")
    down: bool = Field(False, description="Destroy the cluster when its run ends (the default of `train --down`)")

    @property
    def room(self) -> clouds.Cloud:
        """The target's room (trainkit.clouds): everything trainkit knows about `cloud:`."""
        return _room_of(self.cloud)

    @field_validator("ttl", "idle")
    @classmethod
    def _duration(cls, v: str | None) -> str | None:
        if v is not None:
            parse_minutes(v)
        return v

    @field_validator("cloud")
    @classmethod
    def _known_target(cls, v: str) -> str:
        known = clouds.targets()
        if v not in known:
            close = difflib.get_close_matches(str(v).lower(), known, n=1)
            raise ValueError(f"{v!r} is not one of {', '.join(known)}"
                             + (f"; did you mean {close[0]!r}?" if close else ""))
        return v

    @model_validator(mode="before")
    @classmethod
    def _zone_list(cls, data: Any) -> Any:
        return _candidates(_auto_zones(data), "zone", "zone", "us-east-1a, us-east-1b")

    @model_validator(mode="after")
    def _per_target_rules(self) -> "ClusterSpec":
        problems = _target_problems(self)
        if problems:
            raise ValueError("\n".join(problems))
        return self


def _target_problems(s: ClusterSpec) -> list[str]:
    """Rules that depend on the target (its room: spec/target_rules.py), and the cross-field rules
    checked beside them; each string names its field first."""
    out = target_rules.problems(s, s.room)
    if s.data.target == "nas" and not s.storage.nas.enabled:
        out.append("data.target: nas stages once onto the shared filesystem, but storage.nas is "
                   "not enabled; enable it or use target: disk")
    if RESERVED_TAG in s.tags:
        out.append(f"tags.{RESERVED_TAG}: reserved, trainkit sets it to the cluster name")
    return out


def node_count(spec: ClusterSpec) -> int:
    """Nodes in the cluster: the active (non-spare) hosts where the nodes are the spec's hosts,
    else `nodes`."""
    if spec.room.node_source == NODES_HOSTS:
        return len([h for h in spec.hosts if not h.spare])
    return spec.nodes


def load_spec(path: str | Path) -> ClusterSpec:
    """Read and validate a cluster spec file. Raises SpecError naming the file and every field."""
    path = Path(path)
    data = read_yaml_mapping(path)
    try:
        return ClusterSpec.model_validate(data)
    except ValidationError as err:
        raise SpecError(str(path), train_config_given_as_spec(data, ClusterSpec, TrainConfig, LAUNCH_KEYS)
                        or pydantic_problems(err, ClusterSpec)) from None


def check_key_files(spec: ClusterSpec, source: str) -> None:
    """The key files the spec names exist and hold what they should (I/O, so commands call it
    once they are about to use the keys). Raises SpecError naming the ssh field."""
    problems = sshkeys.key_problems(spec.ssh, installs_key=spec.room.installs_key)
    if problems:
        raise SpecError(source, problems)


def read_yaml_mapping(path: Path) -> dict[str, Any]:
    """Parse a YAML file that must hold a mapping (trainkit.util.yamlload: size, encoding, duplicate
    keys and alias expansion bounded); SpecError for a missing file, InputError for bad YAML."""
    if not path.is_file():
        what = yamlload.not_a_file(path)
        raise SpecError(str(path), [("", "file not found" if what == "not found" else what, "check the path")])
    data = yamlload.load_file(path, "cluster spec")
    if data is None:
        raise SpecError(str(path), [("", "the file is empty (or only comments)",
                                     "start from an example: `trainkit examples`")])
    if not isinstance(data, dict):
        raise SpecError(str(path), [("", "must be a YAML mapping (key: value lines)", None)])
    return data


def _parse_cidr(value: str) -> str:
    try:
        return str(ipaddress.ip_network(value, strict=True))
    except ValueError as err:
        raise ValueError(f"{value!r} is not a valid CIDR ({err}); write it like 10.0.0.0/16") from None
