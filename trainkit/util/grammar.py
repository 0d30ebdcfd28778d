"""Strict grammars for user values that reach a shell, an ssh command line or a system file.

Each `check_*` function returns the value unchanged when it is in the grammar and raises
ValueError with a message that says what is wrong and how to write it otherwise (pydantic turns
the ValueError into a field-named problem). The grammars are deliberately narrow: a value that
passes is one plain shell word and one line, so quoting it (as every writer still does) is
defence in depth, not the only guard.

    address   IPv4, IPv6 (no zone id) or an RFC 1123 host name; never starts with '-'
    user      a POSIX login name (portable filename characters, not starting with '-')
    path      absolute, no whitespace, no shell metacharacters, no '..' component
"""

from __future__ import annotations

import ipaddress
import re

from trainkit.util.paths import node_path

# RFC 1123 section 2.1 (host names): labels of letters, digits and hyphens, 1-63 characters,
# not starting or ending with a hyphen; the whole name at most 253 characters (RFC 1035 2.3.4).
_LABEL = re.compile(r"[A-Za-z0-9](?:[A-Za-z0-9-]{0,61}[A-Za-z0-9])?")  # used with fullmatch
HOSTNAME_MAX = 253
# POSIX.1-2017 3.437 (User Name): characters from the portable filename character set (3.282),
# hyphen not first; 32 characters is shadow-utils' useradd limit (LOGIN_NAME_MAX-1 on Linux is
# larger, but useradd refuses longer names).
_USER = re.compile(r"[A-Za-z0-9_][A-Za-z0-9_.-]{0,31}")
# Absolute paths: only characters that are literal in every POSIX shell and in fstab fields.
_PATH = re.compile(r"/[A-Za-z0-9_./+@,=-]*")
PATH_MAX = 4095  # Linux PATH_MAX (4096) less the terminating NUL
# Folders a data disk or NAS must never be mounted over (the Filesystem Hierarchy Standard 3.0's
# top-level system folders).
SYSTEM_DIRS = frozenset({"/", "/bin", "/boot", "/dev", "/etc", "/lib", "/lib64", "/proc", "/root",
                         "/run", "/sbin", "/sys", "/usr", "/var", "/tmp", "/home", "/opt"})


def _shown(value: str) -> str:
    """The value as the message shows it: repr (control characters visible), at most 60 chars."""
    text = repr(value)
    return text if len(text) <= 60 else text[:57] + "...'"


def is_ip(value: str) -> bool:
    """True for an IPv4 or IPv6 address without a zone id."""
    if "%" in value:
        return False
    try:
        ipaddress.ip_address(value)
    except ValueError:
        return False
    return True


def is_hostname(value: str) -> bool:
    """True for an RFC 1123 host name (no trailing dot)."""
    if not value or len(value) > HOSTNAME_MAX:
        return False
    return all(_LABEL.fullmatch(label) for label in value.split("."))


def address_key(value: str) -> str:
    """One spelling per address, for telling two hosts apart: an IP in its compressed form
    (ipaddress: 2001:0db8:0::1 and 2001:db8::1 are one host), a host name lower-cased."""
    return str(ipaddress.ip_address(value)) if is_ip(value) else value.lower()


def check_address(value: str) -> str:
    """An address ssh can dial: IPv4, IPv6 or an RFC 1123 host name."""
    if not isinstance(value, str) or not value:
        raise ValueError("empty address; give an IPv4/IPv6 address or a host name")
    if value.startswith("-"):
        raise ValueError(f"{_shown(value)} starts with '-', which ssh would read as an option; "
                         "give an IPv4/IPv6 address or a host name")
    if is_ip(value) or is_hostname(value):
        return value
    raise ValueError(f"{_shown(value)} is not an IPv4/IPv6 address (no %zone) or an RFC 1123 host "
                     "name (letters, digits, '-' and '.'), e.g. 10.0.0.5 or gpu-a.lab.example.com")


def check_ip(value: str) -> str:
    """An IPv4 or IPv6 address (what /etc/hosts and the rendezvous endpoint need)."""
    if not isinstance(value, str) or not is_ip(value):
        raise ValueError(f"{_shown(value)} is not an IPv4 or IPv6 address, e.g. 10.20.0.11")
    return value


def check_user(value: str) -> str:
    """A POSIX login name."""
    if isinstance(value, str) and _USER.fullmatch(value):
        return value
    raise ValueError(f"{_shown(value)} is not a POSIX login name (letters, digits, '_', '.', '-', "
                     "not starting with '-', at most 32 characters), e.g. ubuntu")


def check_path(value: str) -> str:
    """An absolute path that is one literal shell word, returned normalised (paths.node_path:
    `//`, `.` and a trailing `/` collapsed) so every rule after this one judges the folder meant."""
    if not isinstance(value, str) or not value.startswith("/"):
        raise ValueError(f"{_shown(value)} must be an absolute path, e.g. /data")
    if len(value) > PATH_MAX:
        raise ValueError(f"path is {len(value)} characters; at most {PATH_MAX}")
    if ".." in value.split("/"):
        raise ValueError(f"{_shown(value)} contains a '..' component; write the path it means")
    bad = sorted({c for c in value if not _PATH.fullmatch("/" + c)})
    if bad:
        shown = " ".join(repr(c) for c in bad[:8])
        raise ValueError(f"{_shown(value)} contains {shown}: paths may hold only letters, digits "
                         "and _ . / + @ , = - (no spaces or shell characters), e.g. /opt/trainkit")
    return node_path(value)


def check_mount_point(value: str) -> str:
    """An absolute path (check_path) that is not a system folder such as / or /etc."""
    given, value = value, check_path(value)
    if value in SYSTEM_DIRS:
        shown = repr(given) if given == value else f"{given!r} (= {value!r})"
        raise ValueError(f"{shown} is a system folder; mounting over it would hide the OS's own "
                         "files. Use a folder of its own, e.g. /data or /mnt/shared")
    return value


# Characters a key path may not hold: ssh expands %-tokens in IdentityFile and ProxyCommand, and
# quotes, backslashes and $ or ` would change how ssh_config and /bin/sh read it.
_KEY_PATH_BAD = set("%\"'\\$`")


def check_key_path(value: str) -> str:
    """A key file path on this machine (may be relative or start with ~): one line, no quotes,
    no %, $, backslash or backtick, not starting with '-'."""
    if not isinstance(value, str) or not value.strip():
        raise ValueError("empty path; give the key file, e.g. ~/.ssh/id_ed25519")
    bad = sorted({c for c in value if c in _KEY_PATH_BAD or ord(c) < 32 or ord(c) == 127})
    if bad or value.startswith("-"):
        shown = " ".join(repr(c) for c in bad[:8]) or "a leading '-'"
        raise ValueError(f"{_shown(value)} contains {shown}, which ssh or a shell would read as "
                         "syntax; move the key to a plain path, e.g. ~/.ssh/id_ed25519")
    return value
