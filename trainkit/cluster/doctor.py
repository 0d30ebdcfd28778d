"""`trainkit doctor`: prove every node healthy and its links fast before a paid run starts.

Side effects at the edge, verdicts pure (trainkit/cluster/doctor_verdict.py):
1. the probe (trainkit/node/doctor_probe.py, standard library) on every node at once, through the
   project's one way to run a script on a node (trainkit/provision/node.py, Node.sh): GPUs, ECC,
   Xids, DCGM, free disk, the shared mount, the node's clock (bracketed by the controller's send
   and receive times);
2. where there is shared storage, each node looks for the marker every other node wrote there;
3. with 2+ reachable nodes, an all-reduce test (trainkit/node/allreduce_bench.py) with
   torch.distributed, one process per node in the node's Python: NCCL when every node has a GPU,
   else gloo; the whole world, then each node pair;
4. a verdict per node, saved as <workspace>/doctor.json (`trainkit top` shows its busbw).
"""

from __future__ import annotations

import json
import secrets
import shlex
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from trainkit import errors, records
from trainkit.cluster import doctor_verdict as v
from trainkit.errors import TrainkitError
from trainkit.provision.node import Node, read_nodes
from trainkit.spec.resolve import Cluster
from trainkit.util.nodeargs import option
from trainkit.workspace import Workspace, write_atomic

NODE_DIR = Path(__file__).parents[1] / "node"
PROBE, BENCH = NODE_DIR / "doctor_probe.py", NODE_DIR / "allreduce_bench.py"
PROBE_TIMEOUT_S = 180     # dcgmi diag -r 1 takes up to ~a minute on 8 GPUs; the rest is seconds
BENCH_TIMEOUT_S = 300     # 60 s rendezvous + up to 29 timed tests
CPU_BYTES, GPU_BYTES = 16 * 2**20, 256 * 2**20  # nccl-tests' busbw nears its plateau from ~100s of MB on GPUs


@dataclass(frozen=True)
class Options:
    size_bytes: int | None = None      # None: 16 MiB on CPU, 256 MiB on GPUs
    iters: int = 5
    thresholds: v.Thresholds = v.Thresholds()


def node_paths(node: Node) -> tuple[str, str | None]:
    """(data path, shared path or None) a node's probe checks, from its inventory variables:
    the data disk's mount point (else launch.root), and the NAS mount point when there is one."""
    return node.paths.disk or node.paths.root, node.paths.shared_mount


def _run_py(node: Node, source: Path, args: list[str], env: dict[str, str], timeout: float,
            python: str | None = None):
    """Pipe `source` to the node's Python (python3 where that does not exist) with `args` and `env`;
    NCCL/gloo use the interface that holds the node's private IP and the network role's nccl.env,
    as launch.sh does, so doctor measures the network the job will use."""
    py = shlex.quote(python or node.python)
    env_file = shlex.quote(f"{node.paths.root}/nccl.env")  # ansible role `network`
    exports = " ".join(f"{k}={shlex.quote(val)}" for k, val in env.items())
    script = ("ifname=$(ip -o -4 addr show 2>/dev/null | awk -v ip=\"$TK_IP\" "
              "'index($4, ip \"/\") == 1 {print $2; exit}' || true); "
              'if [ -n "$ifname" ]; then export NCCL_SOCKET_IFNAME="$ifname" GLOO_SOCKET_IFNAME="$ifname"; fi; '
              f"if [ -r {env_file} ]; then set -a; . {env_file}; set +a; fi; "  # the job's own settings
              f"if [ -x {py} ]; then py={py}; else py=python3; fi; "
              f'exec "$py" - {shlex.join(args)}')
    return node.sh(f"export TK_IP={shlex.quote(node.private_ip)} {exports}; {script}", data=source.read_bytes(),
                   timeout=timeout)


def _last_json(proc) -> dict[str, Any]:
    if proc.returncode != 0:
        err = proc.stderr.decode(errors="replace").strip().splitlines()
        raise RuntimeError(err[-1][:300] if err else f"exit {proc.returncode}")
    lines = proc.stdout.decode(errors="replace").strip().splitlines()
    if not lines:
        raise RuntimeError("no output")
    return json.loads(lines[-1])


def probe_node(node: Node, tag: str) -> dict[str, Any]:
    """The probe's JSON, with "sent"/"received" (controller clock); {"error"} when unreachable."""
    data, shared = node_paths(node)
    args = [option("data", data), option("tag", tag), option("mark", f"node-{node.rank}")] + \
        ([option("shared", shared)] if shared else [])
    if node.paths.disk is None:
        args.append("--data-on-demand")  # launch.root: made by the first run, not a mount point
    sent = time.time()
    try:
        row = _last_json(_run_py(node, PROBE, args, {}, PROBE_TIMEOUT_S))
    except (RuntimeError, ValueError) as err:
        return {"error": str(err)}
    row.update(sent=sent, received=time.time())
    return row


def visibility(node: Node, shared: str, tag: str, hosts: list[str]) -> list[str]:
    """Markers (node-R) of other nodes' probes (written by their probe under shared/.trainkit-doctor/tag) this node cannot see."""
    folder = f"{shared}/.trainkit-doctor/{tag}"
    script = f"cd {shlex.quote(folder)} 2>/dev/null && ls -1A"
    proc = node.sh(script, timeout=30)
    seen = set(proc.stdout.decode(errors="replace").split()) if proc.returncode == 0 else set()
    return [h for h in hosts if h not in seen]


def run_bench(nodes: list[Node], backend: str, size: int, iters: int) -> dict[str, Any]:
    """The all-reduce bench on every node at once; rank 0's JSON (RuntimeError naming a node)."""
    head = nodes[0]
    port = head.rdzv_port + 1  # beside the job's rendezvous port
    # with 2 nodes the world test is the one pair: not run twice
    pairs = ",".join(f"{a}-{b}" for a, b in v.pairs_for(len(nodes))) if len(nodes) > 2 else ""
    args = [option("backend", backend), option("bytes", size), option("iters", iters), option("pairs", pairs)]

    def one(i: int):
        env = {"RANK": str(i), "WORLD_SIZE": str(len(nodes)), "LOCAL_RANK": "0", "OMP_NUM_THREADS": "1",
               "MASTER_ADDR": head.private_ip, "MASTER_PORT": str(port)}
        return _run_py(nodes[i], BENCH, args, env, BENCH_TIMEOUT_S)

    with ThreadPoolExecutor(len(nodes)) as pool:
        procs = list(pool.map(one, range(len(nodes))))
    failed = []  # every node's own last line: the one that broke, and the others waiting on it
    for node, proc in zip(nodes, procs):
        if proc.returncode != 0:
            err = proc.stderr.decode(errors="replace").strip().splitlines()
            failed.append(f"on {node.name}: {err[-1][:300] if err else f'exit {proc.returncode}'}")
    if failed:
        raise RuntimeError("; ".join(failed))
    return _last_json(procs[0])


def expected_gpus(cluster: Cluster, name: str) -> int:
    hosts = {h.name: h.gpus for h in cluster.spec.hosts}
    return hosts.get(name, cluster.gpus_per_node) if hosts else cluster.gpus_per_node


def diagnose(cluster: Cluster, ws: Workspace, opts: Options = Options(), echo=lambda _m: None,
             trusted: set[str] = frozenset()) -> dict[str, Any]:
    """Probe, cross-check and measure every node of the applied cluster; the report (also saved
    as <workspace>/doctor.json): {"cluster", "time", "nodes": [...], "network": {...} | None, "failed"}.
    `trusted`: nodes known to be on the shared storage (doctor_verdict.not_seen)."""
    nodes, _ = read_nodes(ws.inventory_yml)
    tag, th, t0 = secrets.token_hex(6), opts.thresholds, time.monotonic()
    with ThreadPoolExecutor(len(nodes)) as pool:
        probes = list(pool.map(lambda n: probe_node(n, tag), nodes))
    echo(f"doctor: probed {len(nodes)} node(s) in {time.monotonic() - t0:.1f}s")
    reports = {n.name: v.NodeReport(n.name) for n in nodes}
    for node, p in zip(nodes, probes):
        reports[node.name].checks += _node_checks(cluster, node, p, th)
    _cross_shared(nodes, probes, tag, reports, set(trusted))
    network = _network(cluster, nodes, probes, opts, reports, echo)
    out = {"cluster": cluster.name, "time": time.time(), "wall_s": round(time.monotonic() - t0, 2),
           "thresholds": th.__dict__, "nodes": [reports[n.name].as_dict() for n in nodes], "network": network}
    out["failed"] = [r["node"] for r in out["nodes"] if r["verdict"] == v.FAILED]
    write_atomic(ws.doctor_json, records.dump(out, indent=2))
    return out


def _node_checks(cluster: Cluster, node: Node, p: dict[str, Any], th: v.Thresholds) -> list[v.Check]:
    if "error" in p:
        return [v.Check("reach", v.FAILED, f"probe did not run: {p['error']}")]
    model = cluster.instance.gpu if cluster.instance is not None else None
    checks = v.gpu_checks(p, expected_gpus(cluster, node.name), model)
    checks.append(v.disk_check("data_disk", p.get("data"), th))
    if p.get("shared_disk"):
        checks.append(v.disk_check("shared_disk", p["shared_disk"], th))
    checks.append(v.clock_check(v.skew_bounds(p["time"], p["sent"], p["received"]), th))
    return checks


def _cross_shared(nodes: list[Node], probes: list[dict], tag: str, reports: dict[str, v.NodeReport],
                  trusted: set[str]) -> None:
    """The shared check per node: its own probe, then the other nodes' markers seen from it,
    judged against the group of nodes that share one storage (doctor_verdict.not_seen)."""
    marked = {f"node-{n.rank}": n for n, p in zip(nodes, probes) if (p.get("shared") or {}).get("mark")}
    seen: dict[str, set[str]] = {}
    for node, p in zip(nodes, probes):
        s = p.get("shared")
        if "error" not in p and s and s.get("ok") and f"node-{node.rank}" in marked:
            missing = visibility(node, s["path"], tag, [m for m in marked if m != f"node-{node.rank}"])
            seen[node.name] = {marked[h].name for h in marked if h not in missing}
    invisible = v.not_seen(seen, trusted)
    for node, p in zip(nodes, probes):
        if "error" not in p:
            reports[node.name].checks.append(v.shared_check(p.get("shared"), invisible.get(node.name, [])))
    if marked:  # the markers' folder, from one node that wrote one (the others see it go too)
        first = next(iter(marked.values()))
        shared = next(p["shared"]["path"] for p in probes if (p.get("shared") or {}).get("mark"))
        first.sh(f"rm -rf {shlex.quote(f'{shared}/.trainkit-doctor/{tag}')}", timeout=30)


def _network(cluster, nodes, probes, opts: Options, reports, echo) -> dict[str, Any] | None:
    if len(nodes) < 2:
        return None
    if any("error" in p for p in probes):
        for r in reports.values():
            r.checks.append(v.Check("network", v.SKIPPED, "not measured: a node did not answer the probe"))
        return None
    gpu = all(p.get("gpus") for p in probes)
    backend = "nccl" if gpu else "gloo"
    size = opts.size_bytes or (GPU_BYTES if gpu else CPU_BYTES)
    t0 = time.monotonic()
    try:
        bench = run_bench(nodes, backend, size, opts.iters)
    except (RuntimeError, ValueError) as err:
        for r in reports.values():
            r.checks.append(v.Check("network", v.FAILED, f"the {backend} all-reduce test did not complete: {err}"))
        return {"backend": backend, "error": str(err)}
    names = [n.name for n in nodes]
    rated = cluster.instance.network_gbps if cluster.instance is not None else None
    summary = v.bandwidth_summary(bench, names, rated)
    for name, check in v.bandwidth_checks(summary, names, opts.thresholds).items():
        reports[name].checks.append(check)
    echo(f"doctor: {backend} all-reduce over {len(nodes)} nodes: busbw {summary['world']['busbw_gbs']:.3f} GB/s "
         f"({len(summary['pairs'])} pair test(s), {time.monotonic() - t0:.1f}s)")
    return summary


def _judge(report: dict[str, Any], echo) -> None:
    """A warning line per slow node and per warning (a skewed clock, application Xids);
    TrainkitError (exit 12) naming every failed node and check."""
    for node in report["nodes"]:
        if node["verdict"] == v.SLOW:
            slow = "; ".join(c["detail"] for c in node["checks"] if c["status"] == v.SLOW)
            echo(f"warning: node {node['node']} is slow: {slow}")
        for c in node["checks"]:
            if c["status"] == v.WARN:
                echo(f"warning: node {node['node']}: {c['name']}: {c['detail']}")
    if report["failed"]:
        lines = _failures(report)
        raise TrainkitError("doctor: node(s) failed their checks, the run was not started:\n  " + "\n  ".join(lines),
                            fix="fix or replace the node (`trainkit docs doctor` says what each check means), or "
                                "skip the checks with --no-doctor", exit_code=errors.DOCTOR)


def _failures(report: dict[str, Any]) -> list[str]:
    """"node: check: detail" for every failed check of the report."""
    return [f"{n['node']}: {c['name']}: {c['detail']}" for n in report["nodes"]
            for c in n["checks"] if c["status"] == v.FAILED]


def _all_unreachable(report: dict[str, Any]) -> bool:
    """Every failed node failed only because its probe never ran (it does not answer)."""
    failed = [n for n in report["nodes"] if n["verdict"] == v.FAILED]
    return bool(failed) and all({c["name"] for c in n["checks"] if c["status"] == v.FAILED} == {"reach"}
                                for n in failed)


def _storage_refuses(report: dict[str, Any]) -> None:
    """TrainkitError (exit STORAGE) when a failure is the shared storage's, which no replacement
    cures (doctor_verdict.storage_failures): nothing is replaced for it."""
    found = v.storage_failures(report)
    if found:
        raise TrainkitError("doctor: the shared storage is full or refuses writes, on every node alike: replacing "
                            "nodes cannot cure it, so none was replaced:\n  " + "\n  ".join(found),
                            fix="free space on the shared storage (or grow it: storage.nas.size_gb, then "
                                "`trainkit apply`), then train again; `trainkit doctor --min-free-gb` sets the bar",
                            exit_code=errors.STORAGE)


def gate(cluster: Cluster, ws: Workspace, echo, tries: int = 0, resume_hint: str = "",
         opts: Options = Options(), trusted: set[str] = frozenset(),
         record=None) -> tuple[Cluster, list[dict[str, Any]]]:
    """doctor before a run: a warning line per slow node; TrainkitError (exit 12) naming each failed
    node and check. With `tries` (train --recover), a failed node is first replaced as if reclaimed
    (a spare host, or a new instance) and the checks run again, up to `tries` times. Returns the
    cluster as it is then and the events of what was replaced (`doctor_failed`, then
    replace_lost's), for the run's events.jsonl: a resumed run records the nodes it lost.
    `trusted`: the nodes a running job already used (after a replacement: the survivors), which
    decide which folder is the shared one when a replacement sees another. `record`: called with
    each of those events as it happens (a later failure still leaves them recorded). A failure of
    the shared storage itself is TrainkitError STORAGE before anything is replaced."""
    from trainkit.cluster.replace import replace_lost  # terraform and ansible: only when a node failed

    events: list[dict[str, Any]] = []
    for left in range(tries, -1, -1):
        report = diagnose(cluster, ws, opts, echo, trusted)
        _storage_refuses(report)
        if not report["failed"] or left == 0:
            break
        failures = _failures(report)
        echo(f"doctor: replacing failed node(s) {', '.join(report['failed'])}: " + "; ".join(failures))
        try:
            done: list[dict[str, Any]] = []
            cluster = replace_lost(cluster, ws, report["failed"], resume_hint, record=done.append)
        except TrainkitError as err:  # no spare left, or `local`: the failed node stays, exit 12 below
            echo(f"doctor: cannot replace {', '.join(report['failed'])}: {err.message}")
            if _all_unreachable(report):   # a node gone with no spare: the replacement's error (75 "no spare")
                raise
            break
        found = [{"kind": "doctor_failed", "nodes": list(report["failed"]), "checks": failures}, *done]
        events += found
        for ev in found if record else ():
            record(ev)
    _judge(report, echo)
    return cluster, events


def busbw_line(report: dict[str, Any] | None) -> str | None:
    """`trainkit top`'s line about the last doctor run: all-node busbw and the slow or failed nodes."""
    net = (report or {}).get("network") or {}
    if not net.get("world"):
        return None
    when = time.strftime("%Y-%m-%d %H:%M", time.localtime(report["time"]))
    bad = [f"{n['node']} {n['verdict']}" for n in report["nodes"] if n["verdict"] != v.OK]
    return (f"last doctor ({when}): {net['backend']} all-reduce busbw {net['world']['busbw_gbs']:.3f} GB/s"
            + (f"; {', '.join(bad)}" if bad else "; every node ok"))


def node_busbw(report: dict[str, Any] | None) -> dict[str, float]:
    """{node: its best pair's busbw in GB/s} from the last doctor report (empty when none)."""
    out = {}
    for node in (report or {}).get("nodes", []):
        for c in node["checks"]:
            if c["name"] == "network" and c.get("figure") is not None:
                out[node["node"]] = c["figure"]
    return out


def last_report(ws: Workspace) -> dict[str, Any] | None:
    """The last doctor report of this workspace, or None (none yet); InputError naming doctor.json
    when it is damaged (records.Doctor)."""
    fix = "run `trainkit doctor SPEC` again: it rewrites the report whole"
    report = records.load(ws.doctor_json, records.Doctor, fix)
    return report.model_dump(mode="json") if report else None
