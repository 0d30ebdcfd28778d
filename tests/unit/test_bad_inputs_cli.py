"""Bad input from outside, through the real CLI entry point (`trainkit.cli.main`): options and values
the commands do not take, files that are not what they claim, tools and rooms that do not load,
Ctrl-C. Each exits with its code from trainkit/errors.py, names the field or file, prints no
traceback and loses no file. (Workspace folders and files: test_bad_inputs_workspace.py.)"""

from __future__ import annotations

from pathlib import Path

import pytest
from cli_run import run_cli as run

from trainkit.cli import main


@pytest.mark.parametrize("args", [["plan", "{spec}", "--out", "{missing}/review.md"],
                                  ["export", "{spec}", "--onnx", "{missing}/model.onnx"],
                                  ["export", "{spec}", "--weights", "{missing}/w.pt"]])
def test_an_output_file_in_a_missing_folder_fails_before_the_work(capsys, repo, tmp_path, args):
    spec, missing = repo / "examples/clusters/local.yaml", tmp_path / "nope"
    code, err = run(capsys, *(a.format(spec=spec, missing=missing) for a in args))
    assert code == 2, err
    assert f"folder {missing} does not exist" in err and "'--" in err
    assert "nothing to provision" not in err


@pytest.mark.parametrize("args,suggestion", [(["validate", "{spec}", "--formt", "json"], "Did you mean '--format'?"),
                                             (["train", "{spec}", "--detatch"], "'--detach'")])
def test_a_mistyped_option_is_an_unknown_option_with_a_suggestion_not_an_override(capsys, repo, args,
                                                                                   suggestion):
    spec = repo / "examples/clusters/local.yaml"
    code, err = run(capsys, *(a.format(spec=spec) for a in args))
    assert code == 2, err
    assert f"No such option '{args[2]}'" in err and suggestion in err
    assert "override" not in err


@pytest.mark.parametrize("where", ["a-folder", "a-plain-file", "missing"])
def test_trainkit_terraform_that_is_no_program_is_named_with_exit_9(capsys, monkeypatch, repo, tmp_path, where):
    target = tmp_path / where
    if where == "a-folder":
        target.mkdir()  # a folder passes os.access(X_OK); it crashed with PermissionError (exit 1)
    elif where == "a-plain-file":
        target.write_text("not terraform")
    monkeypatch.setenv("TRAINKIT_TERRAFORM", str(target))
    code, err = run(capsys, "plan", str(repo / "examples/clusters/aws.yaml"), "--workdir", str(tmp_path / "ws"))
    assert code == 9, err
    assert f"TRAINKIT_TERRAFORM={target} is not an executable file" in err and "install Terraform" in err


def test_ctrl_c_while_render_writes_leaves_the_old_file_whole_and_exits_130(capsys, monkeypatch, repo, tmp_path):
    import os

    spec = tmp_path / "aws.yaml"
    spec.write_text((repo / "examples/clusters/aws.yaml").read_text())
    ws = tmp_path / "ws"
    run_ok = main_code(["render", str(spec), "--workdir", str(ws)])
    assert run_ok == 0
    main_tf = ws / "terraform" / "main.tf"
    before = main_tf.read_text()
    spec.write_text(spec.read_text().replace("\nnodes: 2", "\nnodes: 3"))
    real_replace = os.replace

    def interrupted(src, dst):  # Ctrl-C lands after the new text is written, before the rename
        if str(dst).endswith("main.tf"):
            raise KeyboardInterrupt
        real_replace(src, dst)

    monkeypatch.setattr(os, "replace", interrupted)
    capsys.readouterr()
    code, err = run(capsys, "render", str(spec), "--workdir", str(ws))
    assert code == 130, err
    assert main_tf.read_text() == before
    assert not [p for p in main_tf.parent.iterdir() if ".tmp" in p.name]


def test_ctrl_c_while_the_cli_loads_exits_130_without_a_traceback(tmp_path):
    import subprocess
    import sys

    # Raise KeyboardInterrupt where a real Ctrl-C lands in the first ~50 ms: importing click.
    script = ("import builtins, sys\n"
              "real = builtins.__import__\n"
              "def imp(name, *a, **k):\n"
              "    if name == 'click':\n"
              "        raise KeyboardInterrupt\n"
              "    return real(name, *a, **k)\n"
              "builtins.__import__ = imp\n"
              "sys.argv = ['trainkit', 'validate', 'x.yaml']\n"
              "import runpy\n"
              "runpy.run_module('trainkit', run_name='__main__')\n")
    proc = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, cwd=tmp_path)
    assert proc.returncode == 130, proc.stderr
    assert "Traceback" not in proc.stderr and "interrupted" in proc.stderr


def main_code(args: list[str]) -> int:
    with pytest.raises(SystemExit) as exc:
        main(args)
    return exc.value.code


@pytest.mark.parametrize("typo,suggested", [("valdate", "'validate'"), ("destory", "'destroy'"), ("stauts", "'status'")])
def test_a_mistyped_command_names_the_closest_one(capsys, typo, suggested):
    code, err = run(capsys, typo, "cluster.yaml")
    assert code == 2, err
    assert f"No such command '{typo}'. Did you mean {suggested}" in err  # 'destory' is near 'doctor' too


def test_examples_copy_under_a_file_names_the_option_and_keeps_the_users_copies(capsys, repo, tmp_path):
    (tmp_path / "afile").write_text("x")
    code, err = run(capsys, "examples", "--copy", str(tmp_path / "afile" / "mine"))
    assert code == 2, err
    assert f"--copy {tmp_path / 'afile' / 'mine'}: cannot copy there" in err
    (tmp_path / "ex" / "clusters").mkdir(parents=True)
    (tmp_path / "ex" / "clusters" / "local.yaml").write_text("my edits\n")
    assert main_code(["examples", "--copy", str(tmp_path / "ex")]) == 0
    assert (tmp_path / "ex" / "clusters" / "local.yaml").read_text() == "my edits\n"
    assert (tmp_path / "ex" / "train" / "digits.yaml").is_file()
    # everything the wheel ships under examples/, not only specs and configs
    shipped = {p.relative_to(repo / "examples") for p in (repo / "examples").rglob("*") if p.is_file()}
    copied = {p.relative_to(tmp_path / "ex") for p in (tmp_path / "ex").rglob("*") if p.is_file()}
    assert copied == shipped and Path("custom/train.py") in copied and Path("ci/gitlab-ci.yml") in copied


def test_docs_lists_and_prints_the_shipped_guides_and_names_them_on_a_typo(capsys, repo):
    assert main_code(["docs"]) == 0
    listing = capsys.readouterr().out
    assert all(f"  {p.stem}" in listing for p in (repo / "docs").glob("*.md"))
    assert main_code(["docs", "training"]) == 0
    assert capsys.readouterr().out == (repo / "docs" / "training.md").read_text()
    code, err = run(capsys, "docs", "trainin")
    assert code == 2 and "no guide named 'trainin'" in err and "training" in err


def test_stage_without_credentials_names_the_variables(tmp_path):
    import os
    import subprocess
    import sys

    # A fresh process: boto3's default session caches credentials found earlier in this one.
    (tmp_path / "data.yaml").write_text("data:\n  sources: [{url: 's3://bucket/set/', region: us-east-1}]\n")
    env = {k: v for k, v in os.environ.items() if not k.startswith("AWS_")}
    env.update(AWS_SHARED_CREDENTIALS_FILE=str(tmp_path / "none"), AWS_CONFIG_FILE=str(tmp_path / "none"),
               AWS_EC2_METADATA_DISABLED="true")
    proc = subprocess.run([sys.executable, "-m", "trainkit", "stage", str(tmp_path / "data.yaml"),
                           "--root", str(tmp_path / "root")], capture_output=True, text=True, env=env,
                          timeout=120)
    assert proc.returncode == 13, proc.stderr  # credentials missing: the code check and plan use too
    assert "data source s3://bucket/set/: no AWS credentials in the environment" in proc.stderr
    assert "AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY" in proc.stderr and "Traceback" not in proc.stderr


@pytest.mark.parametrize("args,option", [(["cost", "{aws}", "--hours", "inf"], "--hours"),
                                         (["cost", "{aws}", "--hours", "nan"], "--hours"),
                                         (["cost", "{aws}", "--hours", "1e300"], "--hours"),
                                         (["cost", "{aws}", "--hours", "5", "--reclaims-per-day", "inf"],
                                          "--reclaims-per-day"),
                                         (["top", "{local}", "--interval", "nan"], "--interval"),
                                         (["train", "{local}", "--poll", "nan"], "--poll"),
                                         (["train", "{local}", "--poll", "1e300"], "--poll"),  # sleep overflow
                                         (["cancel", "{local}", "r1", "--wait", "1e300"], "--wait")])
def test_inf_and_nan_options_are_refused_naming_the_option(capsys, repo, args, option):
    specs = {"aws": repo / "examples/clusters/aws.yaml", "local": repo / "examples/clusters/local.yaml"}
    code, err = run(capsys, *(a.format(**specs) for a in args))
    assert code == 2, err
    assert f"Invalid value for '{option}'" in err


@pytest.mark.parametrize("args,expected", [
    (["prices", "refresh", "--cloud", "aws", "--region", "../../tmp/x"], "--region '../../tmp/x' is not a region of aws"),
    (["prices", "refresh", "--cloud", "alicloud", "--region", "cn-hangzou"], "did you mean cn-hangzhou"),
    (["catalog", "--cloud", "aws", "--region", "us-east1"], "--region 'us-east1' is not a region of aws")])
def test_a_region_option_is_one_of_the_clouds_regions_never_a_path(capsys, monkeypatch, tmp_path, args, expected):
    monkeypatch.setenv("TRAINKIT_PRICES_DIR", str(tmp_path / "prices"))
    code, err = run(capsys, *args)
    assert code == 2, err  # prices refresh crashed (InvalidRegionError) or wrote <prices>/aws-../../tmp/x.yaml
    assert expected in err
    assert not (tmp_path / "prices").exists()


@pytest.mark.parametrize("override,expected", [("epochs", "'epochs' is neither a spec file nor an override"),
                                               (".epochs=3", "override '.epochs=3' is not key=value"),
                                               ("a..b=1", "override 'a..b=1' is not key=value")])
def test_a_malformed_override_is_named(capsys, repo, override, expected):
    code, err = run(capsys, "validate", "--config", str(repo / "examples/train/digits.yaml"), override)
    assert code == 2, err  # 'epochs' was read as a spec ("epochs: file not found"), '.epochs' as key ''
    assert expected in err


@pytest.mark.parametrize("key", ["run_dir", "checkpoint.dir"])
def test_run_with_a_folder_that_cannot_be_made_names_the_key(capsys, repo, tmp_path, key):
    (tmp_path / "afile").write_text("x")
    code, err = run(capsys, "run", str(repo / "examples/train/digits.yaml"), "epochs=1",
                    f"run_dir={tmp_path / 'run'}", f"{key}={tmp_path / 'afile' / 'sub'}")
    assert code == 2, err  # NotADirectoryError (exit 1) from deep in the engine before
    assert f"{key}: cannot create the folder {tmp_path / 'afile' / 'sub'}" in err


def test_apply_without_ansible_playbook_names_the_tool_and_how_to_install_it(capsys, monkeypatch, repo, tmp_path):
    import sys

    monkeypatch.setenv("PATH", str(tmp_path / "empty-bin"))
    monkeypatch.setattr(sys, "executable", str(tmp_path / "venv" / "bin" / "python"))
    code, err = run(capsys, "apply", str(repo / "examples/clusters/local.yaml"), "--workdir", str(tmp_path / "ws"), "-y")
    assert code == 9, err
    assert "ansible-playbook is not installed" in err and "pip install 'trainkit-clusters[control]'" in err


def test_destroy_in_ci_without_yes_says_to_pass_yes_not_aborted(repo, tmp_path):
    import subprocess
    import sys

    proc = subprocess.run([sys.executable, "-m", "trainkit", "destroy", str(repo / "examples/clusters/local.yaml"),
                           "--workdir", str(tmp_path / "ws")], stdin=subprocess.DEVNULL, capture_output=True,
                          text=True, timeout=120)
    assert proc.returncode == 2, proc.stderr  # was 130 "aborted", which reads as a Ctrl-C
    assert "destroy: no answer (stdin is not a terminal" in proc.stderr and "--yes" in proc.stderr
    assert "destroyed" not in proc.stdout


PRICE_FILES = [("inf", "prices:\n  g5.xlarge: {on_demand: .inf}\n", "prices.g5.xlarge.on_demand: must be a number from 0 to 1e+09"),
               ("true", "prices:\n  g5.xlarge: {spot: true}\n", "prices.g5.xlarge.spot: must be a number from 0 to 1e+09"),
               ("int-key", "prices:\n  1: {on_demand: 1}\n", "prices.1: not a aws type"),
               ("duplicate", "prices: {}\nprices: {}\n", "duplicate key 'prices'"),
               ("fifo", None, "price file is not a regular file (a FIFO")]


@pytest.mark.parametrize("case,text,expected", PRICE_FILES, ids=[p[0] for p in PRICE_FILES])
def test_a_bad_price_file_is_named_and_a_fifo_is_not_read(capsys, tmp_path, case, text, expected):
    import os

    path = tmp_path / "prices.yaml"
    if text is None:
        os.mkfifo(path)  # reading it blocked catalog forever
    else:
        path.write_text(text)
    code, err = run(capsys, "catalog", "--cloud", "aws", "--prices", str(path))
    assert code == 2, err
    assert f"{path}: " in err and expected in err


@pytest.mark.parametrize("case,content,expected", [
    ("fifo", None, "data file is not a regular file (a FIFO"),
    ("utf16", "data: {}\n".encode("utf-16"), "data file is UTF-16 or UTF-32 encoded"),
    ("alias-bomb", ("a: &a [x, x, x, x, x, x, x, x, x, x]\n" + "".join(
        f"{chr(98 + i)}: &{chr(98 + i)} [{', '.join(['*' + chr(97 + i)] * 10)}]\n" for i in range(8))).encode(),
     "aliases (*name) expand to more than")])
def test_stage_reads_its_file_with_the_one_bounded_loader(capsys, tmp_path, case, content, expected):
    import os

    path = tmp_path / "data.yaml"
    if content is None:
        os.mkfifo(path)
    else:
        path.write_bytes(content)
    code, err = run(capsys, "stage", str(path), "--root", str(tmp_path / "root"))
    assert code == 2, err  # hung (FIFO), UnicodeDecodeError (exit 1), or expanded the aliases
    assert str(path) in err and expected in err


@pytest.mark.parametrize("source,expected", [("x = (\n", "SyntaxError"), ("X = 1\n", "has no attribute 'CLOUD'"),
                                             ("CLOUD = 'moon'\n", "CLOUD is a str, not a trainkit.clouds.Cloud")])
def test_a_broken_cloud_room_on_the_path_is_named(capsys, monkeypatch, tmp_path, source, expected):
    (tmp_path / "rooms" / "moon").mkdir(parents=True)
    (tmp_path / "rooms" / "moon" / "cloud.py").write_text(source)
    monkeypatch.setenv("TRAINKIT_CLOUD_PATH", str(tmp_path / "rooms"))
    spec = tmp_path / "moon.yaml"
    spec.write_text("name: moon-1\ncloud: moon\n")
    code, err = run(capsys, "validate", str(spec))
    assert code == 2, err
    assert f"{tmp_path / 'rooms' / 'moon' / 'cloud.py'} (a room on TRAINKIT_CLOUD_PATH) cannot be loaded" in err
    assert expected in err


def test_a_file_too_big_without_aliases_is_not_blamed_on_aliases(capsys, monkeypatch, tmp_path):
    from trainkit.util import yamlload

    monkeypatch.setattr(yamlload, "MAX_NODES", 1000)  # the real bound is 100,000; same code path, faster
    spec = tmp_path / "hosts.yaml"
    spec.write_text("name: lab\ncloud: hosts\nhosts:\n" + "".join(
        f"  - {{name: h{i}, address: 10.0.{i // 256}.{i % 256}}}\n" for i in range(400)))
    code, err = run(capsys, "validate", str(spec))
    assert code == 2, err  # it said "aliases (*name) expand to more than ..." for a file with none
    assert "more than 1,000 values; a cluster spec or train config has hundreds" in err and "alias" not in err
    spec.write_text("name: lab\ncloud: hosts\na: &a [x, x, x, x, x, x, x, x, x, x]\n"
                    "b: &b [*a, *a, *a, *a, *a, *a, *a, *a, *a, *a]\nc: [*b, *b, *b, *b, *b, *b, *b, *b, *b, *b]\n")
    code, err = run(capsys, "validate", str(spec))
    assert code == 2 and "aliases (*name) expand to more than 1,000 values" in err


def test_plan_out_onto_the_spec_is_refused_and_the_spec_kept(capsys, repo, tmp_path):
    spec = tmp_path / "local.yaml"
    spec.write_text((repo / "examples/clusters/local.yaml").read_text())
    before = spec.read_text()
    code, err = run(capsys, "plan", str(spec), "--workdir", str(tmp_path / "ws"), "--out", str(spec))
    assert code == 2, err  # the review overwrote the spec
    assert "is the spec or price file" in err and spec.read_text() == before


def test_train_refuses_a_workdir_too_big_to_ship_before_any_run_starts(capsys, monkeypatch, repo, tmp_path):
    from trainkit.runs import launch

    monkeypatch.setattr(launch, "MAX_WORKDIR_BYTES", 2**20)  # the real bound is 256 MiB
    job = tmp_path / "job"
    job.mkdir()
    (job / "train.yaml").write_text("name: big\nworkdir: .\ncommand: python train.py\n")
    (job / "train.py").write_text("print(1)\n")
    (job / "data.bin").write_bytes(bytes(2 * 2**20))
    code, err = run(capsys, "train", str(repo / "examples/clusters/local.yaml"), "--workdir", str(tmp_path / "ws"),
                    "--config", str(job / "train.yaml"))
    assert code == 2, err
    assert "more than 1 MiB to copy to every node; largest: data.bin" in err
    assert not (tmp_path / "ws" / "runs").exists()


def test_validate_a_command_job_reports_the_job_not_engine_defaults(capsys, tmp_path):
    (tmp_path / "train.yaml").write_text("name: custom\nworkdir: .\ncommand: python train.py\n")
    (tmp_path / "train.py").write_text("print(1)\n")
    assert main_code(["validate", "--config", str(tmp_path / "train.yaml")]) == 0
    out = capsys.readouterr().out
    assert "ok - custom job custom: its `command:` runs on every node" in out
    assert "digits_cnn" not in out  # it reported the built-in engine's defaults, which never run


def _every_command() -> list[list[str]]:
    import click

    from trainkit.cli import COMMANDS, cli

    out = []
    for name in COMMANDS:
        command = cli.get_command(click.Context(cli), name)
        out.append([name])
        if isinstance(command, click.Group):
            out += [[name, sub] for sub in command.list_commands(click.Context(command))]
    return out


@pytest.mark.parametrize("words", _every_command(), ids=" ".join)
def test_every_command_has_help_with_an_example(capsys, words):
    with pytest.raises(SystemExit) as exc:
        main([*words, "--help"])
    out = capsys.readouterr().out
    assert exc.value.code == 0
    assert "Example:" in out, f"trainkit {' '.join(words)} --help shows no example"


@pytest.mark.parametrize("args,words", [(["--attach", "r1", "--resume", "r1"], "--attach RUN follows"),
                                        (["--attach", "r1", "epochs=3"], "--attach RUN follows"),
                                        (["--force"], "--force only goes with --resume")])
def test_train_options_that_contradict_each_other_are_refused(capsys, repo, args, words):
    code, err = run(capsys, "train", str(repo / "examples/clusters/local.yaml"), *args)
    assert code == 2 and words in err, err
