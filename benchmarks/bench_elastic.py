"""recover.elastic vs waiting for the replacement, on the `hosts` target (not a test; `make bench`).

The bench of bench_faults.py (four SSH machines in network namespaces, two active, two spares;
the digits job, checkpoint every 5 steps), with every step slowed to STEP_SLEEP_S by the engine's
TRAINKIT_FAULT_STEP_SLEEP hook so that the run is long next to a replacement (as a real model's
is). Three runs, one after the other:

    elastic     recover.elastic on, the worker killed at step 15
    waiting     the same fault without elastic (recovery waits for the spare)
    no fault    the same job, nothing killed

Prints kill -> the first step after it (elastic: on the survivor alone; goal under 30 s on this
machine) and each run's wall time over the no-fault run's.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import time
from pathlib import Path

import yaml

from benchmarks.bench_faults import ARGS, REPO, TRAINKIT, _active, _wait_step, four_hosts

STEP_SLEEP_S = 0.5


def config(base: Path, elastic: bool) -> list[str]:
    """ARGS with a digits config that sleeps STEP_SLEEP_S a step (and is elastic when asked)."""
    data = {**yaml.safe_load((REPO / "examples/train/digits.yaml").read_text()),
            "env": {"TRAINKIT_FAULT_STEP_SLEEP": str(STEP_SLEEP_S)}}
    if elastic:
        data["recover"] = {"elastic": True}
    path = base / f"digits-{'elastic' if elastic else 'plain'}.yaml"
    path.write_text(yaml.safe_dump(data))
    return ["--config", str(path), *ARGS[2:]]


def one(four, base: Path, common: list[str], env: dict, elastic: bool, kill: bool) -> dict:
    for h in four.hosts:
        if not h.pids():
            four.revive(h)
    by_name = {h.name: h for h in four.hosts}
    runs = base / "ws" / "runs"
    before = set(runs.glob("*")) if runs.is_dir() else set()
    start = time.time()
    proc = subprocess.Popen([str(TRAINKIT), "train", *common, *config(base, elastic)], env=env,
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)
    killed = None
    try:
        if kill:
            _wait_step(base / "shared" / "bench-faults" / "runs", before, proc)
            killed = time.time()
            four.kill(by_name[_active(base, four)[1]])
        proc.wait(timeout=1200)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
    wall = time.time() - start
    run_dir = max(set(runs.glob("*")) - before, key=lambda p: p.stat().st_mtime)
    events = [json.loads(x) for x in (run_dir / "events.jsonl").read_text().splitlines()]
    resumed = next((e for e in events if e["event"] == "resumed"), {})
    return {"rc": proc.returncode, "wall": wall, "lost": resumed.get("lost_steps"),
            "to_step": resumed["first_step_at"] - killed if killed and resumed.get("first_step_at") else None,
            "grown": any(e["event"] == "grown" for e in events)}


def main() -> None:
    with four_hosts("bench_elastic", "tkbe") as bench:
        if bench is None:
            return
        rows = {"elastic": one(*bench, elastic=True, kill=True),
                "waiting": one(*bench, elastic=False, kill=True),
                "no fault": one(*bench, elastic=False, kill=False)}
    base_wall = rows["no fault"]["wall"]
    print(f"bench_elastic: digits, {STEP_SLEEP_S} s per step, the worker killed at step 15, "
          "checkpoint every 5 steps")
    for name, r in rows.items():
        to_step = f"{r['to_step']:6.1f} s" if r["to_step"] is not None else "     -  "
        print(f"  {name:<9} exit {r['rc']}  kill -> first step {to_step}  lost {r['lost']}  "
              f"wall {r['wall']:6.1f} s  ({r['wall'] / base_wall:4.2f} of no fault)"
              + ("  grew back" if r["grown"] else ""))


if __name__ == "__main__":
    main()
