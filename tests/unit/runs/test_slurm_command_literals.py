"""Property-based (issue 41): a `command:` job's text on a Slurm cluster (command, setup, env
values) stays data. The batch script and node.sh are the same bytes whatever the text (so no user
text becomes an `#SBATCH` line or a shell word of trainkit's scripts); command.sh and setup.sh hold
the text as written (the user's own shell, run as on hosts); each env.sh line reads back through
shlex as `export NAME=<the value>`. Seeded like tests/unit/test_slurm_literals.py."""

from __future__ import annotations

import shlex

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from trainkit.runs.sbatch import COMMAND, CONFIG, ENV, NODE_SCRIPT, SCRIPT, SETUP, BatchJob, render
from trainkit.spec.slurm_block import SlurmSpec

PROPS = settings(max_examples=300, deadline=None, derandomize=True, database=None,
                 suppress_health_check=[HealthCheck.too_slow])
SPECIAL = list("az09-._/:;$()`'\"\\ \n\t\r\x1b%@,=+*?[]{}<>|&!#~") + ["#SBATCH --x", "é", "\u2028"]
text = st.one_of(st.text(alphabet=st.characters(exclude_categories=("Cs",), exclude_characters="\x00"), max_size=40),
                 st.lists(st.sampled_from(SPECIAL), max_size=12).map("".join))
SPEC = SlurmSpec.model_validate({"login": {"address": "login.example"}, "partition": "gpu", "workdir": "/shared/tk"})


def _job(command: str, setup: str | None, env: dict[str, str], nproc: int = 1) -> BatchJob:
    return BatchJob(run_id="r1", run_dir="/shared/tk/runs/r1", nodes=2, nproc_per_node=nproc, rdzv_port=29400,
                    slurm=SPEC, engine_config={}, command=command, setup=setup, env=env, code=True)


@PROPS
@given(command=text.filter(lambda t: t.strip()), setup=text.filter(lambda t: t.strip()), value=text)
def test_user_text_never_reaches_trainkit_s_scripts(command, setup, value):
    files = render(_job(command, setup, {"MY_VAR": value, "B": value}))
    plain = render(_job("x", "y", {"MY_VAR": "v", "B": "v"}))
    assert (files[SCRIPT], files[NODE_SCRIPT]) == (plain[SCRIPT], plain[NODE_SCRIPT])
    assert files[COMMAND] == command.rstrip("\n") + "\n" and files[SETUP] == setup.rstrip("\n") + "\n"
    assert shlex.split(files[ENV]) == ["export", f"MY_VAR={value}", "export", f"B={value}"]


def test_a_command_job_s_node_script_gives_the_job_environment():
    node = render(_job("python train.py", None, {}))[NODE_SCRIPT]
    for name in ("TRAINKIT_NODE_RANK=\"$SLURM_NODEID\"", "MASTER_ADDR=\"$TRAINKIT_HEAD_ADDR\"",
                 "WORLD_SIZE=", "TRAINKIT_STATUS_FILE=", "TRAINKIT_CHECKPOINT_DIR=", "RANK=\"$SLURM_NODEID\" LOCAL_RANK=0",
                 'cd "$TRAINKIT_RUN_DIR/code"', f'bash "$TRAINKIT_RUN_DIR/{COMMAND}"'):
        assert name in node, name
    assert node.index(f'. "$TRAINKIT_RUN_DIR/{ENV}"') < node.index(f'bash "$TRAINKIT_RUN_DIR/{COMMAND}"')
    assert "torch.distributed.run" not in node and CONFIG not in render(_job("x", None, {}))
    # several processes per node: torchrun in the user's command sets RANK per worker itself
    assert "LOCAL_RANK=0" not in render(_job("torchrun x.py", None, {}, nproc=2))[NODE_SCRIPT]


@pytest.mark.parametrize("env", [{"BAD NAME": "v"}, {"A": "nul\x00"}])
def test_an_env_the_script_cannot_hold_is_refused(env):
    with pytest.raises(ValueError):
        render(_job("x", None, env))
