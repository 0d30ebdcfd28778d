"""The batch job of a run on a Slurm cluster (target `slurm`): pure, from a `BatchJob` to the files
the job's folder on shared storage holds.

`render(job)` -> {"job.sbatch", "node.sh", "config.yaml"}. `sbatch job.sbatch` (on the login node,
in the run folder) asks for `nodes` nodes, one task each, and the spec's partition/account/qos/
time/GPUs/constraint; `--requeue` lets Slurm start it again after a node failure or a preemption,
and `--signal=B:USR1@<s>` tells the batch shell `signal_s` seconds before the time limit. Then:

- the batch shell finds the allocation's first node and its address (Slurm's NodeAddr, not the
  node name, which may resolve to loopback on that node: measured with Slurm 22.05 here), and
  starts node.sh on every node with `srun` (one log per node, logs/node-<N>.log);
- node.sh runs torchrun with a c10d rendezvous on that first node: `--rdzv-conf is_host=1` only
  on SLURM_NODEID 0 (the node that hosts the store), `--local-addr` the node's own NodeAddr, a
  rendezvous id per (job, restart), and the engine resumes from the newest complete checkpoint in
  the run folder's checkpoints/ (`resume=true`), so a requeued job continues where it stopped;
- on USR1 the batch shell sends SIGTERM to the job's steps (`scancel --signal=TERM`: every
  process of the tasks, torchrun and its ranks; not srun itself, which kills the step at once
  on SIGTERM); the ranks finish the step, write a checkpoint and
  summary.json "preempted" (trainkit/train/dist.py's Preemption: 30 s before torchrun's SIGKILL,
  pytorch PR #61602); the shell then requeues its own job (`scontrol requeue`), because Slurm
  does not requeue a job that reaches its time limit. Slurm holds a requeued job back before it
  starts again (`AuthInfo` `cred_expire`, 120 s by default: slurm.conf(5); 121-125 s measured with
  Slurm 22.05 on namespace hosts, docs/slurm.md "Figures"; `scontrol update
  JobId=<id> StartTime=now` lets it start at once).
- a step that failed while a node of the allocation no longer answers (a probe `srun true` on
  every node fails within PROBE_S) requeues the job too; a step that failed on healthy nodes
  ends the job with the step's status.

A `command:` job (BatchJob.command) runs the user's command.sh on every node instead of torchrun,
with the job environment hosts give (node.sh's _command_body), env.sh last; its text travels only
as those files, never into job.sbatch or node.sh.

Every value from the spec or the caller is checked here again (ValueError) and reaches the script
only as an `#SBATCH` option of a fixed form or as one shell-quoted assignment; the script's logic
reads those variables, never the text itself.
"""

from __future__ import annotations

import re
import shlex
from dataclasses import dataclass, field

import yaml

from trainkit.runs.record import NAME_RE, OVERRIDE_RE
from trainkit.spec.slurm_block import SlurmSpec
from trainkit.util import grammar

SCRIPT, NODE_SCRIPT, CONFIG = "job.sbatch", "node.sh", "config.yaml"
COMMAND, SETUP, ENV = "command.sh", "setup.sh", "env.sh"   # a `command:` job's own text, as files
_ENV_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
# Seconds a probe step (`srun true` on every node) may take before a node counts as lost after a
# failed step: well above a healthy step's start (about 1 s measured on namespace hosts), below
# Slurm's default SlurmdTimeout (300 s), after which Slurm itself would requeue.
PROBE_S = 120
# The only characters an #SBATCH value may hold (every one of them is checked before this).
_SBATCH_VALUE = re.compile(r"[A-Za-z0-9_.:&|*\[\]/+@,=%-]+")


@dataclass(frozen=True)
class BatchJob:
    """One run as one batch job. `run_dir`: the run's folder on storage every node shares."""

    run_id: str
    run_dir: str
    nodes: int
    nproc_per_node: int
    rdzv_port: int
    slurm: SlurmSpec
    engine_config: dict
    overrides: tuple[str, ...] = ()
    command: str | None = None      # a `command:` job: the user's shell text, run on every node as written
    setup: str | None = None        # its `setup:`, once per node of the run
    env: dict[str, str] = field(default_factory=dict)   # its `env:`, exported last (as on hosts)
    code: bool = False              # its `workdir:` is shipped to <run_dir>/code and the command runs there


def render(job: BatchJob) -> dict[str, str]:
    """The job's files (name -> text). ValueError naming the value when one is not fit for the
    script (the spec's grammar refuses such values earlier; callers pass only checked ones)."""
    _check(job)
    files = {SCRIPT: batch_script(job), NODE_SCRIPT: node_script(job)}
    if job.command is None:
        return {**files, CONFIG: yaml.safe_dump(job.engine_config, sort_keys=False)}
    files[COMMAND] = job.command.rstrip("\n") + "\n"
    if job.setup:
        files[SETUP] = job.setup.rstrip("\n") + "\n"
    return {**files, ENV: "".join(f"export {k}={shlex.quote(v)}\n" for k, v in job.env.items())}


def _check(job: BatchJob) -> None:
    if not NAME_RE.fullmatch(job.run_id):
        raise ValueError(f"run id {job.run_id!r} is not a run name")
    grammar.check_path(job.run_dir)
    if not 1 <= job.nodes <= 1024 or not 1 <= job.nproc_per_node <= 64 or not 1024 <= job.rdzv_port <= 65535:
        raise ValueError(f"nodes {job.nodes}, nproc_per_node {job.nproc_per_node} or port {job.rdzv_port} "
                         "out of range")
    bad = [o for o in job.overrides if not OVERRIDE_RE.fullmatch(o)]
    if bad:
        raise ValueError(f"overrides {bad!r} are not KEY=VALUE")
    SlurmSpec.model_validate(job.slurm.model_dump())   # a spec built without validation is checked
    bad_env = [k for k, v in job.env.items() if not _ENV_NAME.fullmatch(k) or "\x00" in v]
    if bad_env:   # bash holds no NUL in a value; a name is a name (launch_keys.env refuses both first)
        raise ValueError(f"env {bad_env!r}: not NAME=value")


def sbatch_options(job: BatchJob) -> list[tuple[str, str | None]]:
    """The job's `#SBATCH` options in order: (option, value or None for a flag)."""
    s = job.slurm
    gpus = f"{s.gpu_type}:{s.gpus_per_node}" if s.gpu_type else str(s.gpus_per_node)
    options: list[tuple[str, str | None]] = [
        ("--job-name", f"trainkit-{job.run_id}"), ("--nodes", str(job.nodes)), ("--ntasks-per-node", "1"),
        ("--partition", s.partition), ("--account", s.account), ("--qos", s.qos), ("--time", s.time),
        ("--gpus-per-node", gpus if s.gpus_per_node else None), ("--constraint", s.constraint),
        ("--requeue", None), ("--signal", f"B:USR1@{s.signal_s}"), ("--open-mode", "append"),
        # %j: the job id (sbatch(1) filename patterns); a requeued job appends to the same file
        ("--output", f"{job.run_dir}/logs/slurm-%j.out")]
    flags = {"--requeue"}
    return [(k, v) for k, v in options if v is not None or k in flags]


def batch_script(job: BatchJob) -> str:
    """job.sbatch: the header of #SBATCH lines, the job's values, then the logic (module docstring)."""
    lines = ["#!/bin/bash"]
    for option, value in sbatch_options(job):
        if value is not None and not _SBATCH_VALUE.fullmatch(value):
            raise ValueError(f"{option} value {value!r} cannot be an #SBATCH option")
        lines.append(f"#SBATCH {option}" + (f"={value}" if value is not None else ""))
    lines += ["# Written by trainkit (trainkit/runs/sbatch.py). The values below are data: one quoted",
              "# word each; what follows reads only the variables.", "set -u",
              *_assignments(_values(job)), *_BATCH_BODY]
    return "\n".join(lines) + "\n"


def node_script(job: BatchJob) -> str:
    """node.sh: torchrun on one allocated node (srun starts it once per node); for a `command:`
    job, the user's command.sh with the environment every target gives a job (docs: environment)."""
    head = ["#!/bin/bash", "# One per allocated node (srun, one task per node): torchrun, "
            "rendezvous on the allocation's first node.", "set -u", *_NODE_BODY]
    if job.command is not None:
        return "\n".join(head + _command_body(job)) + "\n"
    overrides = " ".join(shlex.quote(o) for o in job.overrides)
    return "\n".join(head + [_TORCHRUN + (f" {overrides}" if overrides else "")]) + "\n"


def _command_body(job: BatchJob) -> list[str]:
    """node.sh's tail for a `command:` job: the job environment per node (as runs/launch.py's
    job_env gives it on hosts, from Slurm's SLURM_NODEID and SLURM_JOB_NUM_NODES; RANK and
    LOCAL_RANK when one process runs per node, else torchrun in the command sets them), the
    user's env.sh last, setup.sh once per node, then command.sh in the shipped workdir (or the run
    folder). Exit 75 from the command is written to $TRAINKIT_STATUS_FILE as `preempted`, which
    the batch shell reads as a checkpointed stop (docs/runs.md: the resumable-command contract)."""
    code = '"$TRAINKIT_RUN_DIR/code"' if job.code else '"$TRAINKIT_RUN_DIR"'
    lines = ['export TRAINKIT_NODE_RANK="$SLURM_NODEID" TRAINKIT_NUM_NODES="$SLURM_JOB_NUM_NODES" '
             'TRAINKIT_ATTEMPT="$((${SLURM_RESTART_COUNT:-0} + 1))" TRAINKIT_PRIVATE_IP="$self_addr" '
             'TRAINKIT_CHECKPOINT_DIR="$TRAINKIT_RUN_DIR/checkpoints" '
             'TRAINKIT_STATUS_FILE="$TRAINKIT_RUN_DIR/status/node-$SLURM_NODEID" '
             'TRAINKIT_DATA_ROOT="$TRAINKIT_RUN_DIR/data" MASTER_ADDR="$TRAINKIT_HEAD_ADDR" '
             'MASTER_PORT="${TRAINKIT_RDZV_ENDPOINT##*:}" NNODES="$SLURM_JOB_NUM_NODES" NODE_RANK="$SLURM_NODEID" '
             'NPROC_PER_NODE="$TRAINKIT_GPUS_PER_NODE" '
             'WORLD_SIZE="$((SLURM_JOB_NUM_NODES * TRAINKIT_GPUS_PER_NODE))" PYTHONUNBUFFERED=1 OMP_NUM_THREADS=1',
             'mkdir -p "$TRAINKIT_RUN_DIR/status" "$TRAINKIT_CHECKPOINT_DIR"']
    if job.code:
        lines.append('export TRAINKIT_CODE_DIR="$TRAINKIT_RUN_DIR/code"')
    if job.nproc_per_node == 1:   # one process per node: it is global rank NODE_RANK (env:// init)
        lines.append('export RANK="$SLURM_NODEID" LOCAL_RANK=0')
    lines.append(f'. "$TRAINKIT_RUN_DIR/{ENV}"')
    if job.setup:
        done = '"$TRAINKIT_RUN_DIR/status/.setup-$SLURMD_NODENAME.done"'
        lines.append(f'if [ ! -e {done} ]; then (cd {code} && bash "$TRAINKIT_RUN_DIR/{SETUP}") || exit $?; '
                     f'touch {done}; fi')
    return lines + [f"cd {code}", f'rc=0; bash "$TRAINKIT_RUN_DIR/{COMMAND}" || rc=$?',
                    'if [ "$rc" = 75 ]; then echo preempted > "$TRAINKIT_STATUS_FILE"; fi', 'exit "$rc"']


def _values(job: BatchJob) -> dict[str, str]:
    """The job's values, by the names the job environment of every target uses (docs: environment)."""
    return {"TRAINKIT_RUN_ID": job.run_id, "TRAINKIT_RUN_DIR": job.run_dir,
            "TRAINKIT_PYTHON": job.slurm.python, "TRAINKIT_GPUS_PER_NODE": str(job.nproc_per_node),
            "rdzv_port": str(job.rdzv_port)}


def _assignments(values: dict[str, str]) -> list[str]:
    exported = " ".join(k for k in values if k.startswith("TRAINKIT_"))
    return [f"{k}={shlex.quote(v)}" for k, v in values.items()] + [f"export {exported}"]


# NodeAddr of a node as Slurm knows it (scontrol show node prints `NodeAddr=<addr>`); the node name
# when Slurm gives none.
_ADDR = "scontrol show node \"$1\" 2>/dev/null | sed -n 's/.*NodeAddr=\\([^ ]*\\).*/\\1/p' | head -n 1"

_BATCH_BODY = [
    f"node_addr() {{ a=$({_ADDR}); echo \"${{a:-$1}}\"; }}",
    'echo "trainkit: job $SLURM_JOB_ID (restart ${SLURM_RESTART_COUNT:-0}) on $SLURM_JOB_NODELIST at $(date -Is)"',
    'head=$(scontrol show hostnames "$SLURM_JOB_NODELIST" | head -n 1)',
    'TRAINKIT_HEAD_ADDR=$(node_addr "$head"); TRAINKIT_RDZV_ENDPOINT="$TRAINKIT_HEAD_ADDR:$rdzv_port"',
    "export TRAINKIT_HEAD_ADDR TRAINKIT_RDZV_ENDPOINT",
    'mkdir -p "$TRAINKIT_RUN_DIR/logs"',
    # a summary.json of an earlier start must not speak for this one
    'rm -f "$TRAINKIT_RUN_DIR/summary.json" "$TRAINKIT_RUN_DIR"/status/node-*',
    "signalled=0",
    # SIGTERM to the job's steps, not to srun: srun answers its own SIGTERM by killing the step at
    # once ("srun: forcing job termination", measured with Slurm 22.05); scancel --signal reaches
    # every process of each step's tasks (torchrun and its ranks) and, without --batch or --full,
    # not this shell (scancel(1))
    'on_usr1() { signalled=1; echo "trainkit: USR1 at $(date -Is): the time limit is near; checkpointing"; '
    'scancel --signal=TERM "$SLURM_JOB_ID" || true; }',
    "trap on_usr1 USR1",
    'srun --ntasks-per-node=1 --kill-on-bad-exit=1 --open-mode=append '
    '--output="$TRAINKIT_RUN_DIR/logs/node-%n.log" bash "$TRAINKIT_RUN_DIR/node.sh" &',
    "step=$!",
    # bash's wait returns early (status > 128) when a trap runs: wait again while the step lives
    'wait "$step"; rc=$?',
    'while kill -0 "$step" 2>/dev/null; do wait "$step"; rc=$?; done',
    # the engine's summary.json, or a `command:` job's status files (node.sh)
    'if [ "$signalled" = 1 ] && grep -qs preempted "$TRAINKIT_RUN_DIR/summary.json" "$TRAINKIT_RUN_DIR"/status/node-*; then',
    '  echo "trainkit: checkpoint written; requeueing job $SLURM_JOB_ID"',
    '  scontrol requeue "$SLURM_JOB_ID"',
    # a failed step on a lost node: the step can end before slurmctld marks the node down and
    # requeues the job itself (SlurmdTimeout, 300 s by default: slurm.conf(5)), and the job would
    # then end FAILED. A node that runs no `true` within PROBE_S is lost for this job: requeue.
    # A step that failed on healthy nodes (the user's code) is not started again.
    f'elif [ "$rc" != 0 ] && ! timeout {PROBE_S} srun --ntasks-per-node=1 --time=1 true >/dev/null 2>&1; then',
    '  echo "trainkit: a node of the allocation does not answer; requeueing job $SLURM_JOB_ID"',
    '  scontrol requeue "$SLURM_JOB_ID"',
    "fi",
    'echo "trainkit: job $SLURM_JOB_ID ended with $rc at $(date -Is)"',
    'exit "$rc"',
]

_NODE_BODY = [
    f"node_addr() {{ a=$({_ADDR}); echo \"${{a:-$1}}\"; }}",
    'self_addr=$(node_addr "$SLURMD_NODENAME")',
    # only the first node of the allocation hosts the rendezvous store
    'is_host=0; if [ "$SLURM_NODEID" = 0 ]; then is_host=1; fi',
    # NCCL/gloo talk over the interface holding the node's address (as runs/launch.py does)
    "ifname=$(ip -o -4 addr show 2>/dev/null | awk -v ip=\"$self_addr\" "
    "'index($4, ip \"/\") == 1 {print $2; exit}' || true)",
    'if [ -n "$ifname" ]; then export NCCL_SOCKET_IFNAME="$ifname" GLOO_SOCKET_IFNAME="$ifname"; fi',
    'echo "trainkit: node $SLURM_NODEID ($SLURMD_NODENAME, $self_addr) of job $SLURM_JOB_ID at $(date -Is)"',
    'cd "$TRAINKIT_RUN_DIR"',
]

# the overrides after `--`: `trainkit run` (click) reads them as KEY=VALUE words, never options
_TORCHRUN = ('exec "$TRAINKIT_PYTHON" -m torch.distributed.run --nnodes "$SLURM_JOB_NUM_NODES" '
             '--node-rank "$SLURM_NODEID" --rdzv-backend c10d '
             '--rdzv-endpoint "$TRAINKIT_RDZV_ENDPOINT" '
             '--rdzv-id "$TRAINKIT_RUN_ID-$SLURM_JOB_ID-${SLURM_RESTART_COUNT:-0}" '
             '--rdzv-conf "is_host=$is_host" --local-addr "$self_addr" '
             '--nproc-per-node "$TRAINKIT_GPUS_PER_NODE" -m trainkit run "$TRAINKIT_RUN_DIR/config.yaml" '
             '"run_dir=$TRAINKIT_RUN_DIR" "checkpoint.dir=$TRAINKIT_RUN_DIR/checkpoints" resume=true --')
