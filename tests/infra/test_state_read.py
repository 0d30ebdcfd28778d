"""trainkit reads the state with `terraform state pull` (no provider start) and shapes it as
`terraform show -json` would (`terraform.show_shape`). The real binary writes a state with
resources at the root, in a module with `count` and in a nested module with `for_each` (the
built-in `terraform_data`: no provider to install), and both reads must agree on every resource
and output."""

from __future__ import annotations

import json
import subprocess

import pytest

from trainkit.stack.terraform import TerraformRunner, show_shape

pytestmark = pytest.mark.infra

ROOT = """
resource "terraform_data" "a" { input = "root" }
module "m" {
  source = "./m"
  n      = 2
}
output "ids" { value = module.m.ids }
output "secret" {
  value     = "s3cr3t"
  sensitive = true
}
"""
MODULE = """
variable "n" { type = number }
resource "terraform_data" "b" {
  count = var.n
  input = { i = count.index, tags = ["x", "y"] }
}
module "n" { source = "./n" }
output "ids" { value = terraform_data.b[*].id }
"""
NESTED = """
resource "terraform_data" "c" {
  for_each = toset(["k1", "k2"])
  input    = each.key
}
"""


def _resources(module: dict) -> dict[str, dict]:
    out = {r["address"]: {k: r.get(k) for k in ("mode", "type", "name", "index", "values")}
           for r in module.get("resources") or []}
    for child in module.get("child_modules") or []:
        out.update(_resources(child))
    return out


def test_state_pull_shaped_as_show_json_equals_show_json(tmp_path):
    (tmp_path / "m" / "n").mkdir(parents=True)
    (tmp_path / "main.tf").write_text(ROOT)
    (tmp_path / "m" / "main.tf").write_text(MODULE)
    (tmp_path / "m" / "n" / "main.tf").write_text(NESTED)
    runner = TerraformRunner(tmp_path, tmp_path / "terraform.log")
    for cmd in (["init", "-input=false"], ["apply", "-auto-approve", "-input=false"]):
        subprocess.run(["terraform", *cmd], cwd=tmp_path, check=True, capture_output=True)

    shown = json.loads(subprocess.run(["terraform", "show", "-json"], cwd=tmp_path, check=True,
                                      capture_output=True, text=True).stdout)["values"]
    read = runner.state_json()["values"]
    expected = _resources(shown["root_module"])
    assert len(expected) == 5 and _resources(read["root_module"]) == expected
    assert {k: v["value"] for k, v in read["outputs"].items()} == {k: v["value"] for k, v in shown["outputs"].items()}
    assert read["outputs"]["secret"]["sensitive"] is True
    nested = read["root_module"]["child_modules"][0]["child_modules"][0]
    assert nested["address"] == "module.m.module.n" and {r["index"] for r in nested["resources"]} == {"k1", "k2"}


def test_an_empty_or_missing_state_is_empty():
    assert show_shape({}) == {}
    assert show_shape({"version": 4, "resources": [], "outputs": {}}) == {}


def test_real_terraform_no_state_lists_nothing_and_a_damaged_state_is_refused_until_the_backup_is_back(tmp_path):
    """The real binary colours "No state file was found!" unless -no-color: state_list read that
    line and its explanation as addresses ("half there ... may still bill"). A 0-byte state, which
    terraform itself reads as no state, is refused (exit 3) until the fix's `cp` of the backup."""
    from trainkit.errors import TrainkitError

    (tmp_path / "main.tf").write_text('variable "v" {}\nresource "terraform_data" "a" { input = var.v }\n')
    runner = TerraformRunner(tmp_path, tmp_path / "terraform.log")
    runner.init()
    assert runner.state_list() == []
    for value in ("one", "two"):  # the second apply leaves terraform.tfstate.backup beside the state
        subprocess.run(["terraform", "apply", "-auto-approve", "-input=false", f"-var=v={value}"], cwd=tmp_path,
                       check=True, capture_output=True)
    assert runner.state_list() == ["terraform_data.a"]
    state = tmp_path / "terraform.tfstate"
    state.write_bytes(b"")
    for call in (runner.state_list, runner.state_json, lambda: TerraformRunner(tmp_path, tmp_path / "log")):
        with pytest.raises(TrainkitError) as err:
            call()
        assert err.value.exit_code == 3 and f"{state} is empty (0 bytes)" in err.value.message
    restore = err.value.fix.split("`")[1]
    subprocess.run(restore, shell=True, check=True, cwd=tmp_path)  # the fix's own command
    assert runner.state_list() == ["terraform_data.a"] and (tmp_path / "terraform.tfstate.damaged").exists()
