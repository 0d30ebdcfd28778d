"""The CI pipelines users copy (examples/ci): valid against the platforms' published JSON schemas,
and the plan step's exact command lines work against the moto example.

Schemas: check-jsonschema's vendored copies (vendor.github-workflows, vendor.gitlab-ci), offline.
The plan commands are taken from the YAML (not retyped here) and run with bash, with the spec
pointed at the moto server (the AWS API emulator standing in for AWS on 127.0.0.1).
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

REPO = Path(__file__).resolve().parents[2]
CI = REPO / "examples" / "ci"
BIN = Path(sys.executable).parent
PIPELINES = [(CI / "github" / "trainkit-plan.yml", "vendor.github-workflows"),
             (CI / "github" / "trainkit-train.yml", "vendor.github-workflows"),
             (CI / "gitlab-ci.yml", "vendor.gitlab-ci")]


@pytest.mark.parametrize("path,schema", PIPELINES, ids=lambda v: getattr(v, "name", v))
def test_pipeline_is_valid_against_the_platform_schema(path, schema):
    exe = BIN / "check-jsonschema"
    assert exe.exists(), "check-jsonschema is not installed (dev extra)"
    proc = subprocess.run([str(exe), "--builtin-schema", schema, str(path)], capture_output=True, text=True)
    assert proc.returncode == 0, proc.stdout + proc.stderr


def test_the_train_pipelines_destroy_whatever_happened():
    gh = yaml.safe_load((CI / "github" / "trainkit-train.yml").read_text())
    steps = gh["jobs"]["train"]["steps"]
    destroy = next(s for s in steps if "trainkit destroy" in s.get("run", ""))
    assert destroy["if"] == "always()"
    assert steps.index(destroy) > next(i for i, s in enumerate(steps) if "trainkit train" in s.get("run", ""))
    gl = yaml.safe_load((CI / "gitlab-ci.yml").read_text())
    assert gl["destroy"]["rules"][0]["when"] == "always"
    assert any("trainkit destroy" in line for line in gl["destroy"]["script"])
    # the workspace handed to the destroy job never carries the SSH keys
    assert any("/ssh/" in e for e in gl["apply-and-train"]["artifacts"]["exclude"])


def moto_spec(tmp_path: Path, moto_url: str) -> Path:
    spec = yaml.safe_load((REPO / "examples/clusters/aws-moto.yaml").read_text())
    spec["endpoints"] = {k: moto_url for k in spec["endpoints"]}
    path = tmp_path / "cluster.yaml"
    path.write_text(yaml.safe_dump(spec))
    return path


def run_lines(script: str, tmp_path: Path, moto_url: str, **env) -> subprocess.CompletedProcess:
    full_env = {**os.environ, "PATH": f"{BIN}{os.pathsep}{os.environ['PATH']}",
                "NO_PROXY": "127.0.0.1,localhost", "AWS_ACCESS_KEY_ID": "test", "AWS_SECRET_ACCESS_KEY": "test",
                "TRAINKIT_SPEC": str(moto_spec(tmp_path, moto_url)), "TRAINKIT_WORKDIR": str(tmp_path / "ws"),
                **env}
    return subprocess.run(["bash", "-e", "-c", script], cwd=tmp_path, env=full_env, capture_output=True,
                          text=True, timeout=900)


def check_review(tmp_path: Path) -> None:
    review = (tmp_path / "review.md").read_text()
    assert review.startswith("### trainkit plan: `aws-moto` on aws"), review[:300]
    assert "per month" in review and "<details><summary>All " in review and len(review) <= 65536


@pytest.mark.usefixtures("tf_cli_config")
def test_the_github_plan_step_runs_against_the_moto_example(tmp_path, moto):
    steps = yaml.safe_load((CI / "github" / "trainkit-plan.yml").read_text())["jobs"]["plan"]["steps"]
    script = next(s for s in steps if s.get("id") == "plan")["run"]
    out = tmp_path / "github_output"
    proc = run_lines(script, tmp_path, moto, GITHUB_OUTPUT=str(out))
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert out.read_text().strip() == "exit_code=0", proc.stderr[-3000:]
    check_review(tmp_path)


@pytest.mark.usefixtures("tf_cli_config")
def test_the_gitlab_plan_job_runs_against_the_moto_example(tmp_path, moto):
    job = yaml.safe_load((CI / "gitlab-ci.yml").read_text())["plan"]
    proc = run_lines("\n".join(job["script"]), tmp_path, moto)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    check_review(tmp_path)
