"""Logging: text or JSON lines (``LOG_FORMAT``), the context of each line, and redaction.

Every handler :func:`setup_logging` installs carries two filters:

* :class:`ContextFilter` adds the context that applies to the line (interaction id, guild id,
  user id, job id, task id, shard), from :mod:`contextvars` set where an interaction or a job is
  handled (:func:`bind`); each asyncio task has its own copy, so concurrent commands and polls
  never mix them up.
* :class:`RedactionFilter` removes secrets from the final text, arguments and tracebacks
  included, whatever logger emitted the line: the configured secrets (the Discord token, the
  default key, database passwords), the API keys the bot decrypts (:meth:`RedactionFilter.add`,
  the most recent :data:`bot.redaction.KNOWN_SECRETS_LIMIT`), and by their shape: anything
  key-shaped, passwords in database URLs, and interaction tokens, bare (they all begin with
  ``aW50ZXJhY3Rpb246``), in webhook URLs (``/webhooks/<application id>/<token>``,
  ``/interactions/<id>/<token>/callback``) and in gateway payloads (``"token": "..."``).
  Interaction tokens are never added one by one: a busy bot sees thousands an hour.

Filters sit on the handlers rather than on loggers because a logger's filters do not see the
records that its children propagate to it: a library's DEBUG line would pass unfiltered.
"""

from __future__ import annotations

import contextlib
import contextvars
import logging
import re
import sys
from collections.abc import Iterable, Iterator
from typing import Any, Literal

from pythonjsonlogger.json import JsonFormatter

from bot.redaction import KNOWN_SECRETS_LIMIT, REDACTED, KnownSecrets, redact

LogFormat = Literal["text", "json"]

TEXT_FORMAT = "%(asctime)s %(levelname)-8s %(name)s: %(message)s"

CONTEXT_FIELDS = ("interaction_id", "guild_id", "user_id", "job_id", "task_id", "shard")
"""The context a line may carry, as JSON fields (absent when they do not apply)."""

_context: dict[str, contextvars.ContextVar[int | str | None]] = {
    name: contextvars.ContextVar(f"log_{name}", default=None) for name in CONTEXT_FIELDS
}

_URL_PASSWORD = re.compile(r"(?i)\b([a-z][a-z0-9+.-]*://[^:/@\s]*:)[^@/\s]+@")
_TOKEN_FIELD = re.compile(r"""(?i)(["']token["']\s*:\s*["'])[^"']+""")
_AUTHORIZATION = re.compile(
    r"(?i)(\bauthorization['\"]?\s*[:=]\s*['\"]?(?:bot\s+|bearer\s+)?)[^\s'\",}]+"
)
_DISCORD_TOKEN_SHAPED = re.compile(r"\b[A-Za-z0-9_-]{20,}\.[A-Za-z0-9_-]{6}\.[A-Za-z0-9_-]{20,}\b")


@contextlib.contextmanager
def bind(**context: int | str | None) -> Iterator[None]:
    """Attach ``context`` (names from :data:`CONTEXT_FIELDS`) to every line logged inside.

    Example: ``with bind(job_id=job.id, task_id=job.task_id): ...``. The values are restored on
    exit; inside a task of its own (a command, a poll) the context ends with the task anyway.

    Raises:
        KeyError: a name outside :data:`CONTEXT_FIELDS`.
    """
    tokens = [(_context[name], _context[name].set(value)) for name, value in context.items()]
    try:
        yield
    finally:
        for var, token in reversed(tokens):
            var.reset(token)


def set_context(**context: int | str | None) -> None:
    """Set context for the rest of the current task (a command's task, which then ends).

    Raises:
        KeyError: a name outside :data:`CONTEXT_FIELDS`.
    """
    for name, value in context.items():
        _context[name].set(value)


class ContextFilter(logging.Filter):
    """Adds the context fields that are set (:func:`bind`) to each record; drops nothing."""

    def filter(self, record: logging.LogRecord) -> bool:
        """Copy the set context variables onto ``record``; always True."""
        for name, var in _context.items():
            value = var.get()
            if value is not None and not hasattr(record, name):
                setattr(record, name, value)
        return True


class RedactionFilter(logging.Filter):
    """Removes secrets from each record's message, arguments, traceback and stack.

    The message is rendered (``msg % args``) and redacted once, so a secret split across
    arguments cannot slip through; the record then carries the redacted text and no arguments.

    Args:
        secrets: values to remove wherever they appear, for good (the Discord token, the
            default API key, database passwords). Values shorter than 4 characters are ignored
            (they would erase ordinary words).
        limit: secrets learnt with :meth:`add` kept at most, the least recently seen
            forgotten first (:data:`bot.redaction.KNOWN_SECRETS_LIMIT`).
    """

    def __init__(self, secrets: Iterable[str] = (), *, limit: int = KNOWN_SECRETS_LIMIT) -> None:
        super().__init__()
        self._secrets = KnownSecrets(secrets, limit=limit)

    @property
    def known(self) -> int:
        """How many secret values the filter holds, configured and learnt.

        A property rather than ``__len__``, which would make an empty filter falsy.
        """
        return len(self._secrets)

    def add(self, secret: str) -> None:
        """Remove ``secret`` from later lines (an API key the bot just decrypted).

        Learnt, not configured: kept while among the ``limit`` most recently added.
        """
        self._secrets.learn(secret)

    @property
    def pattern(self) -> re.Pattern[str] | None:
        """The compiled pattern of the known secrets that are not single words (None: none).

        The same object from one line to the next until the set changes.
        """
        return self._secrets.pattern

    def redact(self, text: str) -> str:
        """Return ``text`` without any secret this filter knows or recognises by shape."""
        text = redact(self._secrets.sub(text))
        # Cheap substring tests first: a DEBUG line costs ~40 us less when nothing can match.
        if "://" in text and "@" in text:
            text = _URL_PASSWORD.sub(rf"\1{REDACTED}@", text)
        folded = text.lower()
        if "token" in folded:
            text = _TOKEN_FIELD.sub(rf"\1{REDACTED}", text)
        if "authorization" in folded:
            text = _AUTHORIZATION.sub(rf"\1{REDACTED}", text)
        return _DISCORD_TOKEN_SHAPED.sub(REDACTED, text)

    def filter(self, record: logging.LogRecord) -> bool:
        """Redact ``record`` in place; always True (a line is never dropped, only cleaned)."""
        try:
            message = record.getMessage()
        except Exception:  # a bad format string: keep what can be shown
            message = f"{record.msg!s} {record.args!r}"
        record.msg, record.args = self.redact(message), None
        if record.exc_info:
            formatted = logging.Formatter().formatException(record.exc_info)
            record.exc_text, record.exc_info = self.redact(formatted), None
        elif record.exc_text:
            record.exc_text = self.redact(record.exc_text)
        if record.stack_info:
            record.stack_info = self.redact(record.stack_info)
        return True


def json_formatter() -> logging.Formatter:
    """The JSON formatter: one object per line.

    Fields: ``time`` (UTC, ISO 8601 to the microsecond), ``level``, ``logger``, ``message``, then
    the context fields that apply and ``exc_info`` for a traceback.
    """
    return JsonFormatter(
        "{levelname}{name}{message}",
        style="{",
        rename_fields={"levelname": "level", "name": "logger"},
        timestamp="time",  # UTC, ISO 8601 with microseconds
        json_ensure_ascii=False,
    )


HANDLER_NAME = "genbot"
"""The name of the root handler :func:`setup_logging` installs (and replaces on a new call)."""


def setup_logging(
    level: int, fmt: LogFormat = "text", secrets: Iterable[str] = (), stream: Any = None
) -> RedactionFilter:
    """Log to ``stream`` (stderr) at ``level`` in ``fmt``, every line context-tagged and redacted.

    Replaces the handler a previous call installed (idempotent); handlers others attached to
    the root logger (a test runner's capture) are left alone. Python's warnings are logged too
    (``logging.captureWarnings``), so a library's warning is one line of the chosen format,
    redacted like any other, never raw text in the middle of JSON lines.

    Args:
        level: a :mod:`logging` level number.
        fmt: ``"text"`` (human lines) or ``"json"`` (one object per line).
        secrets: values never to print (see :class:`RedactionFilter`).
        stream: where lines go; ``sys.stderr`` when None.

    Returns:
        The redaction filter, so that secrets learnt later can be added to it.
    """
    handler = logging.StreamHandler(stream if stream is not None else sys.stderr)
    handler.set_name(HANDLER_NAME)
    handler.setFormatter(json_formatter() if fmt == "json" else logging.Formatter(TEXT_FORMAT))
    redaction = RedactionFilter(secrets)
    handler.addFilter(ContextFilter())
    handler.addFilter(redaction)
    root = logging.getLogger()
    for old in list(root.handlers):
        if old.get_name() == HANDLER_NAME:
            root.removeHandler(old)
    root.addHandler(handler)
    root.setLevel(level)
    logging.captureWarnings(True)
    return redaction
