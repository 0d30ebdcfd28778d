"""Data staging throughput: trainkit's parallel ranged download vs one connection, same server.

A 127.0.0.1 HTTP server with Range support (tests/http_range.py, its own process) serves one
64 MiB file; the stager fetches it with 10 connections in 4 MiB ranges, then with 1 connection in
one range (what a plain `curl -O` does), each into a fresh folder. Two servers: unpaced (loopback:
CPU-bound on both ends, so parallelism buys little on 2 cores) and paced to 8 MiB/s per
connection, the way a long-distance TCP flow is capped by window / RTT -- the case many
connections are for. Prints MiB/s and the ratio for each.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

SIZE_MB, REPEATS = 64, 3
PACED_MBS = 8.0  # per-connection ceiling of the paced server


def _timed(url: str, root: Path, connections: int, chunk_mb: float) -> float:
    from trainkit.staging.fetch import stage
    from trainkit.staging.section import load_section

    section = load_section({"connections": connections, "chunk_mb": chunk_mb,
                            "sources": [{"url": url, "name": "x"}]})
    t0 = time.perf_counter()
    stage(section, root)
    return time.perf_counter() - t0


def _compare(tmp: Path, rate_mbs: float | None) -> None:
    server = Path(__file__).resolve().parents[1] / "tests" / "http_range.py"
    argv = [sys.executable, str(server), str(tmp / "www")] + ([str(rate_mbs)] if rate_mbs else [])
    proc = subprocess.Popen(argv, stdout=subprocess.PIPE, text=True)
    try:
        base = proc.stdout.readline().strip()
        par, one = [], []
        for i in range(REPEATS):  # interleaved
            par.append(_timed(f"{base}/blob.bin", tmp / f"p{rate_mbs}{i}", 10, 4))
            one.append(_timed(f"{base}/blob.bin", tmp / f"s{rate_mbs}{i}", 1, SIZE_MB))
            shutil.rmtree(tmp / f"p{rate_mbs}{i}"), shutil.rmtree(tmp / f"s{rate_mbs}{i}")
    finally:
        proc.terminate()
        proc.wait()
    p, s = sorted(par)[REPEATS // 2], sorted(one)[REPEATS // 2]
    label = f"paced {rate_mbs:.0f} MiB/s per connection" if rate_mbs else "unpaced loopback"
    print(f"{SIZE_MB} MiB, {label}: 10 connections x 4 MiB ranges {SIZE_MB / p:.1f} MiB/s, "
          f"1 connection {SIZE_MB / s:.1f} MiB/s, ratio {s / p:.2f}x")


def main() -> None:
    print("== data staging (benchmarks/bench_stage.py) ==")
    with tempfile.TemporaryDirectory() as tmp:
        (Path(tmp) / "www").mkdir()
        (Path(tmp) / "www" / "blob.bin").write_bytes(os.urandom(SIZE_MB * 2**20))
        for rate in (None, PACED_MBS):
            _compare(Path(tmp), rate)


if __name__ == "__main__":
    main()
