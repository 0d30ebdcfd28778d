"""ansible/roles/slurm's slurm.conf, gres.conf and health script, rendered from the role's own
templates as the template module would; the role's name check (defaults' slurm_name_pattern,
asserted in tasks/main.yml) and the inventory's (provision/slurm_vars.py): no text from the spec or
a module output becomes a key, a second value or a line of slurm.conf.

The two Ansible filters the templates use (extract, quote) are applied here as Ansible defines
them (ansible.plugins.filter.core); one test renders the same values with Ansible's own filters
and `match` test in a separate process and compares: importing ansible here would patch
sys.intern for the whole pytest worker, which breaks torch.compile in the tests that share it."""

from __future__ import annotations

import json
import re
import shlex
import subprocess
import sys
from pathlib import Path

import jinja2
import pytest
import yaml
from hypothesis import given
from hypothesis import strategies as st

from trainkit import records
from trainkit.cluster.replace import effective_cluster
from trainkit.errors import InputError
from trainkit.provision.inventory import inventory_for, inventory_hosts
from trainkit.provision.slurm_vars import NODE_NAME, slurm_vars
from trainkit.spec.resolve import resolve
from trainkit.spec.schema import ClusterSpec
from trainkit.workspace import Workspace

ROLE = Path(__file__).resolve().parents[3] / "ansible" / "roles" / "slurm"
DEFAULTS = yaml.safe_load((ROLE / "defaults" / "main.yml").read_text())
PATTERN = re.compile(DEFAULTS["slurm_name_pattern"])
# ansible.plugins.filter.core: extract(item, container, morekeys) = container[item][morekeys];
# quote = shlex.quote
_FILTERS = {"extract": lambda item, container, morekeys=None: container[item] if morekeys is None
            else container[item][morekeys], "quote": lambda text: shlex.quote(str(text))}
# Every key the role writes, each in slurm.conf(5) of Slurm 22.05 (the template cites it)
KEYS = {"ClusterName", "SlurmctldHost", "SlurmUser", "SlurmdUser", "AuthType", "CredType", "StateSaveLocation",
        "SlurmdSpoolDir", "SlurmctldPidFile", "SlurmdPidFile", "SlurmctldLogFile", "SlurmdLogFile", "ProctrackType",
        "TaskPlugin", "MpiDefault", "SelectType", "SelectTypeParameters", "SchedulerType", "AccountingStorageType",
        "JobAcctGatherType", "JobCompType", "MailProg", "ReturnToService", "SlurmctldTimeout", "SlurmdTimeout",
        "HealthCheckProgram", "HealthCheckInterval", "GresTypes", "NodeName", "PartitionName"}


def render(name: str, **values) -> str:
    env = jinja2.Environment(undefined=jinja2.StrictUndefined, keep_trailing_newline=True,
                             trim_blocks=True)   # as Ansible's template module sets it
    env.filters.update(_FILTERS)
    return env.from_string((ROLE / "templates" / name).read_text()).render(**_values(values))


def _values(values: dict) -> dict:
    return {**{k: v for k, v in DEFAULTS.items() if "{{" not in str(v)}, **values}


_ANSIBLE_RENDER = """
import json, sys, jinja2
from ansible.plugins.filter.core import FilterModule
from ansible.plugins.test.core import TestModule
job = json.load(sys.stdin)
env = jinja2.Environment(undefined=jinja2.StrictUndefined, keep_trailing_newline=True, trim_blocks=True)
filters = FilterModule().filters()
env.filters.update(extract=filters["extract"], quote=filters["quote"])
out = {name: env.from_string(text).render(**job["values"][name]) for name, text in job["templates"].items()}
match = TestModule().tests()["match"]
out["matched"] = [bool(match(v, job["pattern"])) for v in job["names"]]
print(json.dumps(out))
"""


def _node(name: str, address: str, gpus: int = 0) -> dict:
    return {"slurm_node": {"name": name, "address": address, "cpus": "8", "memory_mb": "61000", "gpus": str(gpus)},
            "slurm_node_gpus": [f"/dev/nvidia{i}" for i in range(gpus)]}


def _conf(nodes: dict[str, dict], **values) -> str:
    base = {"slurm_cluster_name": "llm-a100", "slurm_controller": next(iter(nodes)), "slurm_controller_address":
            nodes[next(iter(nodes))]["slurm_node"]["address"], "slurm_partition": "trainkit",
            "slurm_health_program": "/opt/trainkit/bin/slurm-health", "ansible_play_hosts_all": list(nodes),
            "hostvars": nodes}
    return render("slurm.conf.j2", **{**base, **values})


def _lines(conf: str) -> list[str]:
    return [ln for ln in conf.splitlines() if ln and not ln.startswith("#")]


def test_slurm_conf_names_the_cluster_head_nodes_gpus_and_one_partition():
    nodes = {"llm-a100-0": _node("llm-a100-0", "10.0.0.10", gpus=8), "llm-a100-1": _node("llm-a100-1", "10.0.0.11")}
    lines = _lines(_conf(nodes))
    assert {ln.split("=", 1)[0] for ln in lines} <= KEYS
    assert "ClusterName=llm-a100" in lines and "SlurmctldHost=llm-a100-0(10.0.0.10)" in lines
    assert "NodeName=llm-a100-0 NodeAddr=10.0.0.10 CPUs=8 RealMemory=61000 Gres=gpu:8 State=UNKNOWN" in lines
    assert "NodeName=llm-a100-1 NodeAddr=10.0.0.11 CPUs=8 RealMemory=61000 State=UNKNOWN" in lines
    assert "GresTypes=gpu" in lines and [ln for ln in lines if ln.startswith("PartitionName=")] == \
        ["PartitionName=trainkit Nodes=ALL Default=YES MaxTime=INFINITE State=UP"]
    assert "HealthCheckProgram=/opt/trainkit/bin/slurm-health" in lines
    assert f"HealthCheckInterval={DEFAULTS['slurm_health_interval']}" in lines
    gres = render("gres.conf.j2", slurm_node_gpus=nodes["llm-a100-0"]["slurm_node_gpus"])
    assert _lines(gres) == [f"Name=gpu File=/dev/nvidia{i}" for i in range(8)]


def test_a_cluster_without_gpus_has_no_gres_and_an_empty_gres_conf():
    nodes = {"a": _node("a", "10.0.0.10"), "b": _node("b", "10.0.0.11")}
    conf = _conf(nodes)
    assert "GresTypes" not in conf and "Gres=" not in conf
    assert _lines(render("gres.conf.j2", slurm_node_gpus=[])) == []


@given(st.text(min_size=1, max_size=70))
def test_a_name_the_role_accepts_stays_one_word_of_its_line(text):
    """Whatever text the role's check lets through lands as one word after its key: the same
    lines, the same keys; what it refuses holds a character slurm.conf would read as syntax."""
    assert bool(PATTERN.match(text)) == bool(NODE_NAME.fullmatch(text))   # the role and the inventory agree
    if not PATTERN.match(text):
        return
    nodes = {"h0": _node(text, "10.0.0.10"), "h1": _node("h1", "10.0.0.11")}
    lines = _lines(_conf(nodes, slurm_cluster_name=text, slurm_partition=text, slurm_controller=text))
    plain = _lines(_conf({"h0": _node("n", "10.0.0.10"), "h1": _node("h1", "10.0.0.11")},
                         slurm_cluster_name="c", slurm_partition="p", slurm_controller="n"))
    assert len(lines) == len(plain)
    assert f"ClusterName={text}" in lines and f"SlurmctldHost={text}(10.0.0.10)" in lines
    assert any(ln.split(" ", 1)[0] == f"NodeName={text}" for ln in lines)
    assert any(ln.split(" ", 1)[0] == f"PartitionName={text}" for ln in lines)


@pytest.mark.parametrize("bad", ["a\nSlurmUser=root", "a\n", "a b", "a=b", "a#b", "a,b", "h[1-2]", "-a", ""])
def test_the_role_and_the_inventory_refuse_a_name_slurm_conf_would_read_as_syntax(bad, tmp_path):
    assert not PATTERN.match(bad)
    assert not NODE_NAME.fullmatch(bad)
    cluster = resolve(ClusterSpec.model_validate(_hosts_spec()))
    with pytest.raises(InputError, match="Slurm NodeName"):
        slurm_vars(cluster, [{"name": "ok-0"}, {"name": bad}], Workspace(tmp_path / "ws", "lab"))


def test_the_health_script_passes_each_value_as_one_quoted_word():
    script = render("slurm-health.j2", slurm_node_name="n-1", slurm_node_gpus=["/dev/nvidia0"],
                    slurm_health_python="/opt/my venv/bin/python", slurm_health_shared="/mnt/it's shared")
    line = [ln for ln in script.splitlines() if ln.startswith("exec ")]
    assert line == ["exec '/opt/my venv/bin/python' -m trainkit.node.slurm_health --node=n-1 --gpus=1 "
                    "--shared='/mnt/it'\"'\"'s shared'"]


def _hosts_spec(**more) -> dict:
    return {"name": "lab", "cloud": "hosts", "scheduler": "slurm",
            "hosts": [{"name": "n0", "address": "10.0.0.10"}, {"name": "n1", "address": "10.0.0.11"}],
            "storage": {"nas": {"enabled": True, "mount_point": "/mnt/shared"}}, **more}


def test_the_inventory_turns_the_role_on_with_the_cluster_name_partition_and_a_workspace_key(tmp_path):
    ws = Workspace(tmp_path / "ws", "lab")
    inv = inventory_for(resolve(ClusterSpec.model_validate(_hosts_spec(slurm={"partition": "gpu"}))), None, ws)
    group = inv["all"]["vars"]
    assert group["slurm_enabled"] is True and group["slurm_cluster_name"] == "lab"
    assert group["slurm_partition"] == "gpu" and group["slurm_munge_key_source"] == str(ws.munge_key.resolve())
    assert list(inv["all"]["children"]["head"]["hosts"]) == ["n0"]   # the controller: the role's default
    plain = inventory_for(resolve(ClusterSpec.model_validate({**_hosts_spec(), "scheduler": "none"})), None, ws)
    assert not any(k.startswith("slurm_") for k in plain["all"]["vars"])
    default = inventory_for(resolve(ClusterSpec.model_validate(_hosts_spec())), None, ws)
    assert default["all"]["vars"]["slurm_partition"] == "trainkit"


def test_ansibles_own_filters_and_match_test_give_the_same_files_and_refusals():
    nodes = {"n0": _node("n0", "10.0.0.10", gpus=2), "n1": _node("n1", "10.0.0.11")}
    conf = {"slurm_cluster_name": "lab", "slurm_controller": "n0", "slurm_controller_address": "10.0.0.10",
            "slurm_partition": "trainkit", "slurm_health_program": "/opt/trainkit/bin/slurm-health",
            "ansible_play_hosts_all": list(nodes), "hostvars": nodes}
    health = {"slurm_node_name": "n-1", "slurm_node_gpus": ["/dev/nvidia0"],
              "slurm_health_python": "/opt/my venv/bin/python", "slurm_health_shared": "/mnt/it's shared"}
    names = ["ok-1", "a\n", "a\nSlurmUser=root", "a b", "a=b", "h[1-2]", ""]
    job = {"templates": {n: (ROLE / "templates" / n).read_text() for n in ("slurm.conf.j2", "slurm-health.j2")},
           "values": {"slurm.conf.j2": _values(conf), "slurm-health.j2": _values(health)},
           "pattern": DEFAULTS["slurm_name_pattern"], "names": names}
    proc = subprocess.run([sys.executable, "-c", _ANSIBLE_RENDER], input=json.dumps(job), capture_output=True,
                          text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr[-2000:]
    out = json.loads(proc.stdout)
    assert out["slurm.conf.j2"] == render("slurm.conf.j2", **conf)
    assert out["slurm-health.j2"] == render("slurm-health.j2", **health)
    assert out["matched"] == [True, False, False, False, False, False, False]
    assert [bool(PATTERN.match(n)) for n in names] == out["matched"]


def test_a_nodename_belongs_to_a_place_and_a_spare_in_that_place_takes_it(tmp_path):
    """slurm_node_name is `<cluster>-n<rank>`: the spare that replaced n1 (hosts.json) is NodeName
    lab-n1 as n1 was, so slurm.conf keeps its nodes and only the address changes."""
    spec = _hosts_spec(hosts=[{"name": "n0", "address": "10.0.0.10"}, {"name": "n1", "address": "10.0.0.11"},
                              {"name": "sp", "address": "10.0.0.12", "spare": True}])
    ws = Workspace(tmp_path / "ws", "lab")
    cluster = resolve(ClusterSpec.model_validate(spec))
    names = {h: v["slurm_node_name"] for h, v in inventory_hosts(inventory_for(cluster, None, ws)).items()}
    assert names == {"n0": "lab-n0", "n1": "lab-n1"}
    ws.root.mkdir(parents=True, exist_ok=True)
    (ws.root / "hosts.json").write_text(records.dump({"active": ["n0", "sp"], "replaced": {"n1": "sp"}}))
    hosts = inventory_hosts(inventory_for(effective_cluster(cluster, ws), None, ws))
    assert {h: v["slurm_node_name"] for h, v in hosts.items()} == {"n0": "lab-n0", "sp": "lab-n1"}
    assert hosts["sp"]["ansible_host"] == "10.0.0.12"
    plain = inventory_for(resolve(ClusterSpec.model_validate({**spec, "scheduler": "none"})), None, ws)
    assert not any("slurm_node_name" in v for v in inventory_hosts(plain).values())
