"""The docs site (mkdocs.yml over docs/): the reference pages committed in docs/ are what
trainkit/docsgen gives from the code, the published JSON Schema accepts every shipped spec and
refuses what the spec model refuses, every page is in the site's nav, every variable the package
reads is documented, and every `trainkit docs NAME` a help text, an error or a page names exists.
(`make docs` builds the site itself with `mkdocs build --strict`.)"""

from __future__ import annotations

import difflib
import inspect
import json
import re
import typing
from pathlib import Path

import jsonschema
import pytest
import yaml
from test_cli_conventions import commands

from trainkit import docsgen
from trainkit.cli import COMMANDS
from trainkit.docsgen import env_ref, models_ref
from trainkit.runs import launch
from trainkit.util.resources import docs as shipped_docs

DOCS_NAME = re.compile(r"trainkit docs ([a-z][a-z0-9-]*)")


def test_the_committed_reference_pages_are_what_the_code_gives(repo):
    stale = docsgen.stale(repo / "docs")
    diff = [line for name in stale[:1] for line in difflib.unified_diff(
        (repo / "docs" / name).read_text().splitlines(), docsgen.pages()[name].splitlines(), name, "code", lineterm="")]
    assert stale == [], "run `make docs-pages` (python -m trainkit.docsgen) and commit:\n" + "\n".join(diff[:40])


def test_the_cli_page_is_the_same_after_each_command_ran_alone(repo):
    """click keeps a command's help option from the first context that built it: a command invoked
    alone (no `trainkit` group, so no -h) before the page is made must not change the page (it did,
    in whichever xdist worker ran such a test first)."""
    import importlib

    from click.testing import CliRunner

    for target in COMMANDS.values():
        module, attr = target.split(":")
        assert CliRunner().invoke(getattr(importlib.import_module(module), attr), ["--help"]).exit_code == 0
    assert docsgen.pages()["cli.md"] == (repo / "docs" / "cli.md").read_text()


def test_stale_names_a_page_that_differs_and_write_repairs_it(tmp_path):
    assert set(docsgen.write(tmp_path)) == set(docsgen.pages())
    (tmp_path / "cli.md").write_text("# old\n")
    assert docsgen.stale(tmp_path) == ["cli.md"]
    assert docsgen.write(tmp_path) == ["cli.md"] and docsgen.stale(tmp_path) == []


def test_the_cli_page_has_every_command_and_its_options():
    page = docsgen.pages()["cli.md"]
    for name in COMMANDS:
        assert f"\n## trainkit {name}\n" in page, name
    assert "\n## trainkit prices refresh\n" in page  # a subgroup's commands too
    assert "--detailed-exitcode" in page and "--recover" in page


@pytest.mark.parametrize("annotation,expected", [
    (int, "int"), (typing.Optional[str], "str or null"), (typing.Literal["disk", "nas"], '"disk" \\| "nas"'),
    (tuple[str, ...], "list of str"), (dict[str, str], "map of str to str"),
    (typing.Annotated[int, "x"] | typing.Literal["auto"], 'int or "auto"')])
def test_type_names_are_readable(annotation, expected):
    assert models_ref.type_name(annotation) == expected


def test_the_spec_page_lists_nested_fields_with_bounds_and_leaves_derived_ones_out():
    page = docsgen.pages()["spec-fields.md"]
    assert "| `nodes` | int | `1` | >= `1`, <= `64` |" in page
    assert "| `storage.data_disk.size_gb` |" in page and "| `hosts[].address` |" in page
    assert "zone_candidates" not in page and "type_candidates" not in page


def test_the_train_page_lists_sections_and_the_launcher_keys():
    page = docsgen.pages()["train-config.md"]
    assert "| `checkpoint.keep` | int | `3` | >= `2`" in page and "| `lr0` |" in page
    assert "`recover`" in page


def _schema() -> jsonschema.Draft202012Validator:
    return jsonschema.Draft202012Validator(models_ref.spec_schema())


def test_every_shipped_spec_points_at_the_schema_and_passes_it(repo):
    for path in sorted((repo / "examples/clusters").glob("*.yaml")):
        first = path.read_text().splitlines()[0]
        target = first.removeprefix("# yaml-language-server: $schema=")
        assert target != first and (path.parent / target).resolve() == repo / "docs/schema/cluster-spec.json", path
        errors = [e.message for e in _schema().iter_errors(yaml.safe_load(path.read_text()))]
        assert not errors, (path, errors)


@pytest.mark.parametrize("spec,ok", [
    ({"name": "abc", "cloud": "local"}, True),
    ({"name": "abc", "cloud": "aws", "zone": ["us-east-1a", "us-east-1b"],
      "instance": {"type": ["g5.xlarge", "g5.2xlarge"]}}, True),  # the list forms the model takes
    ({"name": "abc", "cloud": "local", "spot": {"max_prize": 3}}, False),  # unknown field
    ({"name": "abc", "cloud": "local", "nodes": 0}, False),  # below ge=1
    ({"name": "Abc", "cloud": "local"}, False),  # the name pattern
    ({"cloud": "local"}, False),  # name is required
    ({"name": "abc", "cloud": "local", "zone_candidates": ["a"]}, False)])  # set by the model, not a user field
def test_the_schema_refuses_what_the_spec_model_refuses(spec, ok):
    assert (not list(_schema().iter_errors(spec))) is ok


def test_every_page_is_in_the_site_nav_once(repo):
    def files(node):
        if isinstance(node, str):
            return [node]
        if isinstance(node, dict):
            return [f for v in node.values() for f in files(v)]
        return [f for v in node for f in files(v)]
    nav = files(yaml.safe_load((repo / "mkdocs.yml").read_text())["nav"])
    assert sorted(nav) == sorted(p.name for p in (repo / "docs").glob("*.md"))


def _names_in_source(repo: Path, pattern: re.Pattern[str]) -> dict[str, str]:
    found = {}
    for path in (repo / "trainkit").rglob("*.py"):
        for m in pattern.finditer(path.read_text()):
            found.setdefault(m.group(1), str(path.relative_to(repo)))
    return found


def test_every_trainkit_variable_the_package_names_is_documented(repo):
    names = _names_in_source(repo, re.compile(r"\b(TRAINKIT_[A-Z0-9_]*[A-Z0-9])\b"))
    names.pop("TRAINKIT_FAULT", None)  # the prefix in prose ("TRAINKIT_FAULT_*")
    missing = {n: where for n, where in names.items() if n not in env_ref.READ and n not in env_ref.SET}
    assert not missing, f"add these to trainkit/docsgen/env_ref.py: {missing}"


def test_the_job_environment_table_is_what_job_env_sets():
    keys = set(re.findall(r'"([A-Z][A-Z0-9_]+)":', inspect.getsource(launch.job_env)))
    keys |= set(re.findall(r'env\["([A-Z][A-Z0-9_]+)"\]', inspect.getsource(launch.job_env)))
    assert keys == set(env_ref.SET)


def test_every_trainkit_docs_name_in_help_errors_and_pages_exists(repo):
    texts = {f"trainkit {n} --help": "\n".join([c.help or ""] + [getattr(p, "help", None) or "" for p in c.params])
             for n, c in commands().items()}
    texts |= {str(p.relative_to(repo)): p.read_text() for p in (repo / "trainkit").rglob("*.py")}
    texts |= {str(p.relative_to(repo)): p.read_text() for p in (repo / "docs").glob("*.md")}
    texts |= {str(p.relative_to(repo)): p.read_text() for p in (repo / "examples").rglob("*") if p.is_file()}
    shipped = set(shipped_docs())
    named = {(where, m.group(1)) for where, text in texts.items() for m in DOCS_NAME.finditer(text)}
    assert len({n for _, n in named}) >= 6  # the help texts and errors do name pages
    assert not [(w, n) for w, n in named if n not in shipped and n != "NAME"]


def test_no_help_text_sends_a_user_to_a_file_a_pip_install_lacks():
    for name, cmd in commands().items():
        text = "\n".join([cmd.help or ""] + [getattr(p, "help", None) or "" for p in cmd.params])
        assert "README" not in text and not re.search(r"docs/[a-z-]+\.md", text), name


def test_trainkit_docs_ships_every_page_of_the_site(repo):
    assert set(shipped_docs()) == {p.stem for p in (repo / "docs").glob("*.md")}
    assert json.loads((repo / "docs/schema/cluster-spec.json").read_text())["title"] == "trainkit cluster spec"
