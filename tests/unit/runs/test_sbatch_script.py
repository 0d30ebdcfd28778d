"""The batch script of a run on a Slurm cluster (trainkit/runs/sbatch.py, issue 41): its shape, not
its whole text. One job of `nodes` nodes, one task each; the spec's options as #SBATCH lines in the
header; --requeue and --signal=B:USR1@<s>; torchrun on every node through srun, rendezvous on the
allocation's first node with is_host only on node 0 and --local-addr the node's own address;
resume from the run folder's checkpoints; USR1 -> SIGTERM to the step -> requeue. `bash -n` parses
both scripts."""

from __future__ import annotations

import shlex
import subprocess

import pytest
import yaml

from trainkit.runs.sbatch import BatchJob, render
from trainkit.spec.slurm_block import SlurmSpec

SLURM = {"login": {"address": "login.hpc.example"}, "partition": "gpu", "account": "proj-1", "qos": "normal",
         "time": "4:00:00", "gpus_per_node": 8, "gpu_type": "a100", "constraint": "a100&ib",
         "signal_s": 240, "workdir": "/shared/tk", "python": "/shared/venv/bin/python"}


def _job(**slurm) -> BatchJob:
    return BatchJob(run_id="digits-20261204-2350", run_dir="/shared/tk/runs/digits-20261204-2350", nodes=2,
                    nproc_per_node=8, rdzv_port=29400, slurm=SlurmSpec.model_validate({**SLURM, **slurm}),
                    engine_config={"model": "digits_cnn", "epochs": 2}, overrides=("epochs=3", "lr0=0.01"))


def _header(script: str) -> list[str]:
    """The #SBATCH lines sbatch reads: those before the first line that is neither a comment nor blank."""
    out = []
    for line in script.splitlines()[1:]:
        if line.startswith("#SBATCH "):
            out.append(line[len("#SBATCH "):])
        elif line.strip() and not line.startswith("#"):
            break
    return out


def test_the_spec_becomes_the_header_of_sbatch_options():
    script = render(_job())["job.sbatch"]
    assert script.startswith("#!/bin/bash\n")
    assert _header(script) == [
        "--job-name=trainkit-digits-20261204-2350", "--nodes=2", "--ntasks-per-node=1", "--partition=gpu",
        "--account=proj-1", "--qos=normal", "--time=4:00:00", "--gpus-per-node=a100:8",
        "--constraint=a100&ib", "--requeue", "--signal=B:USR1@240", "--open-mode=append",
        "--output=/shared/tk/runs/digits-20261204-2350/logs/slurm-%j.out"]
    assert script.count("#SBATCH") == len(_header(script))


def test_options_the_spec_leaves_out_are_left_to_the_cluster():
    header = _header(render(_job(partition=None, account=None, qos=None, gpus_per_node=0, gpu_type=None,
                                 constraint=None, time=None))["job.sbatch"])
    names = [h.split("=")[0] for h in header]
    assert not {"--partition", "--account", "--qos", "--gpus-per-node", "--constraint", "--time"} & set(names)
    assert "--requeue" in header and "--signal=B:USR1@240" in header


def test_the_batch_shell_starts_one_node_script_per_node_and_requeues_after_usr1():
    script = render(_job())["job.sbatch"]
    body = script.split("set -u\n", 1)[1]
    block = body.split("\nexport ", 1)[0]   # the quoted assignments, before the logic
    values = dict(line.split("=", 1) for line in block.splitlines())
    assert {k: shlex.split(v)[0] for k, v in values.items()} == {
        "TRAINKIT_RUN_ID": "digits-20261204-2350", "TRAINKIT_RUN_DIR": "/shared/tk/runs/digits-20261204-2350",
        "TRAINKIT_PYTHON": "/shared/venv/bin/python", "TRAINKIT_GPUS_PER_NODE": "8", "rdzv_port": "29400"}
    srun = next(line for line in body.splitlines() if line.startswith("srun "))
    assert "--ntasks-per-node=1" in srun and "--kill-on-bad-exit=1" in srun and srun.endswith("&")
    assert 'TRAINKIT_RDZV_ENDPOINT="$TRAINKIT_HEAD_ADDR:$rdzv_port"' in body
    assert 'bash "$TRAINKIT_RUN_DIR/node.sh"' in srun and "logs/node-%n.log" in srun
    assert "trap on_usr1 USR1" in body and 'scancel --signal=TERM "$SLURM_JOB_ID"' in body
    requeue = body.index('scontrol requeue "$SLURM_JOB_ID"')
    assert body.index('grep -qs preempted "$TRAINKIT_RUN_DIR/summary.json"') < requeue
    assert body.index('rm -f "$TRAINKIT_RUN_DIR/summary.json"') < body.index("srun ")
    # a failed step with a node gone (the probe step fails) requeues too; else the step's status ends it
    probe = next(line for line in body.splitlines() if line.startswith("elif "))
    assert '"$rc" != 0' in probe and "srun --ntasks-per-node=1 --time=1 true" in probe and "timeout 120" in probe
    assert requeue < body.index(probe) < body.rindex('scontrol requeue "$SLURM_JOB_ID"')
    assert body.rstrip().endswith('exit "$rc"')


def test_each_node_runs_torchrun_with_the_rendezvous_on_the_first_node():
    node = render(_job())["node.sh"]
    torchrun = shlex.split(node.splitlines()[-1])
    assert torchrun[:4] == ["exec", "$TRAINKIT_PYTHON", "-m", "torch.distributed.run"]
    flag = {torchrun[i]: torchrun[i + 1] for i in range(4, torchrun.index("-m", 4), 2)}
    assert flag["--rdzv-backend"] == "c10d"
    assert flag["--rdzv-endpoint"] == "$TRAINKIT_RDZV_ENDPOINT" and flag["--nproc-per-node"] == "$TRAINKIT_GPUS_PER_NODE"
    assert flag["--rdzv-conf"] == "is_host=$is_host" and flag["--local-addr"] == "$self_addr"
    assert flag["--nnodes"] == "$SLURM_JOB_NUM_NODES" and "${SLURM_RESTART_COUNT:-0}" in flag["--rdzv-id"]
    assert 'is_host=0; if [ "$SLURM_NODEID" = 0 ]; then is_host=1; fi' in node
    rest = torchrun[torchrun.index("-m", 4):]
    assert rest[:3] == ["-m", "trainkit", "run"] and "resume=true" in rest
    assert "checkpoint.dir=$TRAINKIT_RUN_DIR/checkpoints" in rest
    assert rest[rest.index("--") + 1:] == ["epochs=3", "lr0=0.01"]


def test_the_engine_config_is_written_beside_the_scripts():
    assert yaml.safe_load(render(_job())["config.yaml"]) == {"model": "digits_cnn", "epochs": 2}


def test_both_scripts_parse_as_bash(tmp_path):
    for name, text in render(_job()).items():
        if name.endswith((".sh", ".sbatch")):
            (tmp_path / name).write_text(text)
            subprocess.run(["bash", "-n", str(tmp_path / name)], check=True)


@pytest.mark.parametrize("change", [{"run_id": "a b"}, {"run_dir": "/shared/a b"}, {"run_dir": "rel"},
                                    {"overrides": ("--help",)}, {"nodes": 0}, {"rdzv_port": 80}])
def test_a_value_unfit_for_the_script_is_refused(change):
    job = _job()
    with pytest.raises(ValueError):
        render(BatchJob(**{**job.__dict__, **change}))
