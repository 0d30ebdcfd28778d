"""Which Slurm a login node runs, and the flags trainkit may use with it: pure, from the text of
`sbatch --version` ("slurm 22.05.8", "slurm-wlm 20.11.9", "slurm 23.11.4-1") to its version.

trainkit supports Slurm 20.11 and newer (issue 41); an older one is refused with the fix. Every
flag trainkit uses is in the man pages of the version named in its row (slurm.schedmd.com/archive/
slurm-20.11.9 and slurm-22.05.8: sbatch(1), squeue(1), sacct(1), sinfo(1), scontrol(1)); trainkit
asks only for output fields both versions print as text, because JSON output (`--json`, 21.08)
and squeue's `--only-job-state` came later (SkyPilot issue #8907: Slurm 20.11.7's squeue refuses
`--only-job-state`, "unrecognized option", and the client stopped right after its sbatch).
"""

from __future__ import annotations

import re

from trainkit.errors import InputError

OLDEST = (20, 11)   # the oldest Slurm trainkit's batch script and reads are written for
# The output formats trainkit reads (squeue(1), sacct(1), sinfo(1) of 20.11 and 22.05 alike):
# a job's state; a job's state, elapsed time and nodes (top); a node's name, state and reason (doctor)
SQUEUE_STATE, SQUEUE_TOP, SACCT_STATE, SINFO_NODES = "%T", "%T|%M|%N", "State", "%N|%T|%E"
# "slurm 22.05.8", "slurm-wlm 22.05.8", "slurm 23.11.4-1" (a distribution's build suffix)
_VERSION = re.compile(r"\bslurm(?:-wlm)?\s+(\d{2})\.(\d{1,2})(?:\.(\d+))?")


def parse(text: str) -> tuple[int, int, int]:
    """(major, minor, patch) from `sbatch --version`'s text; ValueError when it names no Slurm."""
    found = _VERSION.search(text.strip())
    if not found:
        raise ValueError(f"not a Slurm version: {text.strip()[:80]!r}")
    major, minor, patch = found.groups()
    return int(major), int(minor), int(patch or 0)


def shown_version(version: tuple[int, int, int]) -> str:
    """(22, 5, 8) -> "22.05.8", as Slurm writes its versions."""
    return f"{version[0]}.{version[1]:02d}.{version[2]}"


def supported(text: str, where: str = "the login node") -> tuple[int, int, int]:
    """The version of the Slurm whose `sbatch --version` printed `text`. InputError naming
    slurm.login for a text that names no Slurm or a Slurm older than OLDEST, with the fix.

    No flag depends on the version past that check: every option trainkit writes or calls is in
    20.11's man pages (tests/unit/cluster/test_slurm_version_table.py holds the list)."""
    try:
        version = parse(text)
    except ValueError:
        raise InputError(f"slurm.login: `sbatch --version` on {where} printed {text.strip()[:80]!r}, "
                         "not a Slurm version", fix="point slurm.login at a node with Slurm's client commands") from None
    if version[:2] < OLDEST:
        shown = shown_version(version)
        raise InputError(f"slurm.login: {where} runs Slurm {shown}; trainkit needs Slurm "
                         f"{OLDEST[0]}.{OLDEST[1]} or newer", fix="ask the cluster's admins for a login node "
                         "with Slurm 20.11+ client commands (sbatch, squeue, sacct, sinfo), or train on the "
                         "nodes as `cloud: hosts`")
    return version
