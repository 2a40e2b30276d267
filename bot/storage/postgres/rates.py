"""PostgreSQL rate windows: :class:`bot.storage.repositories.RateWindowRepository`."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Final

from bot.genapi.rate_window import RateDecision, RateSnapshot
from bot.storage.postgres.engine import Executor

RATE_LOCK_NAMESPACE: Final = 0x67656E72
"""First half of the per-key advisory lock (the second is ``hashtext(key_id)``); distinct from
the guild locks (one-argument form) and the migration lock."""

RETAINED_WINDOWS: Final = 10
"""Rows are kept this many windows (for operators' inspection), then deleted."""

PRUNE_EVERY: Final = 100
"""A key's old rows are deleted once every this many of its recorded writes."""

NOW_EXPR: Final = "extract(epoch FROM clock_timestamp())::float8"


class PgRates:
    """The ``rate_requests`` and ``rate_blocks`` tables (0004) of the shared database."""

    def __init__(self, sql: Executor) -> None:
        self._sql = sql
        self._pruned: dict[str, int] = {}

    async def snapshot(self, key_id: str, window: float) -> RateSnapshot:
        """The key's requests of the last ``window`` seconds and its block (server's clock)."""
        row = await self._sql.one(
            f"SELECT {NOW_EXPR} AS now,"
            " (SELECT blocked_until FROM rate_blocks WHERE key_id = $1) AS blocked",
            key_id,
        )
        assert row is not None
        now = float(row["now"])
        rows = await self._sql.all(
            "SELECT at, background FROM rate_requests WHERE key_id = $1 AND at > $2 ORDER BY at",
            key_id,
            now - window,
        )
        return RateSnapshot(
            now=now,
            sent=[(float(r["at"]), bool(r["background"])) for r in rows],
            blocked_until=0.0 if row["blocked"] is None else float(row["blocked"]),
        )

    async def record(self, requests: Sequence[tuple[str, bool]], *, window: float) -> None:
        """Record ``requests`` at the server's now, in one transaction (one statement)."""
        if not requests:
            return
        async with self._sql.write() as tx:
            await tx.run(
                "INSERT INTO rate_requests (key_id, at, background)"
                f" SELECT k, {NOW_EXPR}, b FROM unnest($1::text[], $2::boolean[]) AS r(k, b)",
                [key_id for key_id, _ in requests],
                [background for _, background in requests],
            )
            # Old rows go with the first write of a key and then every PRUNE_EVERY writes.
            for key_id in {key_id for key_id, _ in requests}:
                count = self._pruned.get(key_id, 0)
                self._pruned[key_id] = count + 1
                if count % PRUNE_EVERY == 0:
                    await tx.run(
                        f"DELETE FROM rate_requests WHERE key_id = $1 AND at <= {NOW_EXPR} - $2",
                        key_id,
                        RETAINED_WINDOWS * window,
                    )

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
