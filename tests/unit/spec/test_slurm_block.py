"""The `slurm` target's spec (issue 41): the `slurm:` block is read, checked field by field against
Slurm's own grammar (sbatch(1)), and refused where it does not belong; `trainkit validate` names
the field and exits 2, never a traceback."""

from __future__ import annotations

import pytest
import yaml

from trainkit.cli import main
from trainkit.spec.schema import load_spec
from trainkit.spec.slurm_block import time_seconds

BASE = {"name": "lab", "cloud": "slurm", "nodes": 2,
        "slurm": {"login": {"address": "login.hpc.example", "user": "alice"}, "partition": "gpu",
                  "account": "proj-1", "qos": "normal", "time": "1-12:00", "gpus_per_node": 8,
                  "gpu_type": "a100", "constraint": "a100&ib", "workdir": "/shared/alice/trainkit"}}


def _validate(tmp_path, capsys, spec: dict) -> tuple[int, str]:
    path = tmp_path / "spec.yaml"
    path.write_text(yaml.safe_dump(spec))
    with pytest.raises(SystemExit) as done:
        main(["validate", str(path)])
    out, err = capsys.readouterr()
    assert "Traceback" not in err
    return done.value.code, out + err


def _with(**slurm) -> dict:
    return {**BASE, "slurm": {**BASE["slurm"], **slurm}}


def test_a_full_slurm_block_is_read_with_its_time_limit(tmp_path):
    path = tmp_path / "spec.yaml"
    path.write_text(yaml.safe_dump(BASE))
    spec = load_spec(path)
    assert spec.room.node_source == "scheduler" and not spec.room.has_module
    assert spec.slurm.partition == "gpu" and spec.slurm.gpus_per_node == 8
    assert spec.slurm.time_limit_s == 36 * 3600
    assert spec.slurm.login.port == 22 and spec.slurm.signal_s == 300


@pytest.mark.parametrize("text, seconds", [
    ("90", 5400), ("90:30", 5430), ("4:00:00", 14400), ("2-12", 216000), ("2-12:30", 217800),
    ("2-02:30:15", 181815), ("0", None), ("UNLIMITED", None), ("INFINITE", None)])
def test_every_time_form_sbatch_accepts_is_read(text, seconds):
    assert time_seconds(text) == seconds


@pytest.mark.parametrize("field, value", [
    ("partition", "gpu,cpu"), ("partition", "gpu\n#SBATCH --uid=0"), ("partition", "-gpu"),
    ("account", "proj 1"), ("account", "$(id)"), ("qos", "high;reboot"), ("gpu_type", "a100:2"),
    ("time", "4h"), ("time", "1:2:3:4"), ("time", "-1"), ("time", "1-2-3"),
    ("constraint", "a100 & ib"), ("constraint", "a100'"), ("constraint", "[a|b]&c"),
    ("signal_s", 30), ("signal_s", 70000), ("gpus_per_node", -1),
    ("workdir", "shared/rel"), ("workdir", "/shared/a b"), ("python", "python3; rm -rf /")])
def test_a_bad_slurm_value_is_refused_naming_its_field(tmp_path, capsys, field, value):
    code, text = _validate(tmp_path, capsys, _with(**{field: value}))
    assert code == 2, text
    assert f"slurm.{field}" in text


def test_a_bad_login_is_refused_naming_its_field(tmp_path, capsys):
    for login, field in (({"address": "-oProxyCommand=x"}, "address"), ({"address": "h", "user": "a b"}, "user"),
                         ({"address": "h", "port": 0}, "port")):
        code, text = _validate(tmp_path, capsys, _with(login=login))
        assert code == 2 and f"slurm.login.{field}" in text, text


def test_slurm_needs_its_block_and_takes_no_hosts(tmp_path, capsys):
    no_block = {k: v for k, v in BASE.items() if k != "slurm"}
    code, text = _validate(tmp_path, capsys, no_block)
    assert code == 2 and "slurm: required" in text
    code, text = _validate(tmp_path, capsys, {**BASE, "hosts": [{"name": "a", "address": "10.0.0.1"}]})
    assert code == 2 and "hosts: the scheduler chooses" in text


def test_a_slurm_block_on_another_target_is_refused(tmp_path, capsys):
    spec = {"name": "lab", "cloud": "hosts", "hosts": [{"name": "a", "address": "10.0.0.1"}],
            "storage": {"data_disk": {"enabled": False}}, "slurm": BASE["slurm"]}
    code, text = _validate(tmp_path, capsys, spec)
    assert code == 2 and "slurm: only for a target whose nodes a scheduler allocates" in text


def test_slurm_takes_no_safety_nets(tmp_path, capsys):
    code, text = _validate(tmp_path, capsys, {**BASE, "ttl": "12h"})
    assert code == 2 and "ttl:" in text


def test_apply_on_slurm_with_a_login_node_that_does_not_answer_leaves_nothing(tmp_path, capsys, monkeypatch):
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("TRAINKIT_STATE_DIR", str(tmp_path / "state"))
    path = tmp_path / "spec.yaml"
    path.write_text(yaml.safe_dump(BASE))
    with pytest.raises(SystemExit) as done:
        main(["apply", str(path), "--yes"])
    err = capsys.readouterr().err
    assert done.value.code == 2 and "Traceback" not in err
    assert "slurm.login: login.hpc.example did not run `sbatch --version`" in err, err
    assert not (tmp_path / ".trainkit" / "lab" / "inventory.yml").exists()


def test_a_signal_due_in_the_first_half_of_the_time_limit_is_refused(tmp_path, capsys):
    code, text = _validate(tmp_path, capsys, _with(time="5", signal_s=200))
    assert code == 2 and "slurm.signal_s: 200 s before the end of a 300 s time limit" in text, text
    code, text = _validate(tmp_path, capsys, _with(time="5", signal_s=150))
    assert code == 0, text
