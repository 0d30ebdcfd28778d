"""The `trainkit` command: a click group whose subcommands are imported only when called.

Lazy loading keeps `trainkit --help` and the control-side commands free of torch and
ansible imports. Each command module is glue: parse, call one library function, render.
"""

from __future__ import annotations

import contextlib
import errno
import importlib
import json
import os
import sys
from typing import Callable

try:  # Ctrl-C while click loads (the first ~50 ms): exit 130 as main() does, not a traceback
    import click

    from trainkit import __version__
    from trainkit.errors import INTERRUPTED, UNEXPECTED, TrainkitError
    from trainkit.redact import redact
except KeyboardInterrupt:
    sys.stderr.write("interrupted\n")
    sys.exit(130)

# command name -> "module:attribute"; the module is imported on first use.
COMMANDS: dict[str, str] = {
    "check": "trainkit.commands.setup:check",
    "examples": "trainkit.commands.setup:examples",
    "docs": "trainkit.commands.setup:docs",
    "validate": "trainkit.commands.cluster:validate",
    "catalog": "trainkit.commands.cluster:catalog",
    "render": "trainkit.commands.cluster:render",
    "plan": "trainkit.commands.ops:plan",
    "apply": "trainkit.commands.ops:apply",
    "train": "trainkit.commands.jobs:train",
    "runs": "trainkit.commands.jobs:runs_",
    "logs": "trainkit.commands.jobs:logs",
    "cancel": "trainkit.commands.jobs:cancel",
    "destroy": "trainkit.commands.ops:destroy",
    "status": "trainkit.commands.ops:status",
    "ssh": "trainkit.commands.ops:ssh",
    "cost": "trainkit.commands.money:cost",
    "prices": "trainkit.commands.money:prices",
    "run": "trainkit.commands.run:run",
    "export": "trainkit.commands.run:export",
    "stage": "trainkit.commands.data:stage",
    "top": "trainkit.commands.top:top",
    "doctor": "trainkit.commands.doctor:doctor",
}

SHORT_HELP: dict[str, str] = {
    "check": "Check credentials (names only) and tools before anything runs.",
    "examples": "List or copy the shipped example specs and training configs.",
    "docs": "Print a guide shipped with trainkit (training, runs, data, hosts, ci, ...).",
    "validate": "Check a cluster spec and/or a train config; exit 2 with every problem.",
    "catalog": "List GPU instance types, cheapest first.",
    "render": "Write the Terraform root stack for a spec into its workspace.",
    "plan": "Render, terraform plan, and review the plan (resources, cost, findings).",
    "apply": "Create or update the cluster and provision it with Ansible.",
    "train": "Start a training run on every node (detached, supervised; --recover).",
    "runs": "List a cluster's runs with status, step, best metric and wall time.",
    "logs": "Print (or --follow) a run's log from the nodes.",
    "cancel": "Stop a run cleanly: SIGTERM, checkpoint, stop.",
    "destroy": "Destroy the cluster its state backend holds; report (--sweep: delete) tagged leftovers.",
    "status": "Show the nodes the cloud has now and what they cost so far.",
    "ssh": "Open a shell on a node.",
    "cost": "Compare on-demand, subscription and spot+checkpoints for a training job.",
    "prices": "Refresh prices from the clouds' price APIs (`prices refresh`).",
    "run": "Train from a YAML config (on a node, under torchrun or alone).",
    "export": "Export a checkpoint to ONNX and verify it with onnxruntime.",
    "stage": "Download a data: section onto this node (parallel, resumable, verified).",
    "top": "Live per-node GPU, CPU, memory, disk, network and data-wait view of a cluster.",
    "doctor": "Check nodes (GPUs, disks, shared mount, clock) and all-reduce bandwidth; verdict per node.",
}


# `trainkit --help` lists the commands by use, in the order a user meets them.
GROUPS: tuple[tuple[str, tuple[str, ...]], ...] = (
    ("Start here", ("check", "examples", "docs", "validate")),
    ("Review and change a cluster", ("catalog", "cost", "render", "plan", "apply", "status", "destroy")),
    ("Train and watch runs", ("train", "runs", "logs", "cancel", "top", "doctor", "ssh")),
    ("On a node, and data", ("run", "export", "stage")),
    ("Prices", ("prices",)),
)


class LazyGroup(click.Group):
    """A click group that imports a subcommand's module only when that subcommand runs."""

    def list_commands(self, ctx: click.Context) -> list[str]:
        return list(COMMANDS)

    def resolve_command(self, ctx: click.Context, args: list[str]):
        """As click's, but an unknown command names the closest ones (`valdate` -> validate)."""
        if args and args[0] not in COMMANDS and not args[0].startswith("-") and not ctx.resilient_parsing:
            import difflib

            close = difflib.get_close_matches(args[0], list(COMMANDS), n=2)
            hint = f" Did you mean {' or '.join(repr(c) for c in close)}?" if close else ""
            ctx.fail(f"No such command {args[0]!r}.{hint}")
        return super().resolve_command(ctx, args)

    def get_command(self, ctx: click.Context, name: str) -> click.Command | None:
        target = COMMANDS.get(name)
        if target is None:
            return None
        module_name, attr = target.split(":")
        return getattr(importlib.import_module(module_name), attr)

    def format_commands(self, ctx: click.Context, formatter: click.HelpFormatter) -> None:
        """List subcommands by use (GROUPS), from SHORT_HELP so `trainkit --help` imports none of them."""
        for title, names in GROUPS:
            with formatter.section(title):
                formatter.write_dl([(name, SHORT_HELP[name]) for name in names])


@click.group(cls=LazyGroup, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, prog_name="trainkit")
def cli() -> None:
    """Provision GPU training clusters, train PyTorch on them, tear them down.

    \b
    Example:
      trainkit validate examples/clusters/local.yaml
      trainkit apply examples/clusters/local.yaml --yes
      trainkit train examples/clusters/local.yaml --config examples/train/digits.yaml
      trainkit destroy examples/clusters/local.yaml --yes
      trainkit train examples/clusters/local.yaml --up --down --yes   # all three, destroy whatever happens
    """


def main(argv: list[str] | None = None) -> None:
    """Run the CLI; expected failures print one message and exit with their phase's code
    (trainkit.errors.EXIT_CODES). `plan --detailed-exitcode` exits as terraform's flag does:
    0 no changes, 2 changes pending, 1 for every failure (the message names its own code).
    With --json (or --format json) a failure is also one JSON object on stdout (`as_json`)."""
    args = list(sys.argv[1:] if argv is None else argv)
    try:
        code = cli.main(args=args, prog_name="trainkit", standalone_mode=False)
    except SystemExit:
        raise
    except BaseException as exc:  # every failure ends here, Ctrl-C included
        err, show = _as_error(exc)
        _fail(err, show, args)
    sys.exit(code if isinstance(code, int) else 0)


def _as_error(exc: BaseException) -> tuple[TrainkitError, Callable[[], None]]:
    """(the failure as a TrainkitError with its exit code, what prints it on stderr). A bug is
    one line, exit 1; TRAINKIT_DEBUG=1 re-raises it for the traceback."""
    if isinstance(exc, TrainkitError):
        return exc, lambda: click.echo(exc.render(), err=True)
    if isinstance(exc, click.exceptions.Abort):
        return TrainkitError("aborted", exit_code=INTERRUPTED), lambda: click.echo("aborted", err=True)
    if isinstance(exc, click.ClickException):
        return TrainkitError(exc.format_message(), exit_code=exc.exit_code), exc.show
    if isinstance(exc, KeyboardInterrupt):
        return TrainkitError("interrupted", exit_code=INTERRUPTED), lambda: click.echo("interrupted", err=True)
    if isinstance(exc, OSError) and exc.errno in _DISK_ERRNOS:
        return _disk_full(exc)
    if os.environ.get("TRAINKIT_DEBUG", "").strip().lower() in ("1", "true", "yes"):  # not "0" or "no"
        raise exc
    text = (f"internal error: {type(exc).__name__}: {redact(str(exc))} "
            "(set TRAINKIT_DEBUG=1 for a traceback and report it)")
    return TrainkitError(text, exit_code=UNEXPECTED), lambda: click.echo(text, err=True)


def _disk_full(exc: OSError) -> tuple[TrainkitError, Callable[[], None]]:
    """A full or read-only disk, naming the file; a write that names none is trainkit's own output
    (every file trainkit writes is named: workspace.write_atomic), so the disk that is full is the
    one its output goes to, which then is pointed at /dev/null (no second error at exit)."""
    if exc.filename and exc.errno == errno.EROFS:
        where, fix = redact(str(exc.filename)), ("that disk is read-only (mounted so, or remounted by the kernel "
                                                 "after I/O errors: see `dmesg`); remount it read-write or use "
                                                 "another --workdir, then run the command again; nothing in the "
                                                 "workspace was left half-written")
    elif exc.filename:
        where, fix = redact(str(exc.filename)), ("free space on that disk (df -h) and run the command again; "
                                                 "records and caches are replaced whole, so none was left half-written")
    else:
        where, fix = "the command's output (stdout)", ("free space where the output goes (df -h), or send it "
                                                       "elsewhere; nothing in the workspace was left half-written")
        with contextlib.suppress(OSError, ValueError):
            os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
    err = TrainkitError(f"{os.strerror(exc.errno)}: {where}", exit_code=UNEXPECTED, fix=fix)
    return err, lambda: click.echo(err.render(), err=True)


def _fail(err: TrainkitError, show: Callable[[], None], args: list[str]) -> None:
    """Print the failure (stderr; and with --json, `TrainkitError.as_json()` on stdout) and exit with its code:
    with `plan --detailed-exitcode`, 1 for every failure as terraform's."""
    if args[:1] == ["plan"] and "--detailed-exitcode" in args and err.exit_code != UNEXPECTED:
        err.append_note(f"exit {err.exit_code} without --detailed-exitcode; with it every failure exits "
                        f"{UNEXPECTED}, as terraform's")
        err.exit_code = UNEXPECTED
    show()
    if wants_json(args):
        click.echo(json.dumps(err.as_json(), indent=2, sort_keys=True))
    sys.exit(err.exit_code)


def wants_json(args: list[str]) -> bool:
    """Whether the command line asks for JSON output (--json, --format json, --format=json)."""
    return "--json" in args or "--format=json" in args or any(
        a == "--format" and b == "json" for a, b in zip(args, args[1:]))


# The disk under the workspace is full or read-only: the machine's trouble, not a bug in trainkit.
_DISK_ERRNOS = (errno.ENOSPC, errno.EDQUOT, errno.EROFS)
