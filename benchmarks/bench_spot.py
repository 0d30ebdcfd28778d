"""Spot + checkpoints + recovery against on-demand, for the same trained model (issue 42: the seed's
figure, "70% or more" saved; not a test, `make bench`).

Four SSH machines in network namespaces (tests/e2e/netns.py; needs root, sshd and iproute2): two
active, two spares. The digits job (checkpoint every CKPT_EVERY steps on the shared folder) runs
twice on them with `train --recover`: once "on demand" (nothing is reclaimed) and once "on spot",
where a reclaim trace is replayed by killing every process of an active machine at the trace's
times (as bench_recover does), and the recovery loop brings in a spare.

The trace: reclaims of a real job (REAL_NODES spot nodes for one month, the unit the clouds'
figures are given in) drawn with a seeded RNG as a Poisson process at the cited rate
(trainkit/catalog/reclaims.yaml, money/reclaims.py), its month scaled onto the run's steps (the
on-demand run's clock; under a load that changes from run to run, steps are the stable measure).
A reclaimed machine is booted again once the run has resumed and waits as a spare (a lost host
rejoins the spares: cluster/replace.py), so every reclaim of the trace is replayed; one that
falls inside a recovery waits for it to end, one after the run's end is left out (printed).
Scaling keeps the trace's count and spacing, not the share of a run a replacement takes (about a
minute of a one-minute run here; ten minutes of a month on a cloud): the measured overhead is an
upper bound of a cloud's, and the model's figure for the real job is printed beside it.

Priced from the catalog (the on-demand price of a real GPU type; its spot price where the catalog
or the file `trainkit prices refresh` wrote for its region has one) and the runs' cost ledgers (summary.json node-hours over the attempts,
plus every node's time between attempts, which the cloud bills too), with the controller (the
catalog's cheapest CPU type, money/spot.py) for the spot run's wall time. Where the catalog has no
spot price, the spot/on-demand ratio is printed at several price ratios, with the highest price
ratio that keeps it <= 0.30 (the seed's claim). Beside it, the model's prediction (money/spot.py)
with the run's own checkpoint interval and measured replacement time, and its figure for the real
job. Set TRAINKIT_E2E_NETNS_SUBNET / _PREFIX to run it next to other namespace users.
"""

from __future__ import annotations

import json
import os
import random
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO / "tests" / "e2e"))
TRAINKIT = Path(sys.executable).parent / "trainkit"
CKPT_EVERY, EPOCHS, SEED = 5, 40, 42
NODES = 2                      # active machines; the other two are the spares
CLOUD, BAND, PRICED = "aws", ">20%", "g5.xlarge"   # the worst published band: the most reclaims
REAL_NODES = 4                 # the real job the trace stands for: 4 spot nodes for one month
ARGS = ["--config", str(REPO / "examples/train/digits.yaml"), f"epochs={EPOCHS}", "export.onnx=false",
        "plot=false", "tensorboard=false", "checkpoint.interval=null", f"checkpoint.every_n_steps={CKPT_EVERY}",
        "log_every=1", "workers=0", "--poll", "1", "--backoff", "1", "--recover"]
PRICE_RATIOS = (0.3, 0.4, 0.5)
STEP = re.compile(r'"step": (\d+),')


def trace(seed: int = SEED) -> dict:
    """Reclaim times (fractions of the month) of REAL_NODES nodes at CLOUD's BAND, seeded."""
    from trainkit.money import reclaims
    from trainkit.money.cost import HOURS_PER_MONTH

    rate = reclaims.cluster_reclaims_per_day(CLOUD, REAL_NODES, BAND)
    per_month = rate["reclaims_per_day"] * HOURS_PER_MONTH / 24
    rng, t, times = random.Random(seed), 0.0, []
    while True:
        t += rng.expovariate(per_month)
        if t >= 1:
            break
        times.append(t)
    return {"rate": rate, "expected": per_month, "times": times}


def main() -> None:
    from benchmarks.bench_faults import four_hosts

    tr = trace()
    with four_hosts("bench_spot", "tkbs") as bench:
        if bench is None:
            return
        four, base, common, env = bench
        od = run(four, base, common, env, kills=[])
        total = od["steps"] or EPOCHS * 20
        spot = run(four, base, common, env, kills=[max(1, round(t * total)) for t in tr["times"]])
    if os.environ.get("BENCH_SPOT_DUMP"):   # the raw figures, for a look at one run
        Path(os.environ["BENCH_SPOT_DUMP"]).write_text(json.dumps({"trace": tr, "od": od, "spot": spot}, indent=1))
    report(tr, od, spot)


def run(four, base: Path, common: list[str], env: dict, kills: list[int]) -> dict:
    """One `train --recover`; `kills`: the steps at which an active machine is reclaimed (each
    waits for the previous recovery to end). Wall time, kills, the run's files."""
    from benchmarks.bench_faults import _active

    runs = base / "ws" / "runs"
    before = set(runs.glob("*")) if runs.is_dir() else set()
    by_name, rng = {h.name: h for h in four.hosts}, random.Random(SEED + len(kills))
    started = time.time()
    proc = subprocess.Popen([str(TRAINKIT), "train", *common, *ARGS], env=env, stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL, start_new_session=True)
    done = []
    try:
        run_dir = _new_run(runs, before, proc)
        metrics = base / "shared" / "bench-faults" / "runs" / run_dir.name / "metrics.jsonl"
        first = _first_step(metrics, proc)
        for at in kills:
            while proc.poll() is None and (_last_step(metrics) < at or _resumed(run_dir) < len(done)):
                time.sleep(0.1)
            if proc.poll() is not None:
                break
            for h in four.hosts:     # the last reclaimed machine is back, as a spare
                if not h.pids():
                    four.revive(h)
            victim = rng.choice(_active(base, four))
            four.kill(by_name[victim])
            done.append({"at": time.time(), "step": at, "host": victim})
        proc.wait(timeout=900)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
    ended = time.time()
    return {"rc": proc.returncode, "wall_s": ended - started, "ended": ended, "first_step": first, "kills": done,
            "dropped": len(kills) - len(done), **_read(run_dir)}


def _new_run(runs: Path, before: set, proc) -> Path:
    while proc.poll() is None:
        new = set(runs.glob("*")) - before if runs.is_dir() else set()
        if new:
            return new.pop()
        time.sleep(0.2)
    raise RuntimeError("train ended before its run folder appeared")


def _first_step(metrics: Path, proc) -> float:
    while proc.poll() is None:
        if _last_step(metrics) >= 1:
            return time.time()
        time.sleep(0.1)
    raise RuntimeError("train ended before its first step")


def _last_step(metrics: Path) -> int:
    """The newest step record of metrics.jsonl (0 before the first)."""
    found = STEP.findall(metrics.read_text()[-4000:]) if metrics.is_file() else []
    return int(found[-1]) if found else 0


def _resumed(run_dir: Path) -> int:
    path = run_dir / "events.jsonl"
    lines = path.read_text().splitlines() if path.is_file() else []
    return sum(1 for x in lines if '"event": "resumed"' in x or '"event":"resumed"' in x)


def _read(run_dir: Path) -> dict:
    """The run's events, cost ledger node-hours, attempts and the checkpoint interval in seconds."""
    events = [json.loads(x) for x in (run_dir / "events.jsonl").read_text().splitlines()]
    record = json.loads((run_dir / "run.json").read_text())
    summary = json.loads((run_dir / "summary.json").read_text()) if (run_dir / "summary.json").is_file() else {}
    ledger = (summary.get("cost") or {}).get("items") or [{}]
    attempts = record.get("attempts") or []
    gaps = sum(max(0.0, b["started_at"] - a["ended_at"]) for a, b in zip(attempts, attempts[1:])
               if a.get("ended_at"))
    return {"events": events, "ledger_node_hours": ledger[0].get("node_hours"), "attempts": len(attempts),
            "gap_s": gaps, "steps": summary.get("steps")}


def span(r: dict) -> float:
    """Seconds of training: the first step -> the `completed` event (the month the trace is scaled onto)."""
    return next(e["time"] for e in r["events"] if e["event"] == "completed") - r["first_step"]


def billed_node_hours(r: dict) -> float:
    """The ledger's node-hours plus every node's time between attempts (replacing: still billed)."""
    return (r["ledger_node_hours"] or 0.0) + NODES * r["gap_s"] / 3600


def report(tr: dict, od: dict, spot: dict) -> None:
    from trainkit.money import spot as model

    prices = _prices()
    rate = tr["rate"]
    left = f", {spot['dropped']} left out" if spot["dropped"] else ""
    print(f"bench_spot: {CLOUD} band {BAND} ({rate['share_per_month']:.1%} a month per node, "
          f"{rate['source'].split(' (')[0]}); trace of {REAL_NODES} nodes x 1 month, seed {SEED}: "
          f"{len(tr['times'])} reclaim(s) (expected {tr['expected']:.2f}), replayed {len(spot['kills'])}"
          f"{left}")
    resumed = [e for e in spot["events"] if e["event"] == "resumed"]
    for k, e in zip(spot["kills"], resumed):
        print(f"  reclaim of {k['host']} at step {k['step']}: kill -> first step "
              f"{e['first_step_at'] - k['at']:.1f} s, lost {e.get('lost_steps')} steps ({e.get('lost_s')} s)")
    od_h, sp_h = billed_node_hours(od) / NODES, billed_node_hours(spot) / NODES
    print(f"  on-demand: exit {od['rc']}, wall {od['wall_s']:.1f} s, ledger {od['ledger_node_hours']} node-h")
    print(f"  spot:      exit {spot['rc']}, wall {spot['wall_s']:.1f} s, ledger {spot['ledger_node_hours']} node-h "
          f"+ {spot['gap_s']:.1f} s x {NODES} nodes between attempts; billed time x{sp_h / od_h:.3f} of on-demand")
    _predicted(tr, od, spot, resumed, model)
    _ratios(od_h, sp_h, prices, model)
    _real_job(tr, prices, model)


def _predicted(tr, od, spot, resumed, model) -> None:
    """The model's cost of a reclaim (c/2 of lost work + the restart r) with the run's own figures:
    c = CKPT_EVERY steps of the on-demand run's seconds per step, r = the mean measured kill ->
    first step after resume; for the reclaims replayed, training takes W + k (c/2 + r)."""
    if not resumed:
        return
    restart = sum(e["first_step_at"] - k["at"] for k, e in zip(spot["kills"], resumed)) / len(resumed)
    c = CKPT_EVERY * span(od) / (od["steps"] or EPOCHS * 20)
    per_reclaim = model.spot_wall(span(od) / 3600, 1.0, c, restart)["lost_hours_per_reclaim"] * 3600
    lost = sum(e.get("lost_steps") or 0 for e in resumed) / len(resumed)
    print(f"  model (money/spot.py): c = {c:.2f} s ({CKPT_EVERY} steps), r = {restart:.1f} s measured; "
          f"lost {lost:.1f} steps a reclaim (model: {CKPT_EVERY / 2:g}); {len(resumed)} reclaim(s) x "
          f"{per_reclaim:.1f} s: spot training {span(od) + len(resumed) * per_reclaim:.1f} s predicted, "
          f"{span(spot):.1f} s measured (on-demand {span(od):.1f} s)")


def _real_job(tr: dict, prices: dict, model) -> None:
    """The model for the job the trace stands for, with trainkit cost's defaults (60 s to write a
    checkpoint, Young's interval, 600 s from a reclaim to training again: money/billing.py)."""
    from trainkit.money import billing
    from trainkit.money.cost import HOURS_PER_MONTH

    rate = tr["rate"]["reclaims_per_day"]
    t = model.spot_wall(HOURS_PER_MONTH, rate, None, billing.DEFAULT_RESTART_S, billing.DEFAULT_CHECKPOINT_S)
    ctrl = prices["controller"]["per_hour"]
    print(f"  the real job ({REAL_NODES} nodes x {HOURS_PER_MONTH} h, {rate:.3f} reclaims/day, checkpoint every "
          f"{t['interval_s']:.0f} s): spot takes x{t['wall_hours'] / HOURS_PER_MONTH:.4f} the hours; "
          + ", ".join(f"at {p:.0%}: {model.price_ratio(REAL_NODES, HOURS_PER_MONTH, t['wall_hours'], 1.0, p, ctrl / prices['on_demand'])['ratio']:.3f}"
                      for p in PRICE_RATIOS))
    be = model.break_even_price_ratio(0.30, REAL_NODES, HOURS_PER_MONTH, t["wall_hours"], ctrl, prices["on_demand"])
    print(f"  the real job: the seed's <= 0.30 holds while spot costs at most {be:.1%} of on-demand")


def _prices() -> dict:
    from trainkit.catalog import load_catalog, refreshed_price_file, with_prices
    from trainkit.clouds import get
    from trainkit.money import spot as model

    cat = load_catalog(get(CLOUD))
    refreshed = refreshed_price_file(CLOUD, cat.price_region)   # `trainkit prices refresh` (spot included)
    cat = with_prices(cat, refreshed) if refreshed else cat
    inst = cat.get(PRICED)
    return {"on_demand": inst.on_demand, "spot": inst.spot, "controller": model.controller_price(cat),
            "currency": cat.currency, "source": cat.price_source}


def _ratios(od_h: float, sp_h: float, prices: dict, model) -> None:
    ctrl = prices["controller"]
    print(f"  priced as {NODES} x {PRICED} (on-demand {prices['on_demand']} {prices['currency']}/h, "
          f"{prices['source']}) + controller {ctrl['type']} {ctrl['per_hour']}/h")
    ratios = [prices["spot"] / prices["on_demand"]] if prices["spot"] else list(PRICE_RATIOS)
    for p in ratios:
        out = model.price_ratio(NODES, od_h, sp_h, prices["on_demand"], prices["on_demand"] * p, ctrl["per_hour"])
        said = f"the catalog's spot price {prices['spot']:g}/h, {p:.0%}" if prices["spot"] else f"{p:.0%}"
        print(f"  spot at {said} of on-demand: spot/on-demand = {out['ratio']:.3f}")
    be = model.break_even_price_ratio(0.30, NODES, od_h, sp_h, ctrl["per_hour"], prices["on_demand"])
    print(f"  the seed's <= 0.30 holds while spot costs at most {be:.1%} of on-demand" if be else
          "  the seed's <= 0.30 is out of reach at any spot price")


if __name__ == "__main__":
    main()
