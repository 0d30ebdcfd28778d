"""Placeholder values in a cloud spec: what an example carries until the user puts in their own.

A shipped example passes every field check, so without this an apply would create billing nodes
behind SSH rules for an address range nobody has, with state in a bucket nobody owns. `validate`
(and render, plan) warn about each placeholder; `apply` refuses the spec until each is replaced,
naming the field (trainkit.cluster.lifecycle.apply).

What counts as a placeholder, each by its public source:
- an address or CIDR in a documentation range: 192.0.2.0/24, 198.51.100.0/24, 203.0.113.0/24
  (RFC 5737, "IPv4 Address Blocks Reserved for Documentation") and 2001:db8::/32 (RFC 3849);
- a host under a name reserved for examples: example.com/.net/.org and the .example, .test,
  .invalid top-level names (RFC 2606);
- a bucket name the examples and docs use (`my-tfstate-bucket`, `my-bucket`, ...), or a COS bucket
  with APPID 1250000000 (Tencent Cloud's documentation example APPID);
- AWS's documented example access key ids and secrets (ending in EXAMPLE / EXAMPLEKEY).

Only targets that bill are checked (the clouds); `hosts` and `local` create nothing. A spec
whose every API endpoint is on this machine (127.0.0.0/8, ::1, localhost) talks to an emulator
(examples/clusters/aws-moto.yaml, moto): nothing it creates bills, so it may keep its placeholders.
"""

from __future__ import annotations

import ipaddress
import re
from typing import Any
from urllib.parse import urlsplit

DOC_NETWORKS = tuple(ipaddress.ip_network(n) for n in
                     ("192.0.2.0/24", "198.51.100.0/24", "203.0.113.0/24", "2001:db8::/32"))
_EXAMPLE_DOMAINS = ("example.com", "example.net", "example.org")
_EXAMPLE_TLDS = ("example", "test", "invalid")
PLACEHOLDER_BUCKETS = frozenset({"my-tfstate-bucket", "my-tfstate", "my-tf-state", "my-bucket",
                                 "example-bucket", "your-bucket", "bucket-name"})
_COS_EXAMPLE_APPID = re.compile(r"-1250000000$")
_EXAMPLE_KEY = re.compile(r"EXAMPLE(KEY)?$")
_LOOPBACK_NAMES = ("localhost",)


def is_emulator(spec: Any) -> bool:
    """True when the spec sets API endpoints and every one is on this machine (an emulator)."""
    hosts = [urlsplit(url).hostname or "" for url in (spec.endpoints or {}).values()]
    return bool(hosts) and all(_loopback(h) for h in hosts)


def placeholders(spec: Any) -> list[tuple[str, str, str]]:
    """(field path, value, what it is) for each placeholder in a cloud spec that bills; [] for
    hosts, local and emulator specs. Pure: reads the validated spec only."""
    if not spec.room.has_catalog or is_emulator(spec):
        return []
    found: list[tuple[str, str, str]] = []
    for i, cidr in enumerate(spec.network.admin_cidrs):
        why = _doc_range(cidr)
        if why:
            found.append((f"network.admin_cidrs[{i}]", cidr, why))
    if spec.backend.bucket:
        why = _bucket(spec.backend.bucket)
        if why:
            found.append(("backend.bucket", spec.backend.bucket, why))
    for i, source in enumerate(spec.data.sources):
        url = str(getattr(source, "url", "") or "")
        why = _bucket(urlsplit(url).hostname or "") if "://" in url else None
        if why:
            found.append((f"data.sources[{i}].url", url, why))
    found += [(path, value, why) for path, value in _strings(spec.model_dump(mode="json"), "")
              for why in [_example_text(value)] if why and not any(f[0] == path for f in found)]
    return found


def problems(spec: Any) -> list[tuple[str, str, str]]:
    """placeholders() as SpecError problems (field, what is wrong, how to fix it)."""
    return [(path, f"{value!r} is {why}, a placeholder: a cluster applied with it would bill for nothing "
                   "that works", _FIX.get(path.split("[")[0], "replace it with your own value"))
            for path, value, why in placeholders(spec)]


def warnings(spec: Any) -> list[str]:
    """One line per placeholder, for validate/render/plan (apply refuses them)."""
    return [f"{path}: {value!r} is {why}, a placeholder; replace it before `trainkit apply` (which refuses it)"
            for path, value, why in placeholders(spec)]


_FIX = {
    "network.admin_cidrs": "replace it with the range you SSH from: your office or VPN range, or this "
                           "machine's public address with /32",
    "backend.bucket": "replace it with a bucket of your own for the state",
    "data.sources": "replace it with a bucket of your own",
}


def _doc_range(value: str) -> str | None:
    try:
        net = ipaddress.ip_network(value, strict=False)
    except ValueError:
        return None
    for doc in DOC_NETWORKS:
        if net.version == doc.version and net.overlaps(doc):
            rfc = "RFC 3849" if doc.version == 6 else "RFC 5737"
            return f"in the documentation range {doc} ({rfc})"
    return None


def _bucket(name: str) -> str | None:
    if name in PLACEHOLDER_BUCKETS:
        return "an example bucket name"
    if _COS_EXAMPLE_APPID.search(name):
        return "a bucket with Tencent Cloud's documentation example APPID 1250000000"
    return None


def _example_text(value: str) -> str | None:
    """An address in a documentation range or a host reserved for examples (bare, or a URL's
    host), or AWS's documentation example key; None for anything else."""
    if _EXAMPLE_KEY.search(value) and re.fullmatch(r"[A-Za-z0-9/+]{16,}", value):
        return "AWS's documentation example key"
    host = ((urlsplit(value).hostname or "") if "://" in value else value).lower().rstrip(".")
    try:
        ipaddress.ip_address(host)
        return _doc_range(host)
    except ValueError:
        pass
    if any(host == d or host.endswith("." + d) for d in _EXAMPLE_DOMAINS) or \
            ("." in host and " " not in host and host.rsplit(".", 1)[1] in _EXAMPLE_TLDS):
        return "a host name reserved for examples (RFC 2606)"
    return None


def _strings(value: Any, path: str):
    """(field path, text) for every string in a dumped spec, lists as [i]."""
    if isinstance(value, str):
        yield path, value
    elif isinstance(value, dict):
        for k, v in value.items():
            yield from _strings(v, f"{path}.{k}" if path else str(k))
    elif isinstance(value, (list, tuple)):
        for i, v in enumerate(value):
            yield from _strings(v, f"{path}[{i}]")


def _loopback(host: str) -> bool:
    if host.lower() in _LOOPBACK_NAMES:
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False
