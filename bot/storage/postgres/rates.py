"""PostgreSQL rate windows: :class:`bot.storage.repositories.RateWindowRepository`."""

from __future__ import annotations

from typing import Final

from bot.storage.postgres.engine import Executor
from bot.storage.repositories import RateDecision

RATE_LOCK_NAMESPACE: Final = 0x67656E72
"""First half of the per-key advisory lock (the second is ``hashtext(key_id)``); distinct from
the guild locks (one-argument form) and the migration lock."""

RETAINED_WINDOWS: Final = 10
"""Rows are kept this many windows (for operators' inspection), then deleted."""


class PgRates:
    """The ``rate_requests`` and ``rate_blocks`` tables (0004) of the shared database."""

    def __init__(self, sql: Executor) -> None:
        self._sql = sql

    async def take(
        self, key_id: str, *, background: bool, window: float, decide: RateDecision
    ) -> float:
        """Record a request now if ``decide`` allows; else return the seconds to wait.

        Under the key's advisory lock (held to the end of the transaction), timed by
        ``clock_timestamp()`` read after the lock is granted, so a process that waited for the
        lock decides with the time it actually sends at.
        """
        async with self._sql.write() as tx:
            await tx.value(
                "SELECT pg_advisory_xact_lock($1::int, hashtext($2))", RATE_LOCK_NAMESPACE, key_id
            )
            now = float(await tx.value("SELECT extract(epoch FROM clock_timestamp())::float8"))
            await tx.run(
                "DELETE FROM rate_requests WHERE key_id = $1 AND at <= $2",
                key_id,
                now - RETAINED_WINDOWS * window,
            )
            rows = await tx.all(
                "SELECT at, background FROM rate_requests WHERE key_id = $1 AND at > $2"
                " ORDER BY at",
                key_id,
                now - window,
            )
            blocked = await tx.value(
                "SELECT blocked_until FROM rate_blocks WHERE key_id = $1", key_id
            )
            sent = [(float(r["at"]), bool(r["background"])) for r in rows]
            delay = decide(now, sent, 0.0 if blocked is None else float(blocked))
            if delay > 0:
                return delay
            await tx.run(
                "INSERT INTO rate_requests (key_id, at, background) VALUES ($1, $2, $3)",
                key_id,
                now,
                background,
            )
            return 0.0

    async def block(self, key_id: str, seconds: float) -> None:
        """Block the key for ``seconds`` from the database's now (a longer block stays)."""
        await self._sql.run(
            "INSERT INTO rate_blocks (key_id, blocked_until)"
            " VALUES ($1, extract(epoch FROM clock_timestamp())::float8 + $2)"
            " ON CONFLICT (key_id) DO UPDATE"
            " SET blocked_until = GREATEST(rate_blocks.blocked_until, EXCLUDED.blocked_until)",
            key_id,
            seconds,
        )
