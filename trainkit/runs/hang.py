"""What the controller does with a hung attempt (trainkit/runs/watchdog.py decides it is hung):

1. stack dumps of every process of each reachable node's job into the run folder,
   runs/<id>/hang/attempt-<N>/<node>.txt: `py-spy dump` where py-spy is installed on the node
   (the Python stacks of every thread), else each process's state from /proc (State and the
   kernel function it waits in: D is an uninterruptible wait, a hung NFS or a driver; T is
   stopped) and its kernel stack where readable;
2. a hard stop, escalated: SIGTERM to every node's job, then SIGKILL of the job's whole tree
   (supervise.py --hard-stop) for what still runs KILL_AFTER_S later.

The attempt then ends `hung`; trainkit/runs/recover.py relaunches the run from its checkpoint,
counted against --max-restarts-on-errors, and never closes it `cancelled` for its own stop.
"""

from __future__ import annotations

import shlex
from pathlib import Path

from trainkit.runs import record as runs
from trainkit.runs import remote

# torchrun gives its workers 30 s between its SIGTERM and SIGKILL (pytorch PR #61602,
# torch/distributed/elastic/multiprocessing/api.py `_close(death_sig, timeout=30)`): a job that
# can still react has checkpointed and exited by then.
KILL_AFTER_S = 30

# For each pid of the job's tree (the state's `tree`: [pid, start time] pairs), its stacks.
_DUMP = r"""
pids=$({py} -c 'import json, sys; print(" ".join(str(p) for p, _ in json.load(open(sys.argv[1])).get("tree") or []))' {sf} 2>/dev/null)
for pid in $pids; do
  [ -d /proc/$pid ] || continue
  echo "=== pid $pid: $(tr '\0' ' ' < /proc/$pid/cmdline 2>/dev/null | cut -c1-300)"
  grep -E '^(State|PPid|Threads):' /proc/$pid/status 2>/dev/null
  echo "wchan: $(cat /proc/$pid/wchan 2>/dev/null)"
  if command -v py-spy >/dev/null 2>&1; then timeout 20 py-spy dump --pid $pid 2>&1 | head -n 200; fi
  cat /proc/$pid/stack 2>/dev/null | head -n 30
done
echo "py-spy: $(command -v py-spy || echo not installed)"
"""


def dump_stacks(nodes: list, lay: remote.Layout, attempt: int, run_dir: Path) -> list[Path]:
    """Each reachable node's stack dump of the attempt's job, saved under run_dir/hang/; the paths."""
    folder = run_dir / "hang" / f"attempt-{attempt}"
    folder.mkdir(parents=True, exist_ok=True)

    def one(node) -> Path | None:
        sf = shlex.quote(lay.state_file(node.rank, attempt))
        mem = shlex.quote(remote.memory_state_path(lay.state_file(node.rank, attempt)))
        py = shlex.quote(node.python)
        script = f"sf={sf}; if [ -s {mem} ]; then sf={mem}; fi; " + _DUMP.replace("{sf}", '"$sf"').replace("{py}", py)
        res = node.sh(script, timeout=120)
        if res.returncode != 0 and not res.stdout:
            return None
        path = folder / f"{node.name}.txt"
        path.write_bytes(res.stdout)
        return path

    return [p for p in remote.on_nodes(nodes, one) if p is not None]


def stop_hung(nodes: list, lay: remote.Layout, attempt: int, run_dir: Path, stop) -> None:
    """Dumps (an event `hang_dumps` naming the files), then `stop(nodes, lay, attempt, [],
    wait_s=KILL_AFTER_S)` (recover.stop_survivors: SIGTERM, then the hard stop)."""
    dumps = dump_stacks(nodes, lay, attempt, run_dir)
    runs.event(run_dir, "hang_dumps", attempt=attempt, files=[str(p.relative_to(run_dir)) for p in dumps])
    stop(nodes, lay, attempt, [], wait_s=KILL_AFTER_S)
