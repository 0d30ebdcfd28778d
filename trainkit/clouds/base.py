"""The interface every cloud room implements: what Python must know about one cloud.

A cloud room (`trainkit/clouds/<cloud>.py`) is one `Cloud` instance named `CLOUD`, plus data files
beside it (`data/<cloud>-regions.yaml`). spec, resolve, render, plan_rules, review and the commands
ask the room; no other module branches on a cloud's name. Adding a cloud = a Terraform module, a
cloud room, a catalog file and a provider template (see `trainkit.clouds` for the search path).

Contract: every field is plain data or a small pure function; nothing here does I/O except reading
the room's own data files once.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Iterator

# (cidr, first port, last port) of one ingress rule; None ports = all ports.
Ingress = tuple[str, "int | None", "int | None"]


@dataclass(frozen=True)
class CredentialSet:
    """One way to authenticate: all of `variables` set (any one of each tuple's alternatives)."""

    label: str                                  # e.g. "access key"
    variables: tuple[tuple[str, ...], ...]      # each inner tuple: alternatives for one value
    files: tuple[str, ...] = ()                 # profile files that also satisfy it, ~-relative


@dataclass(frozen=True)
class TagRules:
    """What the cloud accepts as resource tags (each room cites its docs)."""

    max_count: int                              # tags per resource, trainkit's own tag included
    key_max: int                                # characters
    value_max: int
    reserved_prefixes: tuple[str, ...] = ()     # case-insensitive key prefixes the cloud keeps
    key_pattern: str | None = None              # full-match regex a key must satisfy, or None
    value_pattern: str | None = None
    forbidden: tuple[str, ...] = ()             # substrings neither keys nor values may contain
    allowed_text: str = "any characters"        # the rule in words, for the fix hint


@dataclass(frozen=True)
class DiskRules:
    """Disk categories and sizes (GiB) the cloud accepts."""

    system_size: tuple[int, int]                # (min, max) for every system disk category
    data_size: dict[str, tuple[int, int]]       # category -> (min, max); "*" = any other category
    level_min_size: dict[str, int] = field(default_factory=dict)   # performance level -> min size
    leveled_categories: tuple[str, ...] = ()    # categories that take a performance level
    # instance family prefix -> the only categories it accepts (system and data disk)
    family_categories: dict[str, tuple[str, ...]] = field(default_factory=dict)
    kms_key_argument: str | None = None         # provider argument the module maps kms_key_id to
    encryption_needs_key: bool = False          # True: encrypted without a key is impossible


@dataclass(frozen=True)
class NasRules:
    """Shared file system limits: name length and size range per type (GiB)."""

    name_length: tuple[int, int] | None = None  # (min, max) of the name the module derives
    name_suffix: str = ""                       # what the module appends to the cluster name
    size: dict[str, tuple[int, int]] = field(default_factory=dict)  # type -> (min, max)


@dataclass(frozen=True)
class MetadataToken:
    """A metadata service's session-token endpoint: PUT `url` with header `ttl_header: <seconds>`
    returns a token; every GET then sends it as `token_header: <token>` (AWS IMDSv2; Alibaba's
    security hardening mode, with its own header names). trainkit/node/supervise.py uses it."""

    url: str
    ttl_header: str
    token_header: str


@dataclass(frozen=True)
class CapacityProblem:
    """A create the cloud refused for want of capacity or quota, read from the provider's error text.

    kind: "capacity" (the cloud has none of `instance_type` in `zone` now: another zone, another
    type or another billing may work) or "quota" (the account's limit `quota` is used up: request
    an increase, or ask for less). zone/instance_type are None where the text does not say; the
    caller fills them from the spec. Issue 21's failover reads `kind`, `zone` and `instance_type`.
    """

    kind: str
    code: str
    zone: str | None = None
    instance_type: str | None = None
    quota: str | None = None


# Capability values (Cloud.node_source, Cloud.replacement, Cloud.default_ssh_user).
NODES_TERRAFORM, NODES_HOSTS, NODES_LOCAL, NODES_SCHEDULER = "terraform", "hosts", "local", "scheduler"
REPLACE_TERRAFORM, REPLACE_SPARE, REPLACE_NONE = "terraform", "spare", "none"
USER_CATALOG, USER_CURRENT = "catalog", "current"

# What an offers adapter says of one (zone, instance type) (see Cloud.offers_adapter).
OFFER_AVAILABLE, OFFER_SOLD_OUT, OFFER_LISTED = "available", "sold out", "offered"


# One documented error code: (code regex, kind, quota name or None).
CapacityCode = tuple[str, str, "str | None"]


def match_capacity(text: str, codes: tuple[CapacityCode, ...], zone_re: str | None = None,
                   type_re: str | None = None) -> CapacityProblem | None:
    """The first of `codes` (in table order) found in `text`, with the zone and type the text names
    (`zone_re`/`type_re`: the first group that matched); None when no code matches. Pure."""
    for pattern, kind, quota in codes:
        found = re.search(rf"(?<![\w.])({pattern})(?![\w])", text)
        if not found:
            continue
        return CapacityProblem(kind=kind, code=found.group(1), zone=_first_group(zone_re, text),
                               instance_type=_first_group(type_re, text), quota=quota)
    return None


def _first_group(pattern: str | None, text: str) -> str | None:
    found = re.search(pattern, text) if pattern else None
    return next((g for g in found.groups() if g), None) if found else None


# A place in a resource's values: keys, and indexes into the lists Terraform makes of nested blocks
# (("root_block_device", 0, "volume_size")).
ValuePath = tuple


@dataclass(frozen=True)
class BillingRule:
    """One value that decides an instance's billing: the value at `path` looked up in `values`
    (-> billing; None: this value decides nothing), `other` for a value not listed. An empty or
    missing value decides nothing."""

    path: ValuePath
    values: dict[str, "str | None"]
    other: str | None = None


@dataclass(frozen=True)
class Billed:
    """One row of a room's billing table (`Cloud.billing`, keyed by Terraform resource type): which
    of that resource's values say what it bills as (`Cloud.billed` reads it: `billed_as`).

    An instance row names the value paths of its type (`node`), its billing rules (the first that
    decides wins; a rule deciding "spot" anywhere makes the node spot, so its `max_price` is read),
    and its system disk's (category, size). Without a deciding rule the billing is on_demand when
    one of `billing_keys` is among the values, else None (not known: the cost model fills it in
    from the spec); with no `billing_keys`, only a deciding rule makes it known. A data disk row
    gives `disk` (category, size); the shared file system's row `nas`."""

    node: ValuePath | None = None
    billing: tuple[BillingRule, ...] = ()
    billing_keys: tuple[str, ...] = ()
    max_price: ValuePath | None = None
    system_disk: tuple[ValuePath, ValuePath] | None = None
    disk: tuple[ValuePath, ValuePath] | None = None
    nas: bool = False


@dataclass(frozen=True)
class Cloud:
    """Everything trainkit's Python knows about one cloud. Immutable; one instance per room."""

    name: str                                   # the spec's `cloud:` value and the module folder
    title: str                                  # for people: "Alibaba Cloud"
    provider_source: str                        # Terraform registry source, e.g. "aliyun/alicloud"
    provider_version: str                       # the constraint the provider template pins
    # Credentials the provider reads from the environment (provider.go); never from files we write.
    credentials: tuple[CredentialSet, ...] = ()
    region_variables: tuple[str, ...] = ()
    # State backend: the `backend.type` users of this cloud write, and the variables it reads
    # credentials from (Huawei OBS goes through the s3 backend with AWS_* variables).
    backend_type: str = "local"
    backend_credentials: tuple[CredentialSet, ...] = ()
    # (BackendSpec, region, prefix) -> (Terraform backend type, arguments in order, comment lines)
    backend: Callable[[Any, str, str], tuple[str, dict[str, Any], list[str]]] | None = None
    # Provider/backend error text meaning "credentials missing or rejected" (kind "credentials") or
    # "authenticated but not allowed" (kind "permission"): (regex, kind). trainkit.clouds.credentials turns
    # a matching terraform failure into one message naming this cloud's variables.
    credential_errors: tuple[tuple[str, str], ...] = ()
    # Provider error text -> the capacity or quota refusal it reports (a pure function of the text,
    # None for anything else); trainkit.clouds.capacity turns it into one message.
    capacity_error: Callable[[str], "CapacityProblem | None"] = lambda text: None
    # A create the cloud refused because what it creates is there already: the answer to an earlier
    # attempt of the same request was lost and the SDK sent it again (the cloud carried out both).
    # `duplicate_error` matches such a refusal in a resource's error text; `import_id(type, planned
    # values)` is the ID `terraform import` adopts that resource by (None: the room cannot name it).
    # trainkit/stack/adopt.py uses both; None/the default: nothing is adopted.
    duplicate_error: str | None = None
    import_id: Callable[[str, dict], "str | None"] = lambda kind, values: None
    # Spot termination notice on the instance metadata service (None: not documented).
    spot_notice_url: str | None = None
    # The metadata host's session-token endpoint, where reading spot_notice_url needs a token
    # (None: a plain GET; the room says why).
    spot_notice_token: MetadataToken | None = None
    # Terraform argument that releases an instance at a time (TTL), or None: use the node timer.
    ttl_argument: str | None = None
    # Whether the module's data disks go with an instance the cloud releases (TTL, spot reclaim).
    ttl_releases_data_disks: bool = False
    # Regions: region -> known zones ([] = not listed); filled from data/<name>-regions.yaml.
    regions: dict[str, tuple[str, ...]] = field(default_factory=dict)
    regions_source: str = ""
    # How a zone name is built from its region: a regex with `{region}` (escaped before use).
    zone_pattern: str = "{region}.+"
    tags: TagRules = TagRules(max_count=50, key_max=128, value_max=256)
    # Resource names trainkit derives from the cluster name: label -> (suffix, max length).
    derived_names: dict[str, tuple[str, int]] = field(default_factory=dict)
    disks: DiskRules = DiskRules(system_size=(20, 2048), data_size={"*": (20, 65536)})
    nas: NasRules = NasRules()
    # NFS options of the cloud's file service: a room fact (the catalogs hold instance types,
    # prices, defaults and choices only); the module's nfs_mount_options default matches it.
    nfs_mount_options: str = "vers=3,nolock,proto=tcp,hard,timeo=600,retrans=2,noresvport"
    # Review facts, each a reader of one planned resource `{type, index, address, values}`:
    # the node index it gives a public IP to (None: none), the labels of its unencrypted disks,
    # and its ingress rules from CIDRs.
    public_ip_node: Callable[[dict], "int | None"] = lambda r: None
    unencrypted: Callable[[dict], Iterator[str]] = lambda r: iter(())
    ingress_rules: Callable[[dict], Iterator[Ingress]] = lambda r: iter(())
    # Which values of the instance, data disk and shared file system resources say what they bill
    # as: resource type -> Billed (a table, read by `billed`). The cost of "what runs now" (review,
    # status) is priced from these, never from the spec.
    billing: dict[str, Billed] = field(default_factory=dict)
    # How the cloud carries out an in-place update of one resource (`type`, state `before`, planned
    # `after`): ("refused", cause) where the cloud (or trainkit, for a spot node) will not make that
    # change in place, so the plan replaces the resource instead; ("stops", cause) where the node is
    # stopped to make it; None when the update disrupts nothing. The review names both.
    in_place: Callable[[str, dict, dict], "tuple[str, str] | None"] = lambda t, before, after: None
    # Why the cloud's module replaces one resource where the spec did not ask for it (a change of the
    # module's own layout between trainkit versions): `(resource_change, plan)` of terraform show
    # -json -> the cause in words, or None. The review names it and warns (plan_rules.disruptions).
    replace_note: Callable[[dict, dict], "str | None"] = lambda rc, plan: None
    # Whether the module makes a node-side shutdown terminate the instance (when ttl/idle are set).
    shutdown_terminates: bool = False
    # Module with `fetch(region, types, endpoint=None)` asking the cloud's price API (lazy import).
    price_adapter: str | None = None
    # Module with `offers(region, types, spot, endpoint=None) -> {(zone, type): status}` asking the
    # cloud which zones offer each instance type and whether it is in stock (lazy import; the
    # placement preflight, cluster/preflight.py). status: OFFER_AVAILABLE, OFFER_SOLD_OUT or
    # OFFER_LISTED (offered; the cloud reports no stock); a (zone, type) the answer leaves out is
    # not offered there. None: the room asks nothing.
    offers_adapter: str | None = None
    # What the cloud (or its provider) refuses in a spec, beyond the data-driven checks of
    # trainkit.clouds.checks: spec -> [(field path, message, fix)]; each room cites its source.
    spec_rules: Callable[[Any], list] = lambda spec: []
    # What the target refuses as the spec is read (spec/schema.py's validator, before any catalog):
    # spec -> ["field: what is wrong; how to fix it"]. `hosts` and `local` keep their rules here.
    read_rules: Callable[[Any], list] = lambda spec: []
    # Limits the cloud enforces (provider validation or API docs); see each room for the source.
    limits: dict[str, Any] = field(default_factory=dict)
    # Whether spot needs an explicit max price (Tencent SPOTPAID does).
    spot_needs_max_price: bool = False
    # Whether the spec may set custom API `endpoints:` (emulators).
    supports_endpoints: bool = False
    # The `endpoints:` keys the room accepts, where trainkit's own API calls (sweeper, preflight) are
    # the only users: each value must then be an http(s)://host[:port] URL. () = any key, any value
    # (they go into the provider block, which checks them).
    endpoint_keys: tuple[str, ...] = ()
    # Instance-type prefixes with elastic RDMA the network role sets up (Alibaba eRDMA); see the room.
    erdma_types: tuple[str, ...] = ()
    # Instance families (the type's part before the first ".", matched exactly) whose RDMA network
    # rdma-agent, a systemd service, configures (Tencent HCC GPU); the network role checks that the
    # service runs and that RDMA devices appear. See the room.
    rdma_agent_types: tuple[str, ...] = ()
    # Where this room's files live; set by `trainkit.clouds` when it loads the room.
    catalog_file: Path | None = None
    provider_template: Path | None = None
    module_dir: Path | None = None
    # Module that finds and deletes what still carries the cluster's tag after destroy:
    # `find(cluster) -> [{type, id, ...}]`, `delete(cluster, found)`. None: not implemented.
    tag_sweeper: str | None = None
    # S3-compatible object storage for data staging (trainkit/staging/fetch.py): (URL scheme, endpoint with a
    # `{region}` placeholder, or None = the S3 SDK's own). Keys come from `credentials[0]`, the
    # region from `region_variables`.
    object_store: tuple[str, str | None] | None = None
    # ---- The kind of target: what the rest of trainkit asks instead of a target's name (SkyPilot's
    # `_CLOUD_UNSUPPORTED_FEATURES` in sky/clouds/local.py and ssh.py, as data). The defaults fit a
    # Terraform cloud; `hosts` and `local` (their rooms) set what differs.
    # Whether the target is provisioned by its Terraform module (render, plan, apply, destroy run
    # terraform; a state backend holds what exists). False: nothing to provision or tear down.
    has_module: bool = True
    # Where the nodes come from (a key of the node-source table in provision/inventory.py):
    # NODES_TERRAFORM (the module's `nodes` output), NODES_HOSTS (the spec's `hosts:`), NODES_LOCAL
    # (this machine, no ssh), NODES_SCHEDULER (a batch scheduler allocates them per job: the spec's
    # `slurm:` block names its login node).
    node_source: str = NODES_TERRAFORM
    # How a lost node is replaced (a key of the table in cluster/replace.py): REPLACE_TERRAFORM (a new
    # instance by a targeted apply), REPLACE_SPARE (a spare host of the spec), REPLACE_NONE (nothing
    # replaces it: the run ends preempted; on a scheduler, the scheduler requeues the job).
    replacement: str = REPLACE_TERRAFORM
    # Whether a lost node is fenced (its processes killed once it answers again) before the run goes
    # on without it: a lost cloud instance is terminated by its replacement, a lost host is not.
    fences_lost_nodes: bool = False
    # How the nodes get trainkit: "venv" (a virtual environment the playbook builds) or "reuse" (the
    # controller's own interpreter, this machine).
    venv_mode: str = "venv"
    # The ssh user when the spec names none: USER_CATALOG (the catalog's `ssh_user`, else root),
    # "root", or USER_CURRENT (whoever runs trainkit).
    default_ssh_user: str = USER_CATALOG
    # Whether trainkit installs the cluster's public key on the nodes (the module's ssh_public_key);
    # False: the key must already be authorised where the nodes are.
    installs_key: bool = True
    # Node count limits: (min, max), None = no maximum; `nodes_limit_text` says why and the fix when
    # `nodes:` is outside them (spec/schema.py).
    node_limits: tuple[int, "int | None"] = (1, None)
    nodes_limit_text: str = ""
    # Whether trainkit may mount shared storage (NAS) on this target, and whether ttl/idle safety
    # nets apply (nodes trainkit may shut down).
    shared_storage: bool = True
    safety_nets: bool = True
    # Whether the target has an instance catalog (types, defaults, prices): region, zone, instance,
    # image, spot and endpoints only mean something where it has.
    has_catalog: bool = True
    # The batch schedulers trainkit may install on the target's nodes (the spec's `scheduler:`,
    # ansible/roles/slurm): a target whose machines trainkit provisions or reaches over SSH. ()
    # where it must not: this machine (`local`), a site's own scheduler (`slurm`).
    schedulers: tuple[str, ...] = ("slurm",)

    def billed(self, resource: dict) -> "dict | None":
        """What one resource `{type, values}` (planned or in the state) bills as: {"node": type,
        "billing": on_demand|spot|subscription, "max_price": float|None, "system_disk": (category,
        GiB)} for an instance, {"disk": (category, GiB)} for a data disk, {"nas": True} for the
        shared file system, None for anything else. A value the resource does not hold (unknown
        until apply) is None; the cost model fills it from the spec."""
        return billed_as(self.billing, resource)

    def credential_variables(self) -> list[str]:
        """Every environment variable name this cloud's provider and backend may read."""
        names: list[str] = []
        for cs in (*self.credentials, *self.backend_credentials):
            for alternatives in cs.variables:
                names.extend(n for n in alternatives if n not in names)
        return names


# Every module names its controller's resources `controller` (terraform/modules/*/controller.tf):
# the instance, its identity and policy. They are no node: cost prices them apart (on demand).
CONTROLLER_NAME = "controller"


def is_controller(resource: dict) -> bool:
    """Whether a planned or state resource ({address, ...}) is one of the controller's."""
    name = str(resource.get("address", "")).rsplit(".", 1)[-1]
    return name.split("[", 1)[0] == CONTROLLER_NAME


def index_of(resource: dict) -> int:
    """The count index of a planned resource (0 when it has none)."""
    index = resource.get("index")
    return index if isinstance(index, int) else 0


def port_range(text: str | None) -> tuple[int | None, int | None]:
    """'22', '22/22', '20-30', 'ALL', '-1/-1' -> (lo, hi); (None, None) = all ports.

    A list like '22,80' yields the first range that covers port 22, else (0, 0).
    """
    if not text or str(text).upper() == "ALL" or str(text).startswith("-1"):
        return None, None
    ranges = []
    for part in str(text).split(","):
        lo, _, hi = part.strip().replace("/", "-").partition("-")
        ranges.append((int(lo), int(hi or lo)))
    return next((r for r in ranges if r[0] <= 22 <= r[1]), (0, 0))


# A spot node is replaced rather than stopped and resized: the cloud holds no capacity for a stopped
# spot instance (Huawei and AWS refuse the resize outright: see their rooms), and a replacement is
# what recovery does anyway.
SPOT_RESIZE = "a spot node is replaced, not stopped and resized: its capacity is not held while it is stopped"


def node_resize(billing: dict[str, Billed], rtype: str, before: dict, after: dict,
                stops: str, spot_refused: str = SPOT_RESIZE) -> "tuple[str, str] | None":
    """The disruption of an instance-type change read through the room's billing table: refused for
    a spot node (`spot_refused`), else the node stops (`stops`: how the cloud resizes); None when
    the type does not change (or is not known yet)."""
    old = billed_as(billing, {"type": rtype, "values": before})
    new = billed_as(billing, {"type": rtype, "values": after})
    if not old or not new or not old.get("node") or not new.get("node") or old["node"] == new["node"]:
        return None
    what = f"instance type {old['node']} -> {new['node']}"
    if old.get("billing") == "spot":
        return "refused", f"{what}: {spot_refused}"
    return "stops", f"{what}: {stops}"


def billed_as(billing: dict[str, Billed], resource: dict) -> "dict | None":
    """What `resource` ({type, values}) bills as, read through a room's billing table (the record
    `Cloud.billed` describes); None for a type the table does not list."""
    row = billing.get(resource["type"])
    if row is None:
        return None
    v = resource["values"]
    if row.nas:
        return {"nas": True}
    if row.disk:
        return {"disk": (value_at(v, row.disk[0]), value_at(v, row.disk[1]))}
    decided = [_decides(rule, value_at(v, rule.path)) for rule in row.billing]
    known = any(k in v for k in row.billing_keys)
    billing_ = next((b for b in decided if b), "on_demand" if known else None)
    price = value_at(v, row.max_price) if row.max_price and "spot" in decided else None
    system_disk = tuple(value_at(v, p) for p in row.system_disk) if row.system_disk else (None, None)
    return {"node": value_at(v, row.node) if row.node else None, "billing": billing_,
            "max_price": float(price) if price else None, "system_disk": system_disk}


def _decides(rule: BillingRule, value: Any) -> "str | None":
    """The billing `value` decides through `rule` (None: it decides nothing)."""
    if not value:
        return None
    return rule.values[value] if isinstance(value, str) and value in rule.values else rule.other


def value_at(values: Any, path: ValuePath) -> Any:
    """The value at `path` (keys and list indexes) in a resource's values; None where a key, an
    index or a block is missing (unknown until apply, or not set)."""
    for step in path:
        if isinstance(step, int):
            values = values[step] if isinstance(values, list) and len(values) > step else None
        else:
            values = values.get(step) if isinstance(values, dict) else None
        if values is None:
            return None
    return values
