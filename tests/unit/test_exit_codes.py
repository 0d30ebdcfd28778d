"""One exit-code table (trainkit/errors.py EXIT_CODES): docs/exit-codes.md (the site's page, which
trainkit/docsgen writes) carries it as generated, and no doc, CI example or help text names an exit code the table lacks or gives a
cause another code (credentials: 13, not 12). `plan --detailed-exitcode` exits as terraform's."""

from __future__ import annotations

import re
from pathlib import Path

import click
import pytest
from test_cli_conventions import commands, run

from trainkit import errors

BEGIN = "<!-- exit-codes: generated from trainkit/errors.py"
END = "<!-- /exit-codes -->"
# "exit 2", "exits 13", "exit code 11", "exits with 7", "exit **12**", "(exit 75)"
MENTION = re.compile(r"\bexit(?:s|ed)?(?: with)?(?: code)?\s+\**(\d+)\b", re.IGNORECASE)
SENTENCE = re.compile(r"(?<=[.;!?])\s+|\n\s*\n|\n\s*[-|*]\s|\n#")


def _docs(repo: Path) -> dict[str, str]:
    paths = [repo / "README.md", *sorted((repo / "docs").glob("*.md")),
             *sorted(p for p in (repo / "examples/ci").rglob("*") if p.is_file())]
    # a shell's own `exit 1` line in a pipeline is a command, not a claim about trainkit's codes
    texts = {str(p.relative_to(repo)): re.sub(r"(?m)^\s*exit \d+\s*$", "", p.read_text()) for p in paths}
    for name, cmd in commands().items():  # every help text a user reads
        helps = [cmd.help or ""] + [getattr(p, "help", None) or "" for p in cmd.params]
        texts[f"trainkit {name} --help"] = "\n".join(helps)
    return texts


def _block(text: str) -> str:
    start = text.index(BEGIN)
    return text[text.index("\n", start) + 1:text.index(END, start)]


def test_the_exit_code_page_carries_the_generated_table(repo):
    for name in ("docs/exit-codes.md",):
        text = (repo / name).read_text()
        assert text.count(BEGIN) == 1, f"{name}: no generated exit-code table"
        assert _block(text) == errors.exit_code_table(), (
            f"{name} disagrees with trainkit/errors.py: paste `python -m trainkit.errors` between its markers")


def test_no_doc_or_help_text_names_an_exit_code_the_table_lacks(repo):
    known = {e.code for e in errors.EXIT_CODES}
    unknown = [(where, int(m.group(1)), m.group(0)) for where, text in _docs(repo).items()
               for m in MENTION.finditer(text) if int(m.group(1)) not in known]
    assert not unknown, unknown


def test_a_cause_next_to_an_exit_code_is_given_that_cause_s_code(repo):
    wrong = []
    for where, text in _docs(repo).items():
        for sentence in SENTENCE.split(text):
            codes = {int(m.group(1)) for m in MENTION.finditer(sentence)}
            if not codes or "--detailed-exitcode" in sentence:
                continue
            for entry in errors.EXIT_CODES:
                if any(cue in sentence.lower() for cue in entry.cues) and entry.code not in codes:
                    wrong.append((where, entry.name, sentence.strip()[:200]))
    assert not wrong, wrong


def test_the_cue_check_would_catch_the_old_credentials_sentence():
    old = "`trainkit check` exits 12 when credentials are missing (9 when only a tool is)."
    codes = {int(m.group(1)) for m in MENTION.finditer(old)}
    cred = next(e for e in errors.EXIT_CODES if e.name == "CREDENTIALS")
    assert any(c in old for c in cred.cues) and cred.code not in codes


def test_the_detailed_exitcode_sentences_use_terraform_s_codes(repo):
    for where, text in _docs(repo).items():
        for sentence in SENTENCE.split(text):
            if "detailed-exitcode" in sentence:
                codes = {int(m.group(1)) for m in MENTION.finditer(sentence)}
                assert codes <= {0, 1, 2}, (where, sentence)


def test_every_constant_is_in_the_table_once():
    constants = {v for k, v in vars(errors).items() if k.isupper() and isinstance(v, int)
                 and k not in ("MAX_PROBLEMS", "DETAILED_CHANGES")}
    codes = [e.code for e in errors.EXIT_CODES]
    assert sorted(codes) == sorted(set(codes)) and constants == set(codes)


def test_plan_detailed_exitcode_failures_exit_1_as_terraform(repo, tmp_path, capsys):
    bad = tmp_path / "bad.yaml"
    bad.write_text("name: x\ncloud: local\n")  # the name is too short: exit 2 without the flag
    assert run(["plan", str(bad), "--workdir", str(tmp_path / "ws")], capsys)[0] == errors.BAD_INPUT
    code, _, err = run(["plan", str(bad), "--workdir", str(tmp_path / "ws"), "--detailed-exitcode"], capsys)
    assert code == 1 and "exit 2 without --detailed-exitcode" in err
    code, _, err = run(["plan", str(bad), "--detailed-exitcode", "--no-such-flag"], capsys)
    assert code == 1 and "No such option" in err  # a usage error is not "changes pending" (2)


def test_plan_detailed_exitcode_with_no_changes_exits_0(repo, tmp_path, capsys):
    code, _, _ = run(["plan", str(repo / "examples/clusters/local.yaml"), "--workdir", str(tmp_path),
                      "--detailed-exitcode"], capsys)
    assert code == 0


@pytest.mark.parametrize("name", ["exit-codes"])
def test_the_page_ships_with_trainkit_docs(name, capsys):
    code, out, _ = run(["docs", name], capsys)
    assert code == 0 and "| 13 | `CREDENTIALS` |" in out
    assert isinstance(commands()["docs"], click.Command)
