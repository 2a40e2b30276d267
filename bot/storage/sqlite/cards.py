"""SQLite cards: :class:`bot.storage.repositories.CardRepository` over an :class:`Executor`."""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from decimal import Decimal
from typing import Any

from bot.storage.models import ResultRequest
from bot.storage.money import from_micro, to_micro
from bot.storage.rows import result_request_from_row
from bot.storage.sqlite.engine import Executor


class SqliteCards:
    """Result requests (``result_requests``) and confirmation thresholds (``card_settings``)."""

    def __init__(self, sql: Executor) -> None:
        self._sql = sql

    async def add_request(
        self,
        *,
        kind: str,
        guild_id: int,
        user_id: int,
        options: Mapping[str, Any],
        outputs: Sequence[str] = (),
        job_id: int | None = None,
        at: float,
    ) -> int:
        """Store the request behind a result; return its id (the ``r<id>`` of its buttons)."""
        return await self._sql.insert(
            "INSERT INTO result_requests"
            " (kind, guild_id, user_id, job_id, options, outputs, created_at)"
            " VALUES (?, ?, ?, ?, ?, ?, ?)",
            (
                kind,
                guild_id,
                user_id,
                job_id,
                json.dumps(dict(options)),
                json.dumps(list(outputs)),
                at,
            ),
        )

    async def request(self, ref: str) -> ResultRequest | None:
        """Return the request behind ``ref`` (``j<job id>`` or ``r<id>``); None if unknown."""
        if len(ref) < 2 or ref[0] not in "jr" or not ref[1:].isdigit():
            return None
        # One of two literal column names, chosen by the prefix: never user text in the SQL.
        column = "job_id" if ref[0] == "j" else "id"
        row = await self._sql.one(
            f"SELECT * FROM result_requests WHERE {column} = ?", (int(ref[1:]),)
        )
        if row is None:
            return None
        return result_request_from_row(row)

    async def confirm_above(self, guild_id: int) -> Decimal | None:
        """Return the guild's confirmation threshold, cents; None when off."""
        row = await self._sql.one(
            "SELECT confirm_above_micro FROM card_settings WHERE guild_id = ?", (guild_id,)
        )
        if row is None or row[0] is None:
            return None
        return from_micro(int(row[0]))

    async def set_confirm_above(self, guild_id: int, cents: Decimal | None) -> None:
        """Set the guild's confirmation threshold, cents, or turn it off (None)."""
        await self._sql.run(
            "INSERT INTO card_settings (guild_id, confirm_above_micro) VALUES (?, ?)"
            " ON CONFLICT (guild_id) DO UPDATE"
            " SET confirm_above_micro = excluded.confirm_above_micro",
            (guild_id, None if cents is None else to_micro(cents)),
        )
