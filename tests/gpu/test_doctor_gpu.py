"""doctor's GPU parts on a machine with an NVIDIA GPU (`make test-gpu`): the probe sees every CUDA
device through NVML with driver and CUDA versions and passes the GPU checks; the all-reduce bench
runs over NCCL (one rank per GPU, up to 2) and its times give finite algbw/busbw."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest
import torch

from trainkit.cluster import doctor_verdict as v
from trainkit.node import doctor_probe

pytestmark = pytest.mark.gpu


@pytest.fixture(autouse=True)
def _cuda():
    """The tier is opt-in (`make test-gpu`); on a machine without CUDA there is nothing to check."""
    if not torch.cuda.is_available():
        pytest.skip("no CUDA device")


def test_the_probe_sees_every_gpu_through_nvml_with_versions(tmp_path):
    row = doctor_probe.probe(str(tmp_path), str(tmp_path), "gpu", "node-0")
    assert row["nvml"] is True and len(row["gpus"]) == torch.cuda.device_count(), row
    assert row["driver"] and row["cuda"] and all(g["name"] for g in row["gpus"])
    checks = {c.name: c for c in v.gpu_checks(row, torch.cuda.device_count(), None)}
    assert checks["gpus"].status == "ok" and checks["gpus"].figure == torch.cuda.device_count()
    assert checks["ecc"].status in ("ok", "failed")  # a real ECC count: failed only on a bad GPU


def test_the_bench_all_reduces_over_nccl_and_gives_busbw(repo, tmp_path):
    n = min(2, torch.cuda.device_count())
    bench = repo / "trainkit" / "node" / "allreduce_bench.py"
    env = {**os.environ, "WORLD_SIZE": str(n), "MASTER_ADDR": "127.0.0.1", "MASTER_PORT": "29511",
           "OMP_NUM_THREADS": "1"}
    args = [sys.executable, str(bench), "--backend", "nccl", "--bytes", str(64 * 2**20), "--iters", "5",
            "--pairs", "0-1" if n == 2 else ""]
    procs = [subprocess.Popen(args, env={**env, "RANK": str(r), "LOCAL_RANK": str(r)}, stdout=subprocess.PIPE,
                              stderr=subprocess.PIPE, text=True) for r in range(n)]
    outs = [p.communicate(timeout=300) for p in procs]
    assert all(p.returncode == 0 for p in procs), [o[1][-2000:] for o in outs]
    result = json.loads(outs[0][0].strip().splitlines()[-1])
    assert result["backend"] == "nccl" and result["world"] == n and result["bytes"] == 64 * 2**20
    assert all(t["seconds"] > 0 for t in result["tests"])
    summary = v.bandwidth_summary(result, [f"node-{i}" for i in range(n)], None)
    assert summary["world"]["algbw_gbs"] > 0
    if n == 2:
        assert summary["world"]["busbw_gbs"] == pytest.approx(summary["world"]["algbw_gbs"])
