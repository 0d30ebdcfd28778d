"""trainkit.util.resources: data found without the current folder; `--config` takes a file or a name."""

from __future__ import annotations

from pathlib import Path

import pytest

from trainkit.errors import InputError
from trainkit.util import resources

REPO = Path(__file__).resolve().parents[3]


def test_a_checkout_reads_its_own_folders_whatever_the_current_folder(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    assert resources.data_root() == REPO
    for name in resources.DATA_FOLDERS:
        assert resources.data_path(name).is_dir()


def test_train_config_is_a_file_or_a_shipped_name(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    assert resources.train_config(None) == REPO / "examples/train/digits.yaml"
    assert resources.train_config("digits") == REPO / "examples/train/digits.yaml"
    mine = tmp_path / "mine.yaml"
    mine.write_text("epochs: 1\n")
    assert resources.train_config(str(mine)) == mine
    with pytest.raises(InputError, match="no such file and no built-in") as err:
        resources.train_config("nope")
    assert "digits" in err.value.fix


def test_missing_package_data_names_the_path(monkeypatch, tmp_path):
    monkeypatch.setattr(resources, "data_root", lambda: tmp_path)
    with pytest.raises(Exception, match="package data is incomplete"):
        resources.data_path("terraform")
