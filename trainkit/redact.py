"""The one redaction rule for URLs: credentials in a URL never reach a message, a log or a record.

A staging URL may carry credentials in two places: the userinfo (`https://user:pass@host/`,
`s3://AKIA...:secret@bucket/`) and the query of a presigned URL (AWS SigV4 `X-Amz-Signature`,
`X-Amz-Credential`, `X-Amz-Security-Token`; SigV2 `AWSAccessKeyId`/`Signature`; OSS
`OSSAccessKeyId`/`Signature`/`security-token`; COS `q-signature`/`q-ak`; OBS `AccessKeyId`). Both
become `***`; the scheme, host, path and the other parameters stay, so the message still says
which object it is about.

    redact_url(url)    one URL
    redact(text)       every URL inside a message (what the CLI prints, what errors carry)
"""

from __future__ import annotations

import re
import urllib.parse

MASK = "***"
# A query parameter whose name says it is a secret or part of a signature (case-insensitive).
_SECRET_PARAM = re.compile(r"(?i).*(signature|credential|token|secret|password|passwd|accesskey|"
                           r"access_key|keyid|key_id|apikey|api_key|q-ak|sig)")
_URL = re.compile(r"[A-Za-z][A-Za-z0-9+.-]*://[^\s'\"<>`]+")
# A query parameter outside a whole URL (a library quoting only the path and query of one).
_PARAM = re.compile(r"([?&])([^=&?#\s'\"]+)=([^&#\s'\"]*)")


def redact_url(url: str) -> str:
    """`url` with its userinfo and any secret query parameters replaced by `***`."""
    try:
        parts = urllib.parse.urlsplit(url)
    except ValueError:  # e.g. an invalid IPv6 netloc: mask everything between :// and the path
        return re.sub(r"://[^/?#]*", f"://{MASK}", url, count=1)
    netloc = parts.netloc
    if "@" in netloc:
        netloc = MASK + "@" + netloc.rsplit("@", 1)[1]
    query = parts.query
    if query:
        pairs = [p.split("=", 1) if "=" in p else [p] for p in query.split("&")]
        query = "&".join(p[0] + (("=" + (MASK if _secret(p[0]) else p[1])) if len(p) == 2 else "")
                         for p in pairs)
    fragment = parts.fragment
    if fragment and "=" in fragment:  # some presigners put the signature after '#'
        fragment = MASK
    if (netloc, query, fragment) == (parts.netloc, parts.query, parts.fragment):
        return url
    return urllib.parse.urlunsplit((parts.scheme, netloc, parts.path, query, fragment))


def _secret(name: str) -> bool:
    return _SECRET_PARAM.match(urllib.parse.unquote(name)) is not None


def redact(text: str) -> str:
    """`text` with every URL in it passed through `redact_url`."""
    if "://" in text:
        text = _URL.sub(lambda m: redact_url(m.group(0)), text)
    if "=" in text:
        text = _PARAM.sub(lambda m: m.group(0) if not _secret(m.group(2)) or m.group(3) == MASK
                          else f"{m.group(1)}{m.group(2)}={MASK}", text)
    return text
