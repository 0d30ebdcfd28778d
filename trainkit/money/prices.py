"""`trainkit prices refresh`: ask a cloud's price API, write a dated price file. An edge module.

The per-cloud adapter (`trainkit/clouds/prices_<cloud>.py`, imported only here) returns
`{currency, source, prices: {TYPE: {on_demand, spot}}}` for the types asked; prices are what the
API quotes with the caller's credentials, so account discounts are included. The file lands in
`catalog.prices_dir()` as `<cloud>-<region>.yaml` and `catalog`, `plan` and `cost` use it
before the shipped catalog.
"""

from __future__ import annotations

import datetime as dt
import importlib
import os
from pathlib import Path
from typing import Any

import yaml

from trainkit import clouds
from trainkit.catalog import load_catalog, prices_dir
from trainkit.clouds.credentials import describe_sets, presence
from trainkit.errors import CredentialsError, InputError
from trainkit.util.dist import pip_install
from trainkit.workspace import write_atomic


def adapter(room: clouds.Cloud):
    """The price adapter module of the cloud `room`; InputError when it has none or its SDK is missing."""
    cloud = room.name
    if not room.price_adapter:
        raise InputError(f"--cloud {cloud}: no price adapter", fix="use --prices with your own file")
    try:
        return importlib.import_module(room.price_adapter)
    except ImportError as err:
        raise InputError(f"the {room.title} price SDK is not installed ({err.name})",
                         fix=pip_install(cloud)) from None


def refresh(room: clouds.Cloud, region: str, types: list[str] | None = None, endpoint: str | None = None,
            zone: str | None = None, now: dt.datetime | None = None) -> Path:
    """Fetch prices for `types` (default: every catalog type) and write the price file; its path."""
    cloud, catalog = room.name, load_catalog(room)
    known = [i.type for i in catalog.instances]
    wanted = types or known
    unknown = sorted(set(wanted) - set(known))
    if unknown:
        raise InputError(f"--types: not {cloud} catalog types: {', '.join(unknown)}",
                         fix=f"see `trainkit catalog --cloud {cloud}`")
    require_credentials(room)
    fetched = adapter(room).fetch(region, wanted, endpoint=endpoint, zone=zone,
                                   image=catalog.defaults.get("image"))
    return write(cloud, region, fetched, now or dt.datetime.now(dt.timezone.utc))


def require_credentials(room: clouds.Cloud) -> None:
    """CredentialsError (exit 13) naming the cloud's variables when none of its credential sets is
    present (the SDKs fail later, each its own way, some with a traceback); names only, no value."""
    cloud = room.name
    if not presence(room, os.environ, Path.home())["provider"]["ok"]:
        raise CredentialsError(f"prices refresh --cloud {cloud}: no {room.title} credentials in the environment",
                               fix=f"set {describe_sets(room.credentials)}; `trainkit check SPEC` lists what is set")


def write(cloud: str, region: str, fetched: dict[str, Any], when: dt.datetime) -> Path:
    """Write `fetched` as the dated price file of cloud+region (rows with no price are dropped)."""
    rows = {t: {k: v for k, v in row.items() if v is not None}
            for t, row in sorted(fetched["prices"].items())}
    data = {"cloud": cloud, "region": region, "currency": fetched["currency"],
            "date": when.strftime("%Y-%m-%dT%H:%M:%SZ"),
            "source": f"{fetched['source']}, {region}, fetched {when:%Y-%m-%d}",
            "prices": {t: row for t, row in rows.items() if row}}
    path = prices_dir() / f"{cloud}-{region}.yaml"
    path.parent.mkdir(parents=True, exist_ok=True)
    write_atomic(path, yaml.safe_dump(data, sort_keys=False))  # a failed refresh leaves no half file
    return path
