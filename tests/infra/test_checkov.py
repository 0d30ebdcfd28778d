"""checkov on every rendered stack (all clouds), in one run: no failed check.

A finding that is accepted must be suppressed in the module, on the resource, with a written
reason (`#checkov:skip=CKV_...:why`); this test also fails on a suppression without a reason.
checkov lives in its own venv: $CHECKOV, else <repo>/.venv-checkov/bin/checkov (`make checkov`).
It runs offline (BC_SKIP_MAPPING=TRUE).
"""

from __future__ import annotations

import json
import os
import re
import subprocess
from pathlib import Path

import pytest

from trainkit import clouds
from trainkit.spec.resolve import load_cluster
from trainkit.stack.render import write_stack

REPO = Path(__file__).resolve().parents[2]
EXAMPLES = REPO / "examples" / "clusters"
SSH_KEY = "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIBkRh4VOcYwCqMTmS1w1tJmXbH3v0xJ7lK0Zq2yC5FQK trainkit-test"
CLOUDS = clouds.TERRAFORM_TARGETS   # the shipped rooms with a Terraform module
SKIP = re.compile(r"#\s*checkov:skip=(CKV2?_[A-Z]+_\d+)(?::(.*))?")


def checkov_bin() -> Path:
    path = Path(os.environ.get("CHECKOV") or REPO / ".venv-checkov" / "bin" / "checkov")
    if not path.exists():
        pytest.fail(f"checkov not found at {path}: run `make checkov` or set CHECKOV")
    return path


@pytest.fixture(scope="module")
def report(tmp_path_factory) -> dict:
    """One checkov run over every cloud example's rendered stack."""
    root = tmp_path_factory.mktemp("checkov")
    for spec in sorted(EXAMPLES.glob("*.yaml")):
        cluster = load_cluster(spec)
        if cluster.spec.cloud in CLOUDS:
            write_stack(cluster, SSH_KEY, root / spec.stem)
    env = {**os.environ, "BC_SKIP_MAPPING": "TRUE", "CHECKOV_RUN_SCA_PACKAGE_SCAN_V2": "false",
           "NO_PROXY": "*"}
    result = subprocess.run([str(checkov_bin()), "-d", str(root), "--framework", "terraform",
                             "--compact", "-o", "json", "--skip-download"],
                            capture_output=True, text=True, env=env, timeout=300)
    assert result.returncode in (0, 1), result.stderr[-3000:]
    data = json.loads(result.stdout)
    return data[0] if isinstance(data, list) else data


def test_checkov_finds_no_failed_check_in_any_rendered_stack(report):
    failed = report["results"]["failed_checks"]
    lines = [f"{f['check_id']} {f['resource']} ({f['file_path']}): {f['check_name']}" for f in failed]
    assert not failed, "checkov findings (fix, or suppress in the module with a reason):\n" + \
        "\n".join(sorted(set(lines)))


def test_checkov_scanned_the_stacks(report):
    assert report["summary"]["resource_count"] > 20
    assert report["summary"]["parsing_errors"] == 0


def test_every_suppression_in_the_modules_has_a_reason():
    for path in sorted((REPO / "terraform" / "modules").rglob("*.tf")):
        for lineno, line in enumerate(path.read_text().splitlines(), 1):
            match = SKIP.search(line)
            if match:
                reason = (match.group(2) or "").strip()
                assert len(reason) >= 15, f"{path.relative_to(REPO)}:{lineno}: {match.group(1)} needs a reason"
