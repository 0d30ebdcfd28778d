"""The cloud controller's own key on the nodes it creates (issue 42, trainkit/stack/state.py
controller_keys, render.render_stack's extra_keys): only the render made in the controller's
workspace (INSTANCE_IDENTITY set, `<dir>/ws` beside `<dir>/ssh/id_ed25519.pub`) passes the module's
`extra_authorized_keys`, and only through terraform.tfvars.json; every other render has none."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml

from trainkit.clouds.credentials import INSTANCE_IDENTITY
from trainkit.errors import InputError
from trainkit.spec.resolve import resolve
from trainkit.spec.schema import ClusterSpec
from trainkit.stack.render import VARS_FILE, render_stack
from trainkit.stack.state import controller_keys
from trainkit.workspace import Workspace

pytestmark = pytest.mark.unit

REPO = Path(__file__).resolve().parents[3]
USER_KEY = "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIBkRh4VOcYwCqMTmS1w1tJmXbH3v0xJ7lK0Zq2yC5FQK user"
# A comment that would be HCL (an interpolation, a quote) if it were ever written as a literal.
CTL_KEY = "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIFakeControllerKey000000000000000000000000 ${file(\"/etc\")}\"x"


def _cluster(tmp_path: Path):
    data = yaml.safe_load((REPO / "examples/clusters/aws-moto.yaml").read_text())
    data["controller"] = {"enabled": True}
    path = tmp_path / "cluster.yaml"
    path.write_text(yaml.safe_dump(data))
    return resolve(ClusterSpec.model_validate(data), str(path))


def _controller_ws(tmp_path: Path, key: str = CTL_KEY) -> Workspace:
    """The layout handoff_cloud ships: <dir>/ws, with the key pair keygen made in <dir>/ssh/."""
    folder = tmp_path / "launch-controller" / "run-1"
    (folder / "ssh").mkdir(parents=True)
    (folder / "ssh" / "id_ed25519.pub").write_text(key + "\n")
    return Workspace.for_cluster("aws-moto", folder / "ws")


def test_the_controller_render_authorizes_its_own_key_through_tfvars_only(tmp_path, monkeypatch):
    monkeypatch.setenv(INSTANCE_IDENTITY, "1")   # as the hand-off sets it in the loop's environment
    keys = controller_keys(_controller_ws(tmp_path))
    assert keys == (CTL_KEY,)
    files = render_stack(_cluster(tmp_path), USER_KEY, keys)
    assert json.loads(files[VARS_FILE])["extra_authorized_keys"] == [CTL_KEY]
    assert "extra_authorized_keys" in files["main.tf"] and "= var.extra_authorized_keys" in files["main.tf"]
    assert 'variable "extra_authorized_keys"' in files["variables.tf"] and "list(string)" in files["variables.tf"]
    assert not any("FakeControllerKey" in text for name, text in files.items() if name != VARS_FILE)


def test_the_users_render_has_no_extra_key_and_is_unchanged(tmp_path, monkeypatch):
    monkeypatch.delenv(INSTANCE_IDENTITY, raising=False)
    cluster = _cluster(tmp_path)
    assert controller_keys(_controller_ws(tmp_path)) == ()   # the layout alone is not the controller
    user_ws = Workspace.for_cluster("aws-moto", tmp_path / "mine")
    monkeypatch.setenv(INSTANCE_IDENTITY, "1")
    assert controller_keys(user_ws) == ()                     # nor the identity alone
    files = render_stack(cluster, USER_KEY, controller_keys(user_ws))
    assert files == render_stack(cluster, USER_KEY)
    root = {k: v for k, v in files.items() if not k.startswith("modules/")}
    assert not any("extra_authorized_keys" in text for text in root.values())
    assert "extra_authorized_keys" not in json.loads(files[VARS_FILE])


def test_a_controller_key_file_that_is_not_a_public_key_line_is_refused_naming_it(tmp_path, monkeypatch):
    monkeypatch.setenv(INSTANCE_IDENTITY, "1")
    ws = _controller_ws(tmp_path, "-----BEGIN OPENSSH PRIVATE KEY-----")
    with pytest.raises(InputError) as err:
        controller_keys(ws)
    assert "id_ed25519.pub" in err.value.message and "--recover --detach" in err.value.fix
