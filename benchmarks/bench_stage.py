"""Data staging throughput: trainkit's parallel ranged download vs one connection, same server.

A 127.0.0.1 HTTP server with Range support (tests/http_range.py) serves one 64 MiB file; the
stager fetches it with 10 connections in 4 MiB ranges, then with 1 connection in one range (what
a plain `curl -O` does), each into a fresh folder. Prints MiB/s and the ratio. On loopback the
server's CPU, not the network, bounds both: the ratio understates a real WAN link, where the
per-connection window is the limit (the reason the field guide uses 10 connections).
"""

from __future__ import annotations

import os
import sys
import tempfile
import time
from pathlib import Path

SIZE_MB, REPEATS = 64, 3


def _timed(url: str, root: Path, connections: int, chunk_mb: float) -> float:
    from trainkit.stage import load_section, stage

    section = load_section({"connections": connections, "chunk_mb": chunk_mb,
                            "sources": [{"url": url, "name": "x"}]})
    t0 = time.perf_counter()
    stage(section, root)
    return time.perf_counter() - t0


def main() -> None:
    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))
    from http_range import serve

    print("== data staging (benchmarks/bench_stage.py) ==")
    with tempfile.TemporaryDirectory() as tmp:
        www = Path(tmp) / "www"
        www.mkdir()
        (www / "blob.bin").write_bytes(os.urandom(SIZE_MB * 2**20))
        server, base = serve(www)
        try:
            par, one = [], []
            for i in range(REPEATS):
                par.append(_timed(f"{base}/blob.bin", Path(tmp) / f"p{i}", 10, 4))
                one.append(_timed(f"{base}/blob.bin", Path(tmp) / f"s{i}", 1, SIZE_MB))
        finally:
            server.shutdown()
    p, s = sorted(par)[REPEATS // 2], sorted(one)[REPEATS // 2]
    print(f"{SIZE_MB} MiB from 127.0.0.1: 10 connections x 4 MiB ranges {SIZE_MB / p:.0f} MiB/s, "
          f"1 connection {SIZE_MB / s:.0f} MiB/s, ratio {s / p:.2f}x")


if __name__ == "__main__":
    main()
