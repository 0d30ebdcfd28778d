"""Failover at apply (issue 21), measured side by side in one run (not a test; `make bench`).

On a moto server behind the fault proxy (tests/infra/fault_proxy.py), both on 127.0.0.1, with one
node and no disks, NAS or NAT gateway (the network, key pair and instance are what is applied):

A. `zone: [us-east-1a, us-east-1b]` with EC2 answering InsufficientInstanceCapacity for
   us-east-1a: the refused candidate, then the next one;
B. `zone: us-east-1b`, nothing refused.

Prints the seconds from the cloud's first refusal (the proxy's answer) to the moment the next
candidate's `terraform apply` starts (trainkit's own line), and the whole apply of A over B. The
runs alternate A, B, B, A so both see the same machine load; medians are printed. Needs terraform
and the offline provider mirror (as bench_cli.py).
"""

from __future__ import annotations

import shutil
import statistics
import subprocess
import tempfile
import threading
import time
import urllib.request
from pathlib import Path

import yaml

from benchmarks.bench_cli import PY, REPO, _tf_config, tests_importable

tests_importable()
from fault_proxy import FaultProxy, Faults  # noqa: E402  (the fault proxy the tests use)

ENV = {"AWS_ACCESS_KEY_ID": "test", "AWS_SECRET_ACCESS_KEY": "test", "AWS_DEFAULT_REGION": "us-east-1"}


class TimedProxy(FaultProxy):
    """The fault proxy, noting when it first answered a capacity refusal."""

    def __init__(self, *args, **kw):
        super().__init__(*args, **kw)
        self.refused_at: float | None = None

    def decide(self, action, form, auth=""):
        verdict = super().decide(action, form, auth)
        if verdict and verdict.startswith("capacity:") and self.refused_at is None:
            self.refused_at = time.monotonic()
        return verdict


def spec_file(tmp: Path, url: str, zone) -> Path:
    spec = yaml.safe_load((REPO / "examples/clusters/aws-moto.yaml").read_text())
    spec.update(endpoints={k: url for k in spec["endpoints"]}, zone=zone, nodes=1,
                storage={"data_disk": {"enabled": False}, "nas": {"enabled": False}},
                network={"admin_cidrs": ["203.0.113.0/24"], "public_ip": "head", "placement_group": False,
                         "nat_gateway": False})
    path = tmp / f"cluster-{len(zone) if isinstance(zone, list) else 1}.yaml"
    path.write_text(yaml.safe_dump(spec))
    return path


def apply_timed(spec: Path, ws: Path) -> tuple[float, list[tuple[float, str]]]:
    """(wall seconds of `trainkit apply`, its stderr lines with the time each was read)."""
    import os

    lines: list[tuple[float, str]] = []
    start = time.monotonic()
    proc = subprocess.Popen([PY, "-m", "trainkit", "apply", str(spec), "--workdir", str(ws), "--no-provision",
                             "--yes"], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
                            env={**os.environ, **ENV})

    def read() -> None:
        for line in proc.stderr:
            lines.append((time.monotonic(), line.rstrip()))
    reader = threading.Thread(target=read)
    reader.start()
    proc.wait()
    reader.join()
    if proc.returncode != 0:
        raise RuntimeError(f"apply failed (exit {proc.returncode}): " + "\n".join(t for _, t in lines[-10:]))
    return time.monotonic() - start, lines


def one_round(tmp: Path, proxy: TimedProxy, moto: str, refused: bool) -> tuple[float, float | None]:
    """(apply seconds, refusal -> next apply start seconds or None) on an empty moto."""
    urllib.request.urlopen(urllib.request.Request(moto + "/moto-api/reset", method="POST"), timeout=10)
    proxy.reset(Faults(no_capacity={("us-east-1a", "g5.12xlarge")}) if refused else Faults())
    proxy.refused_at = None
    ws = tmp / f"ws-{time.monotonic_ns()}"
    spec = spec_file(tmp, proxy.url, ["us-east-1a", "us-east-1b"] if refused else "us-east-1b")
    took, lines = apply_timed(spec, ws)
    gap = None
    if refused and proxy.refused_at is not None:
        starts = [t for t, text in lines if text.startswith("terraform apply") and t > proxy.refused_at]
        gap = starts[0] - proxy.refused_at if starts else None
    shutil.rmtree(ws, ignore_errors=True)   # moto is reset before the next round
    return took, gap


def main() -> None:
    print("== failover at apply (benchmarks/bench_failover.py) ==")
    if not shutil.which("terraform"):
        print("terraform not on PATH: failover benchmark not run")
        return
    tmp = Path(tempfile.mkdtemp(prefix="trainkit-bench-failover-"))
    _tf_config(tmp)
    from tests.conftest import running_moto

    with running_moto() as moto, TimedProxy(moto) as proxy:
        a, b, gaps = [], [], []
        for refused in (True, False, False, True):   # ABBA
            took, gap = one_round(tmp, proxy, moto, refused)
            (a if refused else b).append(took)
            if gap is not None:
                gaps.append(gap)
    shutil.rmtree(tmp, ignore_errors=True)
    ta, tb = statistics.median(a), statistics.median(b)
    print(f"{'refused zone -> next candidate apply starts':<48} {statistics.median(gaps):7.1f} s "
          f"(median of {len(gaps)}; stop terraform, note it, re-render, init, re-plan)")
    print(f"{'apply with one refused zone vs none':<48} {ta:7.1f} s vs {tb:7.1f} s  ratio {ta / tb:5.2f}")


if __name__ == "__main__":
    main()
