"""Control-side checks: the bounded YAML loader, train configs checked against their builders
without torch, `trainkit train` refusing a bad config before any node, and the user's SSH key."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap

import pytest
import yaml

from trainkit.cli import main
from trainkit.errors import InputError
from trainkit.spec.train_config import BUILTINS, builder_problems, static_params
from trainkit.train.config import OTHER_NAMES, TrainConfig, load_config
from trainkit.util import yamlload

PUBLIC_KEY = "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIOMqqnkVzrm0SdG6UOoqKLsabgH5C9okWi0dh2l9GKJl user@laptop"


def test_a_billion_laughs_is_refused_before_anything_walks_it():
    levels = ["a: &a [lol, lol, lol, lol, lol, lol, lol, lol, lol, lol]"]
    levels += [f"{c}: &{c} [{', '.join(['*' + p] * 10)}]" for p, c in zip("abcdefgh", "bcdefghi")]
    with pytest.raises(InputError, match=r"line \d: aliases \(\*name\) expand to more than 100,000"):
        yamlload.load_text("\n".join(levels))


def test_the_yaml11_number_check_walks_each_aliased_list_once(monkeypatch):
    """The octal/base-60 check ran before the expansion bound and followed every alias: a billion
    laughs took minutes to refuse. Each list is walked once: calls stay near the node count."""
    calls = []
    real = yamlload._refuse_yaml11

    def counted(node, checked):
        calls.append(1)
        assert len(calls) < 200, "the check follows aliases into their copies"  # fails fast, no hang
        return real(node, checked)

    monkeypatch.setattr(yamlload, "_refuse_yaml11", counted)
    levels = ["a: &a [lol, lol, lol, lol, lol, lol, lol, lol, lol, lol]"]
    levels += [f"{c}: &{c} [{', '.join(['*' + p] * 10)}]" for p, c in zip("abcdefgh", "bcdefghi")]
    with pytest.raises(InputError, match="expand to more than"):
        yamlload.load_text("\n".join(levels))


def test_a_few_aliases_and_merge_keys_still_work():
    text = "base: &b {x: 1, y: 2}\nnode:\n  <<: *b\n  y: 3\nlist: [*b, *b]\n"
    assert yamlload.load_text(text) == {"base": {"x": 1, "y": 2}, "node": {"x": 1, "y": 3},
                                        "list": [{"x": 1, "y": 2}, {"x": 1, "y": 2}]}


def test_duplicate_key_in_a_nested_mapping_names_key_and_line():
    with pytest.raises(InputError, match=r"line 4: duplicate key 'keep' \(first given on line 3\)"):
        yamlload.load_text("epochs: 3\ncheckpoint:\n  keep: 3\n  keep: 4\n")


def test_exponent_floats_are_numbers_for_float_fields_only(tmp_path):
    path = tmp_path / "train.yaml"
    path.write_text("lr0: 1e-4\nrun_dir: 1e5\n")
    assert load_config(path).run_dir == "1e5"  # a string field keeps the string
    path.write_text("lr0: 1e-4\nweight_decay: 5E-4\ncheckpoint: {mtbf_hours: 2e1}\n")
    cfg = load_config(path, ["lrf=1e-2"])
    assert (cfg.lr0, cfg.weight_decay, cfg.lrf, cfg.checkpoint.mtbf_hours) == (1e-4, 5e-4, 1e-2, 20.0)


def test_other_tools_names_point_at_real_fields():
    fields = set(TrainConfig.model_fields)
    for other, ours in OTHER_NAMES.items():
        section, _, sub = ours.partition(".")
        assert section in fields and (not sub or sub in TrainConfig.model_fields[section].annotation.model_fields), other


def test_builtin_table_matches_the_engines_builtins():
    from trainkit.train.data import BUILTIN_DATA
    from trainkit.train.model import BUILTIN_MODELS

    for key, engine in (("model", BUILTIN_MODELS), ("data", BUILTIN_DATA)):
        assert set(BUILTINS[key]) == set(engine)
        for name, target in BUILTINS[key].items():
            module, _, attr = target.partition(":")
            assert f"{engine[name].__module__}:{engine[name].__name__}" == target
            assert static_params(sys.modules[module].__file__, attr) is not None  # read without import


def test_validating_a_config_imports_no_torch(repo):
    code = ("import sys; from trainkit.cli import main\n"
            "try: main(['validate', '--config', 'examples/train/digits.yaml', 'model_args.channels=8'])\n"
            "except SystemExit as e: assert e.code == 0, e.code\n"
            "assert 'torch' not in sys.modules, 'torch imported'\n")
    proc = subprocess.run([sys.executable, "-c", code], cwd=repo, capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr


USER_MODULE = '''
import functools

def build(hidden, depth=2, *, act="relu"):
    return None

class Net:
    def __init__(self, width=8, **extra):
        pass

@functools.lru_cache
def cached(size=3):
    return None
'''


@pytest.fixture
def user_module(tmp_path, monkeypatch):
    (tmp_path / "mypkg_i9").mkdir()
    (tmp_path / "mypkg_i9" / "__init__.py").write_text("")
    (tmp_path / "mypkg_i9" / "models.py").write_text(textwrap.dedent(USER_MODULE))
    monkeypatch.syspath_prepend(str(tmp_path))
    yield "mypkg_i9.models"
    for name in [m for m in sys.modules if m.startswith("mypkg_i9")]:
        del sys.modules[name]


def test_user_builder_signature_read_from_source(user_module):
    problems, notes = builder_problems("model", f"{user_module}:build", {"hiden": 4, "act": "gelu"})
    assert problems == [f"model_args.hiden: {user_module}:build has no parameter 'hiden'; did you mean 'hidden'?",
                        f"model_args: {user_module}:build needs hidden; add them to model_args"]
    assert notes == [] and user_module not in sys.modules  # nothing was imported
    assert builder_problems("model", f"{user_module}:Net", {"anything": 1}) == ([], [])


def test_decorated_builder_is_imported_for_the_check_and_says_so(user_module):
    problems, notes = builder_problems("model", f"{user_module}:cached", {"sise": 4})
    assert problems == [f"model_args.sise: {user_module}:cached has no parameter 'sise'; did you mean 'size'?"]
    assert notes and "imported mypkg_i9.models" in notes[0]


def test_train_refuses_a_bad_config_before_touching_any_node(tmp_path, capsys, repo, monkeypatch):
    monkeypatch.chdir(tmp_path)  # the workspace (.trainkit/) would go here; it must stay empty
    bad = tmp_path / "bad.yaml"
    bad.write_text("epochs: 3\nmodel_args: {chanels: 8}\nlearning_rate: 1e-3\n")
    with pytest.raises(SystemExit) as exc:
        main(["train", str(repo / "examples/clusters/local.yaml"), "--config", str(bad)])
    err = capsys.readouterr().err
    assert exc.value.code == 2, err
    assert "learning_rate: unknown key; did you mean 'lr0'?" in err
    assert not (tmp_path / ".trainkit").exists()


def test_the_users_public_key_is_installed_not_a_generated_one(tmp_path, capsys, repo):
    (tmp_path / "me.pub").write_text(PUBLIC_KEY + "\n")
    (tmp_path / "me").write_text("private\n")
    spec = yaml.safe_load((repo / "examples/clusters/aws.yaml").read_text())
    spec["ssh"] = {**spec.get("ssh", {}), "public_key": str(tmp_path / "me.pub")}
    path = tmp_path / "aws.yaml"
    path.write_text(yaml.safe_dump(spec))
    with pytest.raises(SystemExit) as exc:
        main(["render", str(path), "--workdir", str(tmp_path / "ws")])
    assert exc.value.code == 0, capsys.readouterr().err
    tfvars = json.loads((tmp_path / "ws" / "terraform" / "terraform.tfvars.json").read_text())
    assert tfvars["ssh_public_key"] == PUBLIC_KEY  # reaches terraform through the tfvars file
    assert not (tmp_path / "ws" / "ssh").exists()  # no key generated


def test_inventory_logs_in_with_the_private_key_beside_the_users_public_key(tmp_path):
    from trainkit.spec.schema import SshSpec
    from trainkit.spec.sshkeys import key_files, private_key_path
    from trainkit.workspace import Workspace

    ssh = SshSpec(public_key="~/keys/me.pub")
    pub, priv = key_files(ssh)
    assert priv == pub.with_suffix("") and "~" not in str(priv)
    assert private_key_path(ssh, Workspace(tmp_path)) == str(priv)
    assert private_key_path(SshSpec(), Workspace(tmp_path)) == str(tmp_path / "ssh" / "id_ed25519")


def test_run_reports_a_model_args_typo_as_exit_2_not_a_crash(tmp_path, capsys):
    with pytest.raises(SystemExit) as exc:
        main(["run", "model_args.chanels=8", f"run_dir={tmp_path / 'run'}"])
    err = capsys.readouterr().err
    assert exc.value.code == 2, err
    assert "model_args.chanels: digits_cnn has no parameter 'chanels'" in err
    assert "Traceback" not in err and "internal error" not in err


def test_builder_argument_types_are_read_from_simple_annotations(tmp_path):
    """int/float/str/bool and their `| None` / Optional forms are checked; anything else is not."""
    from trainkit.spec.train_config import _arg_problems, static_params

    src = tmp_path / "mymodels.py"
    src.write_text("from typing import Optional\n"
                   "def build(width: int, rate: float = 0.1, name: 'str' = 'x', on: bool = True,\n"
                   "          cap: int | None = None, alt: Optional[float] = None, shape: list[int] = (),\n"
                   "          free=3):\n    pass\n")
    params = static_params(str(src), "build")
    assert params.types == {"width": ("int", False), "rate": ("float", False), "name": ("str", False),
                            "on": ("bool", False), "cap": ("int", True), "alt": ("float", True)}
    good = {"width": 8, "rate": 1, "name": "n", "on": False, "cap": None, "alt": 2.5, "shape": "any", "free": []}
    assert _arg_problems("model", "m:build", good, params) == []
    bad = _arg_problems("model", "m:build", {"width": 8.0, "rate": "fast", "on": 1, "cap": True}, params)
    assert [p.split(":")[0] for p in bad] == ["model_args.cap", "model_args.on", "model_args.rate",
                                             "model_args.width"]
