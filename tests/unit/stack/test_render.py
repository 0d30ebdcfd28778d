"""Render: every cloud example spec -> root stack, compared byte for byte with tests/golden/<name>/.

To regenerate the golden files after an intended change, run

    TRAINKIT_UPDATE_GOLDEN=1 .venv/bin/pytest tests/unit/stack/test_render.py -k golden

(each golden test then writes its folder and fails on purpose, so an update run never passes), review
`git diff tests/golden/` like any other change (it is what reviewers will read), and run the tests
again without the variable.
"""

from __future__ import annotations

import dataclasses
import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from trainkit import clouds
from trainkit.errors import BAD_INPUT, InputError, SpecError
from trainkit.spec.resolve import load_cluster, module_variables
from trainkit.stack.render import hcl, render_stack, write_files

REPO = Path(__file__).resolve().parents[3]
EXAMPLES = REPO / "examples" / "clusters"
GOLDEN = REPO / "tests" / "golden"
# A fixed, well-formed public key so the golden files do not depend on a generated one.
SSH_KEY = "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIBkRh4VOcYwCqMTmS1w1tJmXbH3v0xJ7lK0Zq2yC5FQK trainkit-golden"
CLOUD_EXAMPLES = sorted(p.stem for p in EXAMPLES.glob("*.yaml")
                        if load_cluster(p).room.has_module)


def rendered(name: str) -> dict[str, str]:
    return render_stack(load_cluster(EXAMPLES / f"{name}.yaml"), SSH_KEY)


def test_every_cloud_has_an_example():
    covered = {load_cluster(EXAMPLES / f"{n}.yaml").spec.cloud for n in CLOUD_EXAMPLES}
    assert covered == set(clouds.terraform_targets())


@pytest.mark.parametrize("name", CLOUD_EXAMPLES)
def test_render_matches_golden_files(name):
    """The root stack only: the module copy is checked against terraform/modules/ below."""
    files = {k: v for k, v in rendered(name).items() if not k.startswith("modules/")}
    folder = GOLDEN / name
    if os.environ.get("TRAINKIT_UPDATE_GOLDEN"):
        write_files(files, folder)
        pytest.fail(f"goldens updated in {folder.relative_to(REPO)}; review `git diff tests/golden/` "
                    "and re-run without TRAINKIT_UPDATE_GOLDEN", pytrace=False)
    on_disk = {str(p.relative_to(folder)): p.read_text() for p in sorted(folder.rglob("*"))
               if p.is_file() and p.name != ".trainkit-rendered"}
    assert sorted(on_disk) == sorted(files), "file list differs; regenerate (see module docstring)"
    for rel, content in files.items():
        assert content == on_disk[rel], f"{name}/{rel} differs from the golden file"


# Renders every cloud example in a fresh interpreter and prints the files in the order
# render_stack returns them, so a hash-seed-dependent order or content shows up in the bytes.
RENDER_ALL = """
import json, sys
from pathlib import Path
from trainkit.stack.render import render_stack
from trainkit.spec.resolve import load_cluster
examples, key = Path(sys.argv[1]), sys.argv[2]
out = {n: list(render_stack(load_cluster(examples / f"{n}.yaml"), key).items()) for n in sys.argv[3:]}
sys.stdout.write(json.dumps(out, indent=0))
"""


def render_in_fresh_interpreter(hash_seed: str) -> bytes:
    env = {**os.environ, "PYTHONHASHSEED": hash_seed, "PYTHONPATH": str(REPO)}
    proc = subprocess.run([sys.executable, "-c", RENDER_ALL, str(EXAMPLES), SSH_KEY, *CLOUD_EXAMPLES],
                          cwd=REPO, env=env, capture_output=True, timeout=120)
    assert proc.returncode == 0, proc.stderr.decode()[-3000:]
    return proc.stdout


def test_render_is_byte_identical_across_interpreters_with_different_hash_seeds():
    """Set/dict-order or hash() nondeterminism only shows across processes with different seeds."""
    first, second = render_in_fresh_interpreter("1"), render_in_fresh_interpreter("2718")
    assert first, "the render printed nothing"
    by_name = (json.loads(first), json.loads(second))
    assert sorted(by_name[0]) == CLOUD_EXAMPLES
    for name in CLOUD_EXAMPLES:
        assert by_name[0][name] == by_name[1][name], f"{name}: render differs between hash seeds"
    assert first == second


@pytest.mark.parametrize("name", CLOUD_EXAMPLES)
def test_stack_is_self_contained_with_the_clouds_module(name):
    cloud = load_cluster(EXAMPLES / f"{name}.yaml").spec.cloud
    files = rendered(name)
    assert {"versions.tf", "providers.tf", "main.tf", "outputs.tf"} <= set(files)
    assert f"modules/{cloud}/main.tf" in files and f"modules/{cloud}/variables.tf" in files
    assert f'source = "./modules/{cloud}"' in files["main.tf"]
    assert not any(p.startswith("modules/") and not p.startswith(f"modules/{cloud}/") for p in files)
    source = REPO / "terraform" / "modules" / cloud
    copied = {k.removeprefix(f"modules/{cloud}/"): v for k, v in files.items() if k.startswith("modules/")}
    assert copied == {p.name: p.read_text() for p in source.iterdir() if p.is_file()}


@pytest.mark.parametrize("name", CLOUD_EXAMPLES)
def test_module_call_passes_every_module_variable(name):
    cluster = load_cluster(EXAMPLES / f"{name}.yaml")
    main = rendered(name)["main.tf"]
    for key in module_variables(cluster, SSH_KEY):
        assert f"\n  {key} " in main, key
    assert "ssh_public_key           = var.ssh_public_key" in main  # the key itself: terraform.tfvars.json
    assert "node_placement           = var.node_placement" in main  # nodes placed apart: the same
    assert json.loads(rendered(name)["terraform.tfvars.json"]) == {"ssh_public_key": SSH_KEY, "node_placement": {}}


@pytest.mark.parametrize(("public_ip", "nodes", "setting", "expected"), [
    ("head", 2, None, True), ("head", 1, None, False), ("none", 1, None, True),
    ("all", 4, None, False), ("head", 2, False, False), ("head", 1, True, True)])
def test_nat_gateway_is_on_exactly_when_some_node_has_no_public_ip_unless_set(public_ip, nodes,
                                                                               setting, expected):
    cluster = load_cluster(EXAMPLES / "aws.yaml")
    network = cluster.spec.network.model_copy(update={"public_ip": public_ip, "nat_gateway": setting})
    spec = cluster.spec.model_copy(update={"network": network, "nodes": nodes})
    assert module_variables(dataclasses.replace(cluster, spec=spec), SSH_KEY)["nat_gateway"] is expected


def test_nat_gateway_with_every_node_public_is_rejected(tmp_path):
    spec = tmp_path / "c.yaml"
    spec.write_text((EXAMPLES / "aws.yaml").read_text().replace(
        "  public_ip: head", "  public_ip: all\n  nat_gateway: true"))
    with pytest.raises(SpecError) as err:
        load_cluster(spec)
    assert err.value.exit_code == BAD_INPUT
    assert [field for field, _, _ in err.value.problems] == ["network.nat_gateway"]
    assert "network.nat_gateway: true with public_ip: all" in err.value.message
    assert "drop nat_gateway" in err.value.message


def test_aws_emulator_settings_only_with_custom_endpoints():
    real, emulated = rendered("aws")["providers.tf"], rendered("aws-moto")["providers.tf"]
    for text in ("skip_credentials_validation", "endpoints"):
        assert text not in real
        assert text in emulated
    assert re.search(r'ec2 += "http://127.0.0.1:5000"', emulated)
    # custom endpoints take their credentials from the environment, like any other run
    assert "access_key" not in emulated and "secret_key" not in emulated


def test_s3_backend_on_custom_endpoints_checks_credentials_there_not_at_aws():
    moto = with_backend("aws-moto", type="s3", bucket="tfstate")
    assert '"sts" : "http://127.0.0.1:5000"' in moto and '"s3" : "http://127.0.0.1:5000"' in moto
    for text in ("use_path_style", "skip_credentials_validation", "skip_requesting_account_id"):
        assert text in moto
        assert text not in rendered("aws")["versions.tf"]


def test_no_key_from_the_environment_is_written_into_a_rendered_file(tmp_path, monkeypatch):
    keys = {"AWS_ACCESS_KEY_ID": "AKIAFAKEKEYID4TEST00", "AWS_SECRET_ACCESS_KEY": "fake/secret+value4test",
            "ALICLOUD_SECRET_KEY": "fake-ali-secret-4test", "TENCENTCLOUD_SECRET_KEY": "fake-tc-secret-4test",
            "HW_SECRET_KEY": "fake-hw-secret-4test"}
    for name, value in keys.items():
        monkeypatch.setenv(name, value)
    for name in CLOUD_EXAMPLES:
        write_files(rendered(name), tmp_path / name)
    text = "".join(p.read_text() for p in tmp_path.rglob("*") if p.is_file())
    assert text and not [v for v in keys.values() if v in text]


@pytest.mark.parametrize("name", CLOUD_EXAMPLES)
def test_no_credentials_in_rendered_root_files(name):
    files = rendered(name)
    root = "".join(v for k, v in files.items() if not k.startswith("modules/"))
    for word in ("secret_id", "security_token", "password", "access_key", "secret_key"):
        assert word not in root


def test_backends_per_cloud():
    assert 'backend "oss"' in rendered("alicloud")["versions.tf"]
    assert 'tablestore_table    = "statelock"' in rendered("alicloud")["versions.tf"]
    assert 'backend "cos"' in rendered("tencentcloud")["versions.tf"]
    obs = rendered("huaweicloud")["versions.tf"]
    assert 'backend "s3"' in obs and "obs.cn-north-4.myhuaweicloud.com" in obs
    assert "skip_s3_checksum" in obs
    assert 'backend "s3"' in rendered("aws")["versions.tf"]
    assert 'backend "local"' in rendered("aws-moto")["versions.tf"]


def test_hcl_filter_writes_fmt_style_json():
    assert hcl({"a": 1, "b": [True, None, "x"]}) == '{ "a" : 1, "b" : [true, null, "x"] }'
    assert hcl({}) == "{}"
    assert hcl('say "hi"') == '"say \\"hi\\""'


def test_local_target_has_no_terraform_stack():
    with pytest.raises(InputError):
        render_stack(load_cluster(EXAMPLES / "local.yaml"), SSH_KEY)


def test_write_files_removes_only_stale_rendered_files(tmp_path):
    write_files({"main.tf": "a\n", "modules/x/main.tf": "b\n"}, tmp_path)
    (tmp_path / "terraform.tfstate").write_text("{}")
    write_files({"main.tf": "a\n", "modules/y/main.tf": "c\n"}, tmp_path)
    assert not (tmp_path / "modules" / "x").exists()
    assert (tmp_path / "modules" / "y" / "main.tf").read_text() == "c\n"
    assert (tmp_path / "terraform.tfstate").exists()


def with_backend(name: str, **backend):
    cluster = load_cluster(EXAMPLES / f"{name}.yaml")
    spec = cluster.spec.model_copy(update={"backend": cluster.spec.backend.model_copy(update=backend)})
    return render_stack(dataclasses.replace(cluster, spec=spec), SSH_KEY)["versions.tf"]


def test_oss_without_tablestore_says_the_state_is_not_locked():
    text = with_backend("alicloud", tablestore_table=None, tablestore_endpoint=None)
    assert "NOT locked" in text
    assert "tablestore_table " not in text and "tablestore_endpoint" not in text


def test_s3_uses_the_dynamodb_table_when_given_else_the_lockfile():
    assert 'dynamodb_table = "locks"' in with_backend("aws", dynamodb_table="locks")
    assert "use_lockfile = true" in rendered("aws")["versions.tf"]


def test_cli_render_writes_the_stack_into_the_workdir(tmp_path):
    from click.testing import CliRunner

    from trainkit.cli import cli

    result = CliRunner().invoke(cli, ["render", str(EXAMPLES / "tencentcloud.yaml"),
                                      "--workdir", str(tmp_path)])
    assert result.exit_code == 0, result.output
    assert str(tmp_path / "terraform") in result.output
    assert (tmp_path / "terraform" / "modules" / "tencentcloud" / "main.tf").is_file()
    key = (tmp_path / "ssh" / "id_ed25519.pub").read_text().strip()
    assert json.loads((tmp_path / "terraform" / "terraform.tfvars.json").read_text())["ssh_public_key"] == key


def test_cli_render_rejects_a_bad_spec_with_exit_2(tmp_path):
    bad = tmp_path / "bad.yaml"
    bad.write_text("name: x\ncloud: aws\n")
    result = subprocess.run([sys.executable, "-m", "trainkit", "render", str(bad)],
                            capture_output=True, text=True, cwd=tmp_path)
    assert result.returncode == 2, result.stderr
    assert "name" in result.stderr



# The providers' documented default retry counts (each provider's registry docs, `max_retries`:
# hashicorp/aws "If omitted, the default value is 25"; huaweicloud 5). A rendered stack never
# retries fewer times than the provider would by default.
PROVIDER_DEFAULT_RETRIES = {"aws": 25, "huaweicloud": 5}


@pytest.mark.parametrize("name", CLOUD_EXAMPLES)
def test_no_rendered_provider_retries_fewer_times_than_its_default(name):
    cloud = load_cluster(EXAMPLES / f"{name}.yaml").spec.cloud
    for value in re.findall(r"^\s*max_retries\s*=\s*(\d+)", rendered(name)["providers.tf"], re.MULTILINE):
        assert int(value) >= PROVIDER_DEFAULT_RETRIES.get(cloud, 0), f"{name}: max_retries = {value}"


@pytest.mark.parametrize("name", ["aws", "alicloud"])
def test_the_same_spec_rendered_in_two_fresh_folders_gives_the_same_tf_files(name, repo, tmp_path, capsys):
    """Through `trainkit render`, each folder generating its own key pair: every .tf byte for byte
    the same; the generated key reaches terraform through terraform.tfvars.json only."""
    from trainkit.cli import main

    spec = str(repo / "examples" / "clusters" / f"{name}.yaml")
    folders = [tmp_path / "a", tmp_path / "b"]
    for ws in folders:
        with pytest.raises(SystemExit) as done:
            main(["render", spec, "--workdir", str(ws)])
        assert done.value.code in (0, None), capsys.readouterr().err
    tf = [{str(p.relative_to(ws / "terraform")): p.read_bytes() for p in (ws / "terraform").rglob("*.tf")}
          for ws in folders]
    assert tf[0] == tf[1] and "main.tf" in tf[0] and "variables.tf" in tf[0]
    keys = [(ws / "ssh" / "id_ed25519.pub").read_text().strip() for ws in folders]
    assert keys[0] != keys[1]  # two workspaces, two key pairs ...
    for ws, key in zip(folders, keys):  # ... each in its own tfvars file, in no .tf file
        assert json.loads((ws / "terraform" / "terraform.tfvars.json").read_text()) == {"ssh_public_key": key, "node_placement": {}}
        assert not [p for p in (ws / "terraform").rglob("*.tf") if key.split()[1] in p.read_text()]
