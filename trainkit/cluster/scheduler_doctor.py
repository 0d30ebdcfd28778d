"""`trainkit doctor` on a scheduler's cluster (Cloud.node_source NODES_SCHEDULER: target `slurm`),
through the login node only; nothing on the cluster is changed.

1. The partition's nodes as Slurm sees them: `sinfo -N -h -p P -o '%N|%T|%E'` (node, state in
   long form, reason: sinfo(1) format fields Slurm 20.11 has). A node DOWN, DRAINED, DRAINING,
   FAIL, FAILING, INVAL or not responding (`*`) is failed, named with its Reason (the admin's or
   slurmctld's words); one allocated, mixed, completing or reserved is busy and not probed.
2. The doctor's node probe (trainkit/node/doctor_probe.py, copied to trainkit's folder on the
   shared storage) on the idle nodes, as one step of a small allocation: `srun --nodes=N
   --nodelist=<idle> --immediate=IMMEDIATE_S` (srun(1): give up when the nodes are not free by
   then: they were taken meanwhile, said so); each node's GPUs (count vs slurm.gpus_per_node,
   ECC, Xid, DCGM) and the free space of slurm.workdir are judged by doctor_verdict's rules.

The report has the shape of cluster/doctor.py's (no network figures: the all-reduce test needs a
job of its own) and is saved as <workspace>/doctor.json; `report["failed"]` names failed nodes
(exit 12 in the command, as on every target).
"""

from __future__ import annotations

import json
import re
import shlex
import time
from typing import Any, Callable

from trainkit import records
from trainkit.cluster import doctor_verdict as v
from trainkit.cluster.doctor import PROBE
from trainkit.cluster.scheduler import login, remote_root
from trainkit.cluster.slurm_version import SINFO_NODES
from trainkit.spec.resolve import Cluster
from trainkit.workspace import Workspace, write_atomic

# sinfo(1) NODE STATE CODES (long form, %T) that make a node unfit for a job
BAD_STATES = ("down", "drained", "draining", "drain", "fail", "failing", "inval", "not_responding")
BUSY_STATES = ("allocated", "mixed", "completing", "reserved", "planned")
# srun --immediate: seconds an idle node may take to be allocated (a busy slurmctld answers in
# seconds; more means it was taken meanwhile)
IMMEDIATE_S = 60
_PROBE_TIMEOUT_S = 300   # the probe's own work (`dcgmi diag -r 1` at most 120 s: doctor_probe.py) + srun
_NODE = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]*")   # a Slurm node name, as slurm.conf(5) NodeName
_MARK = "TRAINKIT-PROBE"


def node_states(text: str) -> list[tuple[str, str, str]]:
    """`sinfo -N -h -o '%N|%T|%E'` -> [(node, state, reason)], each node once. Pure."""
    out: dict[str, tuple[str, str, str]] = {}
    for line in text.splitlines():
        parts = line.strip().split("|", 2)
        if len(parts) == 3 and _NODE.fullmatch(parts[0]):
            reason = "" if parts[2].strip() == "none" else parts[2].strip()
            out.setdefault(parts[0], (parts[0], parts[1].strip(), reason))
    return list(out.values())


def triage(state: str, reason: str) -> tuple[str, v.Check | None]:
    """("idle" | "busy" | "failed", the node's check, None for an idle node to probe). `state`
    as sinfo's %T prints it: "idle", "down*" (`*`: not responding), "mixed+drain". Pure."""
    words = state.lower().rstrip("*~#!%$@^-").split("+")
    why = f" (Reason: {reason})" if reason else ""
    if state.endswith("*") or any(w in BAD_STATES for w in words):
        return "failed", v.Check("slurm", v.FAILED, f"Slurm has the node {state}{why}: no job runs on it")
    if any(w in BUSY_STATES for w in words):
        return "busy", v.Check("slurm", v.SKIPPED, f"{state}: busy with jobs, not probed")
    if "idle" in words:
        return "idle", None
    return "busy", v.Check("slurm", v.WARN, f"{state}{why}: not idle, not probed")


def probe_command(cluster: Cluster, nodes: list[str], probe: str) -> str:
    """The srun that runs the probe once on each of `nodes` (idle ones), every line of its output
    `TRAINKIT-PROBE <node> <json>`. Every value is one quoted word. Pure."""
    s = cluster.spec.slurm
    opts = [f"--nodes={len(nodes)}", "--ntasks-per-node=1", f"--nodelist={','.join(nodes)}", "--time=10",
            f"--immediate={IMMEDIATE_S}", "--job-name=trainkit-doctor"]
    opts += [f"--{k}={val}" for k, val in (("partition", s.partition), ("account", s.account), ("qos", s.qos)) if val]
    inner = f'echo "{_MARK} $SLURMD_NODENAME $("$0" "$1" --data="$2" | tail -n 1)"'
    return shlex.join(["srun", *opts, "bash", "-c", inner, s.python, probe, s.workdir])


def parse_probes(text: str) -> dict[str, dict[str, Any]]:
    """srun's output -> {node: the probe's JSON}; lines of other shapes are skipped. Pure."""
    out = {}
    for line in text.splitlines():
        parts = line.split(" ", 2)
        if len(parts) == 3 and parts[0] == _MARK:
            try:
                out[parts[1]] = json.loads(parts[2])
            except ValueError:
                continue
    return out


def diagnose(cluster: Cluster, ws: Workspace, th: v.Thresholds, echo: Callable[[str], None]) -> dict[str, Any]:
    """The partition's nodes checked (module doc); the report, also saved as doctor.json."""
    s, node, t0 = cluster.spec.slurm, login(ws), time.monotonic()
    part = f"-p {shlex.quote(s.partition)} " if s.partition else ""
    res = node.sh(f"sinfo -N -h {part}-o {shlex.quote(SINFO_NODES)}", timeout=60)
    reports: dict[str, v.NodeReport] = {}
    idle = []
    for name, state, reason in node_states(res.stdout.decode(errors="replace")):
        kind, check = triage(state, reason)
        reports[name] = v.NodeReport(name, [check] if check else [])
        if kind == "idle":
            idle.append(name)
    echo(f"doctor: {len(reports)} node(s) in partition {s.partition or '(default)'}; probing {len(idle)} idle")
    if idle:
        _probe(cluster, node, idle, reports, th)
    out = {"cluster": cluster.name, "time": time.time(), "wall_s": round(time.monotonic() - t0, 2),
           "thresholds": th.__dict__, "nodes": [r.as_dict() for r in reports.values()], "network": None}
    out["failed"] = [r["node"] for r in out["nodes"] if r["verdict"] == v.FAILED]
    write_atomic(ws.doctor_json, records.dump(out, indent=2))
    return out


def _probe(cluster: Cluster, node, idle: list[str], reports: dict[str, v.NodeReport], th: v.Thresholds) -> None:
    """The probe on the `idle` nodes through one srun; each node's checks into `reports`."""
    probe = f"{remote_root(cluster)}/doctor/doctor_probe.py"
    node.sh(f"mkdir -p {shlex.quote(probe.rsplit('/', 1)[0])} && cat > {shlex.quote(probe)}",
            data=PROBE.read_bytes(), timeout=60)
    res = node.sh(probe_command(cluster, idle, probe), timeout=_PROBE_TIMEOUT_S)
    probes = parse_probes(res.stdout.decode(errors="replace"))
    said = (res.stderr.decode(errors="replace").strip().splitlines() or [f"exit {res.returncode}"])[-1][:200]
    for name in idle:
        p = probes.get(name)
        if p is None:   # srun gave up (--immediate: taken meanwhile) or the node did not run it
            status = v.SKIPPED if "Unable to allocate" in said or "immediate" in said.lower() else v.FAILED
            reports[name].checks.append(v.Check("probe", status, f"the probe did not run there: {said}"))
            continue
        checks = v.gpu_checks(p, cluster.spec.slurm.gpus_per_node or 0, cluster.spec.slurm.gpu_type)
        reports[name].checks += [v.Check("slurm", v.OK, "idle"), *checks,
                                 v.disk_check("workdir", p.get("data"), th)]
