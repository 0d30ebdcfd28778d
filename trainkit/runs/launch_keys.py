"""The launch keys of a train config (name aside), each checked: what trainkit reads to start a run,
not what the engine reads (trainkit.train.config.LAUNCH_KEYS; docs/runs.md). Each function takes
the config's path and the key's raw value and returns it checked, or raises InputError (exit 2)
naming `<path>: <key>` and the fix.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

from trainkit.errors import InputError
from trainkit.staging.section import load_section

ENV_NAME_RE = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")  # POSIX.1-2017 8.1, portable names
ENV_REF_RE = re.compile(r"\$(\{[A-Za-z_][A-Za-z0-9_]*\}?|[A-Za-z_][A-Za-z0-9_]*)")  # $NAME, ${NAME}: a shell's expansion
# What one argv/environment string may hold: no NUL (execve ends the string there), and Linux's
# MAX_ARG_STRLEN (32 pages = 128 KiB) per string.
ARG_STRLEN_MAX = 128 * 1024


def hang_after(path: Path, value: Any) -> float | None:
    """`recover: {hang_after_s: N}`: the watchdog's fixed window in seconds (0: off); None (the
    default) derives it from the measured step time (trainkit/runs/watchdog.py). InputError naming
    the field for anything else."""
    from trainkit.runs.watchdog import HANG_FIXED_MIN_S, HANG_MAX_S

    got = (value or {}).get("hang_after_s") if isinstance(value, dict) else None
    if got is None:
        return None
    if isinstance(got, bool) or not isinstance(got, (int, float)) or not (
            got == 0 or HANG_FIXED_MIN_S <= got <= 24 * 3600):
        raise InputError(f"{path}: recover.hang_after_s: expected 0 (off) or seconds from {HANG_FIXED_MIN_S:g} to "
                         f"86400, got {got!r}", fix=f"leave it out: the window follows the step time, "
                                                  f"at most {HANG_MAX_S:g} s (docs/runs.md, \"Hung nodes\")")
    return float(got)


def elastic(path: Path, value: Any, command: str | None) -> bool:
    """`recover: {elastic: true|false}` (default false); InputError naming the field otherwise.
    Only the built-in engine resumes at another world size (it reshards its checkpoints and keeps
    the global batch): a `command:` job cannot be elastic."""
    if value is None:
        return False
    if not isinstance(value, dict) or set(value) - {"elastic", "hang_after_s"}:
        raise InputError(f"{path}: recover: expected a mapping of elastic (true|false) and hang_after_s "
                         f"(seconds), got {value!r}", fix="recover: keys are elastic and hang_after_s")
    elastic = value.get("elastic", False)
    if not isinstance(elastic, bool):
        raise InputError(f"{path}: recover.elastic: expected true or false, got {elastic!r}")
    if elastic and command is not None:
        raise InputError(f"{path}: recover.elastic: only the built-in engine resumes at another world size",
                         fix="remove recover.elastic, or run the job with the built-in engine (no `command:`)")
    return elastic


def string_list(path: Path, key: str, value: Any) -> tuple[str, ...]:
    """A list of strings; InputError for one string (it was read character by character)."""
    if value is None:
        return ()
    if not isinstance(value, list) or not all(isinstance(v, (str, int, float)) for v in value):
        raise InputError(f"{path}: {key}: expected a list ([a, b], or one '- item' per line), got {value!r}",
                         fix=f"write {key}: [{value!r}]" if isinstance(value, str) else None)
    return tuple(str(v) for v in value)


def stage(path: Path, value: Any) -> Any:
    """The job's `stage:` section (the fields of the spec's `data:`), or None when absent/empty."""
    if value is None:
        return None

    section = load_section(value, f"{path}: stage")
    return section if section.sources else None


def text(path: Path, launch: dict, key: str) -> str | None:
    value = launch.get(key)
    if value is None:
        return None
    if isinstance(value, list) and all(isinstance(v, str) for v in value):
        value = "\n".join(value)
    if not isinstance(value, str) or not value.strip():
        raise InputError(f"{path}: {key}: give a shell command (a string or a list of lines)")
    return value


def workdir(path: Path, value: Any) -> Path | None:
    """The folder `workdir:` names (relative to the config), resolved; InputError naming the field
    for anything but a folder of the user's project: not a folder, a link loop, `/`, the home
    folder or one above it (copied to every node, and `/` holds /proc, which changes as it is read)."""
    if value is None:
        return None
    fix = "a path relative to the config file, e.g. workdir: . (your project's folder)"
    if not isinstance(value, str) or not value.strip():
        raise InputError(f"{path}: workdir: {value!r} is not a folder", fix=fix)
    try:
        folder = (path.parent / value).resolve(strict=True)
    except (OSError, RuntimeError) as err:  # RuntimeError: a symbolic link loop (pathlib, Python 3.11)
        why = getattr(err, "strerror", None) or str(err)
        raise InputError(f"{path}: workdir: {value!r} cannot be followed to a folder ({why})", fix=fix) from None
    if not folder.is_dir():
        raise InputError(f"{path}: workdir: {value!r} is not a folder", fix=fix)
    home = Path.home().resolve()
    if folder == Path("/") or folder == home or folder in home.parents:
        raise InputError(f"{path}: workdir: {value!r} is {folder}, which trainkit would copy whole to every "
                         "node", fix=fix)
    return folder


FAULT_HOOK_PREFIX = "TRAINKIT_FAULT_"


def env(path: Path, value: Any) -> dict[str, str]:
    if value is None:
        return {}
    if not isinstance(value, dict):
        raise InputError(f"{path}: env: give a mapping NAME: value")
    out = {}
    for key, val in value.items():
        if not isinstance(key, str) or not ENV_NAME_RE.fullmatch(key):
            raise InputError(f"{path}: env: {key!r} is not an environment variable name")
        # TRAINKIT_* are the launch environment trainkit sets (docs/runs.md); the engine's fault
        # hooks (TRAINKIT_FAULT_*, docs/environment.md: test only) are read, never set, by trainkit
        if key.startswith("TRAINKIT_") and not key.startswith(FAULT_HOOK_PREFIX):
            raise InputError(f"{path}: env.{key}: TRAINKIT_* variables are set by trainkit",
                             fix="rename the variable (TRAINKIT_RUN_ID, TRAINKIT_CHECKPOINT_DIR ... are in every "
                                 "job's environment already: `trainkit docs environment`)")
        if isinstance(val, (dict, list)) or val is None:
            raise InputError(f"{path}: env.{key}: give a string or number")
        out[key] = check_env_value(path, key, str(val))
        ref = ENV_REF_RE.search(out[key])
        if ref:  # exported literally: `PATH: /opt/conda/bin:$PATH` left the job no PATH at all
            raise InputError(f"{path}: env.{key}: {ref.group(0)} would be passed as those characters, not "
                             "expanded (env values are literals)",
                             fix=f"set it in the shell command instead, e.g. command: export {key}=\"{out[key]}\"; "
                                 "python train.py (or in setup:)")
    return out


def check_env_value(path: Path, key: str, value: str) -> str:
    """`value` when the OS can pass it as `KEY=value`; InputError naming env.KEY otherwise."""
    if "\0" in value:
        raise InputError(f"{path}: env.{key}: the value holds a NUL character, which no program "
                         "can receive in its environment", fix="remove it from the value")
    size = len(f"{key}={value}".encode())
    if size > ARG_STRLEN_MAX:
        raise InputError(f"{path}: env.{key}: the value is {size} bytes; the OS passes at most "
                         f"{ARG_STRLEN_MAX} bytes per variable (Linux MAX_ARG_STRLEN)",
                         fix="put large values in a file the job reads, and give its path in env")
    return value
