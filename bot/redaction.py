"""Redaction of secrets from text that may be logged or shown: one marker, one rule.

Neutral ground for the client (errors carrying the service's messages), the log filter, the
settings (database URLs) and the storage engines (connection errors), so that none of them
imports another for it.

Two kinds of secret are removed. Those recognisable by their shape (bearer tokens, key-shaped
words, Discord interaction tokens and the webhook URLs that carry them) are caught by a pattern,
whoever created them and however many there are. The others are known values
(:class:`KnownSecrets`): the configured ones (the Discord token, the default key, database
passwords) and the API keys the bot decrypts, the latter bounded in number so that the cost of
a log line stays flat however long the bot runs.
"""

from __future__ import annotations

import re
import threading
from collections import OrderedDict
from collections.abc import Iterable
from typing import Final

REDACTED = "[redacted]"

_BEARER = re.compile(r"(?i)\bbearer\s+[^\s\"',;]+")
_KEY_SHAPED = re.compile(
    r"(?<![A-Za-z0-9_-])[A-Za-z]{2,12}[-_](?=[A-Za-z0-9_-]*\d)[A-Za-z0-9_-]{16,}"
)
"""A word prefix (``sk-``, ``gk_live_``...) then 16+ letters, digits, ``-`` or ``_`` with a digit:
an API key's shape (docs/genapi.md §5.2: keys begin with a fixed prefix)."""

_INTERACTION_TOKEN = re.compile(r"aW50ZXJhY3Rpb246[A-Za-z0-9_-]*")
"""A Discord interaction token: base64 of ``interaction:<id>:<secret>``, so it always begins
with ``aW50ZXJhY3Rpb246`` (base64 of ``interaction:``), whatever its id and secret."""

_WEBHOOK_TOKEN = re.compile(r"(/webhooks/\d+/)[^/?#\s\"']+")
"""An interaction's (or a webhook's) token in its URL: ``/webhooks/<application id>/<token>``."""

_CALLBACK_TOKEN = re.compile(r"(/interactions/\d+/)[^/?#\s\"']+")
"""An interaction token in the callback URL: ``/interactions/<id>/<token>/callback``."""

KNOWN_SECRETS_LIMIT: Final = 10_000
"""Learnt secrets (API keys the bot decrypted) remembered at most; the least recently seen is
forgotten first. Configured secrets do not count and are never forgotten."""

ODD_SECRETS_LIMIT: Final = 64
"""Of those, learnt secrets that are not one word (a space, a ``.`` or ``=`` inside) kept at
most: they go into a compiled alternation whose size is its cost. API keys are words."""

MIN_SECRET_LENGTH: Final = 4
"""Shorter values are ignored: they would erase ordinary words."""

_WORD_CHARS: Final = frozenset("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789_-")
_SEPARATORS: Final = frozenset("_-")


def redact(text: str, known: Iterable[str] = ()) -> str:
    """Return ``text`` without secrets: the ``known`` keys and those recognised by shape.

    Recognised by shape: bearer tokens, key-shaped words, Discord interaction tokens and the
    tokens in webhook and interaction callback URLs.

    Args:
        text: a message from the service, or a log line.
        known: secrets to remove wherever they appear (the request's key, the default key);
            values shorter than :data:`MIN_SECRET_LENGTH` are ignored. A few: for many, see
            :class:`KnownSecrets`.

    Returns:
        ``text`` with each secret replaced by ``[redacted]``.
    """
    for secret in sorted({k for k in known if len(k) >= MIN_SECRET_LENGTH}, key=len, reverse=True):
        text = text.replace(secret, REDACTED)
    text = _BEARER.sub(f"Bearer {REDACTED}", text)
    if "/webhooks/" in text or "/interactions/" in text:
        text = _WEBHOOK_TOKEN.sub(rf"\1{REDACTED}", text)
        text = _CALLBACK_TOKEN.sub(rf"\1{REDACTED}", text)
    text = _INTERACTION_TOKEN.sub(REDACTED, text)
    return _KEY_SHAPED.sub(REDACTED, text)


def _is_word(secret: str) -> bool:
    return all(ch in _WORD_CHARS for ch in secret)


class KnownSecrets:
    """Secret values to remove from text, bounded, at a cost per text that does not grow with them.

    Two groups: *words* (letters, digits, ``-``, ``_``: API keys) are kept in a set and found by
    one pattern of word runs, each run looked up whole and from each ``-`` or ``_`` in it, so
    a key glued behind a separator (``x_<key>``) or before anything (``<key>.``) is found too;
    a key glued behind a letter or digit is not (no separator to start from). The *others*
    (a password with punctuation, a phrase) are one compiled alternation. Each pattern is
    compiled again only when its group changes, on the next text, never per text.

    Args:
        configured: secrets kept for good (from the settings).
        limit: learnt secrets kept at most (:data:`KNOWN_SECRETS_LIMIT`); the least recently
            added or seen again is forgotten first. At most :data:`ODD_SECRETS_LIMIT` of them
            (fewer if ``limit`` is smaller) may be non-words.
    """

    def __init__(self, configured: Iterable[str] = (), *, limit: int = KNOWN_SECRETS_LIMIT) -> None:
        self._lock = threading.Lock()
        self._limit = limit
        self._configured: set[str] = set()
        self._learnt_words: OrderedDict[str, None] = OrderedDict()
        self._learnt_odd: OrderedDict[str, None] = OrderedDict()
        self._words: set[str] = set()
        self._lengths: dict[int, int] = {}
        self._lengths_desc: tuple[int, ...] = ()
        self._runs: re.Pattern[str] | None = None
        self._odd: re.Pattern[str] | None = None
        self._odd_stale = False
        for secret in configured:
            self.configure(secret)

    def __len__(self) -> int:
        return len(self._configured) + len(self._learnt_words) + len(self._learnt_odd)

    def configure(self, secret: str) -> None:
        """Remove ``secret`` from every later text, for good (a setting's value)."""
        if len(secret) < MIN_SECRET_LENGTH:
            return
        with self._lock:
            if secret in self._configured:
                return
            self._learnt_words.pop(secret, None)
            if self._learnt_odd.pop(secret, None) is None:
                self._include(secret)
            self._configured.add(secret)

    def learn(self, secret: str) -> None:
        """Remove ``secret`` from later texts while it is among the ``limit`` most recent."""
        if len(secret) < MIN_SECRET_LENGTH:
            return
        with self._lock:
            if secret in self._configured:
                return
            group, cap = (
                (self._learnt_words, self._limit)
                if _is_word(secret)
                else (self._learnt_odd, min(self._limit, ODD_SECRETS_LIMIT))
            )
            if secret in group:
                group.move_to_end(secret)  # seen again: kept longer; nothing to compile
                return
            group[secret] = None
            self._include(secret)
            while len(group) > cap:
                oldest, _ = group.popitem(last=False)
                self._exclude(oldest)

    def _include(self, secret: str) -> None:
        if not _is_word(secret):
            self._odd_stale = True
            return
        self._words.add(secret)
        self._lengths[len(secret)] = self._lengths.get(len(secret), 0) + 1
        if self._lengths[len(secret)] == 1:
            self._lengths_desc = tuple(sorted(self._lengths, reverse=True))
            self._runs = re.compile(rf"[A-Za-z0-9_-]{{{min(self._lengths)},}}")

    def _exclude(self, secret: str) -> None:
        if not _is_word(secret):
            self._odd_stale = True
            return
        self._words.discard(secret)
        self._lengths[len(secret)] -= 1
        if self._lengths[len(secret)] == 0:
            del self._lengths[len(secret)]
            self._lengths_desc = tuple(sorted(self._lengths, reverse=True))
            shortest = min(self._lengths, default=None)
            self._runs = None if shortest is None else re.compile(rf"[A-Za-z0-9_-]{{{shortest},}}")

    @property
    def pattern(self) -> re.Pattern[str] | None:
        """The compiled alternation of the non-word secrets (None without any).

        Compiled when first needed after a change, then the same object until the next one.
        """
        if self._odd_stale:
            with self._lock:
                if self._odd_stale:
                    odd = [s for s in (*self._configured, *self._learnt_odd) if not _is_word(s)]
                    odd.sort(key=len, reverse=True)  # a longer secret first: none left half
                    self._odd = re.compile("|".join(map(re.escape, odd))) if odd else None
                    self._odd_stale = False
        return self._odd

    def sub(self, text: str) -> str:
        """Return ``text`` with every known secret replaced by ``[redacted]``."""
        odd = self.pattern
        if odd is not None:
            text = odd.sub(REDACTED, text)
        runs = self._runs
        if runs is not None:
            text = runs.sub(self._run, text)
        return text

    def _run(self, match: re.Match[str]) -> str:
        run = match.group()
        words = self._words
        if run in words:
            return REDACTED
        starts = [0]
        for at, ch in enumerate(run):
            if ch in _SEPARATORS:
                starts += (at, at + 1)
        out: list[str] = []
        done = 0
        for start in starts:
            if start < done:
                continue
            for length in self._lengths_desc:
                end = start + length
                if end <= len(run) and run[start:end] in words:
                    out += (run[done:start], REDACTED)
                    done = end
                    break
        if not out:
            return run
        out.append(run[done:])
        return "".join(out)
