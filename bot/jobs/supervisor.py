"""Keeps the bot's background tasks alive: restart on an unexpected exception, with backoff.

The poller, the catalogue refresh and the reservation sweep each run forever; one that ended
on an exception would leave the bot taking ``/video`` orders it never announces.
:func:`supervise` runs one of them and, when it raises, logs the exception with a short error
id (8 hex digits, as command errors in ``bot/discord/tree.py``) and starts it again after a backoff:
1 s, doubling to at most 60 s, back to 1 s once a run lasted a healthy minute. Cancellation
(shutdown) still stops it at once.

A locked database (an operator's ``sqlite3`` session, a ``VACUUM``: SQLite's ``SQLITE_BUSY``
after the busy timeout) is the failure an operator meets first; it is logged as one line that
says so, without a traceback, and only delays the task.

``discord.ext.tasks.loop`` was the alternative: it restarts only after a fixed list of network
exception types and stops on any other, sleeps on the real clock (no injected clock, so tests
would wait), and suits a fixed-interval body, which the poller is not.
"""

from __future__ import annotations

import logging
import secrets
import sqlite3
from collections.abc import Awaitable, Callable

from bot.clock import Clock

log = logging.getLogger(__name__)

FIRST_DELAY = 1.0
"""Seconds before the first restart."""

MAX_DELAY = 60.0
"""The longest wait between two restarts, seconds."""

HEALTHY_AFTER = 60.0
"""Seconds a run must last for the next failure to start again from :data:`FIRST_DELAY`."""


def database_busy(exc: BaseException) -> bool:
    """Whether ``exc`` is SQLite's "database is locked" (another connection holds the lock).

    SQLAlchemy wraps the driver's error; the driver's is its ``orig``.
    """
    exc = getattr(exc, "orig", None) or exc
    return isinstance(exc, sqlite3.OperationalError) and exc.sqlite_errorcode in (
        sqlite3.SQLITE_BUSY,
        sqlite3.SQLITE_LOCKED,
    )


async def supervise(
    name: str,
    run: Callable[[], Awaitable[None]],
    *,
    clock: Clock,
    first_delay: float = FIRST_DELAY,
    max_delay: float = MAX_DELAY,
    healthy_after: float = HEALTHY_AFTER,
) -> None:
    """Run ``run()`` until it returns, starting it again whenever it raises.

    Args:
        name: the task's name in the log (``"poller"``).
        run: makes a fresh coroutine of the task for each start.
        clock: monotonic time for the healthy period, and the backoff sleeps.
        first_delay: seconds before the first restart; doubles after each failed run.
        max_delay: the cap of the backoff, seconds.
        healthy_after: seconds of running after which the backoff starts over.

    Raises:
        asyncio.CancelledError: when cancelled, at once, whether running or backing off.
    """
    delay = first_delay
    while True:
        started = clock.monotonic()
        try:
            await run()
        except Exception as exc:  # CancelledError is a BaseException: shutdown goes through
            if clock.monotonic() - started >= healthy_after:
                delay = first_delay
            error_id = secrets.token_hex(4)
            if database_busy(exc):
                log.error(
                    "background task %s: the database is locked by another connection (%s; "
                    "error id %s); restarting in %.0f s",
                    name,
                    exc,
                    error_id,
                    delay,
                )
            else:
                log.error(
                    "background task %s failed (error id %s); restarting in %.0f s",
                    name,
                    error_id,
                    delay,
                    exc_info=exc,
                )
            await clock.sleep(delay)
            delay = min(delay * 2, max_delay)
        else:
            log.info("background task %s ended", name)
            return
