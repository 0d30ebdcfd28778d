"""bench_faults' cluster-side rows (issue 39), measured the way bench_faults measures its node rows:
kill -> first resumed step and steps lost where a run goes on, else the time of the action.
Not a benchmark module of its own: bench_faults.main() runs `host_rows()` on its four namespace
machines (row group `cluster`) and `moto_rows()` (row group `moto`).

On the namespace machines (the `hosts` target, the digits job, the fault at step KILL_AT):

    clock skew          every job's wall clock SKEW_S behind (an LD_PRELOAD shim offsets
                        CLOCK_REALTIME for the job alone, as tests/e2e/test_fault_matrix_node.py
                        does) and the worker killed: kill -> first step on the controller's clock
    destroy, node gone  the worker killed, no run: `trainkit destroy --yes` cleans the others and
                        names the one it could not clean; the action's seconds
    destroy+apply       the worker back, `apply` again, and the worker killed in a run: the
                        inventory, launch and the spare choice read one list (hosts.json)

On moto behind the fault proxy (tests/infra/fault_proxy.py; terraform with the offline aws
provider), a two-node cluster over three zones, node 1 terminated (as test_aws_replace_leaks.py):

    lost RunInstances   capacity refused in the first two zones and the third try's RunInstances
                        answer lost (the SDK launches again): the replacement's seconds, the
                        strays it terminated and the instances left beyond the cluster's two
    refused everywhere  node 1 terminated again and every zone refused: the seconds to the
                        refusal (exit code), and whether `status` names the node lost with its fix
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import tempfile
import time
from pathlib import Path

import yaml

from benchmarks.bench_faults import ARGS, REPO, TRAINKIT, _active, fault

SKEW_S = -120            # the head 120 s behind
ZONES = ["us-east-1a", "us-east-1b", "us-east-1c"]
TYPE = "g5.12xlarge"     # examples/clusters/aws-moto.yaml


def host_rows(four, base: Path, common: list[str], env: dict) -> list[dict]:
    """The namespace rows, in order (destroy ends the cluster; apply makes it again)."""
    import test_fault_matrix_node as node_rows  # the shim's C source, as the test builds it

    src, lib = base / "clockshim.c", base / "clockshim.so"
    src.write_text(node_rows.CLOCK_SHIM)
    subprocess.run(["cc", "-shared", "-fPIC", "-o", str(lib), str(src), "-ldl"], check=True, capture_output=True)
    cfg = {**yaml.safe_load((REPO / "examples/train/digits.yaml").read_text()),
           "env": {"LD_PRELOAD": str(lib), "TK_CLOCK_OFFSET_S": str(SKEW_S)}}
    (base / "digits-skew.yaml").write_text(yaml.safe_dump(cfg))
    skew_args = ["--config", str(base / "digits-skew.yaml"), *ARGS[2:]]
    rows = [fault(four, base, common, env, f"clock skew ({SKEW_S} s)", ("worker",), False, args=skew_args)]
    rows.append(destroy_with_a_node_gone(four, base, common, env))
    for h in four.hosts:
        if not h.pids():
            four.revive(h)
    t0 = time.monotonic()
    applied = subprocess.run([str(TRAINKIT), "apply", *common, "--yes"], env=env, capture_output=True, timeout=900)
    took = time.monotonic() - t0
    row = fault(four, base, common, env, "worker, after destroy+apply", ("worker",), False)
    row["note"] = f"apply again: exit {applied.returncode}, {took:.1f} s"
    return rows + [row]


def destroy_with_a_node_gone(four, base: Path, common: list[str], env: dict) -> dict:
    for h in four.hosts:
        if not h.pids():
            four.revive(h)
    worker = next(h for h in four.hosts if h.name == _active(base, four)[1])
    four.kill(worker)
    t0 = time.monotonic()
    out = subprocess.run([str(TRAINKIT), "destroy", *common, "--yes"], env=env, capture_output=True, text=True,
                         timeout=900)
    took = time.monotonic() - t0
    said = out.stdout + out.stderr   # the warning goes to stderr (trainkit/commands/ops.py)
    named = f"host {worker.name} " in said and "was not cleaned" in said
    return {"fault": "destroy, a node gone", "rc": out.returncode, "lost": None, "to_step": None, "action_s": took,
            "note": f"{worker.name} {'named with the command that cleans it' if named else 'NOT named'}"}


def moto_rows() -> list[dict]:
    """The two moto rows on one cluster; [] (and a line saying why) without terraform."""
    if not shutil.which("terraform"):
        print("bench_faults (moto rows): terraform not on PATH, not run")
        return []
    from benchmarks.bench_cli import _tf_config

    tmp = Path(tempfile.mkdtemp(prefix="tkbm"))
    _tf_config(tmp)   # the offline provider mirror, the emulator's keys
    os.environ.pop("CHECKOV", None)   # replace plans in this process: no checkov, as the tests run it
    from fault_proxy import FaultProxy, Faults

    from tests.conftest import running_moto

    try:
        with running_moto() as moto, FaultProxy(moto) as proxy:
            return _moto_rows(tmp, moto, proxy, Faults)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def _moto_rows(tmp: Path, moto: str, proxy, Faults) -> list[dict]:
    from moto_aws import aws

    from trainkit.cluster import lifecycle
    from trainkit.cluster.replace import replace_instances, replace_lost
    from trainkit.errors import TrainkitError
    from trainkit.spec.resolve import load_cluster
    from trainkit.workspace import Workspace

    spec = yaml.safe_load((REPO / "examples/clusters/aws-moto.yaml").read_text())
    spec.update(endpoints={k: proxy.url for k in spec["endpoints"]}, zone=ZONES)
    path, ws_dir = tmp / "cluster.yaml", tmp / "ws"
    path.write_text(yaml.safe_dump(spec))
    subprocess.run([str(TRAINKIT), "apply", str(path), "--workdir", str(ws_dir), "--yes", "--no-provision"],
                   check=True, capture_output=True, timeout=1200)
    ec2, cluster = aws(moto, "ec2"), load_cluster(path)
    ws = Workspace.for_cluster(cluster.name, ws_dir)
    lost = json.loads((ws_dir / "outputs.json").read_text())["nodes"][1]
    ec2.terminate_instances(InstanceIds=[lost["id"]])
    proxy.faults = Faults(no_capacity={(ZONES[0], TYPE), (ZONES[1], TYPE)}, lose={"RunInstances": 1})
    t0 = time.monotonic()
    events = replace_instances(cluster, ws, [lost["name"]])
    took = time.monotonic() - t0
    held = {n["id"] for n in json.loads((ws_dir / "outputs.json").read_text())["nodes"]}
    strays = sum(len(e["ids"]) for e in events if e["kind"] == "strays_removed")
    left = [i for i in _running(ec2, cluster.name) if i not in held]
    rows = [{"fault": "lost RunInstances answer", "rc": 0, "lost": None, "to_step": None, "action_s": took,
             "note": f"2 zones refused, {strays} stray terminated, {len(left)} instance(s) left beyond the cluster"}]

    again = json.loads((ws_dir / "outputs.json").read_text())["nodes"][1]
    ec2.terminate_instances(InstanceIds=[again["id"]])
    proxy.faults = Faults(no_capacity={(z, TYPE) for z in ZONES})
    t0, rc, record = time.monotonic(), 0, []
    try:
        replace_lost(cluster, ws, [again["name"]], "trainkit train --resume RUN", record=record.append)
    except TrainkitError as err:
        rc = err.exit_code
    took = time.monotonic() - t0
    lifecycle.sync(cluster, ws)
    shown = lifecycle.status(cluster, ws, live=False)
    says = "status names it lost with the fix" if shown.get("lost") == [again["name"]] and \
        "trainkit apply" in (shown.get("lost_fix") or "") else f"status: lost={shown.get('lost')}"
    rows.append({"fault": "refused in every zone", "rc": rc, "lost": None, "to_step": None, "action_s": took,
                 "note": f"{sum(e['kind'] == 'node_lost' for e in record)} node_lost event; {says}"})
    return rows


def _running(ec2, cluster: str) -> list[str]:
    tagged = [{"Name": "tag:trainkit-cluster", "Values": [cluster]}]
    return [i["InstanceId"] for r in ec2.describe_instances(Filters=tagged)["Reservations"]
            for i in r["Instances"] if i["State"]["Name"] in ("pending", "running")]
