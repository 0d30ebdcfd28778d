"""A stand-in of the EC2 instance metadata service (IMDSv2 only) that hands out an instance
profile's role credentials. Run inside a namespace host, bound to 169.254.169.254:80:

    python imds_standin.py --role NAME --log FILE [--bind 169.254.169.254] [--port 80] [--region R]

What it models, from the EC2 user guide ("Use the Instance Metadata Service to access instance
metadata", "Use IMDSv2"; "Retrieve security credentials from instance metadata" in "IAM roles for
Amazon EC2"), with the module's `metadata_options.http_tokens = "required"`:

- PUT /latest/api/token needs X-aws-ec2-metadata-token-ttl-seconds, 1 to 21600 (6 hours): else 400;
  a PUT that carries X-Forwarded-For is refused (403): the token never leaves the instance; the
  answer carries the token and its TTL in the same header (the SDKs read it);
- every GET needs a live X-aws-ec2-metadata-token: without one, or with an unknown or expired one,
  401 (IMDSv1 requests are refused when tokens are required);
- GET /latest/meta-data/iam/security-credentials/ lists the role name; GET .../<role> returns
  {Code, LastUpdated, Type: AWS-HMAC, AccessKeyId, SecretAccessKey, Token, Expiration} (the
  documented document), with new temporary values per stand-in; another role name is 404;
- placement/region, placement/availability-zone and dynamic/instance-identity/document for SDKs
  that ask the region; anything else 404.

Every request is logged to --log as one JSON line {method, path, status}, so a test can say which
role's credentials were served, and that requests without a token were refused.
"""

from __future__ import annotations

import argparse
import json
import secrets
import time
from datetime import datetime, timedelta, timezone
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

TTL_MAX_S = 21600   # EC2 user guide, "Use IMDSv2": the token TTL is 1 second to 6 hours
CREDS = "/latest/meta-data/iam/security-credentials/"


def make_handler(role: str, region: str, log_path: str):
    tokens: dict[str, float] = {}
    now = datetime.now(timezone.utc)
    creds = {"Code": "Success", "LastUpdated": now.strftime("%Y-%m-%dT%H:%M:%SZ"), "Type": "AWS-HMAC",
             "AccessKeyId": "ASIA" + secrets.token_hex(8).upper(), "SecretAccessKey": secrets.token_urlsafe(30),
             "Token": secrets.token_urlsafe(60),
             "Expiration": (now + timedelta(hours=6)).strftime("%Y-%m-%dT%H:%M:%SZ")}
    pages = {CREDS: role, CREDS + role: json.dumps(creds),
             "/latest/meta-data/placement/region": region,
             "/latest/meta-data/placement/availability-zone": region + "a",
             "/latest/dynamic/instance-identity/document": json.dumps({"region": region})}

    class Handler(BaseHTTPRequestHandler):
        def _answer(self, status: int, body: str = "", ttl: str | None = None) -> None:
            data = body.encode()
            self.send_response(status)
            self.send_header("Content-Type", "text/plain")
            if ttl is not None:   # the token's answer says its TTL (the SDKs read it: aws-sdk-go-v2 ec2imds)
                self.send_header("X-aws-ec2-metadata-token-ttl-seconds", ttl)
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)
            with open(log_path, "a") as log:
                log.write(json.dumps({"method": self.command, "path": self.path, "status": status}) + "\n")

        def do_PUT(self):  # noqa: N802 (http.server's name)
            if self.path != "/latest/api/token":
                return self._answer(404)
            if self.headers.get("X-Forwarded-For"):
                return self._answer(403)
            ttl = self.headers.get("X-aws-ec2-metadata-token-ttl-seconds", "")
            if not ttl.isdigit() or not 1 <= int(ttl) <= TTL_MAX_S:
                return self._answer(400)
            token = secrets.token_urlsafe(40)
            tokens[token] = time.monotonic() + int(ttl)
            self._answer(200, token, ttl)

        def do_GET(self):  # noqa: N802
            token = self.headers.get("X-aws-ec2-metadata-token", "")
            if tokens.get(token, 0) < time.monotonic():
                return self._answer(401)
            page = pages.get(self.path)
            self._answer(200, page) if page is not None else self._answer(404)

        def log_message(self, *args) -> None:   # the JSON log is the record
            pass

    return Handler


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--role", required=True)
    ap.add_argument("--log", required=True)
    ap.add_argument("--bind", default="169.254.169.254")
    ap.add_argument("--port", type=int, default=80)
    ap.add_argument("--region", default="us-east-1")
    a = ap.parse_args()
    ThreadingHTTPServer((a.bind, a.port), make_handler(a.role, a.region, a.log)).serve_forever()


if __name__ == "__main__":
    main()
