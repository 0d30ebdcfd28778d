"""A fault proxy in front of the moto server: answers the way AWS answers under load.

Not a test module: imported by the AWS lifecycle tests and tests/conftest.py's `fault_proxy`
fixture. It listens on 127.0.0.1, forwards every request to the moto server unchanged and, where
told to, answers instead of it (or after it) with what AWS documents:

- Throttling. EC2 throttles API requests per account and Region with a token bucket; over the
  limit a request fails with the error code `RequestLimitExceeded`, HTTP 503, and callers must
  retry with exponential backoff ("Request throttling for the Amazon EC2 API",
  https://docs.aws.amazon.com/ec2/latest/devguide/ec2-api-throttling.html; the 503 status and the
  code are in "Error codes for the Amazon EC2 API",
  https://docs.aws.amazon.com/AWSEC2/latest/APIReference/errors-overview.html). `throttle` is the
  fraction of EC2 Query-API requests refused that way, drawn from a seeded generator (the same
  seed and request order give the same faults).
- Dropped connections. A request may end with the connection closed and no answer at all; the
  SDKs retry it as a transient error ("Retry behavior", AWS SDKs and Tools reference guide).
  `drop` is the fraction closed before forwarding (moto never sees them).
- Capacity. `RunInstances` for a type/zone AWS has no capacity for fails with
  `InsufficientInstanceCapacity` ("We currently do not have sufficient <type> capacity in the
  Availability Zone you requested (<zone>)... You can currently get <type> capacity by not
  specifying an Availability Zone in your request or choosing <zones>."; the error-codes page
  above lists it among the server errors, HTTP 500). `no_capacity` holds (zone, type) pairs, either
  part "*" for any. The zone is the form body's `Placement.AvailabilityZone`, else the zone of
  the `SubnetId` (asked of moto with DescribeSubnets). `no_spot_capacity` refuses only spot
  requests (`InstanceMarketOptions.MarketType=spot`) the same way, with the message EC2 gives a
  spot launch it cannot fill, "There is no Spot capacity available that matches your request."
  (same code; "Spot Instance request status", Amazon EC2 user guide, `capacity-not-available`).
- Lost responses. "Operations might also time out or encounter other server issues before they
  complete, even though the request has already returned a result... if the original request and
  the subsequent retries are successful, the operation is completed multiple times. This means
  that you might create more resources than you intended" ("Ensuring idempotency in Amazon EC2 API
  requests", https://docs.aws.amazon.com/ec2/latest/devguide/ec2-api-idempotency.html).
  `lose[Action] = n` forwards the next n requests of that action to moto (which performs them) and
  then closes the connection without the answer.
- Refusals. `refuse[Action] = (status, code, message)` answers every request of that action with
  that EC2 error, e.g. (403, "UnauthorizedOperation", ...) for an action an IAM policy denies
  ("Error codes for the Amazon EC2 API": UnauthorizedOperation, "You are not authorized to
  perform this operation").

Non-Query requests (EFS's REST API, S3, the tagging API's JSON) are forwarded untouched except
for drops. `seen` records every EC2 action forwarded or answered, `faults` each fault injected.
"""

from __future__ import annotations

import http.client
import random
import re
import threading
from collections import Counter
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import parse_qs, urlparse

THROTTLED = (503, "RequestLimitExceeded", "Request limit exceeded.")
SPOT_NO_CAPACITY = "There is no Spot capacity available that matches your request."
_HOP = {"connection", "keep-alive", "transfer-encoding", "content-length", "proxy-connection"}


@dataclass
class Faults:
    """What the proxy does to the traffic; change the fields between steps of a test."""

    throttle: float = 0.0                       # fraction of EC2 Query requests answered 503
    drop: float = 0.0                           # fraction of all requests closed unanswered
    no_capacity: set[tuple[str, str]] = field(default_factory=set)   # (zone, type), "*" = any
    no_spot_capacity: set[tuple[str, str]] = field(default_factory=set)  # the same, spot requests only
    lose: dict[str, int] = field(default_factory=dict)              # Action -> responses to lose
    refuse: dict[str, tuple[int, str, str]] = field(default_factory=dict)  # Action -> (status, code, text)
    seed: int = 20


class FaultProxy:
    """`with FaultProxy(moto_url) as proxy:` proxy.url is the endpoint to give trainkit."""

    def __init__(self, upstream: str, faults: Faults | None = None):
        self.upstream = urlparse(upstream)
        self.faults = faults or Faults()
        self.random = random.Random(self.faults.seed)
        self.lock = threading.Lock()
        self.seen: Counter = Counter()
        self.faults_done: list[tuple[str, str]] = []
        self.server = _QuietServer(("127.0.0.1", 0), _handler(self))
        self.server.daemon_threads = True
        self.url = f"http://127.0.0.1:{self.server.server_port}"

    def reset(self, faults: Faults | None = None) -> None:
        with self.lock:
            self.faults = faults or Faults()
            self.random = random.Random(self.faults.seed)
            self.seen.clear()
            self.faults_done.clear()

    def __enter__(self) -> "FaultProxy":
        threading.Thread(target=self.server.serve_forever, daemon=True).start()
        return self

    def __exit__(self, *exc) -> None:
        self.server.shutdown()
        self.server.server_close()

    # ------------------------------------------------------------ decisions (under the lock)

    def decide(self, action: str | None, form: dict[str, str], auth: str = "") -> str | None:
        """'drop', 'throttle', 'capacity:<zone>', 'spot-capacity:<zone>', 'refuse', 'lose' or None
        (forward and answer)."""
        with self.lock:
            f = self.faults
            if action:
                self.seen[action] += 1
            if f.drop and self.random.random() < f.drop:
                return self._note("drop", action)
            if action and f.throttle and self.random.random() < f.throttle:
                return self._note("throttle", action)
            spot = form.get("InstanceMarketOptions.MarketType") == "spot"
            if action == "RunInstances" and (f.no_capacity or (spot and f.no_spot_capacity)):
                zone = form.get("Placement.AvailabilityZone") or self._subnet_zone(form.get("SubnetId"), auth)
                kind = form.get("InstanceType", "")
                for refused, what in ((f.no_capacity, "capacity"), (f.no_spot_capacity if spot else set(), "spot-capacity")):
                    if any(z in ("*", zone) and t in ("*", kind) for z, t in refused):
                        return self._note(f"{what}:{zone}", action)
            if action in f.refuse:
                return self._note("refuse", action)
            if action and f.lose.get(action, 0) > 0:
                f.lose[action] -= 1
                return self._note("lose", action)
        return None

    def _note(self, what: str, action: str | None) -> str:
        self.faults_done.append((what, action or ""))
        return what

    def _subnet_zone(self, subnet: str | None, auth: str) -> str:
        """The subnet's zone, asked of moto (which picks the service from the signature's scope:
        the caller's Authorization header is reused)."""
        if not subnet:
            return ""
        body = f"Action=DescribeSubnets&Version=2016-11-15&SubnetId.1={subnet}".encode()
        _, _, data = self.forward("POST", "/", {"Content-Type": "application/x-www-form-urlencoded",
                                                "Authorization": auth}, body)
        found = re.search(rb"<availabilityZone>([^<]+)</availabilityZone>", data)
        return found.group(1).decode() if found else ""

    def forward(self, method: str, path: str, headers: dict, body: bytes) -> tuple[int, list, bytes]:
        conn = http.client.HTTPConnection(self.upstream.hostname, self.upstream.port, timeout=120)
        try:
            conn.request(method, path, body=body, headers=headers)
            resp = conn.getresponse()
            return resp.status, resp.getheaders(), resp.read()
        finally:
            conn.close()


class _QuietServer(ThreadingHTTPServer):
    def handle_error(self, request, client_address):  # a client that hung up (Ctrl-C'd terraform)
        pass


def ec2_error(status: int, code: str, message: str) -> tuple[int, bytes]:
    """An EC2 Query-API error body (the XML shape in "Error codes for the Amazon EC2 API")."""
    body = (f'<?xml version="1.0" encoding="UTF-8"?>\n<Response><Errors><Error><Code>{code}</Code>'
            f"<Message>{message}</Message></Error></Errors><RequestID>fault-proxy</RequestID></Response>")
    return status, body.encode()


def capacity_message(kind: str, zone: str) -> str:
    return (f"We currently do not have sufficient {kind} capacity in the Availability Zone you requested "
            f"({zone}). Our system will be working on provisioning additional capacity. You can currently "
            "get capacity by not specifying an Availability Zone in your request or choosing another zone.")


def _handler(proxy: FaultProxy):
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def _serve(self):
            body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
            form = {}
            if "x-www-form-urlencoded" in (self.headers.get("Content-Type") or ""):
                form = {k: v[0] for k, v in parse_qs(body.decode(errors="replace")).items()}
            action = form.get("Action")
            verdict = proxy.decide(action, form, self.headers.get("Authorization") or "")
            if verdict == "drop":
                return self._close()
            if verdict == "throttle":
                return self._answer(*ec2_error(*THROTTLED))
            if verdict and verdict.startswith("capacity:"):
                zone = verdict.partition(":")[2]
                return self._answer(*ec2_error(500, "InsufficientInstanceCapacity",
                                               capacity_message(form.get("InstanceType", ""), zone)))
            if verdict and verdict.startswith("spot-capacity:"):
                return self._answer(*ec2_error(500, "InsufficientInstanceCapacity", SPOT_NO_CAPACITY))
            if verdict == "refuse":
                return self._answer(*ec2_error(*proxy.faults.refuse[action]))
            headers = {k: v for k, v in self.headers.items() if k.lower() not in _HOP}
            status, resp_headers, data = proxy.forward(self.command, self.path, headers, body)
            if verdict == "lose":  # moto acted; the caller never hears of it
                return self._close()
            self._answer(status, data, [(k, v) for k, v in resp_headers if k.lower() not in _HOP])

        def _answer(self, status: int, data: bytes, headers=(("Content-Type", "text/xml"),)):
            self.send_response(status)
            for k, v in headers:
                self.send_header(k, v)
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def _close(self):
            self.close_connection = True
            self.connection.shutdown(2)

        do_GET = do_POST = do_PUT = do_DELETE = do_HEAD = _serve

        def log_message(self, *args):
            pass

    return Handler
