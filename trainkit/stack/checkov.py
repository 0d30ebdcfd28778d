"""checkov on a plan's JSON (`terraform show -json`), when checkov is installed. An edge module.

The binary is $CHECKOV when set, else `checkov` on PATH; without either the review says checkov
did not run. checkov runs offline (BC_SKIP_MAPPING, --skip-download). Every failed check becomes a
"warn" finding: the project's own rules decide what blocks.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from pathlib import Path

TIMEOUT_S = 600


def binary() -> str | None:
    return os.environ.get("CHECKOV") or shutil.which("checkov")


def scan_plan(plan_json: Path) -> tuple[list[dict], str]:
    """(findings, note) for the plan; note says whether and how checkov ran."""
    exe = binary()
    if not exe:
        return [], "checkov not installed: only trainkit's own rules ran"
    env = {**os.environ, "BC_SKIP_MAPPING": "TRUE", "CHECKOV_RUN_SCA_PACKAGE_SCAN_V2": "false"}
    try:
        proc = subprocess.run([exe, "-f", str(plan_json), "--framework", "terraform_plan", "-o", "json",
                               "--compact", "--skip-download", "--quiet"],
                              capture_output=True, text=True, env=env, timeout=TIMEOUT_S)
        data = json.loads(proc.stdout or "{}")
    except (OSError, subprocess.TimeoutExpired, ValueError) as err:
        return [], f"checkov did not run ({type(err).__name__}); only trainkit's own rules ran"
    reports = data if isinstance(data, list) else [data]
    failed = [f for r in reports for f in (r.get("results") or {}).get("failed_checks", [])]
    findings = [{"code": f"checkov {f['check_id']}", "severity": "warn",
                 "message": f"{f.get('resource')}: {f.get('check_name')}"} for f in failed]
    return findings, f"checkov ran: {len(findings)} failed check(s)"
