"""SQLite rate windows: :class:`bot.storage.repositories.RateWindowRepository`."""

from __future__ import annotations

from typing import Final

from bot.storage.repositories import RateDecision
from bot.storage.sqlite.engine import Executor

NOW_EXPR: Final = "(julianday('now') - 2440587.5) * 86400.0"
"""The database's clock, UTC epoch seconds (millisecond resolution; ``unixepoch('subsec')``
needs SQLite 3.42, and Debian 12 ships 3.40)."""
NOW_SQL: Final = f"SELECT {NOW_EXPR}"

RETAINED_WINDOWS: Final = 10
"""Rows are kept this many windows (for operators' inspection), then deleted."""


class SqliteRates:
    """The ``rate_requests`` and ``rate_blocks`` tables (0009) of one SQLite file."""

    def __init__(self, sql: Executor) -> None:
        self._sql = sql

    async def take(
        self, key_id: str, *, background: bool, window: float, decide: RateDecision
    ) -> float:
        """Record a request now if ``decide`` allows; else return the seconds to wait.

        One ``BEGIN IMMEDIATE`` transaction: it serialises every process on the file.
        """
        async with self._sql.write() as tx:
            row = await tx.one(NOW_SQL)
            assert row is not None
            now = float(row[0])
            await tx.run(
                "DELETE FROM rate_requests WHERE key_id = ? AND at <= ?",
                (key_id, now - RETAINED_WINDOWS * window),
            )
            sent = [
                (float(r["at"]), bool(r["background"]))
                for r in await tx.all(
                    "SELECT at, background FROM rate_requests WHERE key_id = ? AND at > ?"
                    " ORDER BY at",
                    (key_id, now - window),
                )
            ]
            blocked = await tx.one(
                "SELECT blocked_until FROM rate_blocks WHERE key_id = ?", (key_id,)
            )
            delay = decide(now, sent, 0.0 if blocked is None else float(blocked[0]))
            if delay > 0:
                return delay
            await tx.run(
                "INSERT INTO rate_requests (key_id, at, background) VALUES (?, ?, ?)",
                (key_id, now, int(background)),
            )
            return 0.0

    async def block(self, key_id: str, seconds: float) -> None:
        """Block the key for ``seconds`` from the database's now (a longer block stays)."""
        await self._sql.run(
            f"INSERT INTO rate_blocks (key_id, blocked_until) VALUES (?, ({NOW_EXPR}) + ?)"
            " ON CONFLICT (key_id) DO UPDATE"
            " SET blocked_until = MAX(blocked_until, excluded.blocked_until)",
            (key_id, seconds),
        )
