"""Shell completion through the real entry point (click's bash protocol): run ids from the SPEC's
workspace, `docs` names, `--config` built-in names plus files; and `trainkit --help` grouped by use."""

from __future__ import annotations

import os
import subprocess
import sys

from trainkit.cli import COMMANDS, GROUPS


def complete(words: str, tmp_path) -> list[str]:
    """What bash completion offers for the last word of `words` ("type,value" lines)."""
    parts = words.split(" ")
    env = {**os.environ, "COMP_WORDS": words, "COMP_CWORD": str(len(parts) - 1),
           "_TRAINKIT_COMPLETE": "bash_complete", "HOME": str(tmp_path)}
    proc = subprocess.run([sys.executable, "-m", "trainkit"], env=env, capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0 and "Traceback" not in proc.stderr, proc.stderr
    return proc.stdout.split()


def _runs(tmp_path, *names: str):
    for name in names:
        (tmp_path / "ws" / "runs" / name).mkdir(parents=True)
        (tmp_path / "ws" / "runs" / name / "run.json").write_text("{}")
    (tmp_path / "ws" / "runs" / "not-a-run").mkdir()  # no run.json: not offered


def test_run_ids_complete_from_the_spec_s_workspace(repo, tmp_path):
    _runs(tmp_path, "digits-20260101-120000", "gpt-20260102-090000")
    spec = repo / "examples/clusters/local.yaml"
    got = complete(f"trainkit logs {spec} --workdir {tmp_path / 'ws'} ", tmp_path)
    assert sorted(got) == ["plain,digits-20260101-120000", "plain,gpt-20260102-090000"]
    assert complete(f"trainkit cancel {spec} --workdir {tmp_path / 'ws'} g", tmp_path) == ["plain,gpt-20260102-090000"]
    assert complete(f"trainkit train {spec} --workdir {tmp_path / 'ws'} --resume d", tmp_path) == [
        "plain,digits-20260101-120000"]


def test_no_spec_or_a_bad_one_completes_nothing_and_never_a_traceback(tmp_path):
    (tmp_path / "bad.yaml").write_text("name: [unclosed\n")
    assert complete(f"trainkit logs {tmp_path / 'bad.yaml'} ", tmp_path) == []


def test_docs_names_and_config_names_complete(tmp_path):
    assert complete("trainkit docs exit", tmp_path) == ["plain,exit-codes"]
    got = complete("trainkit train spec.yaml --config dig", tmp_path)
    assert "plain,digits" in got and "file,dig" in got  # the built-in name, and the shell's own files


def test_help_lists_every_command_once_grouped_by_use():
    grouped = [name for _, names in GROUPS for name in names]
    assert sorted(grouped) == sorted(COMMANDS)
    out = subprocess.run([sys.executable, "-m", "trainkit", "--help"], capture_output=True, text=True).stdout
    assert [title for title, _ in GROUPS] == [line[:-1] for line in out.splitlines() if line and line.endswith(":")
                                              and not line.startswith(" ") and line[:-1] not in ("Options", "Example")]
