"""Shell completion beyond fixed words: cluster names, run ids, `docs` names, `--config` names and files.

Each function is a click `shell_complete` callback: (context, parameter, what was typed so far)
-> the candidates. They read only local files (the registry of known clusters, the spec's
`name:`, the workspace's runs/, the shipped docs and configs), never the cloud, write nothing, and
answer [] rather than fail: a completion that raises prints a traceback into the user's shell.
"""

from __future__ import annotations

import os
import shlex
from pathlib import Path

import click
from click.shell_completion import CompletionItem

from trainkit.cluster import registry
from trainkit.util import resources, yamlload
from trainkit.workspace import Workspace


def cluster_names(ctx: click.Context, param: click.Parameter, incomplete: str) -> list[CompletionItem]:
    """SPEC: the names of the clusters this machine knows (whose workspace is still there), then
    files (the shell completes paths)."""
    try:
        names = sorted(registry.known_names())  # a damaged registry: none (the command names it)
    except Exception:  # an unreadable state folder: only files
        names = []
    return [CompletionItem(n) for n in names if n.startswith(incomplete)] + [CompletionItem(incomplete, type="file")]


def run_ids(ctx: click.Context, param: click.Parameter, incomplete: str) -> list[CompletionItem]:
    """The runs in the workspace of the SPEC already typed (its `name:`, or --workdir; a cluster
    name: its workspace), newest first."""
    try:
        path, workdir = _typed(ctx)
        if not os.path.exists(path) and registry.is_name(path):
            ws = Workspace(Path(registry.find(path, workdir).workspace))
        else:
            spec = yamlload.load_file(path, "cluster spec")
            ws = Workspace.for_cluster(str(spec["name"]), workdir)
        runs = sorted((p for p in ws.runs_dir.iterdir() if (p / "run.json").is_file()),
                      key=lambda p: p.stat().st_mtime, reverse=True)
    except Exception:  # no spec typed yet, a bad one, no workspace: nothing to offer
        return []
    return [CompletionItem(p.name) for p in runs if p.name.startswith(incomplete)]


def doc_names(ctx: click.Context, param: click.Parameter, incomplete: str) -> list[CompletionItem]:
    """The guides `trainkit docs NAME` prints."""
    return [CompletionItem(name) for name in resources.docs() if name.startswith(incomplete)]


def train_configs(ctx: click.Context, param: click.Parameter, incomplete: str) -> list[CompletionItem]:
    """The built-in training configs by name, and files (the shell completes paths)."""
    names = [CompletionItem(n) for n in resources.examples()["train"] if n.startswith(incomplete)]
    return names + [CompletionItem(incomplete, type="file")]


def _typed(ctx: click.Context) -> tuple[str, str | None]:
    """(SPEC, --workdir) as typed. click has them in ctx.params, except while an option's value is
    completed (`train SPEC --resume <TAB>`): its parser stops at that option before it assigns the
    positional SPEC, so they are read from the words the shell passes (COMP_WORDS, set by click's
    bash, zsh and fish scripts)."""
    if ctx.params.get("spec"):
        return ctx.params["spec"], ctx.params.get("workdir")
    words = shlex.split(os.environ.get("COMP_WORDS", ""))
    flags = next((p.opts for p in ctx.command.params if p.name == "workdir"), [])
    takes_value = {o for p in ctx.command.params if isinstance(p, click.Option) and not p.is_flag for o in p.opts}
    spec = next(w for w in words[2:] if w.endswith((".yaml", ".yml"))
                or (registry.is_name(w) and not _after_option(words, w, takes_value)))
    workdir = next((b for a, b in zip(words, words[1:]) if a in flags), None)
    return spec, workdir


def _after_option(words: list[str], word: str, takes_value: set[str]) -> bool:
    """Whether `word`'s first place in `words` is the value of an option that takes one."""
    i = words.index(word)
    return i > 0 and words[i - 1] in takes_value
