"""Node-side supervisor of one run on one node (stdlib only; copied into the run folder).

    python supervise.py STATE_FILE -- bash nodes/node-R/launch.sh
    python supervise.py --hard-stop STATE_FILE        # SIGKILL the supervisor and its whole job

Started detached from the controller's SSH session (`setsid`, or as a transient systemd unit
where systemd is PID 1), it starts the job in its own process group and writes STATE_FILE
(JSON, replaced atomically) at each change:

    {"status": "running" | "completed" | "preempted" | "failed" | "cancelled",
     "pid", "supervisor_pid", "exit_code", "started_at", "ended_at", "host", "notice",
     "notice_error", "tree", "progress", "storage_error"}

and appends events to STATE_FILE's sibling `<stem>.events.jsonl`. Status rules (the
resumable-command contract, docs/runs.md): exit 0 = completed; exit 75, or the job's status file
($TRAINKIT_STATUS_FILE) saying "preempted", = preempted (checkpoint saved); a SIGTERM the
supervisor received = cancelled when trainkit sent it (`trainkit cancel`, the controller stopping
the survivors of a lost node: they create STATE_FILE.cancel first), else preempted (the machine
shutting down, as a reclaim without a notice does: whatever the job's exit code); a torchrun rendezvous that failed (launch.sh's
end record --exit-file says `status=rendezvous`: a peer or the head is gone) = preempted; anything
else = failed.

Progress (the watchdog's input, docs/runs.md "Hung nodes"): the job gets $TRAINKIT_PROGRESS_FILE
(STATE_FILE's sibling `<stem>.progress`), where the engine's local rank 0 rewrites `<step> <phase>`
(trainkit/train/progress.py). Every TREE_POLL_S the supervisor reads it; when the pair changes,
`progress` in the state becomes {"step", "phase", "at", "first_at", "step_s"}: `at` the time of
the change on this node's CLOCK_BOOTTIME (/proc/uptime's clock: the controller reads both in one
ssh and subtracts, never comparing two machines' clocks), `step_s` the measured seconds per step.

Storage faults: the state file is padded to STATE_BYTES, so that when a write of a new file fails
(ENOSPC, EDQUOT: a full disk) the same bytes are rewritten in place, needing no new block; when
that fails too (EROFS: the disk went read-only), the state is kept in memory and written to
memory_state_path() (/dev/shm, a tmpfs), which the controller reads in its place. Either way
`storage_error` {"errno", "path", "message"} says what happened, and an event that cannot be
appended is dropped, never fatal: the supervisor lives on to report how the job ends.

The job's processes: the supervisor is a child subreaper (prctl PR_SET_CHILD_SUBREAPER), so a
process of the job that leaves its session (setsid, as torchrun's workers do) and loses its parent
is re-parented to the supervisor, not to init: the job is every descendant of the supervisor.
`tree` in the state lists them ([pid, start time] pairs, refreshed every TREE_POLL_S) for a hard
stop after the supervisor itself was killed. When the job's main process ends, what it left
behind gets SIGTERM, then SIGKILL after LEFTOVER_GRACE_S, before the final state is written.
`--hard-stop` gathers the supervisor, every descendant and every recorded process still alive
(same pid and start time), stops them all (SIGSTOP: none can fork or be re-parented away while
it works), then SIGKILLs them, until a walk finds none.

With --notice-url it also polls the cloud's spot-termination metadata every --notice-poll
seconds; a 200 answer with a body is a notice: the job gets SIGTERM at once so it can write its
checkpoint inside the notice window (minutes long; each cloud room cites its provider's docs).
With --notice-token-url (AWS IMDSv2, Alibaba's security hardening mode) it first PUTs for a
session token from that endpoint and sends it with every poll, taking a new one before the old
one's TTL ends or when a poll answers 401. A 401/403 (or a refused token) is not "no notice": it is
logged loudly, once per kind, in the supervisor's log, the events and the state's `notice_error`.
"""

from __future__ import annotations

import argparse
import errno
import json
import os
import signal
import socket
import subprocess
import sys
import threading
import time

if __package__:   # imported (the tests, the control side)
    from trainkit.node.jobstate import (
        become_subreaper,
        boottime,
        descendants,
        hard_stop,
        kill,
        memory_state_path,
        rewrite_in_place,
        start_time,
        tree_of,
        write_state,
    )
    from trainkit.node.notices import TOKEN_TTL_S, Notices, fetch_notice
else:             # run as a script on the node: both were copied beside it (python puts this folder first)
    from jobstate import (
        become_subreaper,
        boottime,
        descendants,
        hard_stop,
        kill,
        memory_state_path,
        rewrite_in_place,
        start_time,
        tree_of,
        write_state,
    )
    from notices import TOKEN_TTL_S, Notices, fetch_notice

__all__ = ["Notices", "fetch_notice", "TOKEN_TTL_S", "Supervisor", "hard_stop", "memory_state_path", "main"]

PREEMPTED = 75       # EX_TEMPFAIL (sysexits.h): "try again later", trainkit's preempted code
TREE_POLL_S = 1.0            # how often the job's process tree is recorded in the state
LEFTOVER_GRACE_S = 5.0       # SIGTERM -> SIGKILL for processes the job's main process left behind
# trainkit's own stop (cancel, or the controller stopping survivors) creates STATE_FILE + this
# before its SIGTERM; a SIGTERM without it comes from the machine shutting down: a preemption.
CANCEL_SUFFIX = ".cancel"
STORAGE_ERRNOS = {errno.ENOSPC: "ENOSPC", errno.EDQUOT: "EDQUOT", errno.EROFS: "EROFS", errno.EIO: "EIO"}


class Supervisor:
    def __init__(self, state_file: str, argv: list[str], status_file: str | None, exit_file: str | None = None):
        self.state_file = state_file
        self.events_file = state_file.rsplit(".", 1)[0] + ".events.jsonl"
        self.argv = argv
        self.status_file = status_file
        self.exit_file = exit_file
        self.progress_file = state_file.rsplit(".", 1)[0] + ".progress"
        self.seen: tuple[int, str] | None = None   # the last (step, phase) read from progress_file
        self.state = {"status": "starting", "host": socket.gethostname(), "supervisor_pid": os.getpid(),
                      "supervisor_start": start_time(os.getpid()), "pid": None, "exit_code": None,
                      "started_at": time.time(), "ended_at": None, "notice": None, "tree": []}
        self.proc: subprocess.Popen | None = None
        self.done = threading.Event()     # the job's main process has ended
        self.cancelled = False
        self.lock = threading.Lock()

    def write(self, **changes) -> None:
        """The state, replaced atomically; on a storage fault, rewritten in place, else kept in
        memory (module docstring). Never raises."""
        with self.lock:
            self.state.update(changes)
            try:
                write_state(self.state_file, self.state)
                return
            except OSError as err:
                self._storage(err, self.state_file)
            for state in (self.state, {**self.state, "tree": []}):   # the tree may not fit in place
                try:
                    rewrite_in_place(self.state_file, json.dumps(state))
                    return
                except (OSError, ValueError):
                    continue
            try:
                write_state(memory_state_path(self.state_file), self.state)
            except OSError:   # pragma: no cover - no /dev/shm: nothing left to write on
                pass

    def _storage(self, err: OSError, path: str) -> None:
        """Keep the first storage fault in the state (an OSError of another kind is kept too)."""
        if not self.state.get("storage_error"):
            self.state["storage_error"] = {"errno": STORAGE_ERRNOS.get(err.errno, errno.errorcode.get(err.errno or 0,
                                                                                                     "OSError")),
                                           "path": path, "message": str(err)[:300], "time": time.time()}

    def event(self, kind: str, **data) -> None:
        """Append an event; one that cannot be written (a full or read-only disk) is dropped."""
        try:
            with self.lock, open(self.events_file, "a") as f:
                f.write(json.dumps({"time": time.time(), "event": kind, "host": self.state["host"], **data}) + "\n")
        except OSError as err:
            self._storage(err, self.events_file)

    def running(self) -> bool:
        return self.proc is not None and not self.done.is_set()

    def signal_job(self, sig: int) -> None:
        if self.running():
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
        become_subreaper()
        self.write(status="starting")
        try:
            env = {**os.environ, "TRAINKIT_PROGRESS_FILE": self.progress_file}
            self.proc = subprocess.Popen(self.argv, stdin=subprocess.DEVNULL, start_new_session=True, env=env)
        except OSError as err:
            self.write(status="failed", exit_code=127, ended_at=time.time(), error=str(err))
            self.event("exited", exit_code=127, status="failed", error=str(err))
            return 127
        self.write(status="running", pid=self.proc.pid, tree=tree_of([os.getpid()]))
        self.event("started", pid=self.proc.pid)
        threading.Thread(target=self.record_tree, daemon=True).start()
        rc = self.reap_until_job_ends()
        self.end_leftovers()
        status = self.classify(rc)
        self.write(status=status, exit_code=rc, ended_at=time.time(), tree=[])
        self.event("exited", exit_code=rc, status=status)
        return rc

    def reap_until_job_ends(self) -> int:
        """Wait for any child (the job, or an orphan re-parented to this subreaper) until the job's
        main process ends; its exit status (negative: the signal), as subprocess reports it."""
        while True:
            try:
                pid, status = os.waitpid(-1, 0)
            except InterruptedError:  # pragma: no cover - PEP 475 retries, kept for clarity
                continue
            except ChildProcessError:  # pragma: no cover - the job is our child until reaped here
                return self.proc.wait()
            if pid == self.proc.pid:
                rc = os.waitstatus_to_exitcode(status)
                self.proc.returncode = rc
                self.done.set()
                return rc

    def end_leftovers(self) -> None:
        """SIGTERM what the job left behind (descendants still alive), SIGKILL it after the grace."""
        left = descendants()
        if not left:
            return
        self.event("leftovers", pids=left)
        for pid in left:
            kill(pid, signal.SIGTERM)
        deadline = time.monotonic() + LEFTOVER_GRACE_S
        while descendants() and time.monotonic() < deadline:
            time.sleep(0.1)
        for _ in range(50):
            left = descendants()
            if not left:
                return
            for pid in left:
                kill(pid, signal.SIGKILL)
            time.sleep(0.1)

    def record_tree(self) -> None:
        """Keep `tree` (for a hard stop without us) and `progress` in the state up to date while
        the job runs."""
        while self.running():
            tree = tree_of([os.getpid()])
            progress = self.read_progress()
            if (tree != self.state.get("tree") or progress) and self.running():
                self.write(tree=tree, **({"progress": progress} if progress else {}))
            time.sleep(TREE_POLL_S)

    def read_progress(self) -> dict | None:
        """The new `progress` when the job's (step, phase) changed since the last read, else None."""
        try:
            with open(self.progress_file) as f:
                parts = f.read(64).split()
        except OSError:
            return None
        if len(parts) < 2 or not parts[0].isdigit() or (int(parts[0]), parts[1]) == self.seen:
            return None
        now, (step, phase) = boottime(), (int(parts[0]), parts[1])
        old = self.state.get("progress") or {}
        step_s = old.get("step_s")
        if old.get("phase") == "train" and phase == "train" and step > old.get("step", step):
            step_s = round((now - old["at"]) / (step - old["step"]), 6)
        self.seen = (step, phase)
        return {"step": step, "phase": phase, "at": round(now, 3), "first_at": old.get("first_at", round(now, 3)),
                "step_s": step_s}

    def classify(self, rc: int) -> str:
        if rc == 0:
            return "completed"
        if self.cancelled and os.path.exists(self.state_file + CANCEL_SUFFIX):
            return "cancelled"
        if self.cancelled:   # not trainkit's stop: the machine is going down (a reclaim without notice)
            self.write(reason="sigterm")
            return "preempted"
        if rc == PREEMPTED or self._status_file_says() == "preempted" or self.state["notice"]:
            return "preempted"
        if self._exit_file_says() == "rendezvous":  # torchrun lost its peers: not the user's code
            self.write(reason="rendezvous")
            return "preempted"
        return "failed"

    def _exit_file_says(self) -> str | None:
        """The `status=` word of launch.sh's end record (`exit=<rc> status=<word>`), if any."""
        try:
            with open(self.exit_file or "") as f:
                fields = dict(p.split("=", 1) for p in f.read().split() if "=" in p)
        except OSError:
            return None
        return fields.get("status") or None

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

    def watch(self, notices: Notices, every_s: float) -> None:
        """Poll the spot-termination URL; on the first notice, SIGTERM the job (once)."""
        while self.proc is None or self.running():
            body = notices.fetch()
            for kind, text in notices.take_errors():
                print(f"supervise: WARNING: {text}", file=sys.stderr, flush=True)
                self.write(notice_error={"time": time.time(), "kind": kind, "message": text})
                self.event("notice_error", kind=kind, message=text)
            if body is not None:
                self.write(notice={"time": time.time(), "body": body[:500]})
                self.event("notice", url=notices.url, body=body[:500])
                self.signal_job(signal.SIGTERM)
                return
            time.sleep(every_s)


def parse(argv: list[str]) -> tuple[argparse.Namespace, list[str]]:
    """(options, the job's argv): options before the first `--`, the job after it. trainkit passes
    every value as `--opt=value` (one word), so no value is read as an option or as the `--`; a
    --notice-url that is not http(s):// exits 2 here too (the control side refuses it first)."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("state_file")
    parser.add_argument("--hard-stop", action="store_true",
                        help="SIGKILL the supervisor of STATE_FILE and every process of its job, then exit.")
    parser.add_argument("--status-file", help="The job's own status file (contract: 'preempted').")
    parser.add_argument("--exit-file", help="launch.sh's end record (status=rendezvous: a lost peer).")
    parser.add_argument("--notice-url", help="Spot-termination metadata URL to poll.")
    parser.add_argument("--notice-poll", type=float, default=5.0, help="Seconds between polls.")
    parser.add_argument("--notice-token-url", help="The metadata host's session-token endpoint (PUT).")
    parser.add_argument("--notice-ttl-header", help="Header carrying the token's TTL in the PUT.")
    parser.add_argument("--notice-token-header", help="Header carrying the token in each GET.")
    parser.add_argument("--notice-token-ttl", type=int, default=TOKEN_TTL_S, help="Token TTL, seconds.")
    cut = argv.index("--") if "--" in argv else len(argv)
    args, job = parser.parse_args(argv[:cut]), argv[cut + 1:]
    if args.notice_token_url and not (args.notice_ttl_header and args.notice_token_header):
        parser.error("--notice-token-url needs --notice-ttl-header and --notice-token-header (the cloud room's)")
    for url in (args.notice_url, args.notice_token_url):
        if url is not None and not url.startswith(("http://", "https://")):
            parser.error(f"{url!r} is not an http:// or https:// URL")
    if not job and not args.hard_stop:
        parser.error("give the job's command after --")
    return args, job


def main(argv: list[str] | None = None) -> int:
    args, job = parse(sys.argv[1:] if argv is None else argv)
    if args.hard_stop:
        print(f"killed {hard_stop(args.state_file)} processes")
        return 0
    sup = Supervisor(args.state_file, job, args.status_file, args.exit_file)
    if args.notice_url:
        notices = Notices(args.notice_url, args.notice_token_url, args.notice_ttl_header,
                          args.notice_token_header, args.notice_token_ttl)
        threading.Thread(target=sup.watch, args=(notices, args.notice_poll), daemon=True).start()
    return sup.run()


if __name__ == "__main__":
    sys.exit(main())
