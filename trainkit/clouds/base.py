"""The interface every cloud room implements: what Python must know about one cloud.

A cloud room (`trainkit/clouds/<cloud>.py`) is one `Cloud` instance named `CLOUD`, plus data files
beside it. spec, resolve, render, plan_rules, review, check, cost and the node-side helpers ask the
room; no other module branches on a cloud's name. Adding a cloud = a Terraform module, a cloud room,
a catalog file and a provider template (see docs/design.md).

Contract: every field is plain data or a small pure function; nothing here does I/O except the
optional adapters (`price_adapter`, `tag_sweeper`), which are imported lazily by the commands that
need them.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Callable


@dataclass(frozen=True)
class CredentialSet:
    """One way to authenticate: all of `variables` set (any one of each tuple's alternatives)."""

    label: str                                  # e.g. "access key"
    variables: tuple[tuple[str, ...], ...]      # each inner tuple: alternatives for one value
    files: tuple[str, ...] = ()                 # profile files that also satisfy it, ~-relative


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
    # State backend: the Terraform backend type users of this cloud reach for, and the variables it
    # reads credentials from (Huawei OBS goes through the s3 backend with AWS_* variables).
    backend_type: str = "local"
    backend_credentials: tuple[CredentialSet, ...] = ()
    # Spot termination notice on the instance metadata service (None: not documented).
    spot_notice_url: str | None = None
    # Terraform argument that releases an instance at a time (TTL), or None: use the node timer.
    ttl_argument: str | None = None
    # Limits the cloud enforces (provider validation or API docs); see each room for the source.
    limits: dict[str, Any] = field(default_factory=dict)
    # Review facts: instance resource type -> (attribute, predicate) meaning "has a public IP";
    # disk resource type -> predicate meaning "not encrypted".
    public_ip_attrs: dict[str, tuple[str, Callable[[Any], bool]]] = field(default_factory=dict)
    unencrypted: dict[str, Callable[[dict], bool]] = field(default_factory=dict)
    # Whether spot needs an explicit max price (Tencent SPOTPAID does).
    spot_needs_max_price: bool = False
    # Whether the spec may set custom API `endpoints:` (emulators); only AWS today.
    supports_endpoints: bool = False
    # S3-compatible object storage for data staging (trainkit/stage.py): (URL scheme, endpoint with a
    # `{region}` placeholder, or None = the S3 SDK's own). Keys come from `credentials[0]`, the
    # region from `region_variables`.
    object_store: tuple[str, str | None] | None = None

    def credential_variables(self) -> list[str]:
        """Every environment variable name this cloud's provider and backend may read."""
        names: list[str] = []
        for cs in (*self.credentials, *self.backend_credentials):
            for alternatives in cs.variables:
                names.extend(n for n in alternatives if n not in names)
        return names
