"""User text reaches Terraform only as literals: property-based, read back by Terraform itself.

Hypothesis generates strings full of `${`, `%{`, `$${`, quotes, backslashes, newlines, control and
non-ASCII characters and puts them in every free-text field of a spec (tag keys and values, image,
backend arguments, endpoints). Each example is either refused by `trainkit validate`'s cloud checks
with the field named, or rendered. All rendered examples of a field group are then checked in ONE
Terraform run each: `terraform fmt -check` on every rendered root file, and a locals-only stack
holding every rendered value, evaluated by `terraform console`, must equal the input exactly.
"""

from __future__ import annotations

import base64
import json
import re
import subprocess
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from trainkit.errors import InputError
from trainkit.spec.resolve import check, module_variables, resolve
from trainkit.spec.schema import ClusterSpec
from trainkit.stack.render import VARS_FILE, WORKSPACE_VARIABLES, backend_config, render_stack

EXAMPLES = 500
KEY = "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIBkRh4VOcYwCqMTmS1w1tJmXbH3v0xJ7lK0Zq2yC5FQK test"
NASTY = ["${", "%{", "$${", "%%{", "$$", "}", "~}", "\\", '"', "\\n", "\n", "\r", "\t", "\b", "\f",
         "\x00", "\x1b", "\x7f", "\u0085", "\u2028", "\ufeff", "é", "e\u0301", "日本", "😀", " ",
         "${path.cwd}", "%{ if true }on%{ endif }", "${var.name}", "<<EOT\n", "#", "//", "/*"]
TEXT = st.lists(st.one_of(st.sampled_from(NASTY),
                          st.text(st.characters(exclude_categories=("Cs",)), max_size=4)),
                max_size=8).map("".join)
BASE = {"name": "demo", "nodes": 1, "network": {"admin_cidrs": ["203.0.113.0/24"]}}
ALI = {**BASE, "cloud": "alicloud", "region": "cn-hangzhou", "zone": "cn-hangzhou-i",
       "instance": {"type": "ecs.gn7i-c8g1.2xlarge"}}
AWS = {**BASE, "cloud": "aws", "region": "us-east-1", "zone": "us-east-1a",
       "instance": {"type": "g5.xlarge"}}


def _tag_keys(t: str) -> dict:
    return {**ALI, "tags": {t: "v"}}


def _tag_values(t: str) -> dict:
    return {**ALI, "tags": {"k": t, "k2": t + "x"}}


def _image(t: str) -> dict:
    return {**ALI, "image": t or "x"}


def _backend(t: str) -> dict:
    return {**ALI, "backend": {"type": "oss", "bucket": t or "b", "prefix": t, "key": t + "k",
                               "endpoint": t, "tablestore_endpoint": t, "tablestore_table": t}}


def _endpoints(t: str) -> dict:
    return {**AWS, "endpoints": {"ec2": t, "s3": t + "/"},
            "backend": {"type": "s3", "bucket": t or "b", "key": t + "k", "endpoint": t}}


# group -> (spec maker, the field paths a refusal may name)
GROUPS = {"tag keys": (_tag_keys, ("tags",)), "tag values": (_tag_values, ("tags",)),
          "image": (_image, ("image",)), "backend": (_backend, ("backend",)),
          "endpoints": (_endpoints, ("endpoints", "backend"))}


def expected_values(cluster) -> dict[str, dict]:
    """What each rendered file must say, per attribute, as Python values."""
    spec = cluster.spec
    inputs = module_variables(cluster, KEY)  # the workspace's own (the key) go in terraform.tfvars.json
    return {"main.tf": {k: v for k, v in inputs.items() if k not in WORKSPACE_VARIABLES},
            "versions.tf": backend_config(cluster)[1],
            "providers.tf": {"region": spec.region, **spec.endpoints}}


ATTRIBUTE = re.compile(r"^\s*([A-Za-z_][A-Za-z0-9_]*)\s*=\s*(.+)$")


def rendered_expressions(files: dict[str, str], wanted: dict[str, dict]) -> dict[str, dict]:
    """file -> attribute -> the HCL expression text rendered for it (one line each)."""
    out: dict[str, dict] = {}
    for name, attrs in wanted.items():
        found = {}
        for line in files[name].splitlines():
            m = ATTRIBUTE.match(line)
            if m and m.group(1) in attrs:
                found[m.group(1)] = m.group(2)
        assert set(found) == set(attrs), (name, set(attrs) - set(found))
        out[name] = found
    return out


def collect(group: str, folder: Path) -> tuple[list, list, int]:
    """Run hypothesis over one field group; write each rendered stack under `folder`.

    Returns (expressions per example, expected per example, number refused with the field named).
    """
    make, field = GROUPS[group]
    exprs, expected, refused = [], [], [0]

    @settings(max_examples=EXAMPLES, deadline=None, database=None, derandomize=True,
              suppress_health_check=list(HealthCheck))
    @given(TEXT)
    def one(text: str) -> None:
        try:
            cluster = resolve(ClusterSpec.model_validate(make(text)))
        except InputError as err:  # refused before the room: must name the field
            assert err.message.startswith(field), err.message
            refused[0] += 1
            return
        problems = check(cluster)
        if problems:
            assert all(p[0].startswith(field) for p in problems), problems
            refused[0] += 1
            return
        files = render_stack(cluster, KEY)
        want = expected_values(cluster)
        inputs = module_variables(cluster, KEY)   # extra_authorized_keys: only the controller's render has it
        assert json.loads(files[VARS_FILE]) == {k: inputs[k] for k in WORKSPACE_VARIABLES if k in inputs}
        n = len(exprs)
        for name in want:
            (folder / f"ex{n}").mkdir(parents=True, exist_ok=True)
            (folder / f"ex{n}" / name).write_text(files[name])
        exprs.append(rendered_expressions(files, want))
        expected.append(json.loads(json.dumps(want)))

    one()
    return exprs, expected, refused[0]


def terraform(*args: str, cwd: Path, input: str | None = None) -> subprocess.CompletedProcess:
    return subprocess.run(["terraform", *args], cwd=cwd, capture_output=True, text=True,
                          timeout=300, input=input)


@pytest.mark.parametrize("group", list(GROUPS))
def test_user_text_renders_as_literals_terraform_reads_back_exactly(group, tmp_path):
    stacks, evaluator = tmp_path / "stacks", tmp_path / "eval"
    exprs, expected, refused = collect(group, stacks)
    assert len(exprs) >= EXAMPLES // 2, f"only {len(exprs)} rendered, {refused} refused"

    fmt = terraform("fmt", "-check", "-recursive", "-list=true", str(stacks), cwd=tmp_path)
    assert fmt.returncode == 0, f"not fmt-clean: {fmt.stdout[:2000]} {fmt.stderr[:2000]}"

    body = []
    for n, per_file in enumerate(exprs):
        body.append(f'    "ex{n}" = {{')
        for name, attrs in per_file.items():
            inner = ", ".join(f'"{k}" = {v}' for k, v in attrs.items())
            body.append(f'      "{name}" = {{ {inner} }}')
        body.append("    }")
    evaluator.mkdir()
    (evaluator / "main.tf").write_text("locals {\n  all = {\n" + "\n".join(body) + "\n  }\n}\n")
    out = terraform("console", cwd=evaluator, input="base64encode(jsonencode(local.all))\n")
    assert out.returncode == 0, out.stderr[-3000:]
    got = json.loads(base64.b64decode(out.stdout.strip().strip('"')))
    for n, want in enumerate(expected):
        assert got[f"ex{n}"] == want, f"example {n} read back differently"
