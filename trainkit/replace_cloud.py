"""Replace reclaimed cloud instances, and nothing else, with Terraform.

Cloud-agnostic through the module interface (docs: every module names its repeated resources by
role, `node` for instances and `data` for data disks and their attachments):

1. `terraform apply -refresh-only`: an instance the cloud terminated leaves the state;
2. in the refreshed state, find by id each lost node's `<type>.node[i]` (if it is still there,
   e.g. stopped but not gone) and the `<type>.data[i]` resources of its index (disk, attachment);
3. `terraform apply -replace=...` of those: the lost instance comes back with a fresh data disk
   attached; every other node, disk, the NAS and the network keep their ids (the config did
   not change, so nothing else is in the plan);
4. outputs.json is rewritten (the new instance's id and addresses).
"""

from __future__ import annotations

import json
import re
import time
from pathlib import Path

from trainkit import runs
from trainkit.errors import TrainkitError, PREEMPTED
from trainkit.spec.resolve import Cluster
from trainkit.workspace import Workspace


def replace_instances(cluster: Cluster, ws: Workspace, lost: list[str], run_dir: Path | None) -> list[str]:
    """Recreate the instances of the nodes named `lost` (outputs.json names); returns their names."""
    from trainkit.stack.state import render_and_init

    t0 = time.time()
    nodes = ws.read_outputs().get("nodes") or []
    index = {n["name"]: i for i, n in enumerate(nodes)}
    unknown = [name for name in lost if name not in index]
    if unknown:
        raise TrainkitError(f"lost node(s) {unknown} are not in {ws.outputs_json}", exit_code=PREEMPTED)
    runner, _ = render_and_init(cluster, ws)
    runner.refresh()
    state = runner.state_json()
    addresses = []
    for name in lost:
        addresses += replace_addresses(state, index[name], nodes[index[name]].get("id"))
    runner.apply_replace(addresses)
    outputs = {k: v["value"] for k, v in runner.outputs().items()}
    ws.outputs_json.write_text(json.dumps(outputs, indent=2, sort_keys=True))
    new = {n["name"]: n.get("id") for n in outputs.get("nodes") or []}
    for name in lost:
        if run_dir is not None:
            runs.event(run_dir, "replaced", node=name, old_id=nodes[index[name]].get("id"), new_id=new.get(name),
                       took_s=round(time.time() - t0, 3))
    return lost


def replace_addresses(state: dict, i: int, instance_id: str | None) -> list[str]:
    """Addresses to `-replace` for node index `i`: its instance if still in the state, and the
    `data[i]` resources (data disk, attachment). Pure: reads the `terraform show -json` dict."""
    out = []
    for res in _resources((state.get("values") or {}).get("root_module") or {}):
        m = re.search(r"\.(node|data)\[(\d+)\]$", res.get("address", ""))
        if not m or int(m.group(2)) != i or res.get("mode") != "managed":
            continue
        if m.group(1) == "data" or (res.get("values") or {}).get("id") == instance_id:
            out.append(res["address"])
    return out


def _resources(module: dict):
    yield from module.get("resources") or []
    for child in module.get("child_modules") or []:
        yield from _resources(child)
