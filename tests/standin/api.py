"""The three seed clouds' own APIs, answered from the stand-in cloud's store (cloud.Store): what
trainkit's sweepers (trainkit/clouds/<cloud>_sweep.py) call through the official SDKs after
`terraform destroy` and in `destroy --sweep` sees the objects terraform created through the provider
stand-ins, and a delete here is gone for terraform too.

    with running_api(store, SEED_KEYS) as url:   # http://127.0.0.1:<port>; every product's endpoint
        ...

One server for the three clouds, which it tells apart by the signature each SDK puts on a request
(api_alicloud.py: ACS3-HMAC-SHA256 or an RPC `Signature`, api_tencentcloud.py: TC3-HMAC-SHA256,
api_huaweicloud.py: SDK-HMAC-SHA256); each module answers in its cloud's shapes and error codes
(cited there). Strict as the services are:

- a request must be signed with the access key id the test set (`keys`), else the cloud's
  authentication error; the signature itself is not recomputed (the SDKs compute it, and the secret
  never reaches the stand-in);
- an action or path the module does not know gets the cloud's "no such API" error, never a default;
- the store's `throttle` fault refuses the next n calls the way the cloud throttles (Alibaba
  Throttling.User, Tencent RequestLimitExceeded, Huawei APIGW.0308 with HTTP 429); unlike the
  provider stand-in (cloud.Cloud._throttled), nothing here retries for the caller;
- deletes refuse while something depends on the object (rules_<cloud>.delete_check, and the API's
  own documented dependency errors).

Every call is logged in the store's `calls` as ["api", "<Action or METHOD path>", "<cloud>"], a
throttled one as ["throttled", "api", "<Action>"].

The placement preflight's questions (which zones offer a type, in stock or sold out) are answered
from the store's `offers` and `capacity` faults (api_offers.py).
"""

from __future__ import annotations

import contextlib
import importlib
import json
import threading
import uuid
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, Iterator
from urllib.parse import parse_qsl, urlparse

from .cloud import Store, View

CLOUDS = ("alicloud", "tencentcloud", "huaweicloud")


class ApiError(Exception):
    """A refusal in the cloud's terms: HTTP status, error code, message (each module shapes the body)."""

    def __init__(self, status: int, code: str, message: str):
        super().__init__(f"{code}: {message}")
        self.status, self.code, self.message = status, code, message


class Request:
    """One HTTP request as the modules read it: method, path, query (first value of each name),
    headers (lower-case names), the raw body, and `params`: the query and a form body together."""

    def __init__(self, method: str, target: str, headers: dict[str, str], body: bytes):
        url = urlparse(target)
        self.method, self.path, self.body = method, url.path, body
        self.query = dict(parse_qsl(url.query, keep_blank_values=True))
        self.headers = {k.lower(): v for k, v in headers.items()}
        self.params = dict(self.query)
        if "application/x-www-form-urlencoded" in self.headers.get("content-type", ""):
            self.params.update(parse_qsl(body.decode(), keep_blank_values=True))

    def json(self) -> Any:
        """The body as JSON ({} when empty); ApiError 400 when it is not JSON."""
        try:
            return json.loads(self.body) if self.body else {}
        except ValueError as err:
            raise ApiError(400, "InvalidParameter", f"the request body is not JSON: {err}") from None


class Objects:
    """The store's objects while one call holds its lock: by type and id, in one region."""

    def __init__(self, data: dict, region: str | None):
        self.data, self.region = data, region
        self.view = View(data, region)

    def of_type(self, type_name: str) -> list[dict]:
        """Attrs of every object of `type_name` in this region (all regions when it is None)."""
        return [o["attrs"] for o in self.data["objects"].values()
                if o["type"] == type_name and (self.region is None or o.get("region") == self.region)]

    def get(self, type_name: str, object_id: str | None) -> dict | None:
        obj = self.data["objects"].get(f"{type_name} {object_id}")
        if obj is None or (self.region is not None and obj.get("region") != self.region):
            return None
        return obj["attrs"]

    def region_of(self, type_name: str, object_id: str) -> str | None:
        return (self.data["objects"].get(f"{type_name} {object_id}") or {}).get("region")

    def tagged(self, types: dict[str, Any]) -> list[tuple[str, dict]]:
        """(type, attrs) of every object of `types` in this region, in creation order."""
        rows = sorted(self.data["objects"].values(), key=lambda o: o.get("seq", 0))
        return [(o["type"], o["attrs"]) for o in rows if o["type"] in types
                and (self.region is None or o.get("region") == self.region)]

    def remove(self, type_name: str, object_id: str) -> None:
        """Delete the object (gone for the provider's next read too) and log it as a delete."""
        if self.data["objects"].pop(f"{type_name} {object_id}", None) is not None:
            self.data["calls"].append(["delete", type_name, object_id])

    def where(self, type_name: str, field: str, value: Any) -> list[str]:
        """Ids of the objects of `type_name` (any region) whose attribute `field` is `value`."""
        return self.users(type_name, lambda attrs: attrs.get(field) == value)

    def users(self, type_name: str, test) -> list[str]:
        """Ids of the objects of `type_name` (any region) for which `test(attrs)` holds."""
        return [o["attrs"]["id"] for o in self.data["objects"].values() if o["type"] == type_name and test(o["attrs"])]


def _module(name: str):
    return importlib.import_module(f"{__package__}.api_{name}")


def answer(store: Store, keys: dict[str, str], req: Request) -> tuple[int, dict | None, dict[str, str]]:
    """(HTTP status, JSON body or None, extra headers) for one request: authenticated, throttled or
    carried out under the store's lock."""
    cloud = next((c for c in CLOUDS if _module(c).claims(req)), None)
    if cloud is None:
        return 400, {"message": "the stand-in API answers signed Alibaba, Tencent or Huawei calls only"}, {}
    mod = _module(cloud)
    status, body, extra = _answer(mod, cloud, store, keys, req)
    return status, body, {"Content-Type": mod.CONTENT_TYPE, **extra}


def _answer(mod, cloud: str, store: Store, keys: dict, req: Request) -> tuple[int, dict | None, dict[str, str]]:
    try:
        mod.authenticate(req, keys)
        name = mod.action(req)
        with store.edit() as data:  # an exception inside would skip the write-back: caught here
            try:
                outcome = _carry_out(mod, cloud, name, req, data)
            except ApiError as err:
                outcome = err
        if isinstance(outcome, ApiError):
            raise outcome
        return (*outcome, {})
    except ApiError as err:
        return mod.error(req, err)


def _carry_out(mod, cloud: str, name: str, req: Request, data: dict) -> tuple[int, dict | None]:
    """The call under the store's lock: refused as throttled while the fault lasts, else handled
    (a handler checks before it changes anything, so a refusal leaves the store as it was)."""
    if data["faults"].get("throttle", 0) > 0:
        data["faults"]["throttle"] -= 1
        data["calls"].append(["throttled", "api", name])
        raise mod.THROTTLED
    data["calls"].append(["api", name, cloud])
    return mod.handle(req, data)


@contextlib.contextmanager
def running_api(store: Store, keys: dict[str, str]) -> Iterator[str]:
    """Serve the three clouds' APIs from `store` on 127.0.0.1 (a free port) in a thread; yields the
    base URL (`http://127.0.0.1:<port>`, the value of every product's endpoint) and stops the server
    when the block ends. `keys`: cloud -> the access key id (secret id) requests must carry, and
    "huaweicloud-project": {project id: region} (Huawei paths name the project, which names the region)."""

    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def _serve(self) -> None:
            raw = self.rfile.read(int(self.headers.get("Content-Length") or 0))
            req = Request(self.command, self.path, dict(self.headers.items()), raw)
            status, body, extra = answer(store, keys, req)
            data = b"" if body is None else json.dumps(body).encode()
            self.send_response(status)
            for name, value in {"Content-Type": "application/json", **extra}.items():
                self.send_header(name, value)
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        do_GET = do_POST = do_DELETE = do_PUT = _serve

        def log_message(self, *args: Any) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_port}"
    finally:
        server.shutdown()
        server.server_close()
        thread.join()


def request_id() -> str:
    """A request id as the clouds return them (a UUID; each module names the field)."""
    return str(uuid.uuid4()).upper()
