"""Which Slurm versions trainkit takes and the flags it uses with each (trainkit/cluster/
slurm_version.py), one row per `sbatch --version` text: the 20.11 and 22.05 rows from those
versions' man pages (slurm.schedmd.com/archive/slurm-20.11.9, slurm-22.05.8: sbatch(1)
--gpus-per-node since 19.05, srun(1) --overlap new in 20.11, --json in 21.08); an older Slurm is
refused naming slurm.login and the fix."""

from __future__ import annotations

import re

import pytest

from trainkit.cluster.slurm_version import features, parse
from trainkit.errors import InputError

# Format fields of Slurm 20.11.9's man pages (slurm.schedmd.com/archive/slurm-20.11.9): squeue(1)
# -o: %i job id, %T state (extended), %M time used, %N nodes; sinfo(1) -o: %N node names, %T state
# (extended), %E reason, %P partition; sacct(1) --format: JobID, State, ExitCode, Elapsed.
SQUEUE_20_11 = {"%i", "%T", "%M", "%N"}
SINFO_20_11 = {"%N", "%T", "%E", "%P"}
SACCT_20_11 = {"JobID", "State", "ExitCode", "Elapsed"}


@pytest.mark.parametrize("text, version, gpus_flag, overlap, json_", [
    ("slurm 20.11.9\n", (20, 11, 9), "--gpus-per-node", True, False),
    ("slurm-wlm 20.11.4\n", (20, 11, 4), "--gpus-per-node", True, False),
    ("slurm 21.08.8-2\n", (21, 8, 8), "--gpus-per-node", True, True),
    ("slurm-wlm 22.05.8\n", (22, 5, 8), "--gpus-per-node", True, True),
    ("slurm 23.11.4-1ubuntu1\n", (23, 11, 4), "--gpus-per-node", True, True),
    ("slurm 24.05\n", (24, 5, 0), "--gpus-per-node", True, True),
])
def test_a_supported_slurm_gets_its_flags(text, version, gpus_flag, overlap, json_):
    f = features(text)
    assert (f.version, f.gpus_flag, f.overlap, f.json) == (version, gpus_flag, overlap, json_)
    # every format field trainkit reads is in the oldest supported version's man pages
    for fmt in f.squeue_fields:
        assert set(re.findall(r"%[A-Za-z]", fmt)) <= SQUEUE_20_11, fmt
    assert set(re.findall(r"%[A-Za-z]", f.sinfo_fields)) <= SINFO_20_11 and f.sacct_fields in SACCT_20_11


@pytest.mark.parametrize("text, said", [
    ("slurm 20.02.7\n", "runs Slurm 20.02.7; trainkit needs Slurm 20.11 or newer"),
    ("slurm 19.05.5\n", "runs Slurm 19.05.5"),
    ("slurm 17.11.2\n", "runs Slurm 17.11.2"),
    ("bash: sbatch: command not found\n", "not a Slurm version"),
    ("", "not a Slurm version"),
])
def test_an_older_slurm_or_none_is_refused_with_the_fix(text, said):
    with pytest.raises(InputError) as err:
        features(text, "login.lab")
    assert said in err.value.message and err.value.message.startswith("slurm.login: "), err.value.message
    assert err.value.fix


def test_parse_refuses_text_that_names_no_slurm():
    with pytest.raises(ValueError):
        parse("sbatch 22.05.8")
