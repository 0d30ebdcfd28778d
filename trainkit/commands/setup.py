"""Commands for getting started: `check` (credentials and tools), `examples` (the built-in specs and
configs) and `docs` (the guides shipped with trainkit)."""

from __future__ import annotations

from pathlib import Path

import click

from trainkit import clouds, errors
from trainkit.cluster.check import run_checks
from trainkit.commands import complete
from trainkit.commands.options import dump_json, format_option, resolve_spec, spec_arg
from trainkit.errors import InputError, TrainkitError
from trainkit.spec.schema import load_spec
from trainkit.util.resources import copy_examples, example_files
from trainkit.util.resources import docs as shipped_docs
from trainkit.util.resources import examples as shipped


def _known_clouds(ctx, param, value: tuple[str, ...]) -> tuple[str, ...]:
    """--cloud values, each a room with a Terraform module (read when the command runs, so that the
    rooms on TRAINKIT_CLOUD_PATH count); click's usage error (exit 2) for any other."""
    served = clouds.terraform_targets()
    for name in value:
        if name not in served:
            raise click.BadParameter(f"{name!r} is not one of {', '.join(served)}", ctx, param)
    return value


@click.command()
@spec_arg(required=False)
@click.option("--cloud", "cloud_names", multiple=True, callback=_known_clouds, metavar="CLOUD",
              help="Check this cloud (repeatable): one of the clouds trainkit provisions, those on "
                   "TRAINKIT_CLOUD_PATH included; missing credentials then fail the check.")
@format_option()
def check(spec: str | None, cloud_names: tuple[str, ...], fmt: str) -> None:
    """Check credentials (by name, never printing a value) and tools, before anything runs.

    With SPEC: that spec's cloud and state backend, terraform (for cloud targets) and Ansible.
    With --cloud: those clouds. Alone: every cloud is listed and only the tools must be present.
    Exit 0 when all needed is there, else the fix for each thing missing and exit 13 when
    credentials are missing (as plan/apply/destroy exit then), 9 when only a tool is. Nothing is
    contacted.

    \b
    Example:
      trainkit check
      trainkit check examples/clusters/aws.yaml
      trainkit check --cloud alicloud --format json
    """

    need_backend, strict = False, bool(cloud_names)
    rooms = [r for r in clouds.all_clouds() if r.has_module and (not cloud_names or r.name in cloud_names)]
    need_terraform = True
    if spec:

        s = load_spec(resolve_spec(spec, None)[0])
        provisioned = s.room.has_module
        rooms, strict, need_terraform = ([s.room] if provisioned else []), True, provisioned
        need_backend = provisioned and s.backend.type != "local"
    result = run_checks(rooms, need_backend=need_backend,
                        need_terraform=need_terraform, strict_clouds=strict)
    if fmt != "json":
        click.echo(_text(result))
    elif result["ok"]:
        click.echo(dump_json(result))
    if not result["ok"]:  # with --json the report is the error's `result`: one document on stdout
        creds = any(p["kind"] == "credentials" for p in result["problems"])
        err = TrainkitError(f"{len(result['problems'])} thing(s) missing (see above)",
                            exit_code=errors.CREDENTIALS if creds else errors.MISSING_TOOL)
        err.data = result
        raise err


def _mark(ok: bool) -> str:
    return "ok  " if ok else "--  "


def _text(result: dict) -> str:
    lines = []
    for c in result["clouds"]:
        lines.append(f"{_mark(c['ok'])}{c['title']} ({c['cloud']})")
        for part in ("provider", "backend"):
            for s in c[part]["sets"]:
                have = [n for n, present in {**s["variables"], **s["files"]}.items() if present]
                label = part if part == "provider" else f"{c['backend']['type']} state backend"
                lines.append(f"      {label}, {s['label']}: {'set' if s['ok'] else 'missing'}"
                             f" (present: {', '.join(have) or 'none'})")
        region = [n for n, present in c["region"].items() if present]
        lines.append(f"      region variables present: {', '.join(region) or 'none (the spec sets region)'}")
    tf = result["tools"].get("terraform")
    if tf:
        lines.append(f"{_mark(tf['ok'])}terraform {tf['version'] or ''} "
                     f"{'at ' + tf['path'] if tf['path'] else 'not found'} (needs >= {tf['minimum']})")
    an = result["tools"]["ansible"]
    lines.append(f"{_mark(an['ok'])}ansible-playbook {an['path'] or 'not found'}, ansible-runner "
                 f"{'importable' if an['runner'] else 'not importable'}")
    for p in result["problems"]:
        lines.append(f"missing: {p['what']}\n  fix: {p['fix']}")
    return "\n".join(lines)


@click.command()
@click.option("--copy", "copy_to", type=click.Path(file_okay=False),
              help="Copy every example into this folder (clusters/ and train/), keeping existing files.")
@format_option()
def examples(copy_to: str | None, fmt: str) -> None:
    """List the example cluster specs and training configs shipped with trainkit.

    A training config's name works as `train --config NAME`; copy the specs to edit them.

    \b
    Example:
      trainkit examples
      trainkit examples --copy ./trainkit-examples
    """

    found = shipped()
    others = sorted({rel.split("/")[0] for rel in example_files()} - set(found))
    if fmt == "json":
        click.echo(dump_json({"examples": {k: {n: str(p) for n, p in files.items()} for k, files in found.items()},
                              "also": others, "copied_to": copy_to}))
    else:
        for kind, files in found.items():
            click.echo(f"{kind}:")
            for name, path in files.items():
                click.echo(f"  {name:<14} {path}")
    if others and fmt != "json":
        click.echo("also: " + ", ".join(f"{name}/" for name in others) + " (a custom training script, CI pipelines)")
    if copy_to:
        try:
            copy_examples(Path(copy_to))
        except OSError as err:
            raise InputError(f"--copy {copy_to}: cannot copy there ({err.strerror}: {err.filename})",
                             fix="choose a folder you can write, whose parents are folders, not files") from None
        click.echo(f"copied to {copy_to}/ (existing files kept)", err=fmt == "json")


@click.command("docs")
@click.argument("name", required=False, shell_complete=complete.doc_names)
@format_option()
def docs(name: str | None, fmt: str) -> None:
    """Print one of the guides shipped with trainkit (the ones error messages name), or list them.

    \b
    Example:
      trainkit docs
      trainkit docs training
    """
    found = shipped_docs()
    if name is None:
        titles = {doc: next((line.lstrip("# ").strip() for line in path.read_text().splitlines() if line.strip()), "")
                  for doc, path in found.items()}
        if fmt == "json":
            click.echo(dump_json({"docs": {doc: {"title": titles[doc], "path": str(found[doc])} for doc in found}}))
            return
        for doc in found:
            click.echo(f"  {doc:<12} {titles[doc]}")
        return
    key = name.removesuffix(".md").removeprefix("docs/")
    if key not in found:
        raise InputError(f"no guide named {name!r}", fix="one of: " + ", ".join(found) + " (`trainkit docs` lists them)")
    if fmt == "json":
        click.echo(dump_json({"name": key, "path": str(found[key]), "text": found[key].read_text()}))
        return
    click.echo(found[key].read_text(), nl=False)
