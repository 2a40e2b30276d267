"""Retention: deleting rows past their period, both engines (``RetentionRepository``).

Four kinds of row grow with use and are read only while recent: the requests behind result
buttons (``result_requests``), the configuration audit (``config_audit``), the shared rate
window (``rate_requests``; ``rate_blocks`` whose block ended), and the interaction tokens of
personal jobs kept in ``meta`` (``response:<job id>``), dead 15 minutes after their
interaction. The service (``bot.services.retention``) says how old is too old.

``result_requests``, ``config_audit`` and ``rate_requests`` have no index on their time, and
none is needed: their ids grow with time, so the oldest rows are the first by primary key. A
sweep reads the first rows by id in batches, deletes those past the cutoff and stops at the
first batch that holds a newer row: a few index reads when nothing is due, never a scan of the
table. A row written under a clock that was set back may wait for a later sweep.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Final

from sqlalchemy import Column, Table, bindparam, delete, select

from bot.storage.schema import config_audit, meta, rate_blocks, rate_requests, result_requests
from bot.storage.sql import Sql

BATCH: Final = 500
"""Rows read (and at most deleted) per statement: short transactions, small ``IN`` lists."""

RESPONSE_PREFIX: Final = "response:"
"""The ``meta`` keys of personal jobs' interaction tokens (``bot.services.response_tokens``)."""

_BY_AGE: Final[dict[str, tuple[Table, Column[float]]]] = {
    "result_requests": (result_requests, result_requests.c.created_at),
    "config_audit": (config_audit, config_audit.c.at),
    "rate_requests": (rate_requests, rate_requests.c.at),
}
"""The tables swept in id order, with the column that dates a row (UTC epoch seconds)."""

TABLES: Final = (*_BY_AGE, "rate_blocks", "meta", "thumbnails")
"""Every table a sweep deletes from (the ``table`` label of the swept-rows metric)."""

_OLDEST: Final = {
    name: select(table.c.id.label("id"), column.label("at")).order_by(table.c.id).limit(BATCH)
    for name, (table, column) in _BY_AGE.items()
}
_DELETE_IDS: Final = {
    name: delete(table).where(table.c.id.in_(bindparam("ids", expanding=True)))
    for name, (table, _) in _BY_AGE.items()
}
_ENDED_BLOCKS: Final = delete(rate_blocks).where(rate_blocks.c.blocked_until <= bindparam("before"))
_RESPONSES: Final = select(meta.c.key, meta.c.value).where(
    meta.c.key >= RESPONSE_PREFIX,
    meta.c.key < RESPONSE_PREFIX[:-1] + chr(ord(RESPONSE_PREFIX[-1]) + 1),
)
_DELETE_KEYS: Final = delete(meta).where(meta.c.key.in_(bindparam("keys", expanding=True)))


class RetentionStore:
    """Deletes rows past their retention (contract: ``RetentionRepository``).

    Args:
        sql: the database's executor (never a transaction's: each batch commits alone, so a
            long sweep holds no lock for long).
    """

    def __init__(self, sql: Sql) -> None:
        self._sql = sql

    async def sweep_older(self, table: str, before: float, *, limit: int) -> int:
        """Delete up to ``limit`` rows of ``table`` dated at or before ``before``.

        Args:
            table: ``"result_requests"``, ``"config_audit"`` or ``"rate_requests"``.
            before: the cutoff, UTC epoch seconds.
            limit: the most rows deleted in this call (the next sweep goes on).

        Returns:
            How many rows were deleted.

        Raises:
            KeyError: another table.
        """
        oldest, remove = _OLDEST[table], _DELETE_IDS[table]
        swept = 0
        while swept < limit:
            rows = await self._sql.all(oldest)
            due = [int(row["id"]) for row in rows if float(row["at"]) <= before][: limit - swept]
            if due:
                swept += await self._sql.run(remove, [{"ids": due}])
            if len(due) < len(rows) or len(rows) < BATCH or not due:
                break  # a newer row (ids grow with time), or the end of the table
        return swept

    async def sweep_ended_blocks(self, before: float) -> int:
        """Delete the rate blocks (after a 429) that ended at or before ``before``; how many."""
        return await self._sql.run(_ENDED_BLOCKS, [{"before": before}])

    async def sweep_response_tokens(self, before: float) -> int:
        """Delete the stored interaction tokens that expired at or before ``before``.

        Blank rows (a token forgotten once Discord refused it) go too: a missing row reads the
        same (``bot.services.response_tokens``). Rows that cannot be read are kept.

        Returns:
            How many rows were deleted.
        """
        stale: list[str] = []
        for row in await self._sql.all(_RESPONSES):
            key, value = str(row["key"]), str(row["value"])
            if not value:
                stale.append(key)
                continue
            try:
                expires_at = float(json.loads(value)["e"])
            except (ValueError, KeyError, TypeError):
                continue
            if expires_at <= before:
                stale.append(key)
        return await self._delete_keys(stale)

    async def _delete_keys(self, keys: Sequence[str]) -> int:
        deleted = 0
        for start in range(0, len(keys), BATCH):
            deleted += await self._sql.run(
                _DELETE_KEYS, [{"keys": list(keys[start : start + BATCH])}]
            )
        return deleted
