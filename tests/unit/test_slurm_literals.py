"""Property-based (issue 41): any string in a field of the spec's `slurm:` block, the run's folder or
a train override is either refused (by the spec's grammar, or the renderer's ValueError) or comes
out of the batch script as exactly its own value: the `#SBATCH` header holds the same options in
the same order whatever the text (no extra line, no second option in a value, nothing after a
`#SBATCH` line but the one value), and every value outside the header is one shell word read back
by shlex as the text itself. 400 generated examples per test, seeded (derandomize) so CI sees the
same cases every run (the settings of tests/unit/test_input_literals.py)."""

from __future__ import annotations

import shlex

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from pydantic import ValidationError

from trainkit.runs.sbatch import BatchJob, render, sbatch_options
from trainkit.spec.slurm_block import SlurmSpec

PROPS = settings(max_examples=400, deadline=None, derandomize=True, database=None,
                 suppress_health_check=[HealthCheck.too_slow])
SPECIAL = list("abz09-._/:;$()`'\"\\ \n\t\r\x00\x1b\x7f%@,=+*?[]{}<>|&!#~") + ["é", "中", "\u2028", "\ufeff"]
nasty = st.one_of(
    st.text(alphabet=st.characters(exclude_categories=("Cs",)), max_size=40),
    st.text(alphabet=st.sampled_from(SPECIAL), max_size=30),
    st.tuples(st.from_regex(r"\A[a-z0-9]{1,8}\Z"), st.text(alphabet=st.sampled_from(SPECIAL), max_size=10)
              ).map("".join),
)
BASE = {"login": {"address": "login.example"}, "partition": "gpu", "account": "acct", "qos": "normal",
        "time": "60", "gpus_per_node": 2, "gpu_type": "a100", "constraint": "a100", "workdir": "/shared/tk",
        "python": "/shared/venv/bin/python"}
FIELDS = ("partition", "account", "qos", "time", "gpu_type", "constraint", "workdir", "python")
RUN_DIR = "/shared/tk/runs/r1"


def _job(slurm: dict, run_dir: str = RUN_DIR, overrides: tuple[str, ...] = ()) -> BatchJob | None:
    """The job, or None when the spec or the renderer refuses the text."""
    try:
        spec = SlurmSpec.model_validate(slurm)
    except ValidationError:
        return None
    return BatchJob(run_id="r1", run_dir=run_dir, nodes=2, nproc_per_node=1, rdzv_port=29400, slurm=spec,
                    engine_config={"model": "digits_cnn"}, overrides=overrides)


def _files(job: BatchJob) -> dict[str, str] | None:
    try:
        return render(job)
    except ValueError:
        return None


def _header_is_the_options(script: str, job: BatchJob) -> None:
    lines = script.split("\n")
    expected = ["#SBATCH " + k + (f"={v}" if v is not None else "") for k, v in sbatch_options(job)]
    assert lines[1:1 + len(expected)] == expected
    assert lines[1 + len(expected)].startswith("# Written by trainkit")
    assert sum(1 for ln in lines if "SBATCH" in ln) == len(expected)
    for line in expected:
        assert " " not in line[len("#SBATCH "):] and "\r" not in line and "\\" not in line


def _assigned(script: str) -> dict[str, str]:
    block = script.split("set -u\n", 1)[1].split("\nexport ", 1)[0]
    out = {}
    for line in block.split("\n"):
        words = shlex.split(line, posix=True)
        assert len(words) == 1, line
        name, _, value = words[0].partition("=")
        out[name] = value
    return out


@PROPS
@given(field=st.sampled_from(FIELDS), text=nasty)
def test_a_slurm_field_is_refused_or_stays_its_own_value(field, text):
    job = _job({**BASE, field: text})
    files = _files(job) if job else None
    if files is None:
        return
    script = files["job.sbatch"]
    _header_is_the_options(script, job)
    options = dict(sbatch_options(job))
    if field in ("partition", "account", "qos", "time", "constraint"):
        assert options[f"--{field}"] == text
    elif field == "gpu_type":
        assert options["--gpus-per-node"] == f"{text}:2"
    elif field == "python":
        assert _assigned(script)["TRAINKIT_PYTHON"] == text


@PROPS
@given(run_dir=st.one_of(nasty, st.tuples(st.just("/shared/"), nasty).map("".join)),
       override=st.one_of(nasty, st.tuples(st.sampled_from(["epochs=", "lr0=", "a.b="]), nasty).map("".join)))
def test_the_run_folder_and_overrides_are_refused_or_one_word_each(run_dir, override):
    job = _job(BASE, run_dir=run_dir, overrides=(override,))
    files = _files(job)
    if files is None:
        return
    _header_is_the_options(files["job.sbatch"], job)
    assert _assigned(files["job.sbatch"])["TRAINKIT_RUN_DIR"] == run_dir
    torchrun = shlex.split(files["node.sh"].rstrip("\n").split("\n")[-1])
    assert torchrun[-2:] == ["--", override]
