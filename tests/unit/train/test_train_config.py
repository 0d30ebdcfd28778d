"""Train config: strict keys and types, overrides, clear CLI errors (exit 2, no traceback)."""

from __future__ import annotations

import subprocess
import sys

import pydantic
import pytest
import yaml

from trainkit.errors import BAD_INPUT, InputError
from trainkit.train.config import TrainConfig, load_config

REPO_EXAMPLE = "examples/train/digits.yaml"


def _write(tmp_path, data) -> str:
    path = tmp_path / "train.yaml"
    path.write_text(yaml.safe_dump(data))
    return str(path)


def test_unknown_key_is_rejected_with_a_close_match(tmp_path):
    with pytest.raises(InputError) as err:
        load_config(_write(tmp_path, {"epochz": 3}))
    assert "epochz: unknown key; did you mean 'epochs'?" in err.value.message


def test_unknown_nested_key_is_rejected_with_a_close_match(tmp_path):
    with pytest.raises(InputError) as err:
        load_config(_write(tmp_path, {"checkpoint": {"kepp": 3}}))
    assert "checkpoint.kepp: unknown key; did you mean 'checkpoint.keep'?" in err.value.message


def test_wrong_type_names_the_key_and_the_value(tmp_path):
    with pytest.raises(InputError) as err:
        load_config(_write(tmp_path, {"epochs": "ten", "lr0": "fast"}))
    assert "epochs:" in err.value.message and "'ten'" in err.value.message
    assert "lr0:" in err.value.message and "'fast'" in err.value.message


def test_bad_optimizer_is_named_with_the_allowed_ones(tmp_path):
    with pytest.raises(InputError) as err:
        load_config(_write(tmp_path, {"optimizer": "Adam"}))
    assert "optimizer: expected 'AdamW' or 'SGD' (got 'Adam')" in err.value.message


def test_keep_below_two_is_rejected():
    with pytest.raises(InputError, match="checkpoint.keep"):
        load_config(None, ["checkpoint.keep=1"])


def test_split_must_sum_to_one():
    with pytest.raises(InputError, match="split"):
        load_config(None, ["split=[0.5,0.2,0.1]"])


def test_overrides_are_typed_and_reach_sections(tmp_path):
    cfg = load_config(_write(tmp_path, {"epochs": 3}),
                      ["epochs=5", "checkpoint.keep=4", "checkpoint.interval=30", "amp=false",
                       "model_args.dropout=0.0", "resume=/tmp/x"])
    assert (cfg.epochs, cfg.checkpoint.keep, cfg.checkpoint.interval, cfg.amp) == (5, 4, 30, False)
    assert cfg.model_args == {"dropout": 0.0} and cfg.resume == "/tmp/x"


def test_override_without_equals_is_an_input_error():
    with pytest.raises(InputError, match="not key=value"):
        load_config(None, ["epochs"])


def test_config_is_frozen():
    cfg = load_config(None)
    with pytest.raises(pydantic.ValidationError, match="Instance is frozen") as err:
        cfg.epochs = 3  # type: ignore[misc]
    assert [(e["type"], e["loc"]) for e in err.value.errors()] == [("frozen_instance", ("epochs",))]
    assert cfg.epochs == load_config(None).epochs


def test_example_config_loads_and_round_trips(repo, tmp_path):
    from trainkit.train.config import write_config

    cfg = load_config(repo / REPO_EXAMPLE)
    write_config(cfg, tmp_path / "config.yaml")
    again = load_config(tmp_path / "config.yaml")
    assert again == cfg and again.hash() == cfg.hash()


def test_hash_ignores_where_files_go_but_not_what_is_trained():
    base = load_config(None)
    assert load_config(None, ["run_dir=/elsewhere", "checkpoint.keep=5"]).hash() == base.hash()
    assert load_config(None, ["lr0=0.1"]).hash() != base.hash()


def test_defaults_are_documented():
    for name, field in TrainConfig.model_fields.items():
        if name not in ("checkpoint", "export"):
            assert field.description, name


@pytest.mark.parametrize("content, expected", [
    ({"epochz": 3}, "did you mean 'epochs'?"),
    ({"epochs": "ten"}, "epochs:"),
    ({"optimizer": "Adam"}, "optimizer: expected 'AdamW' or 'SGD'"),
])
def test_cli_reports_config_errors_with_exit_2_and_no_traceback(repo, tmp_path, content, expected):
    proc = subprocess.run([sys.executable, "-m", "trainkit", "run", _write(tmp_path, content)],
                          cwd=repo, capture_output=True, text=True, timeout=60)
    assert proc.returncode == BAD_INPUT
    assert expected in proc.stderr and "Traceback" not in proc.stderr


def test_cli_rejects_a_bad_override_with_exit_2(repo):
    proc = subprocess.run([sys.executable, "-m", "trainkit", "run", REPO_EXAMPLE, "checkpoint.kep=3"],
                          cwd=repo, capture_output=True, text=True, timeout=60)
    assert proc.returncode == BAD_INPUT and "did you mean 'checkpoint.keep'" in proc.stderr


def test_importing_the_cli_does_not_import_torch(repo):
    code = ("import sys, trainkit.cli, trainkit.train.config, trainkit.train.schedule, "
            "trainkit.commands.run; print('torch' in sys.modules)")
    out = subprocess.run([sys.executable, "-c", code], cwd=repo, capture_output=True, text=True,
                         timeout=60)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "False"
