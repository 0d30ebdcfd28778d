"""Which Slurm versions trainkit takes (trainkit/cluster/slurm_version.py), one row per `sbatch
--version` text, and that every option and output field trainkit uses is in the oldest one's man
pages (slurm.schedmd.com/archive/slurm-20.11.9: sbatch(1) --gpus-per-node since 19.05; nothing
newer such as --json, 21.08); an older Slurm is refused naming slurm.login and the fix."""

from __future__ import annotations

import re

import pytest

from trainkit.cluster.slurm_version import SACCT_STATE, SINFO_NODES, SQUEUE_STATE, SQUEUE_TOP, parse, supported
from trainkit.errors import InputError
from trainkit.runs.sbatch import BatchJob, sbatch_options
from trainkit.spec.slurm_block import SlurmSpec

# Format fields of Slurm 20.11.9's man pages (slurm.schedmd.com/archive/slurm-20.11.9): squeue(1)
# -o: %i job id, %T state (extended), %M time used, %N nodes; sinfo(1) -o: %N node names, %T state
# (extended), %E reason, %P partition; sacct(1) --format: JobID, State, ExitCode, Elapsed.
SQUEUE_20_11 = {"%i", "%T", "%M", "%N"}
SINFO_20_11 = {"%N", "%T", "%E", "%P"}
SACCT_20_11 = {"JobID", "State", "ExitCode", "Elapsed"}


# Options of Slurm 20.11.9's sbatch(1) that trainkit's batch script may write (long options)
SBATCH_20_11 = {"--job-name", "--nodes", "--ntasks-per-node", "--partition", "--account", "--qos", "--time",
                "--gpus-per-node", "--constraint", "--requeue", "--signal", "--open-mode", "--output", "--gres"}


@pytest.mark.parametrize("text, version", [
    ("slurm 20.11.9\n", (20, 11, 9)),
    ("slurm-wlm 20.11.4\n", (20, 11, 4)),
    ("slurm 21.08.8-2\n", (21, 8, 8)),
    ("slurm-wlm 22.05.8\n", (22, 5, 8)),
    ("slurm 23.11.4-1ubuntu1\n", (23, 11, 4)),
    ("slurm 24.05\n", (24, 5, 0)),
])
def test_a_supported_slurm_is_taken_with_its_version(text, version):
    assert supported(text) == version


def test_every_option_and_field_trainkit_uses_is_in_slurm_20_11():
    """The fallback for older Slurm is to need nothing newer: every #SBATCH option the batch script
    writes (all optional fields set) and every output field it reads exists in 20.11."""
    job = BatchJob(run_id="digits-20261205-000000", run_dir="/shared/r", nodes=2, nproc_per_node=1,
                   rdzv_port=29500, engine_config={}, slurm=SlurmSpec.model_validate({
                       "login": {"address": "10.0.0.1"}, "workdir": "/shared", "partition": "gpu",
                       "account": "ml", "qos": "normal", "time": "4:00:00", "gpus_per_node": 8,
                       "gpu_type": "a100", "constraint": "ib"}))
    assert {option for option, _ in sbatch_options(job)} <= SBATCH_20_11
    for fmt in (SQUEUE_STATE, SQUEUE_TOP):
        assert set(re.findall(r"%[A-Za-z]", fmt)) <= SQUEUE_20_11, fmt
    assert set(re.findall(r"%[A-Za-z]", SINFO_NODES)) <= SINFO_20_11 and SACCT_STATE in SACCT_20_11


@pytest.mark.parametrize("text, said", [
    ("slurm 20.02.7\n", "runs Slurm 20.02.7; trainkit needs Slurm 20.11 or newer"),
    ("slurm 19.05.5\n", "runs Slurm 19.05.5"),
    ("slurm 17.11.2\n", "runs Slurm 17.11.2"),
    ("bash: sbatch: command not found\n", "not a Slurm version"),
    ("", "not a Slurm version"),
])
def test_an_older_slurm_or_none_is_refused_with_the_fix(text, said):
    with pytest.raises(InputError) as err:
        supported(text, "login.lab")
    assert said in err.value.message and err.value.message.startswith("slurm.login: "), err.value.message
    assert err.value.fix


def test_parse_refuses_text_that_names_no_slurm():
    with pytest.raises(ValueError):
        parse("sbatch 22.05.8")
