"""The I/O edge of data staging: object stores that list objects and read byte ranges.

`open_store(url, ...)` returns a store for `s3://`, `oss://`, `cos://`, `obs://` (each cloud's
S3-compatible endpoint, from its room in trainkit/clouds) or `http(s)://` (one file; Range
requests). A store has `list() -> [Remote]` and `read(key, start, end) -> bytes` (inclusive end,
as HTTP Range). Credentials come only from the environment.
"""

from __future__ import annotations

import http.client
import os
import urllib.error
import urllib.parse
import urllib.request
from dataclasses import dataclass
from typing import Any, Callable

from trainkit import clouds
from trainkit.errors import CredentialsError, InputError, TrainkitError
from trainkit.util.dist import pip_install

HTTP_TIMEOUT_S = 60


@dataclass(frozen=True)
class Remote:
    """One object: `key` in its store, `rel` its path under the item's folder, size and ETag."""

    key: str
    rel: str
    size: int
    etag: str | None


def schemes() -> dict[str, clouds.Cloud]:
    """URL scheme -> the cloud room whose S3-compatible store it names."""
    return {c.object_store[0]: c for c in clouds.all_clouds() if c.object_store}


def env_names() -> list[str]:
    """Names (never values) of the variables the stores read: keys, regions, endpoint overrides.
    The stage role (ansible/stage.yml) passes those set on the controller to the stager's environment."""
    names = ["AWS_ENDPOINT_URL", "AWS_ENDPOINT_URL_S3", "AWS_SESSION_TOKEN"]
    for room in schemes().values():
        for cs in room.credentials[:1]:
            names += [n for alternatives in cs.variables for n in alternatives]
        names += list(room.region_variables)
    return list(dict.fromkeys(names))


def open_store(url: str, endpoint: str | None = None, region: str | None = None):
    scheme = urllib.parse.urlsplit(url).scheme
    if scheme in ("http", "https"):
        return HttpStore(url)
    rooms = schemes()
    if scheme not in rooms:
        raise InputError(f"data source {url!r}: unknown scheme {scheme!r}",
                         fix="use one of " + ", ".join(f"{x}://" for x in [*sorted(rooms), "https"]))
    return S3Store(url, rooms[scheme], endpoint, region)


def _env(names: tuple[str, ...]) -> str | None:
    return next((os.environ[n] for n in names if os.environ.get(n)), None)


class S3Store:
    """A bucket/prefix on an S3-compatible store (boto3; clients are thread-safe)."""

    def __init__(self, url: str, room: clouds.Cloud, endpoint: str | None, region: str | None) -> None:
        try:
            import boto3  # boto3 (an SDK): imported only when an S3-compatible store is used
            from botocore.config import Config
        except ImportError:
            raise TrainkitError("boto3 is not installed", fix=pip_install("train")) from None
        parts = urllib.parse.urlsplit(url)
        self.url, self.bucket, self.prefix, self.room = url, parts.netloc, parts.path.lstrip("/"), room
        region = region or _env(room.region_variables)
        kwargs: dict = {}
        if room.credentials and room.credentials[0].variables and len(room.credentials[0].variables) == 2:
            key_id, secret = (_env(v) for v in room.credentials[0].variables)
            if key_id and secret:
                kwargs.update(aws_access_key_id=key_id, aws_secret_access_key=secret)
        if not endpoint and room.object_store[1]:  # None: boto3 finds the endpoint itself
            if not region:
                raise InputError(f"data source {url}: no region for the {room.title} endpoint",
                                 fix=f"set region: in the data item or {room.region_variables[0]}")
            endpoint = room.object_store[1].format(region=region)
        try:
            self.client = boto3.client("s3", endpoint_url=endpoint, region_name=region or "us-east-1",
                                       config=Config(max_pool_connections=64, retries={"max_attempts": 5}),
                                       **kwargs)
        except ValueError as err:  # botocore: "Invalid endpoint: ..."
            raise InputError(f"data source {url}: endpoint: {err}",
                             fix="give endpoint: a URL like http://127.0.0.1:9000 (or drop it)") from None

    def list(self) -> list[Remote]:
        """The object named by the URL, or every object under it as a prefix; CredentialsError
        (exit 13) naming the variables to set when the environment holds no credentials."""
        from botocore.exceptions import (
            NoCredentialsError,  # botocore (an SDK): imported only when an S3-compatible store is used
        )

        try:
            return self._botocore(self._list)
        except NoCredentialsError:
            names = [" / ".join(v) for cs in self.room.credentials[:1] for v in cs.variables]
            raise CredentialsError(f"data source {self.url}: no {self.room.title} credentials in the "
                             "environment", fix=f"set {' and '.join(names) or 'the access keys'} "
                                                "(credentials come only from the environment)") from None

    def _list(self) -> list[Remote]:
        from botocore.exceptions import (
            ClientError,  # botocore (an SDK): imported only when an S3-compatible store is used
        )

        if self.prefix and not self.prefix.endswith("/"):
            try:
                head = self.client.head_object(Bucket=self.bucket, Key=self.prefix)
                return [Remote(self.prefix, self.prefix.rsplit("/", 1)[-1], head["ContentLength"],
                               head.get("ETag", "").strip('"') or None)]
            except ClientError as err:
                if err.response.get("Error", {}).get("Code") not in ("404", "NoSuchKey", "NotFound"):
                    raise TrainkitError(f"{self.url}: {err}") from None
        prefix = self.prefix.rstrip("/") + "/" if self.prefix else ""
        found = []
        try:
            for page in self.client.get_paginator("list_objects_v2").paginate(Bucket=self.bucket,
                                                                              Prefix=prefix):
                for o in page.get("Contents", []):
                    if not o["Key"].endswith("/"):
                        found.append(Remote(o["Key"], o["Key"][len(prefix):], o["Size"],
                                            o.get("ETag", "").strip('"') or None))
        except ClientError as err:
            raise TrainkitError(f"{self.url}: {err}", fix="check the bucket name and the keys in "
                                                         "the environment") from None
        if not found:
            raise InputError(f"data source {self.url}: no such object or prefix")
        return found

    def read(self, key: str, start: int, end: int) -> bytes:
        def get() -> bytes:
            resp = self.client.get_object(Bucket=self.bucket, Key=key, Range=f"bytes={start}-{end}")
            return resp["Body"].read()
        return self._botocore(get)

    def _botocore(self, call: Callable[[], Any]) -> Any:
        """The one boundary to botocore: its errors (endpoint refused, bad parameters, a reply cut
        short) become a TrainkitError naming the data source; missing credentials pass through."""
        from botocore.exceptions import (  # botocore (an SDK): imported only when a store is used
            BotoCoreError,
            ClientError,
            NoCredentialsError,
        )

        try:
            return call()
        except NoCredentialsError:
            raise
        except (BotoCoreError, ClientError) as err:
            raise TrainkitError(f"data source {self.url}: {err}",
                                fix="check the URL, endpoint and region, that the store is reachable "
                                    "from here, and the keys in the environment") from None


class HttpStore:
    """One file over HTTP(S) with Range requests."""

    def __init__(self, url: str) -> None:
        self.url = url

    def list(self) -> list[Remote]:
        try:
            req = urllib.request.Request(self.url, method="HEAD")
            with urllib.request.urlopen(req, timeout=HTTP_TIMEOUT_S) as resp:
                length = resp.headers.get("Content-Length")
                etag = (resp.headers.get("ETag") or "").strip('"') or None
        except _HTTP_ERRORS as err:
            raise TrainkitError(f"{self.url}: {err}", fix="check the URL is reachable from the node") from None
        size = content_length(self.url, length)
        name = urllib.parse.urlsplit(self.url).path.rsplit("/", 1)[-1] or "download"
        return [Remote(self.url, name, size, etag)]

    def read(self, key: str, start: int, end: int) -> bytes:
        try:
            req = urllib.request.Request(key, headers={"Range": f"bytes={start}-{end}"})
            with urllib.request.urlopen(req, timeout=HTTP_TIMEOUT_S) as resp:
                body = resp.read()
                status = resp.status
        except _HTTP_ERRORS as err:
            raise TrainkitError(f"{key}: bytes {start}-{end}: {err}",
                                fix="run stage again (finished ranges are kept); check the URL is "
                                    "reachable from the node") from None
        if status != 206 and (start, end + 1) != (0, len(body)):
            raise TrainkitError(f"{key}: the server ignored the Range request (status {status})")
        return body


# The one boundary to urllib/http.client: a refused or reset connection, a bad status line, a
# reply cut short, a URL http.client will not send.
_HTTP_ERRORS = (urllib.error.URLError, http.client.HTTPException, OSError, ValueError)
# The largest object trainkit stages (16 TiB: the data disk's own limit on most clouds is lower).
MAX_OBJECT_BYTES = 16 * 2**40


def content_length(url: str, value: str | None) -> int:
    """The size a server announced, checked: present, a decimal number, at most MAX_OBJECT_BYTES."""
    if value is None:
        raise TrainkitError(f"{url}: the server sent no Content-Length, so the download cannot be "
                            "split into ranges or verified", fix="serve the file with a Content-Length "
                                                                 "(a static file server does), or use a store URL")
    text = value.strip()
    if not text.isdigit() or not text.isascii() or int(text) > MAX_OBJECT_BYTES:
        raise TrainkitError(f"{url}: the server sent Content-Length {value[:40]!r}, which is not a size "
                            f"from 0 to {MAX_OBJECT_BYTES} bytes", fix="check the URL names the file you mean")
    return int(text)
