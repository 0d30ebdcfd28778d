"""Options shared by the commands, declared once: SPEC, --workdir, --prices, -y/--yes,
--format/--json; plus loading a spec into (cluster, workspace) and the "apply first" check.

SPEC is a spec file's path or a cluster NAME this machine knows (cluster/registry.py): a path
that exists wins; a word that is a cluster name leads to the spec and workspace its last apply
used (`resolve_spec`, the one place that decides).

Conventions: `-y` is `--yes` (sky's spelling; terraform users know it as -auto-approve);
structured output takes `--format text|json|markdown` and `--json` is short for `--format json`.
Sizing warnings are printed by the commands that act on the size (validate, render, plan, apply),
never by destroy/status/ssh and never between a prompt and its answer.
"""

from __future__ import annotations

import difflib
import json
import math
import re
import shlex
import sys
from pathlib import Path
from typing import Any, Callable

import click

from trainkit import clouds
from trainkit.cluster import failover, registry
from trainkit.commands import complete
from trainkit.errors import FORMAT_VERSION, InputError
from trainkit.spec.resolve import load_cluster
from trainkit.spec.schema import check_key_files
from trainkit.util import progress
from trainkit.workspace import Workspace

FORMATS = ("text", "json", "markdown")

SPEC_HELP = ("SPEC is a cluster spec file, or the NAME of a cluster applied on this machine "
             "(`trainkit status` lists them; a file of that name wins).")


def spec_arg(required: bool = True) -> Callable:
    """The SPEC argument (a path or a cluster NAME, completed as both); adds SPEC_HELP to the
    command's help, before its example."""
    def decorate(func: Callable) -> Callable:
        if func.__doc__:
            func.__doc__ = re.sub(r"(\n([ \t]*)\x08\n[ \t]*Example:)",
                                  lambda m: f"\n{m.group(2)}{SPEC_HELP}\n{m.group(1)}", func.__doc__, count=1)
        return click.argument("spec", type=click.Path(dir_okay=False), required=required,
                              shell_complete=complete.cluster_names)(func)
    return decorate


spec_argument = spec_arg()
workdir_option = click.option("--workdir", type=click.Path(file_okay=False),
                              help="Workspace folder (default .trainkit/<cluster name>).")
prices_option = click.option("--prices", "price_file", type=click.Path(exists=True, dir_okay=False),
                             help="Your own price file (overrides catalog prices).")


class Finite(click.FloatRange):
    """click.FloatRange that also refuses inf and nan (FloatRange takes them: `cost --hours inf`
    crashed with OverflowError, `--reclaims-per-day inf` with ZeroDivisionError)."""

    name = "finite number"

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> Any:
        number = super().convert(value, param, ctx)
        if not math.isfinite(number):
            self.fail(f"{value!r} is not a finite number", param, ctx)
        return number


def cloud_room(served: Callable[[clouds.Cloud], bool], what: str) -> Callable:
    """A click callback turning `--cloud NAME` into that cloud's room, once, for the command to pass
    on (the one lookup of a room by a name given on the command line). The rooms on
    TRAINKIT_CLOUD_PATH count. A name that is not a room `served` accepts: InputError (exit 2)
    naming --cloud, with the choices (`what` says which rooms those are). None stays None."""
    def callback(ctx: click.Context, param: click.Parameter, value: str | None) -> clouds.Cloud | None:
        if value is None:
            return None
        names = [room.name for room in clouds.all_clouds() if served(room)]
        if value not in names:
            raise InputError(f"--cloud: {value!r} is not {what}", fix=f"one of {', '.join(names)}")
        return clouds.get(value)
    return callback


def check_region(room: clouds.Cloud, region: str) -> str:
    """`region` when it is one of the cloud's (its room's list; any a-z0-9- name when the room has
    none); else InputError naming --region with the closest names. The region names a price file,
    so it is never a path."""
    cloud, known = room.name, room.regions
    if (known and region in known) or (not known and re.fullmatch(r"[a-z0-9][a-z0-9-]{0,40}", region)):
        return region
    close = difflib.get_close_matches(region, list(known), n=3, cutoff=0.6)
    raise InputError(f"--region {region!r} is not a region of {cloud}",
                     fix=f"did you mean {', '.join(close)}?" if close else
                     f"regions: {', '.join(sorted(known)) or 'lowercase letters, digits and -'}")


def out_file(ctx: click.Context, param: click.Parameter, value: str | None) -> str | None:
    """Callback for an output file option: its folder must exist, so the command fails before
    the work (a plan, an export), not after it."""

    if value is not None:
        folder = Path(value).absolute().parent
        if not folder.is_dir():
            raise click.BadParameter(f"folder {folder} does not exist; create it or write elsewhere")
    return value


def ask(prompt: Callable[[], Any], question: str) -> Any:
    """Run a click prompt. When stdin is not a terminal and ends before an answer (a CI job
    without -y), InputError saying so instead of click's "Aborted!" (exit 130, read as Ctrl-C)."""

    try:
        return prompt()
    except click.exceptions.Abort:
        if sys.stdin is not None and sys.stdin.isatty():
            raise
        click.echo(err=True)  # end the prompt's line
        raise InputError(f"{question}: no answer (stdin is not a terminal and gave none)",
                         fix="pass -y/--yes to answer yes without asking (CI jobs need it)") from None


def yes_option(help_text: str = "Do not ask.") -> Callable:
    """`-y/--yes`, bound to the parameter `yes`."""
    return click.option("-y", "--yes", "yes", is_flag=True, help=help_text)


def format_option(formats: tuple[str, ...] = ("text", "json"), help_text: str = "") -> Callable:
    """`--format` (one of `formats`, default text) and `--json` (short for `--format json`),
    merged into one parameter `fmt`. Giving --json with another --format is a usage error."""
    def decorate(func: Callable) -> Callable:
        def merge(ctx: click.Context, param: click.Parameter, value: bool) -> None:
            if value:
                given = ctx.params.get("fmt")
                if given not in (None, "text", "json"):
                    raise click.UsageError(f"--json is --format json; it conflicts with --format {given}")
                ctx.params["fmt"] = "json"

        func = click.option("--json", "as_json", is_flag=True, expose_value=False, callback=merge,
                            help="Short for --format json.")(func)
        return click.option("--format", "fmt", type=click.Choice(formats), default="text",
                            show_default=True, is_eager=True,
                            help=help_text or "Output format (json is stable for scripts and CI).")(func)
    return decorate


def say(fmt: str, text: str) -> None:
    """A line for people: stdout in text format, else stderr (with --json, stdout is the JSON)."""
    click.echo(text, err=fmt != "text")


def next_steps(fmt: str, steps: list[tuple[str, str]]) -> None:
    """The block after `apply` and `train`: what to run next, (command, what it does) per line;
    on stderr with --json (and never between a command's own lines and its JSON)."""
    width = max(len(cmd) for cmd, _ in steps)
    say(fmt, "next:")
    for cmd, what in steps:
        say(fmt, f"  {cmd:<{width}}  # {what}")


def spec_args(cluster, ws) -> str:
    """SPEC as a command line takes it, with --workdir when the workspace is not the default one."""
    text = shlex.quote(cluster.source)
    if ws.root != Workspace.for_cluster(cluster.name).root:
        text += f" --workdir {shlex.quote(str(ws.root))}"
    return text


def dump_json(value: Any) -> str:
    """The one JSON rendering of every command's --format json (indented, keys sorted). An object
    carries `format_version` (trainkit.errors.FORMAT_VERSION; a list, as `runs` prints, is the
    rows alone). Strict JSON: a non-finite number (NaN, Infinity: no JSON literal, and most parsers
    refuse them) is written as null, meaning unknown; a date as its ISO text."""
    if isinstance(value, dict) and "format_version" not in value:
        value = {"format_version": FORMAT_VERSION, **value}
    return json.dumps(json_safe(value), indent=2, sort_keys=True, allow_nan=False,
                      default=lambda v: v.isoformat() if hasattr(v, "isoformat") else str(v))


def json_safe(value: Any) -> Any:
    if isinstance(value, float) and not math.isfinite(value):
        return None
    if isinstance(value, dict):
        return {k: json_safe(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [json_safe(v) for v in value]
    return value


def resolve_spec(spec: str, workdir: str | None) -> tuple[str, str | None, str | None]:
    """(spec path, workdir, the cluster name typed or None) for SPEC as typed. A path that exists
    (or a word that cannot be a cluster name) is a path, as before. Otherwise the registry's entry
    for the name (`registry.find`: --workdir picks among folders) gives the spec its last apply used
    and its workspace; a spec changed since is noted on stderr. InputError for an unknown name (the
    close and known names), a name in two workspaces, a spec that is gone."""
    if Path(spec).exists() or Path(spec).is_symlink() or not registry.is_name(spec):
        return spec, workdir, None
    entry = registry.find(spec, workdir)
    path, note = registry.spec_of(entry)
    if note:
        progress.info(f"note: {note}")
    return str(path), entry.workspace, spec


def load_named(spec: str, workdir: str | None, price_file: str | None = None):
    """(cluster, spec path, workdir, the name typed or None) for SPEC as typed (a path or a NAME,
    `resolve_spec`); InputError when a name's spec now names another cluster."""
    path, workdir, name = resolve_spec(spec, workdir)
    cluster = load_cluster(path, price_file)
    if name is not None and cluster.name != name:
        raise InputError(f"cluster {name}: its spec {path} now names cluster {cluster.name!r}",
                         fix=f"give the path to act on {cluster.name}; put back `name: {name}` in {path} "
                             f"to act on {name}")
    return cluster, path, workdir, name


def load(spec: str, workdir: str | None, price_file: str | None = None, warn: bool = False):
    """(cluster, workspace) for SPEC (a path or a cluster NAME: `resolve_spec`), its key files
    checked. `warn`: print the sizing warnings (commands that act on the size pass it; the rest
    stay quiet, so warnings show once). A spec path given for a workspace whose remembered spec is
    gone becomes the one its name leads to (registry.repoint)."""

    cluster, spec, workdir, named = load_named(spec, workdir, price_file)
    check_key_files(cluster.spec, spec)
    if warn:
        for warning in cluster.warnings:
            progress.info(f"warning: {warning}")
    # a name's workspace is the registry's (checked as a --workdir when its apply made it), used
    # from anywhere, inside it too
    ws = Workspace(Path(workdir), cluster.name) if named else Workspace.for_cluster(cluster.name, workdir)
    ws.check_runs_dir()  # runs/ a file: named here, not "no runs yet" or a crash in a listing
    if cluster.room.has_module:  # `zone:`/`type:` lists: where the last apply came up
        cluster = failover.remembered(cluster, ws)
    _follow_moved_spec(ws, spec)
    return cluster, ws


def _follow_moved_spec(ws: Workspace, spec: str) -> None:
    """registry.repoint, never failing the command: the registry is a convenience, and a damaged
    one must not stop a command given a spec path (it is named once, as a warning)."""
    try:
        if registry.repoint(ws.root, spec):
            progress.info(f"note: cluster {ws.cluster} is now reached by name through {Path(spec).absolute()}")
    except InputError as err:
        progress.info(f"warning: {err.message}; fix: {err.fix}")


def require_applied(cluster, ws) -> None:
    """InputError (exit 2, "apply first") when a local/hosts cluster has no inventory in `ws`
    (`trainkit apply` never ran there). Cloud targets ask their state backend instead
    (`lifecycle.sync` raises the same error when it holds no nodes)."""

    if cluster.room.has_module or ws.inventory_yml.exists():
        return
    raise InputError(f"cluster {cluster.name} has not been applied (no inventory in {ws.root}): apply first",
                     fix=f"run `trainkit apply {cluster.source}` first")
