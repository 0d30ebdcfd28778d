"""Node-side probe for `trainkit doctor`: one JSON object about this machine's health on stdout.

Standard library only (piped to `python3 -` over ssh, as top_sampler.py is, so it runs on a node
whether or not the trainkit venv is there yet); NVML through nvidia-ml-py when importable.
It measures and reports; the verdicts (thresholds) are the controller's (trainkit/cluster/doctor_verdict.py).

    python3 doctor_probe.py --data PATH [--shared PATH --tag TAG --mark NAME]

  gpus      NVML: count, model, driver and CUDA driver versions, per GPU the volatile uncorrected
            ECC error count and, on GPUs with row remapping (Ampere and later), pending/failed
            remaps (NVML API reference: nvmlDeviceGetTotalEccErrors, nvmlDeviceGetRemappedRows).
            No NVML (no package or no driver): "nvml": false and no GPUs: a CPU node, said so.
  xid       `NVRM: Xid` lines in the kernel log (the NVIDIA driver reports GPU faults there as
            Xid errors: NVIDIA "XID Errors" document), when `dmesg` may be read; else null.
  dcgm      `dcgmi diag -r 1 -j` (DCGM's quick diagnostic, level 1) only where dcgmi is installed.
  disks     free bytes (statvfs, as `df`) of the data path and of the shared path; a data path the
            job creates on demand (launch.root, no data disk) counts its nearest existing parent.
  shared    the shared path exists, is a directory, and a probe file can be written, read back
            and deleted there; then a marker <shared>/.trainkit-doctor/<TAG>/<NAME> is left for the
            controller's cross-node visibility check (it removes the folder afterwards).
  time      this machine's wall clock (time.time()) as the last thing done, for the skew estimate.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import socket
import subprocess
import sys
import time

DCGM_TIMEOUT_S = 120  # `dcgmi diag -r 1` takes seconds; level 1 is the quick, non-invasive set


def _nvml_text(value) -> str:
    return value.decode() if isinstance(value, bytes) else str(value)


def gpus() -> dict:
    """NVML facts; {"nvml": False, "gpus": []} where NVML cannot start (a CPU node)."""
    try:
        import pynvml
        pynvml.nvmlInit()
    except Exception as err:  # no package, no driver, no device
        return {"nvml": False, "nvml_error": str(err)[:200], "gpus": []}
    out = {"nvml": True, "driver": _nvml_text(pynvml.nvmlSystemGetDriverVersion()), "cuda": None, "gpus": []}
    try:
        v = pynvml.nvmlSystemGetCudaDriverVersion()  # e.g. 12040 -> "12.4" (NVML API reference)
        out["cuda"] = f"{v // 1000}.{(v % 1000) // 10}"
    except Exception:
        pass
    for i in range(pynvml.nvmlDeviceGetCount()):
        out["gpus"].append(_gpu(pynvml, i))
    return out


def _gpu(pynvml, i: int) -> dict:
    h = pynvml.nvmlDeviceGetHandleByIndex(i)
    row = {"index": i, "name": _nvml_text(pynvml.nvmlDeviceGetName(h)), "ecc_uncorrected": None,
           "remap_pending": None, "remap_failed": None}
    try:  # ECC off or unsupported (consumer GPUs): NVMLError_NotSupported -> stays None
        row["ecc_uncorrected"] = int(pynvml.nvmlDeviceGetTotalEccErrors(
            h, pynvml.NVML_MEMORY_ERROR_TYPE_UNCORRECTED, pynvml.NVML_VOLATILE_ECC))
    except Exception:
        pass
    try:  # (corrected rows, uncorrected rows, pending, failure): Ampere and later
        _, _, pending, failure = pynvml.nvmlDeviceGetRemappedRows(h)
        row["remap_pending"], row["remap_failed"] = bool(pending), bool(failure)
    except Exception:
        pass
    return row


def xid_lines() -> list[str] | None:
    """Kernel log lines with `NVRM: Xid` (last 20), or None when the log cannot be read here."""
    if not shutil.which("dmesg"):
        return None
    try:
        proc = subprocess.run(["dmesg"], capture_output=True, text=True, timeout=10)
    except (OSError, subprocess.TimeoutExpired):
        return None
    if proc.returncode != 0:  # kernel.dmesg_restrict=1 and not root
        return None
    return [line.strip() for line in proc.stdout.splitlines() if "NVRM: Xid" in line][-20:]


def dcgm() -> dict | None:
    """`dcgmi diag -r 1 -j` where DCGM is installed: {"rc", "tail"}; None where it is not."""
    if not shutil.which("dcgmi"):
        return None
    try:
        proc = subprocess.run(["dcgmi", "diag", "-r", "1", "-j"], capture_output=True, text=True,
                              timeout=DCGM_TIMEOUT_S)
    except subprocess.TimeoutExpired:
        return {"rc": None, "tail": f"timed out after {DCGM_TIMEOUT_S}s"}
    text = (proc.stdout + proc.stderr).strip()
    failed = '"Fail"' in text or '"status" : "Fail"' in text
    return {"rc": proc.returncode, "failed": proc.returncode != 0 or failed, "tail": text[-600:]}


def disk(path: str, created_on_demand: bool = False) -> dict:
    """Free and total bytes of the filesystem holding `path`; {"path", "error"} when it is missing.
    `created_on_demand` (a folder the job makes, not a mount point): its nearest existing parent."""
    where = path
    while created_on_demand and not os.path.exists(where) and os.path.dirname(where) != where:
        where = os.path.dirname(where)
    try:
        usage = shutil.disk_usage(where)
    except OSError as err:
        return {"path": path, "error": err.strerror or str(err)}
    return {"path": path, "free_bytes": usage.free, "total_bytes": usage.total}


def shared(path: str, tag: str, mark: str) -> dict:
    """Exists, is a directory, a probe file written + read back + deleted; then a marker left
    under .trainkit-doctor/<tag>/ for the cross-node check. {"ok": bool, "error": str|None}."""
    out = {"path": path, "ok": False, "error": None, "mark": None}
    if not os.path.isdir(path):
        out["error"] = "missing" if not os.path.exists(path) else "not a directory"
        return out
    host = socket.gethostname()
    probe = os.path.join(path, f".trainkit-doctor-{host}-{os.getpid()}")
    payload = f"trainkit doctor {host} {tag}\n"
    try:
        with open(probe, "w") as f:
            f.write(payload)
            f.flush()
            os.fsync(f.fileno())
        with open(probe) as f:
            if f.read() != payload:
                raise OSError("read back differs from what was written")
        os.remove(probe)
        mark_dir = os.path.join(path, ".trainkit-doctor", tag)
        os.makedirs(mark_dir, exist_ok=True)
        out["mark"] = os.path.join(mark_dir, mark)
        with open(out["mark"], "w") as f:
            f.write(payload)
    except OSError as err:
        out["error"] = f"not writable: {err.strerror or err}"
        return out
    out["ok"] = True
    return out


def probe(data: str, shared_path: str | None, tag: str, mark: str, data_on_demand: bool = False) -> dict:
    row = {"host": socket.gethostname(), "python": sys.version.split()[0], **gpus(),
           "xid": xid_lines(), "dcgm": dcgm(), "data": disk(data, data_on_demand),
           "shared": shared(shared_path, tag, mark) if shared_path else None}
    if shared_path and row["shared"]["ok"]:
        row["shared_disk"] = disk(shared_path)
    row["time"] = time.time()
    return row


def parser() -> argparse.ArgumentParser:
    """The probe's options (trainkit passes each value as `--opt=value`, one word)."""
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--data", default="/")
    ap.add_argument("--shared", default=None)
    ap.add_argument("--tag", default="probe")
    ap.add_argument("--mark", default=socket.gethostname())
    ap.add_argument("--data-on-demand", action="store_true", help="--data is a folder the job creates")
    return ap


if __name__ == "__main__":
    args = parser().parse_args()
    print(json.dumps(probe(args.data, args.shared, args.tag, args.mark, args.data_on_demand)))
