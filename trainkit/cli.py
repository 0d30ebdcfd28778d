"""The `trainkit` command: a click group whose subcommands are imported only when called.

Lazy loading keeps `trainkit --help` and the control-side commands free of torch and
ansible imports. Each command module is glue: parse, call one library function, render.
"""

from __future__ import annotations

import contextlib
import errno
import importlib
import os
import sys

try:  # Ctrl-C while click loads (the first ~50 ms): exit 130 as main() does, not a traceback
    import click

    from trainkit import __version__
    from trainkit.errors import UNEXPECTED, TrainkitError
    from trainkit.util.redact import redact
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
        """List subcommands from SHORT_HELP so `trainkit --help` imports none of them."""
        with formatter.section("Commands"):
            formatter.write_dl([(name, SHORT_HELP[name]) for name in COMMANDS])


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
    """


def main(argv: list[str] | None = None) -> None:
    """Run the CLI; expected failures print one message and exit with their phase's code."""
    try:
        code = cli.main(args=argv, prog_name="trainkit", standalone_mode=False)
    except TrainkitError as err:
        click.echo(err.render(), err=True)
        sys.exit(err.exit_code)
    except click.exceptions.Abort:
        click.echo("aborted", err=True)
        sys.exit(130)
    except click.ClickException as err:
        err.show()
        sys.exit(err.exit_code)
    except KeyboardInterrupt:
        click.echo("interrupted", err=True)
        sys.exit(130)
    except SystemExit:
        raise
    except OSError as err:
        if err.errno not in _DISK_ERRNOS:
            _internal(err)
        _disk_full(err)
    except Exception as err:  # a bug: say so briefly, keep the traceback for -v users
        _internal(err)
    sys.exit(code if isinstance(code, int) else 0)


# The disk under the workspace is full or read-only: the machine's trouble, not a bug in trainkit.
_DISK_ERRNOS = (errno.ENOSPC, errno.EDQUOT, errno.EROFS)


def _disk_full(err: OSError) -> None:
    """One message for a full or read-only disk, naming the file; a write that names none is
    trainkit's own output (every file trainkit writes is named: workspace.write_atomic), so the
    disk that is full is the one its output goes to. Exit 1."""
    if err.filename:
        where, fix = redact(str(err.filename)), ("free space on that disk (df -h) and run the command again; "
                                                 "records and caches are replaced whole, so none was left half-written")
    else:
        where, fix = "the command's output (stdout)", ("free space where the output goes (df -h), or send it "
                                                       "elsewhere; nothing in the workspace was left half-written")
        with contextlib.suppress(OSError, ValueError):  # no second error when Python flushes stdout at exit
            os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
    click.echo(f"error: {os.strerror(err.errno)}: {where}\n  fix: {fix}", err=True)
    sys.exit(UNEXPECTED)


def _internal(err: Exception) -> None:
    """A bug: one line and exit 1; TRAINKIT_DEBUG=1 re-raises it for the traceback."""
    if os.environ.get("TRAINKIT_DEBUG", "").strip().lower() in ("1", "true", "yes"):  # not "0" or "no"
        raise err
    click.echo(f"internal error: {type(err).__name__}: {redact(str(err))} "
               "(set TRAINKIT_DEBUG=1 for a traceback and report it)", err=True)
    sys.exit(UNEXPECTED)
