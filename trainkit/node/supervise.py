"""Node-side supervisor of one run on one node (stdlib only; copied into the run folder).

    python supervise.py STATE_FILE -- bash nodes/node-R/launch.sh

Started detached from the controller's SSH session (`setsid`, or as a transient systemd unit
where systemd is PID 1), it starts the job in its own process group and writes STATE_FILE
(JSON, replaced atomically) at each change:

    {"status": "running" | "completed" | "preempted" | "failed" | "cancelled",
     "pid", "supervisor_pid", "exit_code", "started_at", "ended_at", "host", "notice"}

and appends events to STATE_FILE's sibling `<stem>.events.jsonl`. Status rules (the
resumable-command contract, docs/runs.md): exit 0 = completed; exit 75, or the job's status file
($TRAINKIT_STATUS_FILE) saying "preempted", = preempted (checkpoint saved); a SIGTERM the
supervisor received (`trainkit cancel`) = cancelled; anything else = failed.

With --notice-url it also polls the cloud's spot-termination metadata every --notice-poll
seconds; a 200 answer with a body is a notice: the job gets SIGTERM at once so it can write its
checkpoint inside the notice window (minutes long; each cloud room cites its provider's docs).
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import socket
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request

PREEMPTED = 75       # EX_TEMPFAIL (sysexits.h): "try again later", trainkit's preempted code
NOTICE_TIMEOUT_S = 2


class Supervisor:
    def __init__(self, state_file: str, argv: list[str], status_file: str | None):
        self.state_file = state_file
        self.events_file = state_file.rsplit(".", 1)[0] + ".events.jsonl"
        self.argv = argv
        self.status_file = status_file
        self.state = {"status": "starting", "host": socket.gethostname(), "supervisor_pid": os.getpid(),
                      "pid": None, "exit_code": None, "started_at": time.time(), "ended_at": None,
                      "notice": None}
        self.proc: subprocess.Popen | None = None
        self.cancelled = False
        self.lock = threading.Lock()

    def write(self, **changes) -> None:
        with self.lock:
            self.state.update(changes)
            tmp = f"{self.state_file}.tmp"
            with open(tmp, "w") as f:
                json.dump(self.state, f)
                f.flush()
                os.fsync(f.fileno())
            os.replace(tmp, self.state_file)

    def event(self, kind: str, **data) -> None:
        with self.lock, open(self.events_file, "a") as f:
            f.write(json.dumps({"time": time.time(), "event": kind, "host": self.state["host"], **data}) + "\n")

    def signal_job(self, sig: int) -> None:
        if self.proc and self.proc.poll() is None:
            try:
                os.killpg(self.proc.pid, sig)
            except ProcessLookupError:
                pass

    def on_term(self, signum, frame) -> None:  # noqa: ARG002 - signal handler signature
        self.cancelled = True
        self.event("cancel", signal=signum)
        self.signal_job(signal.SIGTERM)

    def run(self) -> int:
        signal.signal(signal.SIGTERM, self.on_term)
        signal.signal(signal.SIGINT, self.on_term)
        self.write(status="starting")
        try:
            self.proc = subprocess.Popen(self.argv, stdin=subprocess.DEVNULL, start_new_session=True)
        except OSError as err:
            self.write(status="failed", exit_code=127, ended_at=time.time(), error=str(err))
            self.event("exited", exit_code=127, status="failed", error=str(err))
            return 127
        self.write(status="running", pid=self.proc.pid)
        self.event("started", pid=self.proc.pid)
        while True:
            try:
                rc = self.proc.wait()
                break
            except InterruptedError:  # pragma: no cover - PEP 475 retries, kept for clarity
                continue
        status = self.classify(rc)
        self.write(status=status, exit_code=rc, ended_at=time.time())
        self.event("exited", exit_code=rc, status=status)
        return rc

    def classify(self, rc: int) -> str:
        if rc == 0:
            return "completed"
        if self.cancelled:
            return "cancelled"
        if rc == PREEMPTED or self._status_file_says() == "preempted" or self.state["notice"]:
            return "preempted"
        return "failed"

    def _status_file_says(self) -> str | None:
        try:
            with open(self.status_file or "") as f:
                text = f.read().strip()
        except OSError:
            return None
        try:  # a JSON object with "status" (the engine's summary.json) or a bare word
            return str(json.loads(text).get("status"))
        except (ValueError, AttributeError):
            return text.split()[0] if text else None

    def watch(self, url: str, every_s: float) -> None:
        """Poll the spot-termination URL; on the first notice, SIGTERM the job (once)."""
        while self.proc is None or self.proc.poll() is None:
            body = fetch_notice(url)
            if body is not None:
                self.write(notice={"time": time.time(), "body": body[:500]})
                self.event("notice", url=url, body=body[:500])
                self.signal_job(signal.SIGTERM)
                return
            time.sleep(every_s)


def fetch_notice(url: str) -> str | None:
    """The notice body when `url` answers 200 with one; None for 404 (no notice) or no answer."""
    try:
        with urllib.request.urlopen(url, timeout=NOTICE_TIMEOUT_S) as resp:  # noqa: S310 - metadata URL
            body = resp.read().decode(errors="replace").strip()
            return body if resp.status == 200 and body else None
    except (urllib.error.URLError, OSError, ValueError):
        return None


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("state_file")
    parser.add_argument("--status-file", help="The job's own status file (contract: 'preempted').")
    parser.add_argument("--notice-url", help="Spot-termination metadata URL to poll.")
    parser.add_argument("--notice-poll", type=float, default=5.0, help="Seconds between polls.")
    argv = sys.argv[1:] if argv is None else argv
    cut = argv.index("--") if "--" in argv else len(argv)
    args, job = parser.parse_args(argv[:cut]), argv[cut + 1:]
    if not job:
        parser.error("give the job's command after --")
    sup = Supervisor(args.state_file, job, args.status_file)
    if args.notice_url:
        threading.Thread(target=sup.watch, args=(args.notice_url, args.notice_poll), daemon=True).start()
    return sup.run()


if __name__ == "__main__":
    sys.exit(main())
