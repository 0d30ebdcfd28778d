"""Errors the CLI turns into one clear message and a phase-specific exit code (never a traceback).

Exit codes, one per phase so CI can tell where a job stopped: `EXIT_CODES` below is the one table
of them. docs/exit-codes.md carries it as `python -m trainkit.errors` prints it (trainkit/docsgen writes it), and
tests/unit/test_exit_codes.py fails when any doc or help text says otherwise.

`plan --detailed-exitcode` keeps terraform's meaning instead (0 no changes, 1 error, 2 changes
pending): `DETAILED_EXIT_CODES`.
"""

from __future__ import annotations

from typing import NamedTuple

from trainkit.redact import redact  # one redaction rule: no URL credential in any message

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
PLAN_BLOCKED = 11
DOCTOR = 12
CREDENTIALS = 13
STORAGE = 14
PREEMPTED = 75
INTERRUPTED = 130  # Ctrl-C, as a shell reports SIGINT (128 + 2)

# `plan --detailed-exitcode`, as terraform's `plan -detailed-exitcode`: 2 means changes pending,
# and every failure is 1 (its phase code is named in the message).
DETAILED_CHANGES = 2


# Of every --json output (errors included): a key removed or given another meaning bumps it.
FORMAT_VERSION = "1"


class ExitCode(NamedTuple):
    code: int
    name: str
    meaning: str
    cues: tuple[str, ...] = ()  # words that, next to an exit number in a doc, mean this code


EXIT_CODES: tuple[ExitCode, ...] = (
    ExitCode(OK, "OK", "ok"),
    ExitCode(UNEXPECTED, "UNEXPECTED", "a bug (`internal error`, one line; `TRAINKIT_DEBUG=1` shows the traceback), "
             "or the disk under the workspace is full or read-only (the message names the file)"),
    ExitCode(BAD_INPUT, "BAD_INPUT", "bad input: a spec, a train config, a command-line value, a placeholder "
             "`apply` refuses; the message names the field and the fix. Also \"apply first\"", ("apply first",)),
    ExitCode(PLAN, "PLAN", "`plan`: terraform failed"),
    ExitCode(APPLY, "APPLY", "`apply`: terraform failed, or the cloud has no capacity or quota for the type in "
             "the zone (the message names zone, type and what to try); the error says what the state holds "
             "now, what it bills, and the destroy command", ("no capacity",)),
    ExitCode(PROVISION, "PROVISION", "`apply`: provisioning failed (SSH never answered, an Ansible task failed)"),
    ExitCode(TRAIN, "TRAIN", "`train`: the run failed"),
    ExitCode(DESTROY, "DESTROY", "`destroy`: the state is not empty afterwards, or tagged leftovers are "
             "still in the cloud, or the leftover check could not run"),
    ExitCode(LOCKED, "LOCKED", "busy: another command holds the workspace lock, another run holds the terraform "
             "state lock, or a run is still running on the cluster"),
    ExitCode(MISSING_TOOL, "MISSING_TOOL", "a required tool (terraform, ansible-playbook) is missing; the message "
             "says how to install it"),
    ExitCode(PLAN_BLOCKED, "PLAN_BLOCKED", "`plan` (and `apply`): a blocking finding (SSH open to the internet, "
             "budget exceeded)", ("blocking finding",)),
    ExitCode(DOCTOR, "DOCTOR", "`doctor` (and `train` before its first attempt): a node failed its health "
             "checks; the message names the node and the check", ("health check",)),
    ExitCode(CREDENTIALS, "CREDENTIALS", "cloud credentials missing or rejected, whatever the command "
             "(`check`, `plan`, `apply`, `destroy`, data staging); the message names the variables to set",
             ("credentials are missing", "credentials missing", "missing credentials")),
    ExitCode(STORAGE, "STORAGE", "`train` (and `doctor`): a disk of the run is full (ENOSPC) or read-only "
             "(EROFS), on a node or the shared storage; the message names the node, the path and the engine's "
             "own words; no node was replaced, since a new one would mount the same storage",
             ("no space left", "read-only")),
    ExitCode(PREEMPTED, "PREEMPTED", "`train`: stopped by SIGTERM (spot reclaim) after a checkpoint; run "
             "`train --resume RUN` to continue (EX_TEMPFAIL from BSD sysexits.h: \"try again later\")"),
    ExitCode(INTERRUPTED, "INTERRUPTED", "interrupted (Ctrl-C)"),
)

DETAILED_EXIT_CODES: tuple[ExitCode, ...] = (
    ExitCode(OK, "OK", "the plan has no changes"),
    ExitCode(UNEXPECTED, "ERROR", "any failure (the message names it and the code it has without the flag)"),
    ExitCode(DETAILED_CHANGES, "CHANGES", "the plan has changes"),
)


def exit_code_table() -> str:
    """The exit-code tables as markdown (docs/exit-codes.md carries this text)."""
    rows = ["| exit code | name | meaning |", "|---|---|---|"]
    rows += [f"| {e.code} | `{e.name}` | {e.meaning} |" for e in EXIT_CODES]
    rows += ["", "`trainkit plan --detailed-exitcode` keeps terraform's `-detailed-exitcode` meaning, so a "
             "pipeline written for terraform reads it the same way:", "",
             "| exit code | meaning |", "|---|---|"]
    rows += [f"| {e.code} | {e.meaning} |" for e in DETAILED_EXIT_CODES]
    return "\n".join(rows) + "\n"


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

    # What the command found before failing (check's and doctor's report), for --json: one
    # document on stdout, the error with its `result`.
    data: object = None

    def as_json(self) -> dict:
        """The failure as --json prints it on stdout: {format_version, error, fix, notes,
        exit_code} and `result` when the command has one (`data`)."""
        out = {"format_version": FORMAT_VERSION, "error": self.message, "fix": self.fix,
               "notes": list(getattr(self, "notes", [])), "exit_code": self.exit_code}
        if self.data is not None:
            out["result"] = self.data
        return out

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


if __name__ == "__main__":  # python -m trainkit.errors: the table the docs carry
    print(exit_code_table(), end="")
