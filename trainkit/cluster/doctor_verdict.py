"""`trainkit doctor`'s arithmetic and verdicts: pure functions from what the nodes measured to a
verdict per node (ok / slow / failed), each check with its figure and threshold.

Bandwidth as nccl-tests defines it (NVIDIA/nccl-tests, doc/PERFORMANCE.md):
    algbw = S / t                      S bytes all-reduced in t seconds (per call, mean of iters)
    busbw = algbw * 2 (n - 1) / n      all-reduce over n ranks: each rank sends and receives
                                       2 (n-1)/n * S over its slowest link in a ring, so busbw is
                                       comparable to the link's own (unidirectional) bandwidth
GB/s there is 1e9 bytes/s; a catalog's network rating in Gbit/s is compared as gbps / 8.

The thresholds (docs/doctor.md gives each one's reasoning and source) are knobs of `Thresholds`.
"""

from __future__ import annotations

import re
from dataclasses import asdict, dataclass, field
from typing import Any

OK, SLOW, FAILED, WARN, SKIPPED = "ok", "slow", "failed", "warn", "skipped"
GB = 1e9  # nccl-tests reports GB/s as 1e9 bytes per second

# Xids the NVIDIA driver logs for hardware faults that need a reset or a new machine (NVIDIA
# "XID Errors" document, r570: 48 double-bit ECC, 61/62 internal micro-controller halt, 63/64 ECC
# page retirement / row remapping event or failure, 74 NVLink error, 79 GPU fell off the bus,
# 92 high single-bit ECC rate, 94/95 contained/uncontained ECC error, 119/120 GSP RPC timeout /
# GSP error). Other Xids (13, 31, 43, ...) are usually the application's fault: a warning.
FATAL_XIDS = frozenset({48, 61, 62, 63, 64, 74, 79, 92, 94, 95, 119, 120})
XID_RE = re.compile(r"Xid \([^)]*\): (\d+)")


@dataclass(frozen=True)
class Thresholds:
    # A link at under half of the reference is not tuning noise: healthy TCP/RoCE fabrics reach
    # 70-90% of line rate in nccl-tests' busbw, and the failures the issue cites (GPUDirect RDMA
    # off, NCCL issue #1412; a wrong eRDMA MTU) cost a factor of two or more.
    slow_fraction: float = 0.5
    min_free_gb: float = 5.0       # below this a checkpoint write fails soon; --min-free-gb raises it
    skew_warn_s: float = 1.0       # run records and events from nodes and controller misorder
    skew_fail_s: float = 900.0     # signed object-store requests fail: S3 SigV4 RequestTimeTooSkewed (15 min)


@dataclass(frozen=True)
class Check:
    name: str
    status: str                    # ok | slow | failed | warn | skipped
    detail: str                    # the figure and the threshold, in words
    figure: float | None = None
    threshold: float | None = None


@dataclass
class NodeReport:
    name: str
    checks: list[Check] = field(default_factory=list)

    @property
    def verdict(self) -> str:
        """failed if any check failed; slow if a bandwidth check is slow; else ok (warnings kept)."""
        states = {c.status for c in self.checks}
        return FAILED if FAILED in states else SLOW if SLOW in states else OK

    def failed(self) -> list[Check]:
        return [c for c in self.checks if c.status == FAILED]

    def as_dict(self) -> dict[str, Any]:
        return {"node": self.name, "verdict": self.verdict, "checks": [asdict(c) for c in self.checks]}


# ------------------------------------------------------------------ bandwidth arithmetic

def algbw(size_bytes: float, seconds: float) -> float:
    """Algorithm bandwidth in bytes/s: S / t (nccl-tests doc/PERFORMANCE.md)."""
    if seconds <= 0:
        raise ValueError(f"time must be positive, got {seconds}")
    return size_bytes / seconds


def allreduce_busbw(alg: float, n: int) -> float:
    """Bus bandwidth of an all-reduce over n ranks: algbw * 2(n-1)/n (nccl-tests doc/PERFORMANCE.md)."""
    if n < 1:
        raise ValueError(f"rank count must be >= 1, got {n}")
    return alg * 2 * (n - 1) / n


def figures(size_bytes: int, seconds: float, n: int) -> dict[str, float]:
    """{"time_s", "algbw_gbs", "busbw_gbs"} of one all-reduce timing over n ranks."""
    alg = algbw(size_bytes, seconds)
    return {"time_s": seconds, "algbw_gbs": alg / GB, "busbw_gbs": allreduce_busbw(alg, n) / GB}


def pairs_for(n: int, all_pairs_up_to: int = 8) -> list[tuple[int, int]]:
    """Node pairs to test: every pair up to 8 nodes (28 tests), else each node with the next one
    in a ring and the one half-way round (2n tests, each node in 4), enough to point at a node."""
    if n <= all_pairs_up_to:
        return [(i, j) for i in range(n) for j in range(i + 1, n)]
    seen = {tuple(sorted((i, (i + k) % n))) for i in range(n) for k in (1, n // 2)}
    return sorted(seen)


def bandwidth_summary(bench: dict[str, Any], names: list[str], rated_gbps: float | None) -> dict[str, Any]:
    """The bench's raw times as nccl-tests figures: {"backend", "bytes", "world": {...},
    "pairs": [{"nodes": [a, b], ...}], "rated_busbw_gbs"}; rated = catalog Gbit/s / 8."""
    tests = bench["tests"]
    size = int(bench["bytes"])
    world = {"nodes": [names[r] for r in tests[0]["ranks"]],
             **figures(size, tests[0]["seconds"], len(tests[0]["ranks"]))}
    pairs = [{"nodes": [names[r] for r in t["ranks"]], **figures(size, t["seconds"], 2)}
             for t in tests[1:]]
    return {"backend": bench["backend"], "bytes": size, "iters": bench.get("iters"), "world": world,
            "pairs": pairs, "rated_busbw_gbs": rated_gbps / 8 if rated_gbps else None}


def bandwidth_checks(summary: dict[str, Any], names: list[str], th: Thresholds) -> dict[str, Check]:
    """Per node: its best pair's busbw against slow_fraction x the reference, where the reference
    is the instance's rated bandwidth when the catalog knows it, else the best pair in the cluster.

    A node is as fast as its best link: a node slow in every pair it is in while other pairs are
    fast is the slow one. With 2 nodes and no rating there is one pair and nothing to compare it
    with: both are ok on this check, and the figure is reported."""
    pairs = summary["pairs"] or ([summary["world"]] if len(names) == 2 else [])
    if not pairs:
        return {}
    rated = summary.get("rated_busbw_gbs")
    best = max(p["busbw_gbs"] for p in pairs)
    ref, ref_name = (rated, "the instance's rated network") if rated else (best, "the best pair")
    limit = th.slow_fraction * ref
    out = {}
    for name in names:
        mine = [p for p in pairs if name in p["nodes"]]
        if not mine:
            continue
        top = max(mine, key=lambda p: p["busbw_gbs"])
        peer = next(n for n in top["nodes"] if n != name)
        figure = top["busbw_gbs"]
        status = SLOW if figure < limit else OK
        rel = "<" if status == SLOW else ">="
        out[name] = Check("network", status, f"busbw {figure:.3f} GB/s (best pair, with {peer}) {rel} "
                          f"{th.slow_fraction:.0%} of {ref:.3f} GB/s ({ref_name})", figure, limit)
    return out


# ------------------------------------------------------------------ node checks

def skew_bounds(node_time: float, sent: float, received: float) -> float:
    """Least clock skew consistent with the reading: 0 when the node's clock read a time between
    sending the request and getting the reply (as NTP's offset, bounded by the round trip)."""
    if node_time < sent:
        return node_time - sent
    if node_time > received:
        return node_time - received
    return 0.0


def gpu_checks(probe: dict[str, Any], expect_gpus: int, expect_model: str | None) -> list[Check]:
    """Count and model vs the catalog, driver/CUDA versions, ECC, row remapping, Xids, DCGM."""
    gpus = probe.get("gpus") or []
    if not probe.get("nvml"):
        if expect_gpus:
            return [Check("gpus", FAILED, f"no GPU visible through NVML ({probe.get('nvml_error') or 'no NVML'}),"
                          f" expected {expect_gpus}: driver missing or GPUs lost", 0, expect_gpus)]
        return [Check("gpus", OK, "no GPU (a CPU node): NVML not present", 0, 0)]
    models = sorted({g["name"] for g in gpus})
    out = [Check("gpus", FAILED if len(gpus) < expect_gpus else OK,
                 f"{len(gpus)} x {', '.join(models) or '-'} (expected {expect_gpus}); driver "
                 f"{probe.get('driver')}, CUDA {probe.get('cuda')}", len(gpus), expect_gpus)]
    if expect_model and gpus and not all(expect_model.lower() in m.lower() for m in models):
        out.append(Check("gpu_model", WARN, f"{', '.join(models)} is not the catalog's {expect_model}"))
    ecc = [g for g in gpus if (g.get("ecc_uncorrected") or 0) > 0]
    out.append(Check("ecc", FAILED if ecc else OK, "uncorrected ECC errors on GPU " +
                     ", ".join(f"{g['index']} ({g['ecc_uncorrected']})" for g in ecc) if ecc else
                     "no uncorrected ECC errors since the driver loaded", sum(g["ecc_uncorrected"] for g in ecc), 0))
    remap = [g["index"] for g in gpus if g.get("remap_pending") or g.get("remap_failed")]
    if remap:
        out.append(Check("row_remap", FAILED, f"row remapping pending or failed on GPU {remap}: reset the GPU "
                         "or replace the node"))
    out += _xid_checks(probe.get("xid"))
    dcgm = probe.get("dcgm")
    if dcgm is not None:
        out.append(Check("dcgm", FAILED if dcgm.get("failed") else OK,
                         "dcgmi diag -r 1 " + ("failed: " + dcgm.get("tail", "")[-200:] if dcgm.get("failed") else "passed")))
    return out


def _xid_checks(lines: list[str] | None) -> list[Check]:
    if lines is None:
        return [Check("xid", SKIPPED, "kernel log not readable here (dmesg)")]
    codes = [int(m.group(1)) for line in lines for m in [XID_RE.search(line)] if m]
    fatal = sorted({c for c in codes if c in FATAL_XIDS})
    if fatal:
        return [Check("xid", FAILED, f"hardware Xid error(s) {fatal} in the kernel log", len(codes), 0)]
    if codes:
        return [Check("xid", WARN, f"Xid error(s) {sorted(set(codes))} in the kernel log (application-level)",
                      len(codes), 0)]
    return [Check("xid", OK, "no Xid errors in the kernel log", 0, 0)]


def disk_check(name: str, d: dict[str, Any] | None, th: Thresholds) -> Check:
    if d is None:
        return Check(name, SKIPPED, "not configured")
    if "error" in d:
        return Check(name, FAILED, f"{d['path']}: {d['error']}")
    free = d["free_bytes"] / 2**30
    status = FAILED if free < th.min_free_gb else OK
    return Check(name, status, f"{d['path']}: {free:.1f} GiB free {'<' if status == FAILED else '>='} "
                 f"{th.min_free_gb:g} GiB", free, th.min_free_gb)


def shared_check(s: dict[str, Any] | None, invisible: list[str]) -> Check:
    """The shared mount present and writable here, and what other nodes wrote visible here."""
    if s is None:
        return Check("shared", SKIPPED, "no shared storage in the spec")
    if not s.get("ok"):
        return Check("shared", FAILED, f"shared mount {s['path']}: {s.get('error')}")
    if invisible:
        return Check("shared", FAILED, f"shared mount {s['path']}: files written by {', '.join(invisible)} "
                     "are not visible here: not the same storage")
    return Check("shared", OK, f"shared mount {s['path']}: present, writable, shared with every node")


def not_seen(seen: dict[str, set[str]], trusted: set[str] = frozenset()) -> dict[str, list[str]]:
    """{node: the nodes on the shared storage whose markers it does not see} (empty: it passes).

    `seen[n]` holds the nodes whose markers node n found on its shared folder. Nodes that see each
    other (either way) are on one storage; the shared storage is the biggest such group, and in a
    tie the group holding a `trusted` node (a node the run already ran on: it saw the run's
    checkpoints there). A node outside that group fails, naming the group's nodes; one inside
    fails only for a member it misses. With no group to prefer (a tie, nothing trusted), every
    node is judged against every other: a pair that sees two different folders fails both."""
    names = list(seen)
    group = {n: {n} for n in names}
    for a in names:
        for b in seen[a]:
            if b in group and group[a] is not group[b]:
                merged = group[a] | group[b]
                for m in merged:
                    group[m] = merged
    groups = list({id(g): g for g in group.values()}.values())
    big = max((len(g) for g in groups), default=0)
    best = [g for g in groups if len(g) == big]
    if len(best) > 1:
        best = [g for g in best if g & trusted] or best
    shared = best[0] if len(best) == 1 else set(names)
    return {n: sorted(m for m in shared if m != n and m not in seen[n]) for n in names}


def clock_check(skew: float, th: Thresholds) -> Check:
    size = abs(skew)
    status = FAILED if size > th.skew_fail_s else WARN if size > th.skew_warn_s else OK
    limit = th.skew_fail_s if status == FAILED else th.skew_warn_s
    return Check("clock", status, f"clock {'ahead' if skew >= 0 else 'behind'} by at least {size:.2f}s "
                 f"({'>' if status != OK else '<='} {limit:g}s)", skew, limit)


# What the probe's shared check says when the storage itself refuses a write (strerror texts).
STORAGE_WORDS = ("No space left on device", "Read-only file system", "Disk quota exceeded")


def storage_failures(report: dict[str, Any]) -> list[str]:
    """"node: check: detail" for failed checks that no replacement cures, because every node
    (and a spare) mounts the same storage: the shared storage's free space (`shared_disk`) under
    the floor, or the shared mount refusing writes as full or read-only, on EVERY node that has
    the check (one node alone failing has a mount of its own, a failed NAS mount over a small
    local disk: a spare cures that)."""
    def failed(node: dict[str, Any], name: str) -> list[dict[str, Any]]:
        return [c for c in node["checks"] if c["name"] == name and c["status"] == FAILED]

    def everywhere(name: str, words: tuple[str, ...] = ("",)) -> bool:
        having = [n for n in report["nodes"] if any(c["name"] == name for c in n["checks"])]
        hit = [n for n in having if any(w in c["detail"] for c in failed(n, name) for w in words)]
        return bool(hit) and len(hit) == len(having)

    names = [n for n in ("shared_disk",) if everywhere(n)] + (["shared"] if everywhere("shared", STORAGE_WORDS) else [])
    return [f"{node['node']}: {c['name']}: {c['detail']}" for node in report["nodes"] for name in names
            for c in failed(node, name)]
