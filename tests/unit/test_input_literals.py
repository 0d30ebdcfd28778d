"""Property-based: any string in an address, user or path field is either refused by the spec's
grammar (exit 2, the field named, no traceback) or comes out of every writer as exactly one literal
word or line: the inventory (YAML read back), the ssh command line (after `--`), the ProxyCommand
ssh runs through a shell (shlex read back), /etc/hosts lines, the fstab line, and what the
launcher (trainkit/runs/launch.py) writes for a node: the job's environment, launch.sh and the
supervisor's start command (shlex read back). 500 generated examples per field group, seeded
(derandomize) so CI sees the same cases every run."""

from __future__ import annotations

import json
import shlex
import tempfile
from pathlib import Path

import jinja2
import pytest
import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from trainkit.cli import main
from trainkit.provision.inventory import inventory_for, inventory_hosts
from trainkit.provision.node import nodes_in
from trainkit.runs import launch, remote
from trainkit.runs import record as runs
from trainkit.spec import resolve
from trainkit.spec.resolve import load_cluster
from trainkit.util.paths import node_path
from trainkit.workspace import Workspace

REPO = Path(__file__).resolve().parents[2]
EXAMPLES = 500
PROPS = settings(max_examples=EXAMPLES, deadline=None, derandomize=True, database=None,
                 suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])

SPECIAL = list("abz09-._/:;$()`'\"\\ \n\t\r\x00\x1b\x7f%@,=+*?[]{}<>|&!#~") + ["é", "中", "\u2028", "\ufeff"]
nasty = st.one_of(
    st.text(alphabet=st.characters(exclude_categories=("Cs",)), max_size=40),
    st.text(alphabet=st.sampled_from(SPECIAL), max_size=30),
)
hostname = st.from_regex(r"\A[a-z0-9]([a-z0-9-]{0,10}[a-z0-9])?(\.[a-z0-9]{1,8}){0,3}\Z")
address = st.one_of(nasty, st.ip_addresses().map(str), hostname,
                    st.tuples(st.ip_addresses().map(str), nasty).map("".join),
                    st.tuples(st.sampled_from(["-", "-o", "-oProxyCommand="]), hostname).map("".join))
user = st.one_of(nasty, st.from_regex(r"\A[a-z_][a-z0-9_.-]{0,15}\Z"),
                 st.tuples(st.from_regex(r"\A[a-z]{1,8}\Z"), nasty).map("".join))
path = st.one_of(nasty, st.from_regex(r"\A(/[A-Za-z0-9_.+@,=-]{1,10}){2,4}\Z"),
                 st.tuples(st.just("/opt/"), nasty).map("".join))

HOSTS = {"name": "lab", "cloud": "hosts", "ssh": {"user": "ops"},
         "storage": {"data_disk": {"enabled": False}},
         "hosts": [{"name": "a", "address": "10.0.0.1"}, {"name": "b", "address": "10.0.0.2"}]}
ALI = {"name": "demo", "cloud": "alicloud", "region": "cn-hangzhou", "zone": "cn-hangzhou-i", "nodes": 2,
       "instance": {"type": "ecs.gn7i-c8g1.2xlarge"}, "network": {"admin_cidrs": ["203.0.113.0/24"]},
       "storage": {"nas": {"enabled": True}}}
OUTPUTS = {"nodes": [{"name": "demo-node-0", "private_ip": "10.42.1.10", "public_ip": "203.0.113.7"},
                     {"name": "demo-node-1", "private_ip": "10.42.1.11", "public_ip": None}],
           "nas": {"server": "fs-1.nas.example.internal", "export_path": "/", "mount_options": "vers=3"},
           "data_disk_device": "/dev/vdb"}

# The two kinds of job the launcher starts: the built-in engine (torchrun) and a `command:` with a
# workdir synced to <launch.root>/code/<run-id>.
ENGINE = runs.Job(name="r", source=Path("/x/r.yaml"), engine_config={"epochs": 1})
COMMAND = runs.Job(name="r", source=Path("/x/r.yaml"), engine_config={}, command="python train.py",
                   workdir=Path("/x"))


_LOAD_CATALOG = resolve.load_catalog
_CATALOGS: dict[str, object] = {}


@pytest.fixture(autouse=True)
def _catalog_read_once(monkeypatch):
    """The catalog YAML is parsed once per cloud, not per example (it is most of a validate's time)."""
    def read_once(room):
        if room.name not in _CATALOGS:
            _CATALOGS[room.name] = _LOAD_CATALOG(room)
        return _CATALOGS[room.name]
    monkeypatch.setattr(resolve, "load_catalog", read_once)


def _set(spec: dict, dotted: str, value) -> dict:
    out = json.loads(json.dumps(spec))
    node, *_, = [out]
    parts = dotted.split(".")
    for part in parts[:-1]:
        node = node[int(part)] if part.isdigit() else node.setdefault(part, {})
    node[parts[-1]] = value
    return out


def _validate(capsys, spec: dict, field: str) -> Path | None:
    """Run `trainkit validate`; None when refused (after checking exit 2 names `field`), else the
    spec file for the writers to use."""
    text = yaml.safe_dump(spec)  # non-ASCII escaped: PyYAML misreads a raw \x85 as a line break
    assert yaml.safe_load(text) == spec  # the YAML carries the string exactly
    path = Path(tempfile.mkdtemp(prefix="tk-prop-")) / "cluster.yaml"
    path.write_text(text, encoding="utf-8")
    with pytest.raises(SystemExit) as exc:
        main(["validate", str(path)])
    err = capsys.readouterr().err
    assert "Traceback" not in err and "internal error" not in err, err
    assert exc.value.code in (0, 2), err
    if exc.value.code == 2:
        assert field in err, err
        return None
    return path


def _inventory(path: Path, outputs: dict | None) -> dict:
    cluster = load_cluster(path)
    ws = Workspace(path.parent / "ws").ensure()
    inv = inventory_for(cluster, outputs, ws)
    written = ws.write_inventory(inv)
    back = yaml.safe_load(written.read_text())
    assert back == inv  # the inventory file holds exactly these values
    return back


def _read_back(inv: dict) -> dict:
    """The inventory's nodes as trainkit reads them back, by name."""
    return {n.name: n for n in nodes_in(inv, inv["all"]["vars"])[0]}


def _etc_hosts(inv: dict) -> list[list[str]]:
    """The /etc/hosts block the base role writes (its Jinja, rendered here), split into fields."""
    tasks = yaml.safe_load((REPO / "ansible/roles/base/tasks/main.yml").read_text())
    block = next(t for t in tasks if t["name"] == "Name every cluster node in /etc/hosts")
    text = jinja2.Template(block["ansible.builtin.blockinfile"]["block"]).render(**inv["all"]["vars"])
    return [line.split() for line in text.splitlines() if line.strip()]


@PROPS
@given(value=address, field=st.sampled_from(["address", "private_ip"]))
def test_any_host_address_is_refused_or_one_literal_word(capsys, value, field):
    path = _validate(capsys, _set(HOSTS, f"hosts.0.{field}", value), f"hosts[0].{field}")
    if path is None:
        return
    inv = _inventory(path, None)
    head = inventory_hosts(inv)["a"]
    if field == "address":
        argv = _read_back(inv)["a"].ssh_argv()
        assert argv[-2:] == ["--", f"ops@{value}"] and not value.startswith("-")
        assert shlex.split(shlex.join(argv)) == argv
    else:
        assert head["trainkit_private_ip"] == value
    lines = _etc_hosts(inv)
    assert all(len(fields) == 2 for fields in lines)
    assert [f[0] for f in lines] == [h["ip"] for h in inv["all"]["vars"]["base_cluster_hosts"]]


@PROPS
@given(value=user, field=st.sampled_from(["ssh.user", "hosts.0.user"]))
def test_any_login_user_is_refused_or_one_literal_word(capsys, value, field):
    cloud = field == "ssh.user"
    shown = "ssh.user" if cloud else "hosts[0].user"
    path = _validate(capsys, _set(ALI if cloud else HOSTS, field, value), shown)
    if path is None:
        return
    inv = _inventory(path, OUTPUTS if cloud else None)
    hosts = inventory_hosts(inv)
    node = hosts["demo-node-1" if cloud else "a"]
    assert _read_back(inv)["demo-node-1" if cloud else "a"].ssh_argv()[-1] == f"{value}@{node['ansible_host']}"
    if cloud:  # the worker is reached through the head: ProxyCommand runs in a shell
        words = shlex.split(node["ansible_ssh_common_args"])
        proxy = next(w for w in words if w.startswith("ProxyCommand="))
        hop = shlex.split(proxy.removeprefix("ProxyCommand="))
        assert hop[-2:] == ["--", f"{value}@203.0.113.7"]


@PROPS
@given(value=path, field=st.sampled_from(["launch.python", "launch.root",
                                          "storage.data_disk.mount_point", "storage.nas.mount_point"]))
def test_any_node_path_is_refused_or_one_literal_word(capsys, value, field):
    spec_path = _validate(capsys, _set(ALI, field, value), field)
    if spec_path is None:
        return
    inv = _inventory(spec_path, OUTPUTS)
    gv = inv["all"]["vars"]
    if field.startswith("storage."):
        key = "disks_mount_point" if "data_disk" in field else "nas_mount_point"
        fstab = f"UUID=0f0e {gv[key]} xfs defaults,nofail 0 0"  # what ansible.posix.mount writes
        assert fstab.split()[1] == node_path(value) and len(fstab.split()) == 6 and "\n" not in fstab
        return
    nodes, paths = nodes_in(inv, gv)
    lay = remote.layout_for(paths, "r1")
    node = nodes[1]  # a worker: its torchrun meets the head's rendezvous
    python, run_dir = gv["trainkit_node_python"], f"{gv['trainkit_work_dir']}/runs/r1"
    env = launch.job_env(ENGINE, node, nodes, lay, 1)
    assert (env["TRAINKIT_PYTHON"], env["TRAINKIT_RUN_DIR"]) == (python, run_dir)
    words = shlex.split(launch.launch_script(ENGINE, node, nodes, lay, 1), comments=True)
    assert python in words and f"run_dir={run_dir}" in words and f"checkpoint.dir={lay.checkpoint_dir}" in words
    assert f"TRAINKIT_PYTHON={python}" in words and f"TRAINKIT_RUN_DIR={run_dir}" in words
    words = shlex.split(launch.launch_script(COMMAND, node, nodes, lay, 1), comments=True)
    assert lay.code_dir == f"{gv['trainkit_root']}/code/r1" and f"TRAINKIT_CODE_DIR={lay.code_dir}" in words
    assert ["cd", lay.code_dir] == words[words.index("cd"):words.index("cd") + 2]
    words = shlex.split(launch.start_script(node, lay, 1, None, 5.0, engine=True))
    assert python in words and f"{lay.node_dir(1)}/launch.sh" in words
    if field == "launch.python":
        assert gv["trainkit_python"] == node_path(value)  # the spec keeps paths normalised

