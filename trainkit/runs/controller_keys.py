"""The controller's access to the hosts ends with the controller (issue 42: a stopped controller
leaves no access behind). handoff.py authorizes the controller's own public key on every host;
this takes that exact line off again, and the key pair goes (controller.end_script, or here):

- the run ends for good on the controller (an exit in controller.FINAL_EXITS, `--down` or not):
  its train process takes the key off every host with that key (`at_the_end`, after `--down`'s
  destroy), then its loop or unit removes the key pair;
- `destroy` from the controller's workspace (what a cancelled `--down` run starts there): the key
  off every host after the destroy, then that chain removes the key pair (handoff.down_after_cancel);
- `cancel` of a run whose controller has no `--down` to finish: this workspace, with the user's
  own access, takes the line (run.json's `controller.public_key`) off every host and removes the
  key pair on the controller host (`end_access`).

A host that does not answer keeps the line; the log or the cancel says which, and how to remove it.
"""

from __future__ import annotations

import json
import shlex
import sys
from contextlib import contextmanager
from pathlib import PurePosixPath
from typing import Any, Callable, Iterator

from trainkit.errors import UNEXPECTED, InputError
from trainkit.provision.node import Node
from trainkit.runs import controller as ctl
from trainkit.runs import record as runs
from trainkit.runs import remote
from trainkit.runs.handoff import SSH_S, all_hosts, controller_node, is_controller_ws, keyed_hosts
from trainkit.spec.resolve import Cluster
from trainkit.spec.sshkeys import PUBLIC_KEY
from trainkit.workspace import Workspace


def revoke(hosts: list[tuple[Node, str]], public: str) -> list[str]:
    """`public` taken out of each host's authorized_keys (controller.revoke_script), in parallel;
    the names of the hosts that did not answer (they keep the line)."""
    def one(item: tuple[Node, str]):
        node, path = item
        return node.name, node.sh(ctl.revoke_script(path, public), timeout=SSH_S)

    return [name for name, res in remote.on_nodes(hosts, one) if res.returncode != 0]


def _say_kept(kept: list[str], public: str, say: Callable[[str], None], who: str) -> None:
    say(f"{who}: the controller's key is out of every host's authorized_keys" if not kept else
        f"{who}: the controller's key stays in the authorized_keys of {', '.join(kept)} (no answer): "
        f"remove the line ending in {public.split()[-1]!r} there")


# ------------------------------------------------------------------ on the controller, its own key

def revoker(cluster: Cluster, ws: Workspace, run_id: str) -> Callable[[], None] | None:
    """revoke_own_key when `ws` is the workspace of the controller that holds run `run_id`; None
    anywhere else (the user's machine, a run never handed off)."""
    path = ws.runs_dir / run_id / "run.json"
    try:
        record = json.loads(path.read_text()) if runs.RUN_ID.fullmatch(run_id) else {}
    except (OSError, ValueError):
        return None
    if not isinstance(record, dict) or not is_controller_ws(ws, record):
        return None
    return lambda: revoke_own_key(cluster, ws, lambda m: print(m, file=sys.stderr))


def revoke_own_key(cluster: Cluster, ws: Workspace, say: Callable[[str], None]) -> None:
    """On the controller: its own public key (beside its workspace: <dir>/ssh/id_ed25519.pub)
    taken out of every host's authorized_keys with that key itself; what was done goes to `say`
    (the controller's log)."""
    pub = ws.controller_public_key()
    if not pub.is_file():
        return
    public = pub.read_text().strip()
    if PUBLIC_KEY.fullmatch(public):
        _say_kept(revoke(all_hosts(cluster, ws), public), public, say, "controller")


@contextmanager
def at_the_end(after: Callable[[], None] | None) -> Iterator[None]:
    """Around the controller's own train (or destroy): `after` (revoker's) runs when the body
    ends the run for good: it returns, or raises an error whose exit code is in FINAL_EXITS (the
    loop does not start it again). A crash, Ctrl-C or a signal keeps the key: the loop or the
    unit starts the train process again, which needs it."""
    if after is None:
        yield
        return
    try:
        yield
    except BaseException as err:
        if ctl.ends_for_good(getattr(err, "exit_code", UNEXPECTED)):   # TrainkitError, click's errors
            after()
        raise
    after()


# ------------------------------------------------------------------ from the user's workspace

def end_access(cluster: Cluster, ws: Workspace, run_id: str, held: dict[str, Any],
               say: Callable[[str], None]) -> list[str]:
    """After `cancel` stopped the controller `held` (run.json's `controller`) for good with no
    `--down` left to it: its public key taken off every host through this workspace's own access
    (the line the record names, else the one its host still has), and its key pair removed on its
    host. Returns the hosts that keep the line (all of them when no key could be read)."""
    try:
        host, hosts = controller_node(cluster, ws, held), keyed_hosts(cluster, ws)
    except InputError as err:   # the hosts cannot be listed (a cloud's outputs gone): say so, cancel stands
        say(f"cancel: the controller's key of run {run_id} stays on the hosts: {err.message}")
        return []
    public, folder = str(held.get("public_key") or ""), ctl.key_dir(held, run_id)
    if not PUBLIC_KEY.fullmatch(public) and host is not None and folder:
        res = host.sh(f"cat {shlex.quote(str(PurePosixPath(folder) / 'id_ed25519.pub'))}", timeout=SSH_S)
        public = res.stdout.decode(errors="replace").strip() if res.returncode == 0 else ""
    if not PUBLIC_KEY.fullmatch(public):
        say(f"cancel: the controller's key of run {run_id} is unknown here (its host {held.get('host')} "
            f"did not answer): remove the lines ending in {ctl.UNIT_PREFIX + run_id!r} from the hosts' authorized_keys")
        return [n.name for n, _ in hosts]
    kept = revoke(hosts, public)
    if host is not None and folder:
        host.sh(f"rm -rf {shlex.quote(folder)}", timeout=SSH_S)
    _say_kept(kept, public, say, "cancel")
    return kept
