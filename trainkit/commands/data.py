"""`trainkit stage`: download a `data:` section's sources onto this node (glue over trainkit.staging.fetch)."""

from __future__ import annotations

from pathlib import Path

import click

from trainkit.commands.options import dump_json, format_option
from trainkit.errors import InputError
from trainkit.staging.fetch import stage as run_stage
from trainkit.staging.section import load_section
from trainkit.util import yamlload


@click.command("stage")
@click.argument("file", type=click.Path(exists=True, dir_okay=False))
@click.option("--root", required=True, type=click.Path(file_okay=False),
              help="Data root: each source lands in ROOT/<name>/.")
@format_option(help_text="json: one row per object.")
def stage(file: str, root: str, fmt: str) -> None:
    """Stage the `data:` section of FILE (a cluster spec, or a YAML/JSON file with `data:`) under
    ROOT: parallel ranged downloads, resumed after an interruption, verified (sha256, else size and
    MD5 ETag), archives unpacked, skipped when already present. The stage role (ansible/stage.yml,
    which `trainkit train` runs) runs it on each node (or once, on the NAS) before training.

    \b
    Example:
      trainkit stage examples/clusters/local.yaml --root /data/datasets
    """

    # One loader for every user YAML: bounded size and aliases, UTF-8, no FIFO read (it hung).
    raw = yamlload.load_file(file, "data file") or {}
    section = raw.get("data") if isinstance(raw, dict) else None
    if not isinstance(section, dict):
        raise InputError(f"{file}: no `data:` mapping to stage",
                         fix="add data: {sources: [{url: s3://bucket/prefix/}]} (see `trainkit docs data`)")
    rows = run_stage(load_section(section, f"{file}: data"), Path(root))
    if fmt == "json":
        click.echo(dump_json(rows))
    else:
        for row in rows:
            click.echo(f"{row['status']:10} {row['size']:>12}  {row['path']}")
