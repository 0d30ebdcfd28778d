"""Checks that depend on the cloud a spec names, driven by the room's data (no cloud names here).

`problems(cloud, spec, resolved)` returns `(field path, message, fix)` for everything the cloud
would refuse: an unknown region, a zone outside its region, tags over the cloud's limits or with a
reserved prefix, derived names that are too long, disk categories and sizes, NAS names and sizes,
encryption the cloud cannot do, and text Terraform could not read back exactly (not Unicode NFC).
"""

from __future__ import annotations

import difflib
import re
import unicodedata
from typing import Any

from trainkit.clouds.base import Cloud

Problem = tuple[str, str, "str | None"]
# Tags the modules add themselves besides the user's: trainkit-cluster and Name.
MODULE_TAGS = 2


def problems(cloud: Cloud, spec: Any, resolved: dict[str, Any]) -> list[Problem]:
    """Every cloud-dependent problem of `spec`; `resolved` holds instance_type, image,
    system_disk, data_disk and nas with the catalog defaults filled in."""
    return [*_location(cloud, spec), *_tags(cloud, spec.tags), *_names(cloud, spec),
            *_disks(cloud, resolved), *_nas(cloud, spec, resolved["nas"]),
            *_text(spec, resolved), *cloud.spec_rules(spec)]


def _location(cloud: Cloud, spec: Any) -> list[Problem]:
    out = _backend_region(cloud, spec.backend.region)
    return out + _region_zone(cloud, spec)


def _backend_region(cloud: Cloud, region: str | None) -> list[Problem]:
    """The state bucket's region, when given, is one of the cloud's (terraform init says so only later)."""
    if not region or not cloud.regions or region in cloud.regions:
        return []
    close = difflib.get_close_matches(region, list(cloud.regions), n=3, cutoff=0.6)
    return [("backend.region", f"{region!r} is not a region of {cloud.title}",
             f"did you mean {', '.join(close)}?" if close else "use the region of the state bucket")]


def _region_zone(cloud: Cloud, spec: Any) -> list[Problem]:
    """The region, then every zone candidate (`zone:` may list several), as the cloud names them."""
    found: list[Problem] = []
    for zone in getattr(spec, "zone_candidates", ()) or (spec.zone,):
        found += [p for p in _one_zone(cloud, spec.region, zone) if p not in found]
    return found


def _one_zone(cloud: Cloud, region: str | None, zone: str | None) -> list[Problem]:
    if not region or not zone:
        return []
    if cloud.regions and region not in cloud.regions:
        close = difflib.get_close_matches(region, list(cloud.regions), n=3, cutoff=0.6)
        fix = f"did you mean {', '.join(close)}?" if close else \
            f"{cloud.title} regions: {', '.join(sorted(cloud.regions))}"
        return [("region", f"{region!r} is not a region of {cloud.title}", fix)]
    pattern = cloud.zone_pattern.replace("{region}", re.escape(region))
    known = cloud.regions.get(region, ())
    if not re.fullmatch(pattern, zone) or (known and zone not in known):
        fix = f"zones of {region}: {', '.join(known)}" if known else _zone_shape(cloud, region)
        return [("zone", f"{zone!r} is not a zone of region {region}", fix)]
    return []


def _zone_shape(cloud: Cloud, region: str) -> str:
    """How a zone of `region` is written, for a region whose zones trainkit does not list: a name
    of that shape (never the pattern itself, which is no zone), and where the real list is."""
    example = cloud.zone_pattern.replace("{region}", region).replace("[a-z]", "a").replace(r"\d+", "1")
    if any(c in example for c in "[]\\+*?()"):
        return f"use a zone name as {cloud.title} lists it for {region} (its console or API)"
    return f"zones of {region} are named like {example}; use one {cloud.title} lists for {region}"


def _tags(cloud: Cloud, tags: dict[str, str]) -> list[Problem]:
    rules, out = cloud.tags, []
    if len(tags) + MODULE_TAGS > rules.max_count:
        out.append(("tags", f"{len(tags)} tags; {cloud.title} allows {rules.max_count} per "
                            f"resource and trainkit adds {MODULE_TAGS}",
                    f"keep at most {rules.max_count - MODULE_TAGS} tags"))
    for key, value in tags.items():
        field = f"tags.{key}"
        lowered = key.lower()
        prefix = next((p for p in rules.reserved_prefixes if lowered.startswith(p.lower())), None)
        if prefix:
            out.append((field, f"keys starting with {prefix!r} are reserved by {cloud.title}",
                        "rename the tag"))
        if not key or len(key) > rules.key_max:
            out.append((field, f"key is {len(key)} characters; {cloud.title} allows "
                               f"1-{rules.key_max}", "shorten the key"))
        if len(value) > rules.value_max:
            out.append((field, f"value is {len(value)} characters; {cloud.title} allows at most "
                               f"{rules.value_max}", "shorten the value"))
        for what, text, pattern in (("key", key, rules.key_pattern),
                                    ("value", value, rules.value_pattern)):
            bad = [s for s in rules.forbidden if s in text.lower()]
            if bad or (pattern and text and not re.fullmatch(pattern, text)):
                out.append((field, f"{what} {text!r} has characters {cloud.title} refuses",
                            f"{cloud.title} tag {what}s take {rules.allowed_text}"))
    return out


def _names(cloud: Cloud, spec: Any) -> list[Problem]:
    out = []
    for label, (suffix, limit) in cloud.derived_names.items():
        if len(spec.name + suffix) > limit:
            out.append(("name", f"{len(spec.name)} characters; the {cloud.title} {label} "
                                f"name{' ' + repr('<name>' + suffix) if suffix else ''} is "
                                f"limited to {limit}",
                        f"use a name of at most {limit - len(suffix)} characters"))
    return out


def _disks(cloud: Cloud, r: dict[str, Any]) -> list[Problem]:
    rules, out = cloud.disks, []
    family = next((f for f in rules.family_categories if _family_of(r["instance_type"], f)), None)
    allowed = rules.family_categories.get(family) if family else None
    for field, disk in (("storage.system_disk", r["system_disk"]),
                        ("storage.data_disk", r["data_disk"])):
        if field.endswith("data_disk") and not disk["enabled"]:
            continue
        if allowed is not None and disk["category"] not in allowed:
            out.append((f"{field}.category", f"{disk['category']!r} is not available on "
                        f"{family} instances", f"{family} takes: {', '.join(allowed)}"))
    lo, hi = rules.system_size
    size = r["system_disk"]["size_gb"]
    if not lo <= size <= hi:
        out.append(("storage.system_disk.size_gb", f"{size} GB; {cloud.title} system disks "
                    f"are {lo}-{hi} GB", f"set size_gb between {lo} and {hi}"))
    dd = r["data_disk"]
    if dd["enabled"]:
        out += _data_disk(cloud, dd)
    return out


def _data_disk(cloud: Cloud, dd: dict[str, Any]) -> list[Problem]:
    rules, out = cloud.disks, []
    lo, hi = rules.data_size.get(dd["category"], rules.data_size.get("*", (1, 1 << 20)))
    level = dd.get("performance_level") if dd["category"] in rules.leveled_categories else None
    if level in rules.level_min_size:
        lo = max(lo, rules.level_min_size[level])
    if not lo <= dd["size_gb"] <= hi:
        what = f"{dd['category']} {level}" if level else dd["category"]
        out.append(("storage.data_disk.size_gb", f"{dd['size_gb']} GB; {cloud.title} {what} "
                    f"disks are {lo}-{hi} GB", f"set size_gb between {lo} and {hi}"
                    + (" or lower performance_level" if level else "")))
    if dd["encrypted"] and rules.encryption_needs_key and not dd.get("kms_key_id"):
        out.append(("storage.data_disk.encrypted", f"{cloud.title} encrypts disks only with a "
                    "KMS key", "set storage.data_disk.kms_key_id, or encrypted: false"))
    if dd.get("kms_key_id") and not rules.kms_key_argument:
        out.append(("storage.data_disk.kms_key_id", f"{cloud.title} disks take no KMS key "
                    "in trainkit's module", "remove kms_key_id"))
    if dd.get("kms_key_id") and not dd["encrypted"]:
        out.append(("storage.data_disk.kms_key_id", "a KMS key on an unencrypted disk",
                    "set encrypted: true or remove kms_key_id"))
    return out


def _family_of(instance_type: str, family: str) -> bool:
    """'ecs.gn7i-c8g1.2xlarge' is of family 'gn7i' (not of 'gn7'); 'p4d.24xlarge' of 'p4d'."""
    parts = instance_type.split(".")
    name = parts[1] if len(parts) > 2 else parts[0]
    return name.split("-")[0] == family


def _nas(cloud: Cloud, spec: Any, nas: dict[str, Any]) -> list[Problem]:
    rules, out = cloud.nas, []
    if not nas["enabled"]:
        return out
    if rules.name_length:
        lo, hi = rules.name_length
        full = spec.name + rules.name_suffix
        if not lo <= len(full) <= hi:
            out.append(("name", f"the {cloud.title} file system name {full!r} must be {lo}-{hi} "
                                "characters", f"use a cluster name of at least {lo} characters"))
    if nas["type"] in rules.size:
        lo, hi = rules.size[nas["type"]]
        size = nas.get("size_gb")
        if size is None or not lo <= size <= hi:
            out.append(("storage.nas.size_gb", f"{size} GB; {cloud.title} {nas['type']} file "
                        f"systems are {lo}-{hi} GB", f"set storage.nas.size_gb between {lo} and {hi}"))
    return out


def _text(spec: Any, r: dict[str, Any]) -> list[Problem]:
    """Text Terraform reads back changed: HCL normalises every string to Unicode NFC."""
    values = [("image", r.get("image")), *((f"tags.{k}", k) for k in spec.tags),
              *((f"tags.{k}", v) for k, v in spec.tags.items()),
              *((f"endpoints.{k}", v) for k, v in spec.endpoints.items()),
              *((f"backend.{k}", v) for k, v in spec.backend.model_dump().items())]
    out: list[Problem] = [(field, "text is not in Unicode NFC form; Terraform would change it",
                           "write the composed form (NFC) of these characters")
                          for field, value in values
                          if isinstance(value, str) and not unicodedata.is_normalized("NFC", value)]
    # Endpoint names become HCL attribute names in the provider block.
    out += [(f"endpoints.{k}", "not a service name", "use the provider's endpoint name, e.g. ec2")
            for k in spec.endpoints if not re.fullmatch(r"[a-z][a-z0-9_]{0,63}", k)]
    return out
