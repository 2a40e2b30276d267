"""SQLite rate windows: :class:`bot.storage.repositories.RateWindowRepository`."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Final

from bot.genapi.rate_window import RateDecision, RateSnapshot
from bot.storage.sqlite.engine import Executor

NOW_EXPR: Final = "(julianday('now') - 2440587.5) * 86400.0"
"""The database's clock, UTC epoch seconds (millisecond resolution; ``unixepoch('subsec')``
needs SQLite 3.42, and Debian 12 ships 3.40)."""
NOW_SQL: Final = f"SELECT {NOW_EXPR}"

RETAINED_WINDOWS: Final = 10
"""Rows are kept this many windows (for operators' inspection), then deleted."""

PRUNE_EVERY: Final = 100
"""A key's old rows are deleted once every this many of its recorded writes."""


class SqliteRates:
    """The ``rate_requests`` and ``rate_blocks`` tables (0009) of one SQLite file."""

    def __init__(self, sql: Executor) -> None:
        self._sql = sql
        self._pruned: dict[str, int] = {}

    async def snapshot(self, key_id: str, window: float) -> RateSnapshot:
        """The key's requests of the last ``window`` seconds and its block, on the file's clock."""
        row = await self._sql.one(
            f"SELECT {NOW_EXPR} AS now,"
            " (SELECT blocked_until FROM rate_blocks WHERE key_id = ?) AS blocked",
            (key_id,),
        )
        assert row is not None
        now = float(row["now"])
        rows = await self._sql.all(
            "SELECT at, background FROM rate_requests WHERE key_id = ? AND at > ? ORDER BY at",
            (key_id, now - window),
        )
        return RateSnapshot(
            now=now,
            sent=[(float(r["at"]), bool(r["background"])) for r in rows],
            blocked_until=0.0 if row["blocked"] is None else float(row["blocked"]),
        )

    async def record(self, requests: Sequence[tuple[str, bool]], *, window: float) -> None:
        """Record ``requests`` at the file's now, in one transaction (one statement)."""
        if not requests:
            return
        values = ", ".join(f"(?, {NOW_EXPR}, ?)" for _ in requests)
        params = [p for key_id, background in requests for p in (key_id, int(background))]
        async with self._sql.write() as tx:
            await tx.run(
                f"INSERT INTO rate_requests (key_id, at, background) VALUES {values}", params
            )
            # Old rows go with the first write of a key and then every PRUNE_EVERY writes, so
            # the delete is not paid per request.
            for key_id in {key_id for key_id, _ in requests}:
                count = self._pruned.get(key_id, 0)
                self._pruned[key_id] = count + 1
                if count % PRUNE_EVERY == 0:
                    await tx.run(
                        f"DELETE FROM rate_requests WHERE key_id = ? AND at <= ({NOW_EXPR}) - ?",
                        (key_id, RETAINED_WINDOWS * window),
                    )

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
