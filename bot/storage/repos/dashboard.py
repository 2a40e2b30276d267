"""The web dashboard's tables and its reads of the ledger, jobs and audit log, both engines.

:class:`DashboardStore`: sign-ins under way (``dashboard_logins``), sessions
(``dashboard_sessions``) and access roles (``dashboard_roles``). :class:`DashboardViews`: the
read-only views of the pages (spend by day, model, kind, tier and member; ledger lines with
their jobs; the audit log; finished results). Money stays integer micro-cents (the sums are
``SUM(bigint)``, exact on both engines); pages are keyset-paged (newest first, by time then
id), so page 500 costs what page 1 costs, and an export reads the ledger in batches, oldest
first, holding one batch at a time.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Sequence
from typing import Any, Final

from sqlalchemy import (
    BigInteger,
    ColumnElement,
    Integer,
    Select,
    and_,
    cast,
    delete,
    func,
    insert,
    literal,
    or_,
    select,
    update,
)

from bot.domain import (
    AuditEntry,
    DashboardSession,
    GuildRef,
    LedgerFilter,
    LedgerLine,
    ResultItem,
    SpendBucket,
)
from bot.storage.schema import (
    config_audit,
    dashboard_logins,
    dashboard_roles,
    dashboard_sessions,
    jobs,
    ledger,
    reservations,
)
from bot.storage.sql import Row, Sql

DAY: Final = 86_400.0
"""Seconds in a UTC day (the ledger's times are UTC epoch seconds; no leap seconds)."""

JOB_AFTER_CHARGE: Final = 60.0
"""Seconds within which a job is stored after its charge (the same transaction, ``settle``):
a job of the same key, kind and task id outside them is another task under a reused id."""

EXPORT_BATCH: Final = 5_000
"""Ledger lines an export reads per query: its memory is one batch, whatever the ledger's size."""


def _sum_micro(column: ColumnElement[Any]) -> ColumnElement[int]:
    """``SUM`` of a micro-cent column as an exact integer on both engines (0 when empty)."""
    return cast(func.coalesce(func.sum(column), 0), BigInteger)


def _guilds_json(guilds: Sequence[GuildRef]) -> str:
    return json.dumps(
        [
            {"id": str(g.id), "name": g.name, "permissions": str(g.permissions), "owner": g.owner}
            for g in guilds
        ]
    )


def _guilds_from(text: str) -> tuple[GuildRef, ...]:
    return tuple(
        GuildRef(int(g["id"]), str(g["name"]), int(g["permissions"]), bool(g.get("owner")))
        for g in json.loads(text)
    )


class DashboardStore:
    """Sign-ins under way, sessions and access roles of the web dashboard.

    Args:
        sql: the database's executor, or one transaction's.
    """

    def __init__(self, sql: Sql) -> None:
        self._sql = sql

    async def add_login(self, state_hash: str, binding_hash: str, verifier: str, at: float) -> None:
        """Record a sign-in under way: the hashed ``state``, its cookie's hash, PKCE verifier."""
        await self._sql.run(
            insert(dashboard_logins).values(
                state_hash=state_hash,
                binding_hash=binding_hash,
                code_verifier=verifier,
                created_at=at,
            )
        )

    async def take_login(self, state_hash: str) -> tuple[str, str, float] | None:
        """Remove and return a sign-in's ``(binding hash, verifier, created_at)``; None if unknown.

        Single use: of two callbacks with one ``state``, only the one whose delete removed the
        row gets it.
        """
        async with self._sql.write() as tx:
            row = await tx.one(
                select(dashboard_logins).where(dashboard_logins.c.state_hash == state_hash)
            )
            if row is None:
                return None
            taken = await tx.run(
                delete(dashboard_logins).where(dashboard_logins.c.state_hash == state_hash)
            )
            if taken != 1:
                return None
            return row["binding_hash"], row["code_verifier"], row["created_at"]

    async def purge_logins(self, before: float) -> int:
        """Delete sign-ins begun before ``before`` (abandoned); return how many."""
        return await self._sql.run(
            delete(dashboard_logins).where(dashboard_logins.c.created_at < before)
        )

    async def add_session(
        self, id_hash: str, user_id: int, user_name: str, guilds: Sequence[GuildRef], at: float
    ) -> None:
        """Store a new session (its cookie's hash) for the member, with their servers."""
        await self._sql.run(
            insert(dashboard_sessions).values(
                id_hash=id_hash,
                user_id=user_id,
                user_name=user_name,
                guilds=_guilds_json(guilds),
                created_at=at,
                last_seen_at=at,
            )
        )

    async def session(self, id_hash: str) -> DashboardSession | None:
        """Return the session of a cookie's hash, or None."""
        row = await self._sql.one(
            select(dashboard_sessions).where(dashboard_sessions.c.id_hash == id_hash)
        )
        if row is None:
            return None
        return DashboardSession(
            user_id=row["user_id"],
            user_name=row["user_name"],
            guilds=_guilds_from(row["guilds"]),
            created_at=row["created_at"],
            last_seen_at=row["last_seen_at"],
        )

    async def touch(self, id_hash: str, at: float) -> None:
        """Record a request of the session at ``at`` (the idle expiry counts from it)."""
        await self._sql.run(
            update(dashboard_sessions)
            .where(dashboard_sessions.c.id_hash == id_hash)
            .values(last_seen_at=at)
        )

    async def delete_session(self, id_hash: str) -> int:
        """Delete one session (sign-out); return how many rows went (0 or 1)."""
        return await self._sql.run(
            delete(dashboard_sessions).where(dashboard_sessions.c.id_hash == id_hash)
        )

    async def delete_user_sessions(self, user_id: int) -> int:
        """Delete every session of the member (signed out everywhere); return how many."""
        return await self._sql.run(
            delete(dashboard_sessions).where(dashboard_sessions.c.user_id == user_id)
        )

    async def purge_sessions(self, idle_before: float) -> int:
        """Delete the sessions last seen before ``idle_before``; return how many."""
        return await self._sql.run(
            delete(dashboard_sessions).where(dashboard_sessions.c.last_seen_at < idle_before)
        )

    async def roles(self, guild_id: int) -> dict[int, str]:
        """Return the server's dashboard roles: role id -> access (``view`` or ``edit``)."""
        rows = await self._sql.all(
            select(dashboard_roles.c.role_id, dashboard_roles.c.access).where(
                dashboard_roles.c.guild_id == guild_id
            )
        )
        return {r["role_id"]: r["access"] for r in rows}

    async def set_role(self, guild_id: int, role_id: int, access: str | None) -> None:
        """Grant a role ``access`` to the server's pages, or take it back (None)."""
        async with self._sql.write() as tx:
            await tx.run(
                delete(dashboard_roles).where(
                    dashboard_roles.c.guild_id == guild_id, dashboard_roles.c.role_id == role_id
                )
            )
            if access is not None:
                await tx.run(
                    insert(dashboard_roles).values(
                        guild_id=guild_id, role_id=role_id, access=access
                    )
                )

    async def guilds_with_roles(self, guild_ids: Sequence[int]) -> set[int]:
        """Return which of ``guild_ids`` granted any role access to their pages."""
        if not guild_ids:
            return set()
        rows = await self._sql.all(
            select(dashboard_roles.c.guild_id)
            .where(dashboard_roles.c.guild_id.in_(list(guild_ids)))
            .distinct()
        )
        return {r["guild_id"] for r in rows}


# -- views ---------------------------------------------------------------------------------------

_JOB_OF_CHARGE: Final = and_(
    jobs.c.kind == ledger.c.kind,
    jobs.c.task_id == ledger.c.task_id,
    jobs.c.key_fingerprint == ledger.c.key_fingerprint,
    jobs.c.created_at >= ledger.c.at,
    jobs.c.created_at < ledger.c.at + JOB_AFTER_CHARGE,
)
"""A charge's job: same key, kind and task id, stored right after it (index ``jobs_task``)."""

_STATUS: Final = func.coalesce(jobs.c.status, literal("charged"))

_LINE_COLUMNS: Final = (
    ledger.c.id,
    ledger.c.at,
    ledger.c.user_id,
    ledger.c.kind,
    ledger.c.model,
    jobs.c.id.label("job_id"),
    ledger.c.task_id,
    ledger.c.cost_micro,
    _STATUS.label("status"),
    jobs.c.prompt_summary,
)


def _line(row: Row) -> LedgerLine:
    return LedgerLine(
        id=row["id"],
        at=row["at"],
        user_id=row["user_id"],
        kind=row["kind"],
        model=row["model"],
        job_id=row["job_id"],
        task_id=row["task_id"],
        cost_micro=int(row["cost_micro"]),
        status=row["status"],
        prompt=row["prompt_summary"] or "",
    )


def _filtered(stmt: Any, guild_id: int, where: LedgerFilter) -> Any:
    """``stmt`` (a ``Select`` over the ledger) narrowed to the server and ``where``."""
    stmt = stmt.where(ledger.c.guild_id == guild_id)
    if where.user_id is not None:
        stmt = stmt.where(ledger.c.user_id == where.user_id)
    if where.model is not None:
        stmt = stmt.where(ledger.c.model == where.model)
    if where.kind is not None:
        stmt = stmt.where(ledger.c.kind == where.kind)
    if where.since is not None:
        stmt = stmt.where(ledger.c.at >= where.since)
    if where.until is not None:
        stmt = stmt.where(ledger.c.at < where.until)
    if where.status is not None:
        charged = where.status == "charged"
        stmt = stmt.where(jobs.c.id.is_(None) if charged else jobs.c.status == where.status)
    return stmt


def _result(row: Row) -> ResultItem:
    return ResultItem(
        job_id=row["id"],
        guild_id=row["guild_id"],
        channel_id=row["channel_id"],
        message_id=row["message_id"],
        user_id=row["user_id"],
        kind=row["kind"],
        model=row["model"],
        prompt=row["prompt_summary"],
        outputs=tuple(json.loads(row["outputs"])),
        cost_micro=int(row["cost_micro"]),
        created_at=row["created_at"],
    )


class DashboardViews:
    """The dashboard's reads of the ledger, the jobs and the audit log.

    Args:
        sql: the database's executor.
    """

    def __init__(self, sql: Sql) -> None:
        self._sql = sql

    def _day(self) -> ColumnElement[int]:
        """The UTC day of a charge, as its first epoch second."""
        if self._sql.dialect == "postgresql":
            day = cast(func.floor(ledger.c.at / DAY), BigInteger)
        else:
            day = cast(ledger.c.at / DAY, Integer)  # truncation: the ledger's times are positive
        return day

    async def spend(self, guild_id: int, since: float, until: float, by: str) -> list[SpendBucket]:
        """Return the server's charges in ``[since, until)`` grouped by ``by``.

        Args:
            guild_id: the server.
            since: from, UTC epoch seconds.
            until: to (excluded), UTC epoch seconds.
            by: ``day`` (key: the day's first UTC epoch second), ``model``, ``kind``, ``tier``
                (key: the tier's role id, None without one) or ``member`` (key: the user id).

        Returns:
            Days in order; the other groups by micro-cents, largest first.
        """
        keys: dict[str, ColumnElement[Any]] = {
            "day": self._day(),
            "model": ledger.c.model,
            "kind": ledger.c.kind,
            "tier": ledger.c.tier_role_id,
            "member": ledger.c.user_id,
        }
        key = keys[by].label("k")
        micro = _sum_micro(ledger.c.cost_micro).label("micro")
        stmt = (
            select(key, func.count().label("n"), micro)
            .where(ledger.c.guild_id == guild_id, ledger.c.at >= since, ledger.c.at < until)
            .group_by(key)
        )
        stmt = stmt.order_by(key) if by == "day" else stmt.order_by(micro.desc(), key)
        rows = await self._sql.all(stmt)
        return [
            SpendBucket(int(r["k"] * DAY) if by == "day" else r["k"], int(r["n"]), int(r["micro"]))
            for r in rows
        ]

    async def total(self, guild_id: int, where: LedgerFilter) -> tuple[int, int]:
        """Return ``(charges, micro-cents)`` of the server's ledger lines that ``where`` keeps."""
        stmt: Any = select(func.count().label("n"), _sum_micro(ledger.c.cost_micro).label("micro"))
        if where.status is not None:
            stmt = stmt.select_from(ledger.outerjoin(jobs, _JOB_OF_CHARGE))
        row = await self._sql.one(_filtered(stmt, guild_id, where))
        assert row is not None
        return int(row["n"]), int(row["micro"])

    async def lines(
        self,
        guild_id: int,
        where: LedgerFilter,
        *,
        before: tuple[float, int] | None,
        limit: int,
    ) -> list[LedgerLine]:
        """Return up to ``limit`` ledger lines, newest first, older than the cursor ``before``.

        Args:
            guild_id: the server.
            where: the filters.
            limit: at most this many lines.
            before: ``(at, id)`` of the last line of the previous page; None for the first.
        """
        stmt: Select[Any] = select(*_LINE_COLUMNS).select_from(
            ledger.outerjoin(jobs, _JOB_OF_CHARGE)
        )
        stmt = _filtered(stmt, guild_id, where)
        if before is not None:
            at, row_id = before
            stmt = stmt.where(or_(ledger.c.at < at, and_(ledger.c.at == at, ledger.c.id < row_id)))
        stmt = stmt.order_by(ledger.c.at.desc(), ledger.c.id.desc()).limit(limit)
        return [_line(r) for r in await self._sql.all(stmt)]

    async def export(
        self, guild_id: int, where: LedgerFilter, batch: int = EXPORT_BATCH
    ) -> AsyncIterator[list[LedgerLine]]:
        """Yield every ledger line ``where`` keeps, oldest first, ``batch`` at a time."""
        after: tuple[float, int] | None = None
        base = _filtered(
            select(*_LINE_COLUMNS).select_from(ledger.outerjoin(jobs, _JOB_OF_CHARGE)),
            guild_id,
            where,
        ).order_by(ledger.c.at, ledger.c.id)
        while True:
            stmt = base
            if after is not None:
                at, row_id = after
                stmt = stmt.where(
                    or_(ledger.c.at > at, and_(ledger.c.at == at, ledger.c.id > row_id))
                )
            rows = [_line(r) for r in await self._sql.all(stmt.limit(batch))]
            if not rows:
                return
            yield rows
            if len(rows) < batch:
                return
            after = (rows[-1].at, rows[-1].id)

    async def models(self, guild_id: int, since: float) -> list[str]:
        """Return the models charged in the server since ``since``, by name (filter choices)."""
        rows = await self._sql.all(
            select(ledger.c.model)
            .where(ledger.c.guild_id == guild_id, ledger.c.at >= since)
            .distinct()
            .order_by(ledger.c.model)
        )
        return [r["model"] for r in rows]

    async def audit(
        self,
        guild_id: int,
        *,
        user_id: int | None,
        what: str | None,
        since: float | None,
        until: float | None,
        before: int | None,
        limit: int | None,
    ) -> list[tuple[int, AuditEntry]]:
        """Return ``(id, entry)`` of the server's audit log, newest first.

        Args:
            guild_id: the server.
            user_id: one admin's changes; None for all.
            since: from, UTC epoch seconds; None: the beginning.
            until: to (excluded), UTC epoch seconds; None: now.
            what: keep the entries whose setting contains this text (any case).
            before: the id of the last entry of the previous page; None for the first.
            limit: at most this many; None for all (an export).
        """
        stmt = select(config_audit).where(config_audit.c.guild_id == guild_id)
        if user_id is not None:
            stmt = stmt.where(config_audit.c.user_id == user_id)
        if what:
            stmt = stmt.where(
                func.lower(config_audit.c.what).contains(what.lower(), autoescape=True)
            )
        if since is not None:
            stmt = stmt.where(config_audit.c.at >= since)
        if until is not None:
            stmt = stmt.where(config_audit.c.at < until)
        if before is not None:
            stmt = stmt.where(config_audit.c.id < before)
        stmt = stmt.order_by(config_audit.c.id.desc())
        if limit is not None:
            stmt = stmt.limit(limit)
        return [
            (
                r["id"],
                AuditEntry(r["guild_id"], r["user_id"], r["what"], r["old"], r["new"], r["at"]),
            )
            for r in await self._sql.all(stmt)
        ]

    async def results(
        self,
        *,
        guild_id: int | None,
        user_id: int | None,
        kind: str | None,
        model: str | None,
        since: float | None,
        until: float | None,
        before: tuple[float, int] | None,
        limit: int,
    ) -> list[ResultItem]:
        """Return finished results with outputs, newest first (a server's, or a member's).

        Args:
            guild_id: one server's results; None for the member's in every server.
            user_id: one member's results; None for everyone's (a server's gallery).
            kind: one kind; None for all.
            model: one model; None for all.
            since: from, UTC epoch seconds; None: the beginning.
            until: to (excluded), UTC epoch seconds; None: now.
            limit: at most this many.
            before: ``(created_at, id)`` of the last result of the previous page.
        """
        stmt = select(jobs).where(jobs.c.status == "completed")
        if guild_id is not None:
            stmt = stmt.where(jobs.c.guild_id == guild_id)
        if user_id is not None:
            stmt = stmt.where(jobs.c.user_id == user_id)
        if kind is not None:
            stmt = stmt.where(jobs.c.kind == kind)
        if model is not None:
            stmt = stmt.where(jobs.c.model == model)
        if since is not None:
            stmt = stmt.where(jobs.c.created_at >= since)
        if until is not None:
            stmt = stmt.where(jobs.c.created_at < until)
        if before is not None:
            at, row_id = before
            stmt = stmt.where(
                or_(jobs.c.created_at < at, and_(jobs.c.created_at == at, jobs.c.id < row_id))
            )
        stmt = stmt.order_by(jobs.c.created_at.desc(), jobs.c.id.desc()).limit(limit)
        return [_result(r) for r in await self._sql.all(stmt)]

    async def result(self, job_id: int) -> ResultItem | None:
        """Return a finished result by its job id, or None."""
        row = await self._sql.one(
            select(jobs).where(jobs.c.id == job_id, jobs.c.status == "completed")
        )
        return None if row is None else _result(row)

    async def member_spend(self, user_id: int, since: float) -> list[SpendBucket]:
        """Return the member's charges since ``since`` per server, largest first.

        The buckets' key is the guild id; served by the index ``ledger_user_at``.
        """
        micro = _sum_micro(ledger.c.cost_micro).label("micro")
        rows = await self._sql.all(
            select(ledger.c.guild_id, func.count().label("n"), micro)
            .where(ledger.c.user_id == user_id, ledger.c.at >= since)
            .group_by(ledger.c.guild_id)
            .order_by(micro.desc(), ledger.c.guild_id)
        )
        return [SpendBucket(r["guild_id"], int(r["n"]), int(r["micro"])) for r in rows]

    async def job_counts(
        self, guild_id: int, now: float, day_start: float
    ) -> tuple[int, int, int, int, list[tuple[int, str, str]]]:
        """Return the server's ``(today, pending, failed in 24 h, in flight, failures)``.

        ``failures``: the last day's, newest first, at most ten ``(job id, model, error)``.
        """
        today = await self._sql.scalar(
            select(func.count()).where(jobs.c.guild_id == guild_id, jobs.c.created_at >= day_start)
        )
        pending = await self._sql.scalar(
            select(func.count()).where(jobs.c.guild_id == guild_id, jobs.c.status == "pending")
        )
        # A job fails at most its timeout after it was made: the created_at bound keeps the
        # query on the server's recent jobs (index jobs_guild_listing).
        recent = and_(
            jobs.c.guild_id == guild_id,
            jobs.c.created_at >= now - 2 * DAY,
            jobs.c.status == "failed",
            jobs.c.finished_at >= now - DAY,
        )
        failed = await self._sql.scalar(select(func.count()).where(recent))
        rows = await self._sql.all(
            select(jobs.c.id, jobs.c.model, jobs.c.error)
            .where(recent)
            .order_by(jobs.c.finished_at.desc())
            .limit(10)
        )
        in_flight = await self._sql.scalar(
            select(func.count()).where(
                reservations.c.guild_id == guild_id, reservations.c.expires_at > now
            )
        )
        return (
            int(today or 0),
            int(pending or 0),
            int(failed or 0),
            int(in_flight or 0),
            [(r["id"], r["model"], r["error"] or "") for r in rows],
        )
