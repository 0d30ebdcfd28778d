"""Terraform's own local state file, checked before terraform runs on it.

With the local backend, `terraform/terraform.tfstate` is the cluster's only record of what it
created. Terraform reads a 0-byte file as "no state" (`state list`: "No state file was found!",
`state pull`: nothing), so a state emptied by a crash or a full disk would make destroy report
"nothing to destroy" and forget a cluster that still bills; garbage or a non-UTF-8 file fails
every command with terraform's parse error. `check_state(folder)` refuses all of these before any
terraform command runs (exit 3, naming the file and the backup terraform keeps beside it,
`terraform.tfstate.backup`: the state before its last change). Nothing is moved or deleted here.

State format: terraform's internal/states/statefile (version 4 since Terraform 0.12: a JSON object
with "version", "serial", "lineage", "resources" [] and "outputs" {}; versions 1-3 are upgraded
on read, a higher version is from a newer Terraform).
"""

from __future__ import annotations

import json
from pathlib import Path

from trainkit import errors
from trainkit.errors import TrainkitError

STATE = "terraform.tfstate"
BACKUP = "terraform.tfstate.backup"
STATE_VERSION = 4  # the newest state format this Terraform (>= 1.10) writes


def state_problem(path: Path) -> str | None:
    """What is wrong with the state file at `path` ("0 bytes", "not UTF-8", ...), or None when it
    is absent or reads as a state terraform can load. Reads only."""
    try:
        raw = path.read_bytes()
    except FileNotFoundError:
        return None
    except OSError as err:
        return f"cannot be read ({err.strerror})"
    if not raw.strip():
        return f"is empty ({len(raw)} bytes): terraform would read it as no state at all"
    try:
        data = json.loads(raw.decode("utf-8"))
    except UnicodeDecodeError as err:
        return f"is not UTF-8 text (byte {err.start})"
    except ValueError as err:
        return f"is not JSON ({err})"
    if not isinstance(data, dict):
        return f"is a JSON {type(data).__name__}, not a state object"
    version = data.get("version")
    if not isinstance(version, int) or isinstance(version, bool) or version < 1:
        return "has no state format version (\"version\")"
    if version > STATE_VERSION:
        return f"is state format {version}, written by a newer Terraform than this one reads"
    if not isinstance(data.get("resources", []), list) or not isinstance(data.get("outputs", {}), dict):
        return "has \"resources\" or \"outputs\" of the wrong type"
    return None


def check_state(folder: Path, phase: int = errors.PLAN) -> None:
    """TrainkitError (exit 3, or `phase`) when `folder/terraform.tfstate` exists and is damaged,
    naming it and what terraform's backup beside it holds; nothing is changed."""
    path = Path(folder) / STATE
    problem = state_problem(path)
    if problem is None:
        return
    backup = path.with_name(BACKUP)
    moved = f"{path}.damaged"
    if backup.is_file() and state_problem(backup) is None:
        held = _resources(backup)
        fix = (f"terraform keeps the state as it was before its last change in {backup} ({held} resource(s)); "
               f"keep the damaged file and restore that one: `mv {path} {moved} && cp {backup} {path}`, then "
               "run the command again (a change made by that last run is then missing from the state: "
               "`trainkit status SPEC` shows what the cloud holds)")
    else:
        why = "is damaged too" if backup.exists() else "does not exist"
        fix = (f"restore {path} from your own copy (terraform's backup, {backup}, {why}); do not destroy "
               "or re-apply until it is back: the cloud still holds what it recorded")
    raise TrainkitError(f"terraform state {path} {problem}; it is the cluster's only record of what it "
                        "created, so no terraform command was run on it", fix=fix, exit_code=phase)


def _resources(path: Path) -> int:
    try:
        return len(json.loads(path.read_text()).get("resources") or [])
    except (OSError, ValueError, AttributeError):
        return 0
