"""The CLI reference: every command of the click group in trainkit/cli.py, as `--help` prints it.

The help is rendered at a fixed width (WIDTH) so the page does not depend on the terminal that
built it. A subgroup (`prices`) lists each of its subcommands under it.
"""

from __future__ import annotations

import click

WIDTH = 100  # columns for the rendered help: wide enough for the option lists, fixed for a stable page


def _help(cmd: click.Command, path: list[str], parent: click.Context | None) -> tuple[str, click.Context]:
    # the root's context_settings (-h/--help) as `trainkit` has them; children inherit them from parent
    settings = {} if parent is not None else dict(cmd.context_settings)
    # click (>= 8.2) keeps a command's help option from the first context that asked for it: a
    # command invoked alone before (a test, another program) would print `--help` without `-h`
    cmd._help_option = None
    ctx = click.Context(cmd, info_name=path[-1], parent=parent, terminal_width=WIDTH, max_content_width=WIDTH,
                        **settings)
    return cmd.get_help(ctx), ctx


def _sections(cmd: click.Command, path: list[str], parent: click.Context | None) -> list[str]:
    """`## trainkit a b` with the command's help in a text block, then its subcommands."""
    text, ctx = _help(cmd, path, parent)
    out = [f"## {' '.join(path)}\n", f"{cmd.get_short_help_str(limit=200)}\n", "```text", text.rstrip(), "```\n"]
    if isinstance(cmd, click.Group):
        for name in cmd.list_commands(ctx):
            out += _sections(cmd.get_command(ctx, name), [*path, name], ctx)
    return out


def page(note: str) -> str:
    """docs/cli.md: an index of the commands by use (trainkit.cli.GROUPS), then each one's help."""
    from trainkit.cli import GROUPS, SHORT_HELP, cli

    root, ctx = _help(cli, ["trainkit"], None)
    lines = ["# Command reference\n", note.format(source="the click commands of trainkit/cli.py"),
             "Every command as `trainkit COMMAND --help` prints it. Conventions shared by all of them "
             "(`--json`, `--yes`, `--workdir`) are in [Command-line conventions](conventions.md); exit "
             "codes in [Exit codes](exit-codes.md).\n"]
    for title, names in GROUPS:
        lines += [f"**{title}**\n", "| command | what it does |", "|---|---|"]
        lines += [f"| [`{n}`](#trainkit-{n}) | {SHORT_HELP[n]} |" for n in names]
        lines.append("")
    lines += ["## trainkit\n", "```text", root.rstrip(), "```\n"]
    for _title, names in GROUPS:
        for name in names:
            lines += _sections(cli.get_command(ctx, name), ["trainkit", name], ctx)
    return "\n".join(lines).rstrip() + "\n"
