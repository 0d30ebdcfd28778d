"""Run identity, the train config's launch keys, the launcher's files (pure parts of runs/launch)."""

from __future__ import annotations

import io
import shlex
import subprocess
import tarfile
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from trainkit.errors import InputError
from trainkit.provision.node import Node, node_from_vars, paths_from_vars
from trainkit.runs import launch, remote
from trainkit.runs import record as runs


def write(tmp_path: Path, text: str, name: str = "job.yaml") -> Path:
    path = tmp_path / name
    path.write_text(text)
    return path


def test_name_defaults_to_the_config_stem_and_run_ids_are_name_plus_timestamp(tmp_path):
    job = runs.load_job(write(tmp_path, "epochs: 3\n", "digits.yaml"))
    assert job.name == "digits" and job.mode == "engine" and job.engine_config == {"epochs": 3}
    first = runs.new_run_id("digits", tmp_path, now=0)
    assert first == "digits-19700101-000000"
    (tmp_path / first).mkdir()
    assert runs.new_run_id("digits", tmp_path, now=0) == "digits-19700101-000000-2"


def test_launch_keys_are_split_from_the_engine_config(tmp_path):
    (tmp_path / "code").mkdir()
    job = runs.load_job(write(tmp_path, "name: mine\ncommand: python train.py\nworkdir: code\n"
                                        "setup: [pip install x, echo done]\nenv: {A: 1}\n"))
    assert (job.name, job.command, job.setup, job.env) == ("mine", "python train.py",
                                                            "pip install x\necho done", {"A": "1"})
    assert job.workdir == (tmp_path / "code").resolve() and job.engine_config == {}


@pytest.mark.parametrize("text, words", [
    ("name: 'a b'\n", "name"), ("command: python t.py\nenv: {TRAINKIT_X: 1}\n", "TRAINKIT_X"),
    ("command: x\nenv: {'1A': b}\n", "1A"), ("command: x\nworkdir: nowhere\n", "workdir"),
    ("setup: pip install x\n", "workdir/setup need a `command:`"), ("command: ''\n", "command"),
    ("command: x\nenv: [a]\n", "env")])
def test_bad_launch_keys_name_the_file_and_field(tmp_path, text, words):
    path = write(tmp_path, text)
    with pytest.raises(InputError) as err:
        runs.load_job(path)
    assert str(path) in err.value.message and words in err.value.message and err.value.exit_code == 2


def test_resume_with_a_changed_config_is_refused_unless_forced(tmp_path):
    job = runs.load_job(write(tmp_path, "epochs: 3\n"))
    record = {"run_id": "job-1", "config_hash": job.fingerprint()}
    runs.check_resume(record, job, force=False)
    changed = runs.load_job(write(tmp_path, "epochs: 3\n"), ["epochs=4"])
    with pytest.raises(InputError, match="different config"):
        runs.check_resume(record, changed, force=False)
    runs.check_resume(record, changed, force=True)


def test_resolve_run_by_prefix_and_newest(tmp_path):
    for i, name in enumerate(["a-1", "a-2", "b-1"]):
        runs.write_record(tmp_path / name, {"run_id": name, "config": "c.yaml", "created_at": i})
    assert runs.resolve_run(tmp_path, None).name == "b-1"
    assert runs.resolve_run(tmp_path, "b").name == "b-1"
    with pytest.raises(InputError, match="ambiguous"):
        runs.resolve_run(tmp_path, "a")


def test_workdir_tar_leaves_out_gitignored_and_default_excludes(tmp_path):
    for rel in ("train.py", "data/big.bin", ".git/HEAD", "pkg/__pycache__/m.pyc", "keep/x.txt", "out.log"):
        (tmp_path / rel).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / rel).write_text("x")
    (tmp_path / ".gitignore").write_text("data/\n*.log\n")
    names = tarfile.open(fileobj=io.BytesIO(launch.workdir_tar(tmp_path))).getnames()
    assert set(names) == {".gitignore", "train.py", "keep", "keep/x.txt", "pkg"}


NODE_VARS = {"ansible_connection": "local", "trainkit_private_ip": "10.0.0.1", "trainkit_nproc_per_node": 2,
             "trainkit_node_python": "/usr/bin/python3"}


def _node(**more) -> Node:
    return node_from_vars("n0", 0, {**NODE_VARS, **more})


@settings(max_examples=40, deadline=None)
@given(value=st.text(alphabet=st.characters(blacklist_categories=("Cs",), blacklist_characters="\0"),
                     max_size=30))
def test_env_values_reach_the_job_as_literals(tmp_path_factory, value):
    tmp = tmp_path_factory.mktemp("env")
    job = runs.Job(name="j", source=tmp / "j.yaml", engine_config={}, command="true", env={"V": value})
    lay = remote.Layout(str(tmp), str(tmp), "j-1")
    script = launch.launch_script(job, _node(), [_node()], lay, 1)
    exports = script[:script.index("exec </dev/null")]   # shebang, set -euo pipefail, the exports
    out = subprocess.run(["bash", "-c", exports + '\nprintf %s "$V"'], capture_output=True)
    assert out.stdout.decode("utf-8", "surrogateescape") == value


def test_engine_launcher_runs_torchrun_with_the_run_paths(tmp_path):
    job = runs.Job(name="j", source=tmp_path / "j.yaml", engine_config={"epochs": 1}, overrides=("epochs=2",))
    nodes = [_node(), node_from_vars("n1", 1, {**NODE_VARS, "trainkit_private_ip": "10.0.0.2"})]
    lay = remote.Layout("/w", "/r", "j-1")
    script = launch.launch_script(job, nodes[1], nodes, lay, 3)
    assert "export TRAINKIT_NODE_RANK=1" in script and "export TRAINKIT_RDZV_ENDPOINT=10.0.0.1:29400" in script
    assert "export WORLD_SIZE=4" in script and "export TRAINKIT_CHECKPOINT_DIR=/w/checkpoints/j-1" in script
    # in the foreground (not exec), so launch.sh records how it ended, and exits with its status
    [line] = [ln for ln in script.splitlines() if "torch.distributed.run" in ln]
    last = shlex.split(line.replace("$TRAINKIT_", "TRAINKIT_"))
    assert last[:5] == ["rc=0;", "/usr/bin/python3", "-m", "torch.distributed.run", "--nnodes"]
    assert "--rdzv-id" in last and last[last.index("--rdzv-id") + 1] == "j-1-a3"
    assert last[-7:] == ["run_dir=/w/runs/j-1", "checkpoint.dir=/w/checkpoints/j-1", "resume=true", "--",
                         "epochs=2", "||", "rc=$?"]  # the user's overrides after `--`: never options
    assert "/w/runs/j-1/nodes/node-1/attempt-3.exit" in script and script.splitlines()[-1] == 'exit "$rc"'


def test_replace_addresses_picks_the_lost_index_instance_by_id_and_its_data_resources():
    from trainkit.cluster.replace import replace_addresses

    def res(addr, id_):
        return {"address": f"module.cluster.{addr}", "mode": "managed", "values": {"id": id_}}
    state = {"values": {"root_module": {"child_modules": [{"resources": [
        res("x_instance.node[0]", "i-0"), res("x_instance.node[1]", "i-1"), res("x_disk.data[0]", "d-0"),
        res("x_disk.data[1]", "d-1"), res("x_attach.data[1]", "a-1"), res("x_nas.this", "fs-1")]}]}}}
    assert replace_addresses(state, 1, "i-1") == ["module.cluster.x_instance.node[1]",
                                                  "module.cluster.x_disk.data[1]", "module.cluster.x_attach.data[1]"]
    # terminated: the refresh dropped it (or another id sits there): only its data resources
    assert replace_addresses(state, 1, "i-gone") == ["module.cluster.x_disk.data[1]",
                                                     "module.cluster.x_attach.data[1]"]


def test_spare_hosts_are_not_nodes_and_all_spares_is_an_error():
    from trainkit.spec.schema import ClusterSpec, node_count

    hosts = [{"name": "a", "address": "10.0.0.1"}, {"name": "b", "address": "10.0.0.2", "spare": True}]
    assert node_count(ClusterSpec(name="abc", cloud="hosts", hosts=hosts)) == 1
    with pytest.raises(ValueError, match="every host is a spare"):
        ClusterSpec(name="abc", cloud="hosts", hosts=[{**hosts[1], "name": "c"}])


def test_runs_lists_a_finished_engine_run_whose_summary_names_its_best_metric(tmp_path, capsys):
    from trainkit.cli import main

    spec = write(tmp_path, "name: local-demo\ncloud: local\nstorage: {data_disk: {enabled: false}}\n", "c.yaml")
    run = tmp_path / "ws" / "runs" / "digits-1"
    runs.write_record(run, {"run_id": "digits-1", "status": "completed", "created_at": 1.0, "ended_at": 61.0})
    # what the engine writes: best_metric is the metric's name, best_val_acc its value
    (run / "summary.json").write_text('{"best_metric": "val_acc", "best_val_acc": 0.99, "steps": 7}')
    with pytest.raises(SystemExit) as done:
        main(["runs", str(spec), "--workdir", str(tmp_path / "ws")])
    out = capsys.readouterr()
    assert done.value.code == 0, out.err
    assert "best_val_acc=0.990" in out.out and "completed" in out.out and "60s" in out.out


def test_a_jobs_stage_section_is_a_launch_key_checked_and_part_of_the_fingerprint(tmp_path):
    job = runs.load_job(write(tmp_path, "epochs: 3\nstage:\n  sources:\n"
                                        "    - {url: 'https://example.org/pets.tar.gz', name: pets}\n"))
    assert job.engine_config == {"epochs": 3} and job.stage.sources[0].name == "pets"
    plain = runs.load_job(write(tmp_path, "epochs: 3\n", "plain.yaml"))
    assert plain.stage is None and plain.fingerprint() != job.fingerprint()  # other data, other run
    with pytest.raises(InputError) as err:
        runs.load_job(write(tmp_path, "stage:\n  sources:\n    - {url: 'ftp://x/y'}\n", "bad.yaml"))
    assert "bad.yaml: stage.sources.0.url" in err.value.message and err.value.exit_code == 2


def test_a_jobs_stage_section_lands_in_its_targets_root_and_the_job_is_told_where():
    from trainkit.provision.inventory import stage_vars
    from trainkit.staging.section import load_section

    group = {"trainkit_data_root": "/mnt/shared/c/datasets", "trainkit_shared_work_dir": True,
             "trainkit_data_roots": {"disk": "/data/datasets", "nas": "/mnt/shared/c/datasets"}}
    disk = load_section({"sources": [{"url": "https://example.org/a.tar"}]})
    nas = load_section({"target": "nas", "sources": [{"url": "https://example.org/a.tar"}]})
    paths = paths_from_vars(group)  # as the inventory's group vars read back
    read = (paths.data_roots, paths.data_root, paths.shared_work_dir)
    assert stage_vars(disk, *read)["trainkit_data_root"] == "/data/datasets"
    assert not stage_vars(disk, *read)["trainkit_data_once"]
    assert (stage_vars(nas, *read)["trainkit_data_root"], stage_vars(nas, *read)["trainkit_data_once"]) == (
        "/mnt/shared/c/datasets", True)
    job = runs.Job(name="j", source=Path("j.yaml"), engine_config={}, stage=disk)
    assert launch.data_root(job, paths) == "/data/datasets"
    assert launch.data_root(runs.Job(name="j", source=Path("j.yaml"), engine_config={}), paths) == \
        "/mnt/shared/c/datasets"  # no stage: of its own -> the spec's data root
    lay = remote.Layout("/w", "/r", "j-1")
    assert "export TRAINKIT_DATA_ROOT=/data/datasets" in launch.launch_script(job, _node(**group), [_node(**group)], lay, 1)


def test_a_workdir_too_big_to_ship_names_its_largest_files(tmp_path, monkeypatch):
    monkeypatch.setattr(launch, "MAX_WORKDIR_BYTES", 2**20)  # the real bound is 256 MiB; same path
    (tmp_path / "train.py").write_text("print(1)\n")
    (tmp_path / "dataset.bin").write_bytes(bytes(3 * 2**20))  # `workdir: .` next to the data
    with pytest.raises(InputError, match=r"workdir .*: more than 1 MiB to copy to every node; "
                                         r"largest: dataset.bin \(3.0 MiB\)") as err:
        launch.workdir_tar(tmp_path)
    assert "excludes:" in err.value.fix


def test_trainkit_variables_in_env_are_refused_but_the_engines_fault_hooks_pass(tmp_path):
    with pytest.raises(InputError, match="env.TRAINKIT_RUN_ID: TRAINKIT_.* variables are set by trainkit"):
        runs.load_job(write(tmp_path, "epochs: 3\nenv: {TRAINKIT_RUN_ID: mine}\n", "a.yaml"))
    job = runs.load_job(write(tmp_path, "epochs: 3\nenv: {TRAINKIT_FAULT_SLOW_SAVE: '15:6'}\n", "b.yaml"))
    assert job.env == {"TRAINKIT_FAULT_SLOW_SAVE": "15:6"}
