"""The environment variables trainkit reads, and the ones it sets for a job on every node.

READ is kept by hand (a description needs a person), SET comes from trainkit.runs.launch.job_env's
keys; tests/unit/test_docsgen.py fails when a `TRAINKIT_*` name in the package's source is in
neither, so a new variable cannot go undocumented.
"""

from __future__ import annotations

READ: dict[str, str] = {
    "TRAINKIT_DEBUG": "`1`: an unexpected error shows its Python traceback instead of one line (exit 1)",
    "TRAINKIT_TERRAFORM": "path of the terraform binary (default: `terraform` on PATH)",
    "TRAINKIT_PRICES_DIR": "where `prices refresh` writes and `catalog`/`plan`/`cost` read fetched prices "
                           "(default `~/.cache/trainkit/prices`)",
    "TRAINKIT_STATE_DIR": "where `clusters.json`, the list of the workspaces this machine knows, lives "
                          "(default `$XDG_STATE_HOME/trainkit`, else `~/.local/state/trainkit`)",
    "TRAINKIT_CLOUD_PATH": "extra folders (os.pathsep-separated) holding more cloud rooms, one folder per "
                           "cloud (`trainkit/clouds/__init__.py`)",
    "TRAINKIT_FAULT_SIGTERM_AT_STEP": "fault injection for the preemption and recovery tests only "
                                      "(`trainkit/train/`); never set it in production",
    "TRAINKIT_FAULT_SIGTERM_TARGET": "fault injection (tests only): which process the SIGTERM goes to",
    "TRAINKIT_FAULT_KILL_IN_SAVE": "fault injection (tests only): kill the process while a checkpoint is written",
    "TRAINKIT_FAULT_SLOW_SAVE": "fault injection (tests only): slow each checkpoint write down",
    "TRAINKIT_FAULT_STEP_SLEEP": "fault injection (tests only): sleep in every step",
    "TRAINKIT_INSTANCE_IDENTITY": "set by the cloud controller's hand-off in its loop's environment: `1` "
                                  "keeps the AWS SDK's metadata lookup in stacks rendered there (credentials "
                                  "from the instance profile, even with custom `endpoints`) and, in its own "
                                  "workspace, authorizes its key on the nodes it creates (`extra_authorized_keys`); "
                                  "unset elsewhere",
    "TRAINKIT_PROGRESS_FILE": "set by the node's supervisor for the job it starts: the file the engine's "
                              "local rank 0 rewrites with `<step> <phase>` after every step (the hang "
                              "watchdog's input; `trainkit docs runs`); a custom command may write it too",
}

# What each variable of the job's environment means (job_env in trainkit/runs/launch.py sets them).
SET: dict[str, str] = {
    "TRAINKIT_RUN_ID": "the run id",
    "TRAINKIT_ATTEMPT": "attempt number (1, 2, ... after recoveries)",
    "TRAINKIT_NODE_RANK": "this node's rank (head = 0)",
    "TRAINKIT_NUM_NODES": "node count",
    "TRAINKIT_HEAD_ADDR": "the head node's private IP",
    "TRAINKIT_RDZV_ENDPOINT": "`<head ip>:<launch.rdzv_port>`",
    "TRAINKIT_GPUS_PER_NODE": "processes per node (`launch.nproc_per_node`, else GPUs, else 1)",
    "TRAINKIT_CHECKPOINT_DIR": "the run's checkpoint folder (shared storage when there is a NAS)",
    "TRAINKIT_RUN_DIR": "the run folder on the node",
    "TRAINKIT_STATUS_FILE": "the node's status file (write `preempted` there to ask for a resume)",
    "TRAINKIT_CODE_DIR": "the synced `workdir:` (only when the config has one)",
    "TRAINKIT_PRIVATE_IP": "this node's private IP",
    "TRAINKIT_PYTHON": "the node's Python (the venv trainkit provisioned)",
    "TRAINKIT_DATA_ROOT": "where staged datasets are (`<root>/<name>/`; `trainkit docs data`)",
    "MASTER_ADDR": "as torchrun's: the head node's private IP",
    "MASTER_PORT": "as torchrun's: the rendezvous port",
    "NNODES": "node count",
    "NODE_RANK": "this node's rank",
    "NPROC_PER_NODE": "processes per node",
    "WORLD_SIZE": "nodes x processes per node",
    "PYTHONUNBUFFERED": "`1`: logs reach the log files as they are written",
    "OMP_NUM_THREADS": "`1`",
}


def _table(rows: dict[str, str]) -> list[str]:
    return ["| variable | effect |", "|---|---|", *[f"| `{k}` | {v} |" for k, v in rows.items()], ""]


def page(note: str) -> str:
    """docs/environment.md: READ and SET as two tables, plus the credentials pointer."""
    lines = ["# Environment variables\n", note.format(source="trainkit/docsgen/env_ref.py and "
                                                      "trainkit/runs/launch.py"),
             "## What trainkit reads\n", *_table(READ),
             "Cloud credentials are read from the environment too, by the providers and backends, and "
             "never written anywhere: each cloud's page names its variables ([Alibaba](alicloud.md), "
             "[Tencent](tencentcloud.md), [Huawei](huaweicloud.md), [AWS](aws.md)); `trainkit check` "
             "says which are set.\n",
             "## What a job gets on every node\n",
             "`trainkit train` starts the job on each node with these set (a config's `env:` adds "
             "more; [Runs](runs.md) explains the resumable-command contract that uses them).\n",
             *_table(SET)]
    return "\n".join(lines).rstrip() + "\n"
