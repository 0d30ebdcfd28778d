"""`trainkit check`: are credentials and tools in place, before anything runs (like `sky check`).

    run_checks(clouds, env, home, need_backend, need_terraform) -> dict
        {"ok", "clouds": [presence + "ok"], "tools": {"terraform": {...}, "ansible": {...}},
         "problems": [{"kind": "credentials" | "tool", "what", "fix"}]}

Credentials are judged by name only (trainkit.clouds.credentials.presence): no value is read out, printed
or sent anywhere, and no cloud is contacted. Terraform must be at least
render.TERRAFORM_MIN_VERSION, the same constant the rendered stack's `required_version` uses.
"""

from __future__ import annotations

import importlib.util
import os
import re
from pathlib import Path
from typing import Any, Mapping

from trainkit.clouds.base import Cloud
from trainkit.clouds.credentials import describe_sets, presence
from trainkit.errors import MissingToolError
from trainkit.provision.playbook import find_ansible_playbook
from trainkit.stack.render import TERRAFORM_MIN_VERSION
from trainkit.stack.terraform import terraform_path, terraform_version
from trainkit.util.dist import pip_install

TERRAFORM_INSTALL = "https://developer.hashicorp.com/terraform/install"


def version_tuple(text: str | None) -> tuple[int, ...]:
    """"1.11.4" -> (1, 11, 4); () when no version number is in `text`."""
    m = re.search(r"(\d+)\.(\d+)(?:\.(\d+))?", text or "")
    return tuple(int(g) for g in m.groups() if g is not None) if m else ()


def terraform_status() -> dict[str, Any]:
    """{found, path, version, minimum, ok}: terraform on PATH (or TRAINKIT_TERRAFORM), recent enough."""

    try:
        path = terraform_path()
    except MissingToolError:
        return {"found": False, "path": None, "version": None, "minimum": TERRAFORM_MIN_VERSION, "ok": False}
    version = terraform_version(path)
    ok = version_tuple(version) >= version_tuple(TERRAFORM_MIN_VERSION)
    return {"found": True, "path": path, "version": version, "minimum": TERRAFORM_MIN_VERSION, "ok": ok}


def ansible_status() -> dict[str, Any]:
    """{found, path, runner, ok}: ansible-playbook (PATH or beside this Python) and ansible_runner."""

    try:
        path = find_ansible_playbook()
    except MissingToolError:
        path = None
    runner = importlib.util.find_spec("ansible_runner") is not None
    return {"found": path is not None, "path": path, "runner": runner, "ok": bool(path) and runner}


def _cloud_problems(c: dict[str, Any], room: Cloud, need_backend: bool) -> list[dict[str, str]]:
    out = []
    if not c["provider"]["ok"]:
        out.append({"kind": "credentials", "what": f"{room.title}: no credentials for the provider",
                    "fix": f"export {describe_sets(room.credentials)}"})
    if need_backend and not c["backend"]["ok"]:
        out.append({"kind": "credentials",
                    "what": f"{room.title}: no credentials for the {room.backend_type} state backend",
                    "fix": f"export {describe_sets(room.backend_credentials)}"})
    return out


def run_checks(rooms: list[Cloud], env: Mapping[str, str] | None = None, home: Path | None = None,
               *, need_backend: bool = False, need_terraform: bool = True,
               strict_clouds: bool = True) -> dict[str, Any]:
    """Check `rooms`' credentials and the tools. `strict_clouds=False` reports clouds without
    counting them as problems (plain `trainkit check`: every cloud listed, only tools required)."""
    env = os.environ if env is None else env
    home = Path.home() if home is None else home
    problems: list[dict[str, str]] = []
    cloud_rows = []
    for room in rooms:
        row = presence(room, env, home)
        found = _cloud_problems(row, room, need_backend)
        row["ok"] = not found
        cloud_rows.append(row)
        if strict_clouds:
            problems += found
    tools = {"ansible": ansible_status()}
    if need_terraform:
        tools["terraform"] = terraform_status()
        tf = tools["terraform"]
        if not tf["found"]:
            problems.append({"kind": "tool", "what": "terraform is not installed",
                             "fix": f"install Terraform >= {TERRAFORM_MIN_VERSION} ({TERRAFORM_INSTALL})"})
        elif not tf["ok"]:
            problems.append({"kind": "tool", "what": f"terraform {tf['version'] or '(unknown version)'} is older than "
                                     f"{TERRAFORM_MIN_VERSION}, which the rendered stack requires",
                             "fix": f"install Terraform >= {TERRAFORM_MIN_VERSION} ({TERRAFORM_INSTALL})"})
    if not tools["ansible"]["ok"]:
        problems.append({"kind": "tool", "what": "ansible-playbook or ansible-runner is not installed",
                         "fix": pip_install("control")})
    return {"ok": not problems, "clouds": cloud_rows, "tools": tools, "problems": problems}
