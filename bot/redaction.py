"""Redaction of secrets from text that may be logged or shown: one marker, one rule.

Neutral ground for the client (errors carrying the service's messages), the log filter, the
settings (database URLs) and the storage engines (connection errors), so that none of them
imports another for it.
"""

from __future__ import annotations

import re
from collections.abc import Iterable

REDACTED = "[redacted]"

_BEARER = re.compile(r"(?i)\bbearer\s+[^\s\"',;]+")
_KEY_SHAPED = re.compile(
    r"(?<![A-Za-z0-9_-])[A-Za-z]{2,12}[-_](?=[A-Za-z0-9_-]*\d)[A-Za-z0-9_-]{16,}"
)
"""A word prefix (``sk-``, ``gk_live_``...) then 16+ letters, digits, ``-`` or ``_`` with a digit:
an API key's shape (spec part 5: keys begin with a fixed prefix)."""


def redact(text: str, known: Iterable[str] = ()) -> str:
    """Return ``text`` without secrets: the ``known`` keys, bearer tokens, key-shaped words.

    Args:
        text: a message from the service.
        known: secrets to remove wherever they appear (the request's key, the default key);
            empty strings are ignored.

    Returns:
        ``text`` with each secret replaced by ``[redacted]``.
    """
    for secret in sorted({k for k in known if len(k) >= 4}, key=len, reverse=True):
        text = text.replace(secret, REDACTED)
    text = _BEARER.sub(f"Bearer {REDACTED}", text)
    return _KEY_SHAPED.sub(REDACTED, text)
