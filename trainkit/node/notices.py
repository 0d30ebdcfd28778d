"""The spot-termination notice reader of the node's supervisor (stdlib only; copied into the run
folder beside supervise.py, which imports it).

`Notices` polls a cloud's spot-termination metadata URL; with a token URL (AWS IMDSv2, Alibaba's
security hardening mode) it first PUTs for a session token and sends it with every poll, taking
a new one before the old one's TTL ends or when a poll answers 401. A 401/403 (or a refused
token) is not "no notice": it is kept, once per kind, for the supervisor to log loudly.
"""

from __future__ import annotations

import time
import urllib.error
import urllib.request

NOTICE_TIMEOUT_S = 2
# The longest token both services issue: AWS EC2 user guide ("Use IMDSv2": TTL up to six hours)
# and Alibaba ECS "Instance metadata" (X-aliyun-ecs-metadata-token-ttl-seconds: 1 to 21600).
TOKEN_TTL_S = 21600
TOKEN_REFRESH_S = 60         # take a new token this long before the old one expires


class Notices:
    """Reads a spot-termination URL as its metadata service requires: with a session token from
    `token_url` (PUT, `ttl_header: TOKEN_TTL_S`; each GET sends `token_header`) when one is
    given, else a plain GET. `fetch()` is the notice body or None; an answer that means "not
    allowed" (401/403, a token refused) is kept, once per kind, for `take_errors()`."""

    def __init__(self, url: str, token_url: str | None = None, ttl_header: str | None = None,
                 token_header: str | None = None, ttl_s: int = TOKEN_TTL_S):
        self.url, self.token_url, self.ttl_header, self.token_header = url, token_url, ttl_header, token_header
        self.ttl_s = ttl_s
        self.token: str | None = None
        self.token_until = 0.0
        self.seen: set[str] = set()
        self.errors: list[tuple[str, str]] = []

    def fetch(self) -> str | None:
        if self.token_url and not self._token():
            return None
        status, body = self._get()
        if status == 401 and self.token_url:   # IMDSv2: "the GET request uses an invalid token"
            self.token = None
            if not self._token():
                return None
            status, body = self._get()
        if status in (401, 403):
            self._error(f"get-{status}", f"spot notices: {self.url} answered {status} "
                        f"({'with' if self.token_url else 'without'} a session token): notices "
                        "cannot be read, so a reclaim comes without warning; "
                        + ("check the metadata service is on for this instance" if self.token_url else
                           "the cloud room (trainkit/clouds/<cloud>.py) must name its spot_notice_token"))
            return None
        return body if status == 200 and body else None

    def take_errors(self) -> list[tuple[str, str]]:
        out, self.errors = self.errors, []
        return out

    def _token(self) -> bool:
        if self.token and time.monotonic() < self.token_until - min(TOKEN_REFRESH_S, self.ttl_s / 2):
            return True
        asked = time.monotonic()
        req = urllib.request.Request(self.token_url, method="PUT", headers={self.ttl_header: str(self.ttl_s)})
        try:
            with urllib.request.urlopen(req, timeout=NOTICE_TIMEOUT_S) as resp:  # noqa: S310 - metadata URL
                token = resp.read().decode(errors="replace").strip()
        except urllib.error.HTTPError as err:
            self._error(f"token-{err.code}", f"spot notices: the token endpoint {self.token_url} answered "
                        f"{err.code} to PUT with {self.ttl_header}: {self.ttl_s}; notices cannot be read")
            return False
        except (urllib.error.URLError, OSError, ValueError):
            return False   # no metadata service (yet): like an unreachable notice URL, no notice
        if not token:
            self._error("token-empty", f"spot notices: {self.token_url} gave an empty token")
            return False
        self.token, self.token_until = token, asked + self.ttl_s
        return True

    def _get(self) -> tuple[int | None, str | None]:
        headers = {self.token_header: self.token} if self.token_url and self.token else {}
        try:
            req = urllib.request.Request(self.url, headers=headers)
            with urllib.request.urlopen(req, timeout=NOTICE_TIMEOUT_S) as resp:  # noqa: S310 - metadata URL
                return resp.status, resp.read().decode(errors="replace").strip()
        except urllib.error.HTTPError as err:
            return err.code, None
        except (urllib.error.URLError, OSError, ValueError):
            return None, None

    def _error(self, kind: str, text: str) -> None:
        if kind not in self.seen:
            self.seen.add(kind)
            self.errors.append((kind, text))


def fetch_notice(url: str) -> str | None:
    """The notice body when `url` answers a plain GET with 200 and a body; None for 404 (no
    notice) or no answer. For services that need a token, use `Notices`."""
    return Notices(url).fetch()
