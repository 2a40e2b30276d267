"""What the buttons under a result need, both engines: :class:`ResultRequestStore`.

Tables ``result_requests`` (``options`` and ``outputs`` JSON text; jsonb on PostgreSQL) and
``card_settings`` (the confirmation threshold, micro-cents: :mod:`bot.storage.money`).
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from decimal import Decimal
from typing import Any

from sqlalchemy import insert, select

from bot.domain import ResultRequest
from bot.storage.money import from_micro, to_micro
from bot.storage.repos.dialect import json_value, upsert
from bot.storage.schema import card_settings, result_requests
from bot.storage.sql import Row, Sql


def result_request_from_row(row: Row) -> ResultRequest:
    """Build a :class:`ResultRequest` from a row of ``result_requests`` (either engine)."""
    return ResultRequest(
        id=int(row["id"]),
        kind=str(row["kind"]),
        guild_id=int(row["guild_id"]),
        user_id=int(row["user_id"]),
        job_id=None if row["job_id"] is None else int(row["job_id"]),
        options=json.loads(row["options"]),
        outputs=tuple(json.loads(row["outputs"])),
    )


class ResultRequestStore:
    """What the buttons under a result need after any restart.

    The request behind each result, found by the reference its buttons' custom ids carry
    (``j<job id>`` or ``r<request id>``), and each guild's confirmation threshold.

    Args:
        sql: the database's executor, or one transaction's.
    """

    def __init__(self, sql: Sql) -> None:
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
        """Store the request behind a result; return its id (the ``r<id>`` of its buttons).

        Args:
            kind: ``"text"``, ``"image"`` or ``"video"``.
            guild_id: where it was asked.
            user_id: the requester.
            options: the command's options, JSON-serialisable.
            outputs: result URLs of a synchronous answer.
            job_id: the job of an asynchronous result (at most one request per job).
            at: when, UTC epoch seconds.
        """
        new_id = await self._sql.scalar(
            insert(result_requests)
            .values(
                kind=kind,
                guild_id=guild_id,
                user_id=user_id,
                job_id=job_id,
                options=json_value(self._sql, dict(options)),
                outputs=json_value(self._sql, list(outputs)),
                created_at=at,
            )
            .returning(result_requests.c.id)
        )
        return int(new_id)

    async def request(self, ref: str) -> ResultRequest | None:
        """Return the request behind ``ref`` (``j<job id>`` or ``r<id>``); None if unknown."""
        if len(ref) < 2 or ref[0] not in "jr" or not ref[1:].isdigit():
            return None
        column = result_requests.c.job_id if ref[0] == "j" else result_requests.c.id
        row = await self._sql.one(select(result_requests).where(column == int(ref[1:])))
        return None if row is None else result_request_from_row(row)

    async def confirm_above(self, guild_id: int) -> Decimal | None:
        """Return the guild's confirmation threshold (``/config confirm-above``), cents.

        None when it is off (the default).
        """
        micro = await self._sql.scalar(
            select(card_settings.c.confirm_above_micro).where(card_settings.c.guild_id == guild_id)
        )
        return None if micro is None else from_micro(int(micro))

    async def set_confirm_above(self, guild_id: int, cents: Decimal | None) -> None:
        """Set the guild's confirmation threshold, cents (exact), or turn it off with None."""
        stmt = upsert(self._sql, card_settings).values(
            guild_id=guild_id, confirm_above_micro=None if cents is None else to_micro(cents)
        )
        await self._sql.run(
            stmt.on_conflict_do_update(
                index_elements=[card_settings.c.guild_id],
                set_={"confirm_above_micro": stmt.excluded.confirm_above_micro},
            )
        )
