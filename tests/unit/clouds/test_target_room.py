"""A new kind of target is a room and nothing else (issue 40, docs/design.md "Adding a target
kind"): tests/unit/fixtures/target-room/rack/cloud.py, a made-up rack of machines reached over SSH
(nothing to provision, like `hosts`), lives on TRAINKIT_CLOUD_PATH with no package edit. It
validates (its own rules), plans (no Terraform), applies (its nodes from the spec's `hosts:`, the
node-source table's `hosts` row, with its own default ssh user), and destroys (the teardown table's
no-terraform row: the node that does not answer is named, the workspace goes) through the same
code paths as the shipped targets. Plug-in clouds with a module are served by `check` and
`prices refresh` (the fifth-cloud fixture)."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
import yaml

from trainkit import clouds
from trainkit.cli import main
from trainkit.cluster.replace import REPLACEMENTS
from trainkit.cluster.teardown import TEARDOWNS, teardown_kind
from trainkit.provision.inventory import NODE_SOURCES
from trainkit.spec.resolve import load_cluster

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures"


def _cli(capsys, *args: str) -> tuple[int, str, str]:
    """(exit code, stdout, stderr) of `trainkit ARGS` in this process; no traceback allowed."""
    with pytest.raises(SystemExit) as done:
        main(list(args))
    out, err = capsys.readouterr()
    assert "Traceback" not in err and "internal error" not in err, err
    return done.value.code, out, err


@pytest.fixture
def rack(tmp_path, monkeypatch) -> Path:
    """The rack room on TRAINKIT_CLOUD_PATH and a spec of one machine on it (port 1: nothing answers)."""
    shutil.copytree(FIXTURES / "target-room", tmp_path / "rooms")
    monkeypatch.setenv(clouds.PATH_VARIABLE, str(tmp_path / "rooms"))
    spec = tmp_path / "rack.yaml"
    spec.write_text("name: rack-demo\ncloud: rack\nhosts:\n  - {name: r1, address: 127.0.0.1, port: 1}\n"
                    "storage: {data_disk: {enabled: false}}\n")
    return spec


def test_a_target_room_from_one_file_is_a_target_with_its_capabilities(rack):
    assert "rack" in clouds.targets() and "rack" not in clouds.terraform_targets()
    cluster = load_cluster(rack)
    assert cluster.room.name == "rack" and cluster.ssh_user == "lab" and cluster.nodes == 1
    # every capability it names has its row in the tables that act on it
    assert cluster.room.node_source in NODE_SOURCES and cluster.room.replacement in REPLACEMENTS
    assert teardown_kind(cluster.room) in TEARDOWNS


def test_a_target_room_validates_plans_applies_and_destroys(rack, tmp_path, capsys):
    ws = str(tmp_path / "ws")
    code, out, err = _cli(capsys, "validate", str(rack))
    assert code == 0 and "rack-demo on rack, 1 node(s)" in out, err
    code, out, err = _cli(capsys, "plan", str(rack), "--workdir", ws)
    assert code == 0 and "rack: nothing to provision with terraform" in out, out + err
    code, out, err = _cli(capsys, "render", str(rack), "--workdir", ws)
    assert code == 2 and "cloud rack: there is no Terraform to render for this target" in err
    code, out, err = _cli(capsys, "apply", str(rack), "--workdir", ws, "--yes", "--no-provision")
    assert code == 0 and "cluster rack-demo is up: 1 node(s)" in out, out + err
    inventory = yaml.safe_load((tmp_path / "ws" / "inventory.yml").read_text())
    head = inventory["all"]["children"]["head"]["hosts"]["r1"]
    assert (head["ansible_host"], head["ansible_port"], head["ansible_user"]) == ("127.0.0.1", 1, "lab")
    assert inventory["all"]["vars"]["ansible_python_interpreter"] == "/usr/bin/python3"
    code, out, err = _cli(capsys, "destroy", str(rack), "--workdir", ws, "--yes")
    assert code == 0 and "cluster rack-demo destroyed" in out, out + err
    assert "host r1 (127.0.0.1) did not answer on SSH and was not cleaned" in err
    assert not (tmp_path / "ws" / "inventory.yml").exists()


def test_a_target_room_s_own_rules_refuse_a_spec(rack, capsys):
    rack.write_text("name: rack-demo\ncloud: rack\nregion: north-1\n")
    code, out, err = _cli(capsys, "validate", str(rack))
    assert code == 2
    assert "hosts: list the rack's machines (name, address)" in out + err
    assert "region: does nothing on rack" in out + err   # no catalog: the cloud-only fields are named


@pytest.fixture
def fifth(tmp_path, monkeypatch) -> Path:
    """The fifth-cloud fixture on TRAINKIT_CLOUD_PATH, with a price adapter of its own on sys.path."""
    room = tmp_path / "rooms" / "fifthcloud"
    shutil.copytree(FIXTURES / "fifth-cloud", room)
    text = (room / "cloud.py").read_text()
    (room / "cloud.py").write_text(text.replace('    nfs_mount_options="vers=4.1",\n',
                                                '    nfs_mount_options="vers=4.1",\n'
                                                '    price_adapter="fifthcloud_prices",\n'))
    adapters = tmp_path / "adapters"
    adapters.mkdir()
    (adapters / "fifthcloud_prices.py").write_text(
        "def fetch(region, types, endpoint=None, **_):\n"
        "    return {'currency': 'USD', 'source': 'fifthcloud price list',\n"
        "            'prices': {t: {'on_demand': 2.25, 'spot': None} for t in types}}\n")
    monkeypatch.syspath_prepend(str(adapters))
    monkeypatch.setenv(clouds.PATH_VARIABLE, str(tmp_path / "rooms"))
    monkeypatch.setenv("TRAINKIT_PRICES_DIR", str(tmp_path / "prices"))
    return tmp_path


def test_check_serves_a_cloud_from_trainkit_cloud_path(fifth, capsys):
    code, out, err = _cli(capsys, "check", "--cloud", "fifthcloud")
    assert "Fifth Cloud (fifthcloud)" in out and "no credentials" not in out + err
    assert code in (0, 9), out + err   # 9: a tool (terraform, Ansible) missing on this machine
    code, out, err = _cli(capsys, "check")
    assert "Fifth Cloud (fifthcloud)" in out
    code, out, err = _cli(capsys, "check", "--cloud", "sixthcloud")
    assert code == 2 and "'sixthcloud' is not one of alicloud, tencentcloud, huaweicloud, aws, fifthcloud" in err


def test_prices_refresh_serves_a_cloud_from_trainkit_cloud_path(fifth, capsys):
    code, out, err = _cli(capsys, "prices", "refresh", "--cloud", "fifthcloud", "--region", "north-1")
    assert code == 0, out + err
    written = yaml.safe_load((fifth / "prices" / "fifthcloud-north-1.yaml").read_text())
    assert written["cloud"] == "fifthcloud" and written["prices"]["f5.a100"]["on_demand"] == 2.25
    code, out, err = _cli(capsys, "prices", "refresh", "--cloud", "sixthcloud", "--region", "north-1")
    assert code == 2 and "one of alicloud, tencentcloud, huaweicloud, aws, fifthcloud" in err
