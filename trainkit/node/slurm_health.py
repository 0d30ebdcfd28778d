"""Slurm's HealthCheckProgram on a cluster trainkit provisions with `scheduler: slurm`
(ansible/roles/slurm writes a script that runs this module; slurm.conf(5) HealthCheckProgram,
HealthCheckInterval): `trainkit doctor`'s node probe (doctor_probe.py), judged on the node, and
the node drained when a check fails.

    python -m trainkit.node.slurm_health --node NAME [--gpus N] [--shared PATH]

slurm.conf(5): "Any action to be taken must be explicitly performed by the program (e.g. execute
'scontrol update NodeName=foo State=drain Reason=tmp_file_system_full' to drain a node)." So a
failed check runs `scontrol update NodeName=<node> State=DRAIN Reason=<reason>` (an argv, no
shell; the reason is one of this module's fixed texts) and the exit status is 1; a healthy node
exits 0 and is left as it is (an admin resumes a drained node: `scontrol update State=RESUME`).

The checks are the ones of trainkit/cluster/doctor_verdict.py that need no other node: the shared
folder can be written and read back; the GPUs slurm.conf gives the node are all visible to NVML;
no GPU has uncorrected ECC errors since the driver loaded or pending/failed row remaps.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import re
import subprocess
import sys

from trainkit.node import doctor_probe

SCONTROL_TIMEOUT_S = 30   # scontrol answers within seconds; slurmd waits for the program (slurm.conf(5))
_NODE = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]{0,62}")   # ansible/roles/slurm's slurm_name_pattern


def failures(probe: dict, gpus: int) -> list[str]:
    """The failed checks of one probe result (doctor_probe.probe) as short fixed reasons; [] = healthy.
    `gpus`: the GPUs slurm.conf gives the node (its Gres count)."""
    out: list[str] = []
    shared = probe.get("shared")
    if shared is not None and not shared.get("ok"):
        out.append("shared-storage-not-writable")
    seen = probe.get("gpus") or []
    if gpus and len(seen) < gpus:
        out.append("gpus-missing")
    if any((g.get("ecc_uncorrected") or 0) > 0 for g in seen):
        out.append("gpu-uncorrected-ecc")
    if any(g.get("remap_pending") or g.get("remap_failed") for g in seen):
        out.append("gpu-row-remap")
    return out


def drain_argv(node: str, reasons: list[str]) -> list[str]:
    """`scontrol update` draining `node` for `reasons` (ValueError for a name that is not a node name)."""
    if not _NODE.fullmatch(node):
        raise ValueError(f"node name {node!r}")
    return ["scontrol", "update", f"NodeName={node}", "State=DRAIN",
            f"Reason=trainkit-health:{','.join(reasons)}"]


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--node", required=True)
    ap.add_argument("--gpus", type=int, default=0)
    ap.add_argument("--shared", default=None)
    args = ap.parse_args(argv)
    result = doctor_probe.probe("/", args.shared, "slurm-health", args.node)
    mark = (result.get("shared") or {}).get("mark")
    if mark:   # the marker is for doctor's cross-node check, which does not run here
        with contextlib.suppress(OSError):
            os.remove(mark)
    reasons = failures(result, args.gpus)
    if not reasons:
        return 0
    print(f"trainkit health check on {args.node}: {', '.join(reasons)}", file=sys.stderr)
    subprocess.run(drain_argv(args.node, reasons), timeout=SCONTROL_TIMEOUT_S, check=False)
    return 1


if __name__ == "__main__":
    sys.exit(main())
