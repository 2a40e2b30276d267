"""PostgreSQL cards: :class:`bot.storage.repositories.CardRepository` over an :class:`Executor`."""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from decimal import Decimal
from typing import Any

from bot.storage.models import ResultRequest
from bot.storage.money import from_micro, to_micro
from bot.storage.postgres.engine import Executor
from bot.storage.rows import result_request_from_row


class PgCards:
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
        new_id = await self._sql.returning(
            "INSERT INTO result_requests"
            " (kind, guild_id, user_id, job_id, options, outputs, created_at)"
            " VALUES ($1, $2, $3, $4, $5::jsonb, $6::jsonb, $7) RETURNING id",
            kind,
            guild_id,
            user_id,
            job_id,
            json.dumps(dict(options)),
            json.dumps(list(outputs)),
            at,
        )
        return int(new_id)

    async def request(self, ref: str) -> ResultRequest | None:
        """Return the request behind ``ref`` (``j<job id>`` or ``r<id>``); None if unknown."""
        if len(ref) < 2 or ref[0] not in "jr" or not ref[1:].isdigit():
            return None
        # One of two literal column names, chosen by the prefix: never user text in the SQL.
        column = "job_id" if ref[0] == "j" else "id"
        row = await self._sql.one(
            f"SELECT * FROM result_requests WHERE {column} = $1", int(ref[1:])
        )
        if row is None:
            return None
        return result_request_from_row(row)

    async def confirm_above(self, guild_id: int) -> Decimal | None:
        """Return the guild's confirmation threshold, cents; None when off."""
        micro = await self._sql.value(
            "SELECT confirm_above_micro FROM card_settings WHERE guild_id = $1", guild_id
        )
        return None if micro is None else from_micro(int(micro))

    async def set_confirm_above(self, guild_id: int, cents: Decimal | None) -> None:
        """Set the guild's confirmation threshold, cents, or turn it off (None)."""
        await self._sql.run(
            "INSERT INTO card_settings (guild_id, confirm_above_micro) VALUES ($1, $2)"
            " ON CONFLICT (guild_id) DO UPDATE"
            " SET confirm_above_micro = EXCLUDED.confirm_above_micro",
            guild_id,
            None if cents is None else to_micro(cents),
        )
