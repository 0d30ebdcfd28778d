"""GPU instance catalog: one YAML file per cloud (specs, prices with source and date, defaults).

Pure data in, data out. `load_catalog(room)` reads the file the cloud's room names (the shipped
clouds' `<cloud>.yaml` next to this file);
`with_prices(catalog, path)` overlays a user's own price file; `matching()` filters and sorts
cheapest first; `select()` picks the cheapest feasible type. Unknown prices stay `None` and
sort after every known price; they are never estimated.
"""

from __future__ import annotations

import datetime as dt
import difflib
import os
import re
from dataclasses import dataclass, field, replace
from functools import lru_cache
from pathlib import Path
from typing import Any

import yaml

from trainkit import clouds
from trainkit.errors import InputError
from trainkit.util import yamlload

CATALOG_DIR = Path(__file__).parent
PRICE_KEYS = ("on_demand", "spot", "subscription_month")


@dataclass(frozen=True)
class InstanceType:
    type: str
    gpu: str
    gpus: int | None = None
    gpu_memory_gb: int | None = None
    vcpus: int | None = None
    ram_gb: float | None = None
    network_gbps: float | None = None
    on_demand: float | None = None      # per node-hour, catalog currency
    spot: float | None = None
    subscription_month: float | None = None  # per node-month (monthly subscription), where priced
    accelerator: str = "nvidia"          # nvidia | ascend
    arch: str = "x86_64"

    def price(self, spot: bool) -> float | None:
        """Hourly price to plan with: spot price when asked and known, else on-demand."""
        return self.spot if spot and self.spot is not None else self.on_demand


@dataclass(frozen=True)
class Catalog:
    cloud: str
    currency: str
    instances: tuple[InstanceType, ...]
    defaults: dict[str, Any] = field(default_factory=dict)
    choices: dict[str, list] = field(default_factory=dict)
    storage_prices: dict[str, Any] = field(default_factory=dict)
    price_source: str | None = None
    price_date: str | None = None
    price_region: str | None = None
    # CPU-only types a controller may run on (the file's `controllers:`); never nodes' types.
    controllers: tuple[InstanceType, ...] = ()

    def get(self, type_name: str) -> InstanceType:
        """The named type; InputError with the closest names when it is not in the catalog."""
        for inst in self.instances:
            if inst.type == type_name:
                return inst
        close = difflib.get_close_matches(type_name, [i.type for i in self.instances], n=3)
        hint = f"did you mean {', '.join(close)}?" if close else f"see `trainkit catalog --cloud {self.cloud}`"
        raise InputError(f"instance.type: {type_name!r} is not a known {self.cloud} GPU type", fix=hint)


def catalog_rooms() -> list[clouds.Cloud]:
    """Every room with a catalog file, sorted by name."""
    return sorted((c for c in clouds.all_clouds() if c.catalog_file and c.catalog_file.is_file()),
                  key=lambda c: c.name)


def catalog_clouds() -> list[str]:
    """The names of catalog_rooms()."""
    return [c.name for c in catalog_rooms()]


def load_catalog(room: clouds.Cloud) -> Catalog:
    """Read the catalog of the cloud `room` (the file the room names); InputError for a room with none."""
    path = room.catalog_file or CATALOG_DIR / f"{room.name}.yaml"
    if not path.is_file():
        raise InputError(f"no instance catalog for cloud {room.name!r}",
                         fix=f"clouds with a catalog: {', '.join(catalog_clouds())}")
    return _read(str(path), path.stat().st_mtime_ns)


@lru_cache(maxsize=32)
def _read(path: str, mtime_ns: int) -> Catalog:
    """Parse a catalog file once per version of it (Catalog is immutable, so sharing is safe)."""
    data = yaml.load(Path(path).read_text(), Loader=getattr(yaml, "CSafeLoader", yaml.SafeLoader))
    instances = tuple(InstanceType(**row) for row in data["instances"])
    controllers = tuple(InstanceType(**row) for row in data.get("controllers") or ())
    return Catalog(cloud=data["cloud"], currency=data["currency"], instances=instances, controllers=controllers,
                   defaults=data.get("defaults", {}), choices=data.get("choices", {}),
                   storage_prices=data.get("storage_prices") or {},
                   price_source=data.get("price_source"), price_date=data.get("price_date"),
                   price_region=data.get("price_region"))


def with_prices(catalog: Catalog, price_file: str | Path) -> Catalog:
    """Overlay a price file: `{currency, region, date, source, prices: {TYPE: {on_demand, spot,
    subscription_month}}}` (`prices refresh` writes this shape; a hand-written one may omit all
    but `prices`).

    Types not in the file keep their shipped prices. InputError names the file and the key.
    """
    path = Path(price_file)
    try:  # bounded, UTF-8, duplicate keys refused; a FIFO or folder is refused unread (it hung)
        data = yamlload.load_file(path, "price file")
    except OSError as err:
        raise InputError(f"{path}: cannot read price file ({err})") from None
    if not isinstance(data, dict) or not isinstance(data.get("prices"), dict):
        raise InputError(f"{path}: expected a mapping with a `prices:` mapping of TYPE -> "
                         "{on_demand, spot}")
    meta = _price_file_meta(path, data, catalog)
    known = {i.type for i in catalog.instances}
    updated = []
    for type_name, row in data["prices"].items():
        if type_name not in known:
            close = difflib.get_close_matches(str(type_name), sorted(known), n=1)
            raise InputError(f"{path}: prices.{type_name}: not a {catalog.cloud} type in the catalog",
                             fix=f"did you mean {close[0]!r}?" if close else None)
        if not isinstance(row, dict) or set(row) - set(PRICE_KEYS):
            raise InputError(f"{path}: prices.{type_name}: give {', '.join(PRICE_KEYS)} numbers")
        for key, value in row.items():
            if value is not None and (isinstance(value, bool) or not isinstance(value, (int, float))
                                      or not 0 <= value <= MAX_PRICE):  # also refuses nan (no order)
                shown = repr(value) if len(repr(value)) <= 40 else f"{repr(value)[:20]}... ({len(repr(value))} digits)"
                raise InputError(f"{path}: prices.{type_name}.{key}: must be a number from 0 to {MAX_PRICE:g}, "
                                 f"got {shown}")
    for inst in catalog.instances:
        row = data["prices"].get(inst.type)
        updated.append(replace(inst, **row) if row else inst)
    return replace(catalog, instances=tuple(updated), currency=catalog.currency,
                   price_source=meta.get("source") or str(path), price_date=meta.get("date", catalog.price_date),
                   price_region=meta.get("region", catalog.price_region))


# A price is per hour (subscription: per month); beyond this it is a typo, and a 400-digit integer
# has no float to compute with (OverflowError).
MAX_PRICE = 1e9


# ISO 4217 alphabetic currency codes are three capital letters (USD, CNY, EUR).
_CURRENCY = re.compile(r"[A-Z]{3}")


def _price_file_meta(path: Path, data: dict, catalog: Catalog) -> dict[str, str]:
    """The price file's currency, date, source and region, checked like a spec's fields: text
    (an unquoted YAML date is read as a date and written back as its ISO text), the currency an
    ISO 4217 code and the catalog's own (one currency per file; prices are never relabelled)."""
    meta: dict[str, str] = {}
    for key in ("currency", "date", "source", "region"):
        value = data.get(key)
        if value is None:
            continue
        if isinstance(value, (dt.date, dt.datetime)):
            value = value.isoformat()
        if not isinstance(value, str) or (key == "currency" and not _CURRENCY.fullmatch(value)):
            want = "an ISO 4217 code such as USD or CNY" if key == "currency" else "text"
            raise InputError(f"{path}: {key}: must be {want}, got {value!r}",
                             fix=f"write it like {key}: {catalog.currency if key == 'currency' else repr('...')}")
        meta[key] = value
    currency = meta.get("currency", catalog.currency)
    if currency != catalog.currency:
        raise InputError(f"{path}: currency: {currency}, but the {catalog.cloud} catalog's prices are in "
                         f"{catalog.currency}; one file holds one currency and never relabels the catalog's",
                         fix=f"give the prices in {catalog.currency} (currency: {catalog.currency})")
    return meta


def prices_dir() -> Path:
    """Where `trainkit prices refresh` writes: $TRAINKIT_PRICES_DIR, else ~/.cache/trainkit/prices."""
    env = os.environ.get("TRAINKIT_PRICES_DIR")
    base = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "trainkit" / "prices"
    return Path(env) if env else base


def refreshed_price_file(cloud: str, region: str | None) -> Path | None:
    """The price file `prices refresh` wrote for this cloud and region, if any."""
    path = prices_dir() / f"{cloud}-{region}.yaml"
    return path if region and path.is_file() else None


def gpu_matches(inst: InstanceType, gpu: str | None) -> bool:
    return gpu is None or inst.gpu.lower() == gpu.lower()


def feasible(inst: InstanceType, gpu: str | None, gpus: int | None, min_mem: int | None) -> bool:
    """Does `inst` meet the requirements? Unknown sizes never meet a stated requirement."""
    if not gpu_matches(inst, gpu):
        return False
    if gpus is not None and (inst.gpus is None or inst.gpus < gpus):
        return False
    if min_mem is not None and (inst.gpu_memory_gb is None or inst.gpu_memory_gb < min_mem):
        return False
    return True


def sort_key(inst: InstanceType, spot: bool = False) -> tuple:
    """Cheapest first; unknown prices last; ties by fewer GPUs, fewer vCPUs, then name."""
    price = inst.price(spot)
    return (price is None, price or 0.0, inst.gpus or 0, inst.vcpus or 0, inst.type)


def matching(catalog: Catalog, gpu: str | None = None, gpus: int | None = None,
             min_gpu_memory_gb: int | None = None, spot: bool = False) -> list[InstanceType]:
    """All feasible types, cheapest first (see sort_key)."""
    rows = [i for i in catalog.instances if feasible(i, gpu, gpus, min_gpu_memory_gb)]
    return sorted(rows, key=lambda i: sort_key(i, spot))


def select(catalog: Catalog, gpu: str | None = None, gpus: int | None = None,
           min_gpu_memory_gb: int | None = None, spot: bool = False) -> InstanceType:
    """The cheapest feasible type. InputError naming the requirement when none fits."""
    rows = matching(catalog, gpu, gpus, min_gpu_memory_gb, spot)
    if rows:
        return rows[0]
    models = sorted({i.gpu for i in catalog.instances})
    if gpu and not any(gpu_matches(i, gpu) for i in catalog.instances):
        close = difflib.get_close_matches(gpu, models, n=1)
        raise InputError(f"instance.gpu: no {catalog.cloud} type has GPU {gpu!r}",
                         fix=f"did you mean {close[0]!r}?" if close else f"GPU models: {', '.join(models)}")
    raise InputError(f"instance: no {catalog.cloud} type has gpu={gpu or 'any'}, "
                     f"gpus_per_node>={gpus or 1}, min_gpu_memory_gb>={min_gpu_memory_gb or 0}",
                     fix=f"relax the requirements; see `trainkit catalog --cloud {catalog.cloud}`")


def controller_types(catalog: Catalog, min_vcpus: int, min_ram_gb: float) -> list[InstanceType]:
    """The catalog's CPU-only `controllers:` with at least `min_vcpus` and `min_ram_gb`, x86_64 only
    (the module boots the nodes' image on the controller), cheapest on-demand first (sort_key:
    unknown prices last, then fewer vCPUs, then the name). A controller is never spot."""
    rows = [i for i in catalog.controllers if not i.gpus and i.arch == "x86_64"
            and (i.vcpus or 0) >= min_vcpus and (i.ram_gb or 0) >= min_ram_gb]
    return sorted(rows, key=lambda i: sort_key(i, spot=False))
