"""Which Slurm versions trainkit takes and the flags it uses with each (trainkit/cluster/
slurm_version.py), one row per `sbatch --version` text: the 20.11 and 22.05 rows from those
versions' man pages (slurm.schedmd.com/archive/slurm-20.11.9, slurm-22.05.8: sbatch(1)
--gpus-per-node since 19.05, srun(1) --overlap new in 20.11, --json in 21.08); an older Slurm is
refused naming slurm.login and the fix."""

from __future__ import annotations

import pytest

from trainkit.cluster.slurm_version import features, parse
from trainkit.errors import InputError


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
    # the text fields trainkit reads are the same in every supported version
    assert (f.squeue_fields, f.sacct_fields, f.sinfo_fields) == ("%i %T %M %N", "State", "%N|%T|%E")


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
