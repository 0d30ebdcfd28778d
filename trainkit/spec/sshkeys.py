"""Which SSH key pair a cluster uses: the user's (`ssh.public_key` / `ssh.private_key`) when given,
else the pair generated in the workspace. The user's key always wins; a key is generated only
when the spec names none.

    key_files(ssh)             -> (public, private) paths, each expanded, the missing half derived
    key_problems(ssh, cloud)   -> [(field, what, fix)] for missing or malformed key files (I/O)
    public_key_text(ssh, ws)   -> the public key line to install on the nodes
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import TYPE_CHECKING, Any

from trainkit.util.yamlload import not_a_file

if TYPE_CHECKING:
    from trainkit.workspace import Workspace

# OpenSSH authorized_keys key types (sshd(8), AUTHORIZED_KEYS FILE FORMAT): type, base64 key,
# optional comment, on one line.
PUBLIC_KEY = re.compile(
    r"(ssh-ed25519|ssh-rsa|ssh-dss|ecdsa-sha2-nistp(256|384|521)|sk-ssh-ed25519@openssh\.com|"
    r"sk-ecdsa-sha2-nistp256@openssh\.com) [A-Za-z0-9+/]+={0,3}( [^\x00-\x1f\x7f]*)?")  # used with fullmatch
MAX_KEY_BYTES = 16 * 1024  # an RSA-16384 public key is about 2.8 KB


def key_files(ssh: Any) -> tuple[Path | None, Path | None]:
    """(public, private): the spec's paths with ~ expanded; a missing half is the other with or
    without `.pub` (ssh-keygen's naming)."""
    pub = Path(ssh.public_key).expanduser() if ssh.public_key else None
    priv = Path(ssh.private_key).expanduser() if ssh.private_key else None
    if pub is not None and priv is None and pub.suffix == ".pub":
        priv = pub.with_suffix("")
    if priv is not None and pub is None:
        pub = priv.with_name(priv.name + ".pub")
    return pub, priv


def key_problems(ssh: Any, installs_key: bool) -> list[tuple[str, str, str | None]]:
    """Problems with the key files the spec names. `installs_key`: the target puts the public key
    on new machines (cloud targets), so the public half must exist and be an OpenSSH public key."""
    if not ssh.public_key and not ssh.private_key:
        return []
    pub, priv = key_files(ssh)
    out: list[tuple[str, str, str | None]] = []
    if ssh.private_key and not priv.is_file():
        out.append(("ssh.private_key", f"{priv} {not_a_file(priv)}", "give the path of an existing key file"))
    elif ssh.private_key:
        out += _private_key_problems(priv)
    if ssh.public_key and not pub.is_file():
        out.append(("ssh.public_key", f"{pub} {not_a_file(pub)}", "give the path of an existing .pub file, or "
                    "remove ssh.public_key to have trainkit generate a key pair per cluster"))
    elif ssh.public_key or installs_key:
        out += _public_key_problems(pub, "ssh.public_key" if ssh.public_key else "ssh.private_key",
                                    must_exist=installs_key)
    if ssh.public_key and not ssh.private_key and (priv is None or not priv.is_file()):
        out.append(("ssh.private_key", f"not given, and no private key beside {pub}",
                    "set ssh.private_key to the key that matches ssh.public_key"))
    return out


def _private_key_problems(priv: Path) -> list[tuple[str, str, str | None]]:
    """An empty file, or a public key where the private one belongs (ssh fails on both only at
    apply time, after the cluster is paid for)."""
    if priv.stat().st_size == 0:
        return [("ssh.private_key", f"{priv} is empty", "give the path of the private key file")]
    head = priv.read_bytes()[:MAX_KEY_BYTES].decode("utf-8", "replace").strip()
    if PUBLIC_KEY.fullmatch(head):
        return [("ssh.private_key", f"{priv} is a public key",
                 "private_key is the file without .pub (ssh.public_key takes the .pub file)")]
    return []


def _public_key_problems(pub: Path, field: str, must_exist: bool) -> list[tuple[str, str, str | None]]:
    if not pub.is_file():
        if not must_exist:
            return []
        return [(field, f"the matching public key {pub} is not there; the nodes need it",
                 f"set ssh.public_key (ssh-keygen -y -f KEY > {pub.name} writes it)")]
    if pub.stat().st_size > MAX_KEY_BYTES:
        return [(field, f"{pub} is {pub.stat().st_size:,} bytes, not a public key", "check the path")]
    text = pub.read_bytes().decode("utf-8", "replace").strip()
    if "PRIVATE KEY" in text:
        return [(field, f"{pub} is a PRIVATE key; never send it to a node",
                 "point ssh.public_key at the .pub file")]
    if not PUBLIC_KEY.fullmatch(text):
        return [(field, f"{pub} is not one OpenSSH public key line (type base64 [comment])",
                 "use the .pub file ssh-keygen wrote")]
    return []


def public_key_text(ssh: Any, ws: "Workspace", comment: str) -> str:
    """The public key installed on new nodes: the user's when the spec names one, else the
    workspace pair (generated on first use)."""
    pub, _ = key_files(ssh)
    if pub is not None:
        return pub.read_text().strip()
    return ws.ensure_ssh_key(comment=comment)


def private_key_path(ssh: Any, ws: "Workspace") -> str:
    """The private key ssh and Ansible log in with: the user's, else the workspace's."""
    _, priv = key_files(ssh)
    return str(priv) if priv is not None else str(ws.ssh_private_key)
