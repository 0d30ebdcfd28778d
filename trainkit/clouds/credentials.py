"""Credentials, asked of the cloud rooms: which are present, and what a provider's refusal means.

    presence(cloud, env, home)     -> dict   which variables / profile files of each credential set
                                             are present (names only: a value is never read out)
    explain_failure(cloud, output) -> TrainkitError | None
                                             one message for a terraform failure caused by missing,
                                             rejected or insufficient credentials, naming the cloud's
                                             variables (CredentialsError, exit 13, for missing or
                                             rejected ones); None when the output is about something else

Pure functions over data (the environment and a home folder are passed in); the variable names,
profile files and error patterns live in `trainkit/clouds/<cloud>.py`.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any, Mapping

from trainkit import clouds
from trainkit.clouds.base import Cloud, CredentialSet
from trainkit.errors import CredentialsError, TrainkitError


def set_presence(cs: CredentialSet, env: Mapping[str, str], home: Path) -> dict[str, Any]:
    """{label, ok, variables: {name: present}, files: {path: present}} for one credential set.

    ok when every value has one of its alternatives set (non-empty), or a profile file exists.
    """
    variables = {name: bool(env.get(name)) for alternatives in cs.variables for name in alternatives}
    files = {f: (home / f.removeprefix("~/")).is_file() for f in cs.files}
    all_vars = all(any(variables[n] for n in alternatives) for alternatives in cs.variables)
    return {"label": cs.label, "ok": bool(cs.variables) and all_vars or any(files.values()),
            "variables": variables, "files": files}


# Set (to 1) by the cloud controller's hand-off (trainkit/runs/handoff_cloud.py) in its loop's
# environment: that process's credentials come from the instance identity through the metadata
# service (AWS: the instance profile over IMDSv2), which no variable or file here shows.
INSTANCE_IDENTITY = "TRAINKIT_INSTANCE_IDENTITY"


def presence(cloud: Cloud, env: Mapping[str, str], home: Path) -> dict[str, Any]:
    """What is set for `cloud`: its provider's credential sets, its state backend's, its region.
    A provider or backend that reads no credentials (a room that lists no set) needs none: ok; on
    the controller (`env` has INSTANCE_IDENTITY=1) the instance identity is one more set, present."""
    identity = [{"label": "instance identity", "ok": True, "variables": {INSTANCE_IDENTITY: True}, "files": {}}] \
        if env.get(INSTANCE_IDENTITY) == "1" else []
    provider = [set_presence(cs, env, home) for cs in cloud.credentials] + identity
    backend = [set_presence(cs, env, home) for cs in cloud.backend_credentials] + identity
    return {"cloud": cloud.name, "title": cloud.title,
            "provider": {"ok": not provider or any(s["ok"] for s in provider), "sets": provider},
            "backend": {"type": cloud.backend_type, "ok": not backend or any(s["ok"] for s in backend),
                        "sets": backend},
            "region": {name: bool(env.get(name)) for name in cloud.region_variables}}


def describe_sets(sets: tuple[CredentialSet, ...]) -> str:
    """'A and B (or C with ~/.x)' style text naming the variables of each way to authenticate."""
    ways = []
    for cs in sets:
        names = " and ".join("/".join(alt) for alt in cs.variables)
        if cs.files:
            names += f"{' or ' if names else ''}{' / '.join(cs.files)}"
        ways.append(f"{names} ({cs.label})")
    return "; or ".join(ways)


def explain_failure(cloud_name: str, output: str) -> TrainkitError | None:
    """The one message for a credential/permission failure in terraform `output`, else None.

    The message quotes the first matching line (no secrets: providers never print key values)
    and names the variables of the cloud's provider and state backend.
    """
    try:
        cloud = clouds.get(cloud_name)
    except KeyError:
        return None
    for pattern, kind in cloud.credential_errors:
        line = next((ln.strip(" │\t") for ln in output.splitlines() if re.search(pattern, ln)), None)
        if line is None:
            continue
        if kind == "permission":
            return TrainkitError(
                f"{cloud.title} refused an operation: the credentials work but lack a permission\n"
                f"  {line[:300]}",
                fix="grant that permission to the user or role of these credentials (the full "
                    "log names the action and resource)")
        fix = f"set {describe_sets(cloud.credentials)} for the provider"
        if cloud.backend_credentials and cloud.backend_credentials != cloud.credentials:
            fix += (f"; the {cloud.backend_type} state backend reads "
                    f"{describe_sets(cloud.backend_credentials)}")
        return CredentialsError(
            f"{cloud.title} credentials are missing or were rejected\n  {line[:300]}",
            fix=fix + f"; `trainkit check --cloud {cloud.name}` shows what is set")
    return None
