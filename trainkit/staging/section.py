"""The `data:` section of a cluster spec or a train config, validated: where the data goes (each
node's disk, or the NAS once) and its sources (URL, folder name, checksum, unpack, endpoint).

`load_section(raw)` returns a frozen `DataSection` or raises InputError naming the field.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator

from trainkit.errors import InputError
from trainkit.redact import redact_url
from trainkit.staging.stores import schemes


class Source(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)
    url: str = Field(description="s3:// oss:// cos:// obs:// (bucket/key or bucket/prefix/) or https://")
    name: str | None = Field(None, pattern=r"^[A-Za-z0-9._-]+$", description="Folder under the data root.")
    sha256: str | None = Field(None, pattern=r"^[0-9a-f]{64}$", description="Expected sha256 (one object).")
    unpack: bool = Field(True, description="Unpack .tar/.tar.gz/.tgz/.zip archives after download.")
    endpoint: str | None = Field(None, description="Override the store's endpoint URL (emulators).")

    @field_validator("endpoint")
    @classmethod
    def _endpoint_url(cls, endpoint: str | None) -> str | None:
        if endpoint is None:
            return None
        scheme, _, rest = endpoint.partition("://")
        if scheme not in ("http", "https") or not rest.split("/", 1)[0] or any(c.isspace() for c in endpoint):
            raise ValueError(f"{redact_url(endpoint)!r} is not an endpoint URL; write it like "
                             "http://127.0.0.1:9000 or https://s3.example.com")
        return endpoint
    region: str | None = Field(None, description="Region for the cloud's endpoint (else from env).")

    @field_validator("name")
    @classmethod
    def _not_dots(cls, name: str | None) -> str | None:
        if name in (".", ".."):
            raise ValueError(f"{name!r} is the data root or its parent; name a folder under it")
        return name

    @field_validator("url")
    @classmethod
    def _known_scheme(cls, url: str) -> str:

        bad = sorted({c for c in url if c.isspace() or ord(c) < 32 or ord(c) == 127})
        if bad:
            shown = " ".join(repr(c) for c in bad[:4])
            raise ValueError(f"{redact_url(url)!r} contains {shown}; a URL holds no spaces or control "
                             "characters: percent-encode them (a space is %20)")
        scheme = url.partition("://")[0]
        known = [*sorted(schemes()), "https", "http"]
        if "://" not in url or scheme not in known:
            raise ValueError(f"{url!r}: use one of " + ", ".join(f"{k}://" for k in known))
        if not url.partition("://")[2].split("/", 1)[0]:
            raise ValueError(f"{url!r} names no bucket or host; write it like {scheme}://bucket/prefix/")
        if scheme not in ("http", "https") and "@" in url.partition("://")[2].split("/", 1)[0]:
            raise ValueError(f"{redact_url(url)!r} holds credentials before the bucket; object store "
                             "keys come only from the environment (see `trainkit check`)")
        return url


class DataSection(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True, allow_inf_nan=False)  # chunk_mb: .inf
    target: Literal["disk", "nas"] = "disk"
    connections: int = Field(10, ge=1, le=64)
    # 8-16 MB byte ranges: Amazon S3 "Best practices design patterns: optimizing performance".
    chunk_mb: float = Field(8, gt=0, le=1024)
    sources: list[Source] = Field(default_factory=list)

    @model_validator(mode="after")
    def _one_folder_each(self) -> "DataSection":
        """Each source unpacks into a folder of its own: two in one folder replace each other's
        files (an archive's unpack replaces the folders it holds)."""
        seen: dict[str, int] = {}
        for i, src in enumerate(self.sources):
            folder = folder_name(src)
            if folder in seen:
                raise ValueError(f"sources {seen[folder]} and {i} both go to the folder {folder!r} under the "
                                 "data root, and would replace each other's files; give each its own `name:`")
            seen[folder] = i
        return self


def folder_name(src: Source) -> str:
    """The folder under the data root that `src` lands in: its `name:`, else the URL's last part."""
    return src.name or src.url.rstrip("/").rsplit("/", 1)[-1].split("?")[0] or "data"


def load_section(raw: Any, where: str = "data") -> DataSection:
    """Validate a `data:` mapping; InputError naming the field on bad input."""
    try:
        return DataSection.model_validate(raw or {})
    except ValidationError as err:
        lines = [f"{'.'.join([where, *map(str, e['loc'])])}: {e['msg'].removeprefix('Value error, ')}"
                 for e in err.errors()]
        raise InputError("\n  ".join(lines), fix="see `trainkit docs data` for the data: section") from None
