"""One room per cloud: `get(name)` returns the `Cloud` that knows everything about that cloud.

Shipped rooms are `trainkit/clouds/<name>.py` defining `CLOUD`, with their catalog in
`trainkit/catalog/<name>.yaml`, provider template `templates/terraform/provider-<name>.tf.j2` and
module `terraform/modules/<name>/`. More clouds can live outside the package: every folder listed
in `TRAINKIT_CLOUD_PATH` (os.pathsep-separated) holds one folder per cloud,

    <folder>/<name>/cloud.py        defines CLOUD (a trainkit.clouds.Cloud)
    <folder>/<name>/catalog.yaml    instance catalog (same format as the shipped ones)
    <folder>/<name>/provider.tf.j2  provider template
    <folder>/<name>/module/         the Terraform module (same interface as the shipped ones)
    <folder>/<name>/regions.yaml    regions and zones (optional)

`hosts` and `local` are rooms too (`trainkit/clouds/hosts.py`, `local.py`): targets with nothing to
provision. What sets them apart is data, the room's capabilities (`Cloud.has_module`, `node_source`,
`replacement`, ...); a room on TRAINKIT_CLOUD_PATH may be such a target too (only `cloud.py`, with
`has_module=False`). docs/design.md, "Adding a target kind", says which tables read them.
"""

from __future__ import annotations

import dataclasses
import importlib
import importlib.util
import os
from functools import lru_cache
from pathlib import Path

from trainkit.clouds.base import Cloud, CredentialSet, DiskRules, NasRules, TagRules
from trainkit.errors import InputError
from trainkit.util import resources, yamlload

PACKAGE = Path(__file__).resolve().parent

# The shipped rooms: the Terraform clouds, then the targets with nothing to provision.
TERRAFORM_TARGETS: tuple[str, ...] = ("alicloud", "tencentcloud", "huaweicloud", "aws")
OTHER_TARGETS: tuple[str, ...] = ("hosts", "slurm", "local")
TARGETS: tuple[str, ...] = TERRAFORM_TARGETS + OTHER_TARGETS
PATH_VARIABLE = "TRAINKIT_CLOUD_PATH"

__all__ = ["Cloud", "CredentialSet", "DiskRules", "NasRules", "TagRules", "TARGETS",
           "TERRAFORM_TARGETS", "OTHER_TARGETS", "get", "all_clouds", "terraform_targets",
           "targets"]


def _extra_rooms() -> dict[str, Path]:
    """name -> folder of every cloud found on TRAINKIT_CLOUD_PATH (first folder wins)."""
    found: dict[str, Path] = {}
    for entry in filter(None, os.environ.get(PATH_VARIABLE, "").split(os.pathsep)):
        folder = Path(entry)
        if folder.is_dir():
            for room in sorted(folder.iterdir()):
                if (room / "cloud.py").is_file() and room.name not in TARGETS:
                    found.setdefault(room.name, room)
    return found


def terraform_targets() -> tuple[str, ...]:
    """Every room provisioned with Terraform (`has_module`): the shipped clouds, then those on
    TRAINKIT_CLOUD_PATH. What prices, `check` and `setup` serve."""
    return TERRAFORM_TARGETS + tuple(n for n in _extra_rooms() if get(n).has_module)


def scheduler_targets(scheduler: str) -> tuple[str, ...]:
    """The targets trainkit may install `scheduler` on (Cloud.schedulers), in targets() order."""
    return tuple(t for t in targets() if scheduler in get(t).schedulers)


def targets() -> tuple[str, ...]:
    """Every value `cloud:` may take: the Terraform clouds, the other rooms on TRAINKIT_CLOUD_PATH,
    then `hosts`, `slurm` and `local`."""
    return TERRAFORM_TARGETS + tuple(_extra_rooms()) + OTHER_TARGETS


def get(name: str) -> Cloud:
    """The room of target `name`. KeyError when trainkit has no such target."""
    if name in TARGETS:
        return _shipped(name)
    extra = _extra_rooms()
    if name in extra:
        return _external(name, str(extra[name]))
    raise KeyError(name)


def all_clouds() -> list[Cloud]:
    """Every room, in targets() order (filter on a capability, e.g. `has_module`, for the clouds)."""
    return [get(n) for n in targets()]


@lru_cache(maxsize=None)
def _shipped(name: str) -> Cloud:
    cloud = importlib.import_module(f"trainkit.clouds.{name}").CLOUD
    return _with_files(cloud, regions=PACKAGE / "data" / f"{name}-regions.yaml",
                       catalog=PACKAGE.parent / "catalog" / f"{name}.yaml",
                       template=resources.data_root() / "templates" / "terraform" / f"provider-{name}.tf.j2",
                       module=resources.data_root() / "terraform" / "modules" / name)


@lru_cache(maxsize=None)
def _external(name: str, folder: str) -> Cloud:
    root = Path(folder)
    spec = importlib.util.spec_from_file_location(f"trainkit_cloud_{name}", root / "cloud.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    try:  # the user's code: any failure is named with its file, not an internal error
        spec.loader.exec_module(module)
        cloud = module.CLOUD
        if not isinstance(cloud, Cloud):
            raise TypeError(f"CLOUD is a {type(cloud).__name__}, not a trainkit.clouds.Cloud")
    except Exception as err:
        raise InputError(f"{root / 'cloud.py'} (a room on {PATH_VARIABLE}) cannot be loaded: "
                         f"{type(err).__name__}: {err}",
                         fix=f"fix the file, or take its folder off {PATH_VARIABLE}") from None
    if cloud.name != name:
        raise KeyError(f"{root / 'cloud.py'} defines cloud {cloud.name!r}, expected {name!r}")
    return _with_files(cloud, regions=root / "regions.yaml", catalog=root / "catalog.yaml",
                       template=root / "provider.tf.j2", module=root / "module")


def _with_files(cloud: Cloud, regions: Path, catalog: Path, template: Path, module: Path) -> Cloud:
    """The room with its file locations and its region list (from `regions` when it exists)."""
    if not cloud.has_module:   # nothing to provision: no catalog, template or module to find
        return cloud
    changes: dict = {"catalog_file": catalog, "provider_template": template, "module_dir": module}
    if not cloud.regions and regions.is_file():
        data = yamlload.load_file(regions, "regions file")  # InputError naming the file and line
        table = data.get("regions") if isinstance(data, dict) else None
        if not isinstance(table, dict) or not all(
                isinstance(zones, (list, type(None))) and all(isinstance(z, (str, int)) for z in zones or ())
                for zones in table.values()):
            raise InputError(f"{regions}: not a regions file: give `regions:` as a mapping of region "
                             "to its list of zones", fix="write it like regions: {cn-hangzhou: "
                                                         "[cn-hangzhou-h, cn-hangzhou-i]} (source: and date: optional)")
        changes["regions"] = {str(r): tuple(str(z) for z in (zones or ())) for r, zones in table.items()}
        changes["regions_source"] = f"{data.get('source', '')} ({data.get('date', 'undated')})"
    return dataclasses.replace(cloud, **changes)
