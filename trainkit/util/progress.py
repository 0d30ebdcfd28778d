"""Progress for long steps: a live spinner with the latest line on a terminal, plain lines in CI;
and the Ansible task display (`ProgressDisplay`, an ansible-runner event handler).

Everything goes to stderr so `--json` output on stdout stays machine-readable.
"""

from __future__ import annotations

import contextlib
import re
import threading
import time
from pathlib import Path
from typing import Iterator, TextIO

from rich.console import Console

from trainkit.redact import redact

console = Console(stderr=True, highlight=False, soft_wrap=True)  # no hard wraps in CI logs

# Terraform lines worth a plain log line when there is no live display (CI logs). Errors are not
# among them: the failure message shows them once.
_NOTABLE = re.compile(r"(Creation complete|Destruction complete|Modifications complete|"
                      r"Apply complete|Destroy complete|Plan:|No changes)")


class Step:
    """One long step; `line(text)` shows the latest output of the tool doing the work."""

    def __init__(self, title: str, status) -> None:
        self.title, self.status, self.started = title, status, time.monotonic()

    def line(self, text: str) -> None:
        text = redact(text.strip().lstrip("│ "))
        if not text:
            return
        if self.status is not None:
            self.status.update(f"{self.title} [dim]({self.elapsed():.0f}s) {text[:100]}[/dim]")
        elif _NOTABLE.search(text):
            console.print(f"  {text}", markup=False)

    def elapsed(self) -> float:
        return time.monotonic() - self.started


@contextlib.contextmanager
def step(title: str) -> Iterator[Step]:
    """Show `title` while the block runs, then `done`/`failed` with the elapsed time."""
    live = console.is_terminal
    ctx = console.status(title) if live else contextlib.nullcontext()
    if not live:
        console.print(f"{title} ...", markup=False)
    with ctx as status:
        s = Step(title, status if live else None)
        try:
            yield s
        except BaseException:
            console.print(f"[red]✗[/red] {title} failed after {s.elapsed():.0f}s")
            raise
    console.print(f"[green]✓[/green] {title} ({s.elapsed():.0f}s)")


def info(text: str) -> None:
    console.print(redact(text), markup=False)


@contextlib.contextmanager
def follow(path: Path, prefix: str, poll_s: float = 1.0) -> Iterator[None]:
    """While the block runs, print each new line of `path` (which may not exist yet) with `prefix`."""
    stop = threading.Event()

    def tail() -> None:
        offset = 0
        while True:
            finished = stop.wait(poll_s)
            if path.exists():
                with open(path, "rb") as fh:
                    fh.seek(offset)
                    for raw in iter(fh.readline, b""):
                        if not raw.endswith(b"\n"):
                            break  # a line still being written: read it whole next time
                        offset += len(raw)
                        text = raw.decode(errors="replace").rstrip()
                        console.print(f"{prefix}{text}", markup=False, highlight=False)
            if finished:
                return

    thread = threading.Thread(target=tail, daemon=True)
    thread.start()
    try:
        yield
    finally:
        stop.set()
        thread.join(timeout=5)


class ProgressDisplay:
    """ansible-runner event handler: one line per task result (host, status, task), and the
    totals at the end. Coloured on a terminal (this module's console), plain lines otherwise or
    to `stream`."""

    STATUS = {"runner_on_ok": "ok", "runner_on_failed": "failed", "runner_on_skipped": "skipped",
              "runner_on_unreachable": "unreachable", "runner_item_on_failed": "failed"}
    COLOUR = {"ok": "green", "changed": "yellow", "failed": "red", "unreachable": "red",
              "skipped": "cyan"}

    def __init__(self, stream: TextIO | None = None, quiet: bool = False):
        self.stream = stream  # None: this module's console (stderr)
        self.quiet = quiet
        self.counts: dict[str, int] = {}

    def __call__(self, event: dict) -> bool:
        status = self.STATUS.get(event.get("event", ""))
        data = event.get("event_data", {})
        if status == "ok" and (data.get("res") or {}).get("changed"):
            status = "changed"
        if status == "failed" and data.get("ignore_errors"):
            status = "ignored"
        if status:
            self.counts[status] = self.counts.get(status, 0) + 1
            self._line(status, data.get("host", "?"), data.get("task", "?"))
        elif event.get("event") == "playbook_on_stats":
            self._write(" ".join(f"{k}={v}" for k, v in sorted(self.counts.items())), "bold")
        return True  # keep the event in ansible-runner's artifacts too

    def _line(self, status: str, host: str, task: str) -> None:
        self._write(f"{status:>11}  {host}  {task}", self.COLOUR.get(status))

    def _write(self, text: str, style: str | None) -> None:
        if self.quiet:
            return
        if self.stream is None:
            console.print(text, style=style, markup=False)
        else:
            print(text, file=self.stream, flush=True)
