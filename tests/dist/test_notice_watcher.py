"""The spot-notice watcher for real: the node supervisor (trainkit/node/supervise.py) polls a local
HTTP server on 127.0.0.1 playing the cloud's metadata service as strictly as the real one (session
tokens required, as the aws and alicloud modules configure it: 404 = no notice, then 200 with a
termination time), sends SIGTERM to the training job (the real engine, one process on CPU), which
writes its checkpoint and exits 75; the supervisor records the notice and the state `preempted`.
"""

from __future__ import annotations

import json
import os
import secrets
import subprocess
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

from trainkit import clouds
from trainkit.errors import PREEMPTED
from trainkit.node import supervise

REPO = Path(__file__).resolve().parents[2]
SUPERVISOR = REPO / "trainkit" / "node" / "supervise.py"
NOTICE_PATH = "/latest/meta-data/spot/instance-action"
AWS = clouds.get("aws").spot_notice_token
ALI = clouds.get("alicloud").spot_notice_token


class Metadata(BaseHTTPRequestHandler):
    """A metadata service with session tokens required (http_tokens = "required"), as documented:

    - AWS EC2 user guide, "Use the Instance Metadata Service to access instance metadata"
      (IMDSv2): `PUT /latest/api/token` with `X-aws-ec2-metadata-token-ttl-seconds` (1 to 21600)
      returns a token; every GET must carry it in `X-aws-ec2-metadata-token`. Its "Possible IMDS
      responses": 400 (Missing or Invalid Parameters: the PUT request is not valid, e.g. no or a bad
      TTL), 401 (Unauthorized: the GET request uses an invalid token: none, unknown or expired),
      403 (Forbidden: not allowed, or the IMDS is turned off), 404 (Not Found).
    - Alibaba ECS docs, "Instance metadata", security hardening mode: the same exchange at
      100.100.100.200 with `X-aliyun-ecs-metadata-token-ttl-seconds` (1 to 21600) and
      `X-aliyun-ecs-metadata-token`; a mode set to required refuses normal (tokenless) access.

    `server.headers_` picks the cloud's header names; `server.notice` (None: 404) is the body of
    NOTICE_PATH; `server.off` answers 403 to everything (IMDS turned off)."""

    def do_PUT(self):  # noqa: N802 - http.server's name
        ttl_header, _ = self.server.headers_
        if self.server.off:
            return self._send(403)
        if self.path != "/latest/api/token":
            return self._send(403)
        ttl = self.headers.get(ttl_header, "")
        if not ttl.isdigit() or not 1 <= int(ttl) <= 21600:
            return self._send(400)
        token = secrets.token_urlsafe(24)
        self.server.tokens[token] = time.monotonic() + int(ttl)
        self.server.puts += 1
        self._send(200, token)

    def do_GET(self):  # noqa: N802 - http.server's name
        _, token_header = self.server.headers_
        if self.server.off:
            return self._send(403)
        if self.server.tokens.get(self.headers.get(token_header, ""), 0) <= time.monotonic():
            self.server.unauthorized += 1
            return self._send(401)
        body = self.server.notice if self.path == NOTICE_PATH else None
        self._send(200 if body else 404, body)

    def _send(self, code: int, body: str | None = None):
        self.send_response(code)
        self.send_header("Content-Length", str(len(body.encode()) if body else 0))
        self.end_headers()
        if body:
            self.wfile.write(body.encode())

    def log_message(self, *args):  # keep the test output quiet
        pass


def _server(token=AWS):
    server = ThreadingHTTPServer(("127.0.0.1", 0), Metadata)
    server.notice, server.off, server.tokens, server.puts, server.unauthorized = None, False, {}, 0, 0
    server.headers_ = (token.ttl_header, token.token_header)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return server


def _notices(server, token=AWS, ttl_s: int = supervise.TOKEN_TTL_S):
    base = f"http://127.0.0.1:{server.server_port}"
    return supervise.Notices(base + NOTICE_PATH, base + "/latest/api/token", token.ttl_header,
                             token.token_header, ttl_s)


def test_the_rooms_that_require_tokens_name_their_token_endpoint_on_the_notice_host():
    for name in ("aws", "alicloud"):
        room = clouds.get(name)
        assert room.spot_notice_token.url.split("/latest/")[0] == room.spot_notice_url.split("/latest/")[0]
    assert clouds.get("tencentcloud").spot_notice_token is None
    assert clouds.get("huaweicloud").spot_notice_url is None


def test_a_plain_get_against_required_tokens_is_401_and_said_loudly_once():
    """Before: a 401 read as 'no notice', silently, for the whole run."""
    server = _server()
    try:
        plain = supervise.Notices(f"http://127.0.0.1:{server.server_port}{NOTICE_PATH}")
        server.notice = '{"action": "terminate", "time": "2026-11-30T20:00:00Z"}'
        assert plain.fetch() is None and plain.fetch() is None
        [(kind, text)] = plain.take_errors()
        assert kind == "get-401" and "401" in text and "spot_notice_token" in text
        assert plain.take_errors() == []   # once per kind
    finally:
        server.shutdown()


@pytest.mark.parametrize("token", [AWS, ALI], ids=["aws", "alicloud"])
def test_the_notice_is_read_with_a_session_token(token):
    server = _server(token)
    try:
        notices = _notices(server, token)
        assert notices.fetch() is None            # 404: no notice
        server.notice = '{"action": "terminate", "time": "2026-11-30T20:00:00Z"}'
        assert notices.fetch() == server.notice
        assert server.puts == 1 and server.unauthorized == 0 and notices.take_errors() == []
    finally:
        server.shutdown()
    assert _notices(server, token).fetch() is None   # nothing listening: no notice, no exception


def test_the_token_is_renewed_before_its_ttl_ends_and_after_a_401():
    server = _server()
    try:
        notices = _notices(server, ttl_s=2)
        t_end = time.monotonic() + 4.5
        while time.monotonic() < t_end:
            assert notices.fetch() is None
            time.sleep(0.2)
        assert server.puts >= 3 and server.unauthorized == 0   # renewed ahead of expiry, never refused
        server.tokens.clear()                                  # the service forgot it (a reboot)
        server.notice = "terminate"
        assert notices.fetch() == "terminate" and server.unauthorized == 1
        assert notices.take_errors() == []
    finally:
        server.shutdown()


@pytest.mark.parametrize("ttl_s, off, kind", [(0, False, "token-400"), (21601, False, "token-400"),
                                             (60, True, "token-403")])
def test_a_refused_token_or_a_service_turned_off_is_said_once(ttl_s, off, kind):
    server = _server()
    server.off = off
    try:
        notices = _notices(server, ttl_s=ttl_s)
        assert notices.fetch() is None and notices.fetch() is None
        [(got, text)] = notices.take_errors()
        assert got == kind and kind.split("-")[1] in text
    finally:
        server.shutdown()


def test_notice_sends_sigterm_job_checkpoints_and_exits_75(tmp_path):
    server = _server()
    url = f"http://127.0.0.1:{server.server_port}{NOTICE_PATH}"
    state_file, run_dir, ckpt_dir = tmp_path / "state.json", tmp_path / "run", tmp_path / "ckpt"
    job = [sys.executable, "-m", "trainkit", "run", str(REPO / "examples/train/digits.yaml"), "epochs=200",
           "workers=0", "export.onnx=false", "plot=false", "tensorboard=false", "checkpoint.interval=null",
           f"run_dir={run_dir}", f"checkpoint.dir={ckpt_dir}"]
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    token = f"http://127.0.0.1:{server.server_port}/latest/api/token"
    proc = subprocess.Popen([sys.executable, str(SUPERVISOR), str(state_file), "--notice-url", url,
                             "--notice-poll", "0.2", "--notice-token-url", token, "--notice-ttl-header",
                             AWS.ttl_header, "--notice-token-header", AWS.token_header, "--", *job],
                            env=env, cwd=REPO)
    try:
        _wait(lambda: _steps(run_dir) >= 20, proc)
        assert json.loads(state_file.read_text())["status"] == "running"
        server.notice = '{"action": "terminate", "time": "2026-11-30T20:02:00Z"}'
        assert proc.wait(timeout=120) == PREEMPTED
    finally:
        proc.kill()
        server.shutdown()
    state = json.loads(state_file.read_text())
    assert state["status"] == "preempted" and state["exit_code"] == PREEMPTED
    assert "terminate" in state["notice"]["body"]
    summary = json.loads((run_dir / "summary.json").read_text())
    assert summary["status"] == "preempted"
    assert (ckpt_dir / f"step-{summary['steps']:08d}").is_dir()     # the checkpoint it wrote on SIGTERM
    events = [json.loads(x)["event"] for x in (tmp_path / "state.events.jsonl").read_text().splitlines()]
    assert events == ["started", "notice", "exited"]
    assert server.unauthorized == 0 and "notice_error" not in state


def _steps(run_dir: Path) -> int:
    try:
        recs = [json.loads(x) for x in (run_dir / "metrics.jsonl").read_text().splitlines() if x.strip()]
    except (OSError, ValueError):
        return 0
    return max([r.get("step", 0) for r in recs if r.get("kind") == "step"], default=0)


def _wait(cond, proc, timeout_s: float = 120) -> None:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        assert proc.poll() is None, "the job ended before the notice"
        if cond():
            return
        time.sleep(0.2)
    raise AssertionError("the job never got going")
