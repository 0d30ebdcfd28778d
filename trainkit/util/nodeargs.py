"""Values handed to a process on a node, checked as what they are and passed as one argv word.

A value trainkit puts on a node process's command line (the supervisor, the doctor probe, the
all-reduce bench, torchrun's `trainkit run`) must reach that process as the value it is, never as
an option: `--notice-url=--help` once made the supervisor print its help and exit, and the run was
reported reclaimed 70 s later. Two rules, used by every argv builder:

    http_url(value, field)  the value when it is an http:// or https:// URL with a host (and no
                            space or control character); InputError (exit 2) naming the field
    option(name, value)     `--name=value`: one word, read by argparse and click as that option's
                            value whatever the value starts with (`-`, `--`, `-h`)

Positional values go after `--` (or are absolute paths trainkit built).
"""

from __future__ import annotations

from urllib.parse import urlsplit

from trainkit.errors import InputError


def http_url(value: str, field: str) -> str:
    """`value` unchanged when it is an http(s) URL with a host; InputError naming `field` otherwise."""
    text = str(value)
    ok = bool(text) and all(c.isprintable() and not c.isspace() for c in text)
    if ok:
        try:
            parts = urlsplit(text)
            parts.port  # noqa: B018 - raises ValueError for a port that is not a number in range
        except ValueError:
            ok = False
        else:
            ok = parts.scheme in ("http", "https") and bool(parts.hostname) and text.startswith(parts.scheme + "://")
    if not ok:
        raise InputError(f"{field} {text!r}: not an http:// or https:// URL with a host",
                         fix=f"give the full URL, e.g. {field} http://169.254.169.254/latest/meta-data/spot/"
                             "instance-action, or drop it to poll the cloud's own spot notice")
    return text


def option(name: str, value: object) -> str:
    """`--name=value` as one argv word (never two, so the value cannot be read as an option).
    ValueError for a value of exactly `--`, the one value argparse drops from `--name=--` (Python
    3.11's _get_values removes it); callers pass checked values (paths are absolute)."""
    if str(value) == "--":
        raise ValueError(f"--{name}: '--' cannot be passed as a value")
    return f"--{name}={value}"
