"""A run's batch job on a Slurm cluster, through its login node (the edge: ssh, sbatch, squeue).

`login_node(spec)` is the login node as a `Node` (ssh with the spec's key, port and user);
`submit(login, job)` writes the job's files (runs/sbatch.py) into its run folder on the shared
storage and submits it, returning the job id; `job_state(login, job_id)` reads the scheduler;
`fetch(login, run_dir, dest)` brings the run folder back. Nothing here waits: callers poll.

The CLI reaches these through trainkit/runs/slurm_runs.py (train, runs, logs, cancel).
"""

from __future__ import annotations

import getpass
import io
import re
import shlex
import tarfile
from pathlib import Path

from trainkit.errors import TrainkitError
from trainkit.provision.node import Node
from trainkit.runs.launch import tar_bytes
from trainkit.runs.sbatch import SCRIPT, BatchJob, render
from trainkit.spec.slurm_block import SlurmSpec

# Job states after which the job runs no more (squeue(1) JOB STATE CODES; REQUEUED and PENDING
# are not among them: a requeued job starts again).
ENDED = ("COMPLETED", "FAILED", "CANCELLED", "TIMEOUT", "NODE_FAIL", "OUT_OF_MEMORY", "BOOT_FAIL",
         "DEADLINE", "PREEMPTED")
_JOB_ID = re.compile(r"(\d+)(?:;\S+)?")   # sbatch --parsable: "<id>" or "<id>;<cluster>"
_SUBMIT_TIMEOUT_S = 120                   # a busy slurmctld answers sbatch within seconds


def login_node(spec: SlurmSpec) -> Node:
    """The login node: the spec's address, port, user (default: whoever runs trainkit) and key."""
    login = spec.login
    return Node(name="login", rank=0, address=login.address, port=login.port,
                user=login.user or getpass.getuser(), key_file=login.key)


def submit(login: Node, job: BatchJob, code: bytes | None = None) -> str:
    """Write the job's files into `job.run_dir` (created) and `sbatch` it there; the job id. `code`:
    a `workdir:` job's tar (runs/launch.py workdir_tar), unpacked into <run_dir>/code first.
    TrainkitError with sbatch's own words when the login node or the scheduler refuses."""
    files = {name: text.encode() for name, text in render(job).items()}
    run_dir = shlex.quote(job.run_dir)
    if code is not None:
        res = login.sh(f"mkdir -p {run_dir}/code && tar -xf - -C {run_dir}/code", data=code, timeout=_SUBMIT_TIMEOUT_S)
        if res.returncode != 0:
            raise TrainkitError(f"could not copy the workdir to {job.run_dir}/code on {login.address} "
                                f"(exit {res.returncode}): {res.stderr.decode(errors='replace').strip()[-400:]}",
                                fix="check that the login node can write slurm.workdir and that it has room")
    script = (f"mkdir -p {run_dir}/logs && tar -xf - -C {run_dir} && cd {run_dir} && "
              f"sbatch --parsable {SCRIPT}")
    res = login.sh(script, data=tar_bytes(files), timeout=_SUBMIT_TIMEOUT_S)
    out = res.stdout.decode(errors="replace").strip()
    found = _JOB_ID.fullmatch(out.splitlines()[-1]) if out else None
    if res.returncode != 0 or not found:
        said = res.stderr.decode(errors="replace").strip()[-600:] or out[-600:]
        raise TrainkitError(f"sbatch on {login.address} did not take the job (exit {res.returncode}): {said}",
                            fix="check the spec's slurm: block (partition, account, qos, time) "
                                "against `sinfo` and `sacctmgr show assoc` on the login node")
    return found.group(1)


def job_state(login: Node, job_id: str) -> str | None:
    """The job's state (RUNNING, PENDING, COMPLETED, ...): squeue, then scontrol for a job squeue no
    longer lists; None when the scheduler knows no such job (or the login node does not answer)."""
    if not job_id.isdigit():
        raise ValueError(f"job id {job_id!r}")
    res = login.sh(f"squeue -h -j {job_id} -o %T 2>/dev/null; "
                   f"scontrol show job {job_id} 2>/dev/null | grep -o 'JobState=[A-Z_]*'", timeout=60)
    lines = res.stdout.decode(errors="replace").split()
    if not lines:
        return None
    return lines[0].removeprefix("JobState=")


def fetch(login: Node, run_dir: str, dest: Path) -> list[Path]:
    """Copy the run folder from the shared storage (through the login node) into `dest`."""
    dest.mkdir(parents=True, exist_ok=True)
    res = login.sh(f"cd {shlex.quote(run_dir)} && tar -cf - . 2>/dev/null", timeout=300)
    if res.returncode not in (0, 2) or not res.stdout:
        raise TrainkitError(f"could not read {run_dir} on {login.address} (exit {res.returncode})",
                            fix="check that the login node sees slurm.workdir")
    with tarfile.open(fileobj=io.BytesIO(res.stdout)) as tar:
        members = [m for m in tar.getmembers() if m.isfile() or m.isdir()]
        tar.extractall(dest, members=members, filter="data")
    return sorted(p for p in dest.rglob("*") if p.is_file())
