"""The spot-notice watcher for real: the node supervisor (trainkit/node/supervise.py) polls a local
HTTP server on 127.0.0.1 playing the cloud's metadata service (404 = no notice, then 200 with a
termination time, as AWS/Alibaba/Tencent answer), sends SIGTERM to the training job (the real
engine, one process on CPU), which writes its checkpoint and exits 75; the supervisor records the
notice and the state `preempted`.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

from trainkit.errors import PREEMPTED
from trainkit.node import supervise

REPO = Path(__file__).resolve().parents[2]
SUPERVISOR = REPO / "trainkit" / "node" / "supervise.py"


class Metadata(BaseHTTPRequestHandler):
    """404 until `server.notice` is set, then 200 with a termination time (AWS instance-action shape)."""

    def do_GET(self):  # noqa: N802 - http.server's name
        body = self.server.notice
        self.send_response(200 if body else 404)
        self.end_headers()
        if body:
            self.wfile.write(body.encode())

    def log_message(self, *args):  # keep the test output quiet
        pass


def _server():
    server = ThreadingHTTPServer(("127.0.0.1", 0), Metadata)
    server.notice = None
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return server


def test_fetch_notice_is_none_for_404_and_unreachable_and_the_body_for_200():
    server = _server()
    try:
        url = f"http://127.0.0.1:{server.server_port}/latest/meta-data/spot/instance-action"
        assert supervise.fetch_notice(url) is None
        server.notice = '{"action": "terminate", "time": "2026-11-30T20:00:00Z"}'
        assert supervise.fetch_notice(url) == server.notice
    finally:
        server.shutdown()
    assert supervise.fetch_notice(url) is None   # nothing listening: no notice, no exception


def test_notice_sends_sigterm_job_checkpoints_and_exits_75(tmp_path):
    server = _server()
    url = f"http://127.0.0.1:{server.server_port}/latest/meta-data/spot/instance-action"
    state_file, run_dir, ckpt_dir = tmp_path / "state.json", tmp_path / "run", tmp_path / "ckpt"
    job = [sys.executable, "-m", "trainkit", "run", str(REPO / "examples/train/digits.yaml"), "epochs=200",
           "workers=0", "export.onnx=false", "plot=false", "tensorboard=false", "checkpoint.interval=null",
           f"run_dir={run_dir}", f"checkpoint.dir={ckpt_dir}"]
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    proc = subprocess.Popen([sys.executable, str(SUPERVISOR), str(state_file), "--notice-url", url,
                             "--notice-poll", "0.2", "--", *job], env=env, cwd=REPO)
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
