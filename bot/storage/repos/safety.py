"""Safety checking's tables, both engines: :class:`SafetyStore`.

``safety_settings`` (a server's ``/config safety``), ``safety_results`` (a result's visibility
when its score did more than show it, or members reported it), ``safety_reports`` (one per
member and result: its key makes a second report no report) and ``safety_decisions`` (every
Approve and Reject). docs/safety.md.
"""

from __future__ import annotations

import builtins
from collections.abc import Collection, Mapping, Sequence
from typing import Any

from sqlalchemy import (
    ColumnElement,
    Text,
    cast,
    exists,
    func,
    insert,
    literal,
    or_,
    select,
    update,
)

from bot.domain import SafetyRecord, Visibility
from bot.storage.repos.dialect import upsert
from bot.storage.schema import (
    result_requests,
    safety_decisions,
    safety_reports,
    safety_results,
    safety_settings,
)
from bot.storage.sql import Row, Sql

SETTING_COLUMNS = (
    "mode",
    "review_above",
    "block_above",
    "review_channel_id",
    "reports_to_hide",
    "nsfw_channels",
)
"""The columns of ``safety_settings`` an admin sets."""

HIDDEN_STATES = tuple(s.value for s in Visibility if s.hidden)
"""The states whose result members other than reviewers may not see."""


def job_hidden(job_id: ColumnElement[Any]) -> ColumnElement[bool]:
    """SQL: the job ``job_id`` (a column of the outer query) is held, withheld or rejected.

    For the lists that leave such results out in the query itself (the gallery, My results,
    the showcase), so that a page holds as many results as it says: ``~job_hidden(jobs.c.id)``.
    A job's result is ``'j' || id`` (``safety_results``' key, found by its index); a
    synchronous image kept as a finished job was screened as its request, ``'r' || id`` of the
    ``result_requests`` row whose ``job_id`` it is (unique, indexed).
    """
    ref = literal("j", type_=Text) + cast(job_id, Text)
    own = exists().where(safety_results.c.ref == ref, safety_results.c.state.in_(HIDDEN_STATES))
    request_ref = literal("r", type_=Text) + cast(result_requests.c.id, Text)
    as_request = exists().where(
        result_requests.c.job_id == job_id,
        safety_results.c.ref == request_ref,
        safety_results.c.state.in_(HIDDEN_STATES),
    )
    return or_(own, as_request)


_reports = (
    select(func.count())
    .where(safety_reports.c.ref == safety_results.c.ref)
    .correlate(safety_results)
    .scalar_subquery()
    .label("reports")
)


def _record(row: Row) -> SafetyRecord:
    card = row["card_message_id"]
    review = row["review_message_id"]
    return SafetyRecord(
        ref=row["ref"],
        guild_id=int(row["guild_id"]),
        channel_id=int(row["channel_id"]),
        user_id=int(row["user_id"]),
        kind=row["kind"],
        prompt=row["prompt"],
        score=row["score"],
        state=Visibility(row["state"]),
        reason=row["reason"],
        at=row["at"],
        card=None if card is None else (int(row["card_channel_id"]), int(card)),
        review=None if review is None else (int(row["review_channel_id"]), int(review)),
        decided_by=None if row["decided_by"] is None else int(row["decided_by"]),
        decided_at=row["decided_at"],
        reports=int(row["reports"] or 0),
    )


class SafetyStore:
    """A server's safety policy, held and reported results, reports and decisions.

    Args:
        sql: the database's executor, or one transaction's.
    """

    def __init__(self, sql: Sql) -> None:
        self._sql = sql

    # -- the policy ------------------------------------------------------------------------

    async def settings(self, guild_id: int) -> Row | None:
        """Return the server's ``safety_settings`` row (None: every default)."""
        return await self._sql.one(
            select(safety_settings).where(safety_settings.c.guild_id == guild_id)
        )

    async def set(self, guild_id: int, values: Mapping[str, Any]) -> None:
        """Write the given columns (:data:`SETTING_COLUMNS`; None = the default), others kept."""
        if not values:
            return
        stmt = upsert(self._sql, safety_settings).values(guild_id=guild_id, **values)
        await self._sql.run(
            stmt.on_conflict_do_update(
                index_elements=[safety_settings.c.guild_id], set_=dict(values)
            )
        )

    # -- results -----------------------------------------------------------------------------

    async def result(self, ref: str) -> SafetyRecord | None:
        """The result's record, with its reports counted; None when it has none."""
        row = await self._sql.one(
            select(safety_results, _reports).where(safety_results.c.ref == ref)
        )
        return None if row is None else _record(row)

    async def add(self, record: SafetyRecord) -> bool:
        """Store a result's first decision; False when it had one already (kept as it was)."""
        stmt = upsert(self._sql, safety_results).values(
            ref=record.ref,
            guild_id=record.guild_id,
            channel_id=record.channel_id,
            user_id=record.user_id,
            kind=record.kind,
            prompt=record.prompt,
            score=record.score,
            state=record.state.value,
            reason=record.reason,
            at=record.at,
            card_channel_id=None if record.card is None else record.card[0],
            card_message_id=None if record.card is None else record.card[1],
        )
        return await self._sql.run(stmt.on_conflict_do_nothing()) > 0

    async def change_state(
        self,
        ref: str,
        state: Visibility,
        *,
        only_from: Collection[Visibility],
        reason: str | None = None,
        decided_by: int | None = None,
        decided_at: float | None = None,
    ) -> bool:
        """Move a result to ``state`` if it is in one of ``only_from`` now (one atomic update).

        Returns:
            Whether it moved (False: another decision came first, or no record).
        """
        values: dict[str, Any] = {"state": state.value}
        if reason is not None:
            values["reason"] = reason
        if decided_by is not None:
            values["decided_by"] = decided_by
            values["decided_at"] = decided_at
        done = await self._sql.run(
            update(safety_results)
            .where(
                safety_results.c.ref == ref,
                safety_results.c.state.in_([s.value for s in only_from]),
            )
            .values(**values)
        )
        return done > 0

    async def set_review(self, ref: str, channel_id: int, message_id: int) -> None:
        """Remember the result's card in the review channel."""
        await self._sql.run(
            update(safety_results)
            .where(safety_results.c.ref == ref)
            .values(review_channel_id=channel_id, review_message_id=message_id)
        )

    async def set_card(self, ref: str, channel_id: int, message_id: int) -> None:
        """Remember the member's card of the result (to edit it on a decision)."""
        await self._sql.run(
            update(safety_results)
            .where(safety_results.c.ref == ref)
            .values(card_channel_id=channel_id, card_message_id=message_id)
        )

    async def hidden(self, refs: Collection[str]) -> builtins.set[str]:
        """Those of ``refs`` members may not see (held, withheld or rejected).

        ``j<id>`` of a synchronous image kept as a finished job is hidden when its request
        (``r<id>``, as it was screened) is (:func:`job_hidden`).
        """
        if not refs:
            return set()
        rows = await self._sql.all(
            select(safety_results.c.ref).where(
                safety_results.c.ref.in_(list(refs)), safety_results.c.state.in_(HIDDEN_STATES)
            )
        )
        found = {row["ref"] for row in rows}
        job_ids = [int(r[1:]) for r in refs if r.startswith("j") and r[1:].isdigit()]
        if job_ids:
            request_ref = literal("r", type_=Text) + cast(result_requests.c.id, Text)
            kept = await self._sql.all(
                select(result_requests.c.job_id)
                .join(safety_results, safety_results.c.ref == request_ref)
                .where(
                    result_requests.c.job_id.in_(job_ids),
                    safety_results.c.state.in_(HIDDEN_STATES),
                )
            )
            found |= {f"j{row['job_id']}" for row in kept}
        return found

    async def queue(self, guild_id: int, limit: int) -> list[SafetyRecord]:
        """The server's results awaiting review or reported, newest first."""
        pending = [s.value for s in Visibility if s.pending]
        rows = await self._sql.all(
            select(safety_results, _reports)
            .where(
                safety_results.c.guild_id == guild_id,
                or_(safety_results.c.state.in_(pending), _reports > 0),
            )
            .order_by(safety_results.c.at.desc())
            .limit(limit)
        )
        return [_record(row) for row in rows]

    # -- reports and decisions ------------------------------------------------------------

    async def add_report(
        self, ref: str, user_id: int, guild_id: int, reason: str, at: float
    ) -> bool:
        """Record a member's report of a result; False when they reported it before."""
        stmt = upsert(self._sql, safety_reports).values(
            ref=ref, user_id=user_id, guild_id=guild_id, reason=reason, at=at
        )
        return await self._sql.run(stmt.on_conflict_do_nothing()) > 0

    async def report_count(self, ref: str) -> int:
        """How many members reported the result."""
        value = await self._sql.scalar(
            select(func.count()).select_from(safety_reports).where(safety_reports.c.ref == ref)
        )
        return int(value or 0)

    async def add_decision(
        self, ref: str, guild_id: int, user_id: int, decision: str, via: str, at: float
    ) -> None:
        """Record an Approve or a Reject."""
        await self._sql.run(
            insert(safety_decisions).values(
                ref=ref, guild_id=guild_id, user_id=user_id, decision=decision, via=via, at=at
            )
        )

    async def decisions(self, ref: str) -> Sequence[Row]:
        """The result's decisions, oldest first."""
        return await self._sql.all(
            select(safety_decisions)
            .where(safety_decisions.c.ref == ref)
            .order_by(safety_decisions.c.id)
        )
