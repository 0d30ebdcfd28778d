"""A replacement whose create answer was lost, on a seed cloud (issue 39, defect 4): the stand-in cloud
creates the instance and the provider reports a timeout (Store.set_faults(lose=...),
tests/standin/cloud.py), so the cloud holds a tagged instance the state does not. After the failed
try, trainkit finds it through the cloud's tag API and terminates it through its ECS API
(trainkit/cluster/strays.py with the sweeper `destroy --sweep` uses, here the stand-in APIs of
tests/standin/api.py). The next sync drops node 1 from outputs.json (the state lacks it): `status`
still names it lost with the fix, and the next recovery recreates it by its index (it stopped with
"not in outputs.json" before); exactly the cluster's two instances are left. One cloud: the three sweepers' find/delete per cloud are test_seed_sweep.py's.
The AWS version (a retried RunInstances, the try succeeding) is test_aws_replace_leaks.py.
"""

from __future__ import annotations

import json

import pytest
from seed_clouds import trainkit, write_spec

pytestmark = pytest.mark.usefixtures("tf_cli_config")


def test_an_instance_whose_create_answer_was_lost_during_a_replacement_is_terminated(
        repo, tmp_path, seed_cloud, monkeypatch):
    from trainkit.cluster import lifecycle
    from trainkit.cluster.replace import replace_instances
    from trainkit.errors import TrainkitError
    from trainkit.spec.resolve import load_cluster
    from trainkit.workspace import Workspace

    monkeypatch.delenv("CHECKOV", raising=False)
    spec, ws_dir = write_spec(repo, tmp_path, "alicloud"), tmp_path / "ws"
    trainkit("apply", spec, "--workdir", ws_dir, "--yes", "--no-provision")
    survivor, lost = json.loads((ws_dir / "outputs.json").read_text())["nodes"]
    seed_cloud.release("alicloud_instance", lost["id"])          # the cloud reclaims node 1
    seed_cloud.set_faults(lose={"alicloud_instance": 1})
    cluster = load_cluster(spec)
    ws = Workspace.for_cluster(cluster.name, ws_dir)
    before = len(seed_cloud.read()["calls"])

    with pytest.raises(TrainkitError) as failed:
        replace_instances(cluster, ws, [lost["name"]])
    assert "Traceback" not in failed.value.render()
    calls = seed_cloud.read()["calls"][before:]
    created = [c[2] for c in calls if c[:2] == ["create", "alicloud_instance"]]
    assert len(created) == 1 and ["delete", "alicloud_instance", created[0]] in calls   # the copy went
    assert set(seed_cloud.objects("alicloud_instance")) == {survivor["id"]}

    # the next sync writes outputs.json from the state, which lacks node 1: it stays lost, with the fix
    lifecycle.sync(cluster, ws)
    assert [n["name"] for n in json.loads((ws_dir / "outputs.json").read_text())["nodes"]] == [survivor["name"]]
    shown = lifecycle.status(cluster, ws, live=False)
    assert shown["lost"] == [lost["name"]] and "trainkit apply" in shown["lost_fix"]

    events = replace_instances(cluster, ws, [lost["name"]])       # the next recovery: found by its index
    assert [e["kind"] for e in events] == ["replaced"], events
    after = json.loads((ws_dir / "outputs.json").read_text())["nodes"]
    assert set(seed_cloud.objects("alicloud_instance")) == {survivor["id"], after[1]["id"]}
