"""Node-side sampler for `trainkit top`: one JSON object about this machine on stdout.

Standard library only (it is piped to `python3 -` over ssh on nodes that may lack trainkit);
NVML through nvidia-ml-py when importable. Usage: `python3 top_sampler.py WORK_DIR DATA_PATH [SECS]`.
Counters are read twice SECS (default 1) apart for rates, as `iostat -x 1` and `sar -n DEV 1` do:
  cpu      /proc/stat: busy and iowait share of all CPU time (proc(5))
  memory   /proc/meminfo: MemTotal - MemAvailable (proc(5))
  disk     /proc/diskstats of the device holding DATA_PATH: r/s, w/s, read/write MB/s (512-byte
           sectors) and %util = time doing I/O / elapsed (kernel Documentation/admin-guide/iostats.rst)
  network  /proc/net/dev: receive/transmit MB/s over every interface except lo
  gpus     NVML: utilisation % and memory used/total per device
  job      the newest WORK_DIR/runs/*/metrics.jsonl's last `step` record: samples/s, data wait %
"""

from __future__ import annotations

import glob
import json
import os
import socket
import sys
import time

SECTOR = 512  # /proc/diskstats counts 512-byte sectors whatever the device's block size


def cpu_times() -> tuple[int, int, int]:
    """(total, idle, iowait) jiffies from the aggregate `cpu` line."""
    with open("/proc/stat") as f:
        vals = [int(v) for v in f.readline().split()[1:]]
    return sum(vals[:8]), vals[3], vals[4]


def meminfo() -> dict[str, int]:
    out = {}
    with open("/proc/meminfo") as f:
        for line in f:
            key, _, rest = line.partition(":")
            out[key] = int(rest.split()[0]) * 1024
    return out


def device_of(path: str) -> str | None:
    """The block device (diskstats name) of the longest mount point containing `path`."""
    path = os.path.realpath(path)
    best, dev = "", None
    with open("/proc/self/mounts") as f:
        for line in f:
            src, mnt = line.split()[:2]
            inside = path == mnt or path.startswith(mnt.rstrip("/") + "/")
            if inside and len(mnt) > len(best):
                best, dev = mnt, src
    if not dev or not dev.startswith("/dev/"):
        return None
    return os.path.basename(os.path.realpath(dev))


def diskstats(name: str | None) -> list[int] | None:
    if not name:
        return None
    with open("/proc/diskstats") as f:
        for line in f:
            parts = line.split()
            if parts[2] == name:
                return [int(v) for v in parts[3:14]]
    return None


def netdev() -> tuple[int, int]:
    rx = tx = 0
    with open("/proc/net/dev") as f:
        for line in f.readlines()[2:]:
            name, _, rest = line.partition(":")
            if name.strip() == "lo":
                continue
            vals = rest.split()
            rx, tx = rx + int(vals[0]), tx + int(vals[8])
    return rx, tx


def gpus() -> list[dict]:
    try:
        import pynvml
        pynvml.nvmlInit()
    except Exception:  # no package, no driver: a CPU node
        return []
    out = []
    for i in range(pynvml.nvmlDeviceGetCount()):
        h = pynvml.nvmlDeviceGetHandleByIndex(i)
        util, mem = pynvml.nvmlDeviceGetUtilizationRates(h), pynvml.nvmlDeviceGetMemoryInfo(h)
        out.append({"index": i, "util_pct": float(util.gpu), "mem_used_mb": mem.used / 2**20,
                    "mem_total_mb": mem.total / 2**20})
    return out


def job(work_dir: str) -> dict | None:
    """The newest run's last step record (samples/s, data wait) under WORK_DIR/runs."""
    files = glob.glob(os.path.join(work_dir, "runs", "*", "metrics.jsonl"))
    if not files:
        return None
    newest = max(files, key=os.path.getmtime)
    last = None
    with open(newest) as f:
        for line in f:
            if '"kind": "step"' in line:
                last = line
    rec = json.loads(last) if last else {}
    return {"run_id": os.path.basename(os.path.dirname(newest)), "step": rec.get("step"),
            "samples_per_s": rec.get("samples_per_s"), "data_wait_pct": rec.get("data_wait_pct"),
            "age_s": round(time.time() - rec["time"], 1) if "time" in rec else None}


def sample(work_dir: str, data_path: str, secs: float = 1.0) -> dict:
    dev = device_of(data_path if os.path.exists(data_path) else "/")
    c0, d0, n0, t0 = cpu_times(), diskstats(dev), netdev(), time.monotonic()
    time.sleep(secs)
    c1, d1, n1, t1 = cpu_times(), diskstats(dev), netdev(), time.monotonic()
    dt, total = t1 - t0, max(1, c1[0] - c0[0])
    mem = meminfo()
    row = {"host": socket.gethostname(), "cpus": os.cpu_count(),
           "cpu_pct": 100 * (total - (c1[1] - c0[1]) - (c1[2] - c0[2])) / total,
           "iowait_pct": 100 * (c1[2] - c0[2]) / total,
           "mem_used_gb": (mem["MemTotal"] - mem.get("MemAvailable", mem["MemFree"])) / 2**30,
           "mem_total_gb": mem["MemTotal"] / 2**30,
           "net_rx_mbs": (n1[0] - n0[0]) / dt / 1e6, "net_tx_mbs": (n1[1] - n0[1]) / dt / 1e6,
           "disk": None, "gpus": gpus(), "job": job(work_dir)}
    if d0 and d1:
        delta = [b - a for a, b in zip(d0, d1)]
        row["disk"] = {"device": dev, "r_s": delta[0] / dt, "w_s": delta[4] / dt,
                       "read_mbs": delta[2] * SECTOR / dt / 1e6, "write_mbs": delta[6] * SECTOR / dt / 1e6,
                       "util_pct": min(100.0, delta[9] / (dt * 1000) * 100)}
    return row


if __name__ == "__main__":
    args = sys.argv[1:]
    print(json.dumps(sample(args[0] if args else ".", args[1] if len(args) > 1 else "/",
                            float(args[2]) if len(args) > 2 else 1.0)))
