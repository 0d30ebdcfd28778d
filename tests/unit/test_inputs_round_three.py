"""Round three of odd inputs (issue 35's list, the causes rather than its cases): each is refused
at validate or at the command with exit 2 naming the field or option and the fix, never a
traceback, never a run started on it."""

from __future__ import annotations

import os

import pytest
from cli_run import run_cli as run

from trainkit.errors import InputError

LOCAL = "name: local-demo\ncloud: local\nstorage: {data_disk: {enabled: false}}\n"


def spec_file(tmp_path, text: str):
    path = tmp_path / "c.yaml"
    path.write_text(text)
    return str(path)


def test_two_staged_sources_that_share_a_folder_are_refused_at_validate(capsys, tmp_path):
    spec = spec_file(tmp_path, LOCAL + "data:\n  sources:\n"
                     "    - {url: 'https://example.org/a/train.tar.gz', name: pets}\n"
                     "    - {url: 'https://example.org/b/val.tar.gz', name: pets}\n")
    code, err = run(capsys, "validate", spec)
    assert code == 2, err  # unpacking one replaced the folders the other had unpacked
    assert "data: sources 0 and 1 both go to the folder 'pets'" in err and "its own `name:`" in err
    same_url_name = spec_file(tmp_path, LOCAL + "data:\n  sources:\n"
                              "    - {url: 'https://example.org/a/pets.tar.gz'}\n"
                              "    - {url: 'https://mirror.example.org/pets.tar.gz'}\n")
    code, err = run(capsys, "validate", same_url_name)
    assert code == 2 and "both go to the folder 'pets.tar.gz'" in err, err


def _config(tmp_path, workdir: str):
    path = tmp_path / "job.yaml"
    path.write_text(f"command: python train.py\nworkdir: {workdir!r}\n")
    return path


def test_a_workdir_that_is_a_link_loop_or_the_root_is_refused(tmp_path):
    from trainkit.runs.record import load_job

    os.symlink(tmp_path / "loop-b", tmp_path / "loop-a")
    os.symlink(tmp_path / "loop-a", tmp_path / "loop-b")
    for value, said in (("loop-a", "cannot be followed to a folder"), ("/", "which trainkit would copy whole"),
                        ("../" * 40, "which trainkit would copy whole"), ("~", "cannot be followed to a folder (No such file")):
        with pytest.raises(InputError) as err:
            load_job(_config(tmp_path, value))
        assert f"workdir: {value!r}" in err.value.message and said in err.value.message, err.value.message
    (tmp_path / "project").mkdir()
    assert load_job(_config(tmp_path, "project")).workdir == (tmp_path / "project").resolve()


@pytest.mark.parametrize("option", ["--resume", "--attach"])
def test_an_empty_run_id_is_refused_not_a_new_run(capsys, repo, tmp_path, option):
    code, err = run(capsys, "train", str(repo / "examples/clusters/local.yaml"), "--workdir", str(tmp_path / "ws"),
                    option, "")
    assert code == 2, err  # --resume "" started a new run
    assert f"{option} '': not a run id (empty)" in err
    assert not (tmp_path / "ws" / "runs").exists()


@pytest.mark.parametrize("value", ["/opt/conda/bin:$PATH", "${HOME}/bin", "$HOME"])
def test_an_env_value_that_expects_expansion_is_refused_with_the_shell_way(tmp_path, value):
    from trainkit.runs.record import load_job

    path = tmp_path / "job.yaml"
    path.write_text(f"command: date\nenv:\n  PATH: {value!r}\n")
    with pytest.raises(InputError) as err:
        load_job(path)
    assert "env.PATH" in err.value.message and "not expanded" in err.value.message
    assert f'export PATH="{value}"' in err.value.fix
    path.write_text("command: date\nenv:\n  PRICE: 'costs $5'\n")
    assert load_job(path).env == {"PRICE": "costs $5"}  # a $ that a shell would not expand stays


@pytest.mark.parametrize("cloud,region", [("aws", "us-east-1"), ("alicloud", "cn-hangzhou"),
                                          ("tencentcloud", "ap-guangzhou"), ("huaweicloud", "cn-north-4")])
def test_prices_refresh_without_credentials_names_the_clouds_variables(capsys, monkeypatch, tmp_path, cloud, region):
    from trainkit import clouds

    room = clouds.get(cloud)
    for cs in room.credentials:
        for alternatives in cs.variables:
            for name in alternatives:
                monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("TRAINKIT_PRICES_DIR", str(tmp_path / "prices"))
    code, err = run(capsys, "prices", "refresh", "--cloud", cloud, "--region", region)
    assert code == 13, err  # Tencent, AWS and Alibaba crashed inside their SDKs
    first = room.credentials[0].variables[0][0]
    assert f"no {room.title} credentials" in err and first in err
    assert not (tmp_path / "prices").exists()


@pytest.mark.parametrize("value", ["9" * 400, "1e400", "-1", ".nan", "2e9"])
def test_a_price_out_of_range_names_the_key_not_an_overflow(capsys, tmp_path, value):
    prices = tmp_path / "p.yaml"
    prices.write_text(f"prices:\n  g5.xlarge: {{on_demand: {value}}}\n")
    code, err = run(capsys, "catalog", "--cloud", "aws", "--prices", str(prices))
    assert code == 2, err  # 400 digits: internal error: OverflowError
    assert "prices.g5.xlarge.on_demand: must be a number from 0 to 1e+09" in err and len(err) < 400


@pytest.mark.parametrize("override,field", [("workers=100000", "workers"), ("epochs=10000000", "epochs"),
                                            ("batch=99999999999", "batch"), ("checkpoint.keep=5000", "keep"),
                                            ("weight_decay=5", "weight_decay")])
def test_a_numeric_knob_out_of_its_range_fails_validate(capsys, repo, override, field):
    code, err = run(capsys, "validate", str(repo / "examples/clusters/local.yaml"), "--config", "digits", override)
    assert code == 2, err  # workers=100000 passed validate
    assert field in err and "less than or equal to" in err


@pytest.mark.parametrize("line,field", [("zone: [a, b]\n", "zone"), ("zone: z-1\n", "zone"),
                                        ("region: us-east-1\n", "region"),
                                        ("spot: {fallback: on_demand}\n", "spot.fallback"),
                                        ("spot: {max_price: 1.5}\n", "spot.max_price")])
def test_a_cloud_only_field_on_local_is_refused_naming_the_targets_it_serves(capsys, tmp_path, line, field):
    code, err = run(capsys, "validate", spec_file(tmp_path, LOCAL + line))
    assert code == 2, err  # accepted and ignored
    assert f"{field}: does nothing on local (it serves the cloud targets: alicloud" in err and "aws" in err


def test_upgrade_image_on_local_is_refused_naming_the_targets_it_serves(capsys, repo, tmp_path):
    code, err = run(capsys, "apply", str(repo / "examples/clusters/local.yaml"), "--workdir", str(tmp_path / "ws"),
                    "--yes", "--upgrade-image")
    assert code == 2, err
    assert "--upgrade-image does nothing on local" in err and "aws" in err and "fix: drop --upgrade-image" in err
    assert not (tmp_path / "ws").exists()


INVENTORY = ("all:\n  vars: {}\n  children:\n    head:\n      hosts:\n        localhost: {ansible_connection: local}\n"
             "    workers:\n      hosts: {}\n")


@pytest.mark.parametrize("columns,wide", [("0", False), ("12", False), ("40", True), ("200", False)])
def test_top_is_readable_at_any_width_and_wide_never_empties_a_cell(capsys, monkeypatch, repo, tmp_path, columns,
                                                                    wide):
    from trainkit.cli import main
    from trainkit.cluster.top import COLUMNS
    from trainkit.workspace import Workspace

    ws = Workspace(tmp_path / "ws", "local-demo").ensure()
    ws.inventory_yml.write_text(INVENTORY)
    monkeypatch.setenv("COLUMNS", columns)
    with pytest.raises(SystemExit) as done:
        main(["top", str(repo / "examples/clusters/local.yaml"), "--workdir", str(ws.root), "--once",
              *(["--wide"] if wide else [])])
    out = capsys.readouterr().out
    assert done.value.code == 0 and "localhost" in out, out  # COLUMNS=0 printed nothing
    assert "…" not in out, out  # --wide on a narrow terminal cut every cell to an ellipsis
    if wide or columns == "200":
        assert all(col in out for col in COLUMNS)
    if columns == "12":  # narrower than NODE and VERDICT: one line per cell
        assert "  VERDICT " in out and "  GPU% " in out


def test_top_on_a_cloud_cluster_never_applied_says_apply_not_edited_by_hand(capsys, repo, tmp_path):
    code, err = run(capsys, "top", str(repo / "examples/clusters/aws.yaml"), "--workdir", str(tmp_path / "ws"),
                    "--once")
    assert code == 2, err
    assert "has not been applied from this workspace" in err and "edited by hand" not in err
    assert "trainkit apply" in err


@pytest.mark.parametrize("override", ["name=x", "stage.target=nas", "env.A=1", "recover.elastic=true"])
def test_a_launch_key_as_an_override_is_named_as_such_not_unknown(capsys, repo, override):
    code, err = run(capsys, "validate", str(repo / "examples/clusters/local.yaml"), "--config", "digits", override)
    assert code == 2, err
    assert "cannot be overridden on the command line" in err and "unknown key" not in err
    assert f"fix: set it in {repo / 'examples/train/digits.yaml'}" in err


def test_a_full_disk_under_stdout_is_named_as_the_output_not_the_workspace(tmp_path):
    import subprocess
    import sys

    with open("/dev/full", "w") as full:  # every write: ENOSPC
        proc = subprocess.run([sys.executable, "-m", "trainkit", "examples"], stdout=full, stderr=subprocess.PIPE,
                              text=True, cwd=tmp_path, timeout=120)
    assert proc.returncode == 1, proc.stderr
    assert proc.stderr.startswith("error: No space left on device: the command's output (stdout)"), proc.stderr
    assert "workspace:" not in proc.stderr and "Exception ignored" not in proc.stderr


@pytest.mark.parametrize("cloud,region,zone", [("aws", "us-west-1", "us-west-1-x"), ("tencentcloud", "ap-shanghai", "z"),
                                               ("alicloud", "cn-beijing", "cn-beijing1"),
                                               ("huaweicloud", "cn-north-1", "north")])
def test_a_zone_fix_line_names_a_zone_not_a_pattern(cloud, region, zone):
    import re

    from trainkit import clouds
    from trainkit.clouds.checks import _one_zone

    room = clouds.get(cloud)
    [(field, what, fix)] = _one_zone(room, region, zone)
    assert field == "zone" and not any(c in fix for c in "[]\\+*"), fix  # "us-west-1[a-z]" is no zone
    suggested = fix.split("named like ")[1].split(";")[0]
    assert re.fullmatch(room.zone_pattern.replace("{region}", re.escape(region)), suggested)
    assert _one_zone(room, region, suggested) == []  # the name the fix line gives passes the check


AWS = ("name: lab\ncloud: aws\nregion: us-east-1\nzone: us-east-1a\ninstance: {type: g5.xlarge}\n"
       "network: {admin_cidrs: [203.0.113.0/24]}\n")


@pytest.mark.parametrize("line,field", [("spot: {enabled: true, max_price: 1e9}\n", "spot.max_price"),
                                        ("budget: {max_per_hour: 1e12}\n", "budget.max_per_hour"),
                                        ("storage: {nas: {enabled: true, size_gb: 99999999}}\n", "storage.nas.size_gb"),
                                        ("data: {chunk_mb: 1e6}\n", "data.chunk_mb")])
def test_a_spec_number_out_of_its_range_fails_validate(capsys, tmp_path, line, field):
    code, err = run(capsys, "validate", spec_file(tmp_path, AWS + line))
    assert code == 2 and field in err and "less than or equal to" in err, err
