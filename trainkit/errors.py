"""Errors the CLI turns into one clear message and a phase-specific exit code (never a traceback).

Exit codes, one per phase so CI can tell where a job stopped:

    0  ok                       10  plan: changes pending (with `--detailed-exitcode`)
    1  unexpected bug           11  plan: a blocking finding
    2  bad input (spec/config)  12  doctor: a node failed its health checks (`trainkit doctor`,
    3  plan                         and `train` before its first attempt; docs/doctor.md)
    4  apply (terraform)        75  training stopped by SIGTERM after a checkpoint (resume later;
    5  provision (ansible)          EX_TEMPFAIL from BSD sysexits.h: "try again later")
    6  train
    7  destroy
    8  busy: the workspace lock, the state lock or a running run
    9  a required tool (terraform, ansible-playbook) is missing
   13  cloud credentials missing or rejected (the same code from check, plan, apply, destroy,
       train's data staging: one cause, one code whatever the phase)

1 is also a full or read-only disk under the workspace (a message naming the file, not a bug).
"""

from __future__ import annotations

from trainkit.util.redact import redact  # one redaction rule: no URL credential in any message

OK = 0
UNEXPECTED = 1
BAD_INPUT = 2
PLAN = 3
APPLY = 4
PROVISION = 5
TRAIN = 6
DESTROY = 7
LOCKED = 8
MISSING_TOOL = 9
PLAN_CHANGES = 10
PLAN_BLOCKED = 11
DOCTOR = 12
CREDENTIALS = 13
PREEMPTED = 75


class TrainkitError(Exception):
    """An expected failure: `message` says what went wrong, `fix` how to put it right.

    `exit_code` is one of the module constants; the CLI prints `error: message` (+ `fix: ...`)
    to stderr and exits with it.
    """

    exit_code = UNEXPECTED

    def __init__(self, message: str, fix: str | None = None, exit_code: int | None = None):
        message, fix = redact(message), (redact(fix) if fix else fix)
        super().__init__(message)
        self.message = message
        self.fix = fix
        self.notes: list[str] = []
        if exit_code is not None:
            self.exit_code = exit_code

    def append_note(self, note: str) -> None:
        """Add a line of context found after the failure (what it left behind, what was cleaned up);
        rendered after the message, and in --json output as `notes`."""
        self.notes.append(redact(note))

    def render(self) -> str:
        text = f"error: {self.message}"
        for note in getattr(self, "notes", ()):
            text += f"\n  note: {note}"
        if self.fix:
            text += f"\n  fix: {self.fix}"
        return text


class InputError(TrainkitError):
    """Bad user input: a spec, a train config, a price file, a command-line value."""

    exit_code = BAD_INPUT


class SpecError(InputError):
    """A cluster spec that does not validate; carries every problem found, each with its field path."""

    def __init__(self, path: str, problems: list[tuple[str, str, str | None]]):
        self.path = path
        self.problems = problems  # (field path, what is wrong, how to fix it or None)
        lines = []
        for field, what, fix in problems:
            line = f"{field or '<top level>'}: {what}"
            if fix:
                line += f" ({fix})"
            lines.append(line)
        head = f"{path}: {len(problems)} problem(s)"
        super().__init__("\n  ".join([head, *capped(lines)]))

    def render(self) -> str:
        return "error: " + self.message + "".join(f"\n  note: {n}" for n in self.notes)


MAX_PROBLEMS = 50  # problems listed per file; the rest are counted (a junk file lists thousands)


def capped(lines: list[str], limit: int = MAX_PROBLEMS) -> list[str]:
    """The first `limit` lines, then one line counting the rest."""
    if len(lines) <= limit:
        return list(lines)
    return [*lines[:limit], f"... and {len(lines) - limit} more problem(s) not shown"]


class MissingToolError(TrainkitError):
    exit_code = MISSING_TOOL


class CredentialsError(TrainkitError):
    """Cloud credentials missing or rejected (the variables to set are in `fix`)."""

    exit_code = CREDENTIALS


class LockedError(TrainkitError):
    exit_code = LOCKED
