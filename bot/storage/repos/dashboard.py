"""The web dashboard's tables and its reads of the ledger, jobs and audit log, both engines.

:class:`DashboardStore`: sessions (``dashboard_sessions``) and access roles
(``dashboard_roles``); sign-ins under way live in a signed cookie since issue 35
(``bot.dashboard.oauth.LoginCookie``), and ``dashboard_logins`` is no longer used.
:class:`DashboardViews`: the read-only views of the pages (spend by day, model, kind, tier
and member; ledger lines with their jobs; the audit log; finished results). Money stays integer
micro-cents (the sums are ``SUM(bigint)``, exact on both engines); pages are keyset-paged
(newest first, by time then id), so page 500 costs what page 1 costs, and an export reads the
ledger in batches, oldest first, holding one batch at a time.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Sequence
from typing import Any, Final

from sqlalchemy import (
    BigInteger,
    ColumnElement,
    Select,
    Text,
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
    CreditEntryKind,
    DashboardSession,
    GuildRef,
    LedgerFilter,
    LedgerLine,
    ResultItem,
    SpendBucket,
)
from bot.storage.repos.dialect import upsert
from bot.storage.repos.safety import job_hidden
from bot.storage.schema import (
    config_audit,
    credit_entries,
    dashboard_roles,
    dashboard_sessions,
    jobs,
    ledger,
    ledger_daily,
    member_settings,
    reservations,
    takes,
)
from bot.storage.sql import Row, Sql

DAY: Final = 86_400.0
"""Seconds in a UTC day (the ledger's times are UTC epoch seconds; no leap seconds)."""

JOB_AFTER_CHARGE: Final = 60.0
"""Seconds within which a job is stored after its charge (the same transaction, ``settle``):
a job of the same key, kind and task id outside them is another task under a reused id."""

EXPORT_BATCH: Final = 10_000
"""Ledger lines an export reads per query: its memory is one batch, whatever the ledger's size."""


def _sum_micro(column: ColumnElement[Any]) -> ColumnElement[int]:
    """``SUM`` of a micro-cent column as an exact integer on both engines (0 when empty)."""
    return cast(func.coalesce(func.sum(column), 0), BigInteger)


DIMENSIONS: Final = ("total", "model", "kind", "tier", "member", "stage")
"""The dimensions of ``ledger_daily``: each charge adds to one bucket of each."""


def day_of(at: float) -> int:
    """The UTC midnight (epoch seconds) of the day of ``at``."""
    return int(at // DAY) * int(DAY)


async def add_to_daily(
    sql: Sql,
    *,
    guild_id: int,
    at: float,
    user_id: int,
    kind: str,
    model: str,
    tier_role_id: int | None,
    micro: int,
    stage: str | None = None,
) -> None:
    """Add one charge to its server's day in ``ledger_daily`` (one bucket per dimension).

    ``stage``: the charge's Draft → Final stage (``"draft"``, ``"final"``), None for any other
    (the ``stage`` dimension's bucket ``""``).

    Called by :meth:`bot.storage.repos.ledger.LedgerStore.insert_charge` in the charge's own
    transaction, only when the charge was appended: the daily sums stay exactly the ledger's.
    """
    day = day_of(at)
    buckets = {
        "total": "",
        "model": model,
        "kind": kind,
        "tier": "" if tier_role_id is None else str(tier_role_id),
        "member": str(user_id),
        "stage": stage or "",
    }
    stmt = upsert(sql, ledger_daily)
    stmt = stmt.on_conflict_do_update(
        index_elements=[
            ledger_daily.c.guild_id,
            ledger_daily.c.day,
            ledger_daily.c.dimension,
            ledger_daily.c.bucket,
        ],
        set_={
            "charges": ledger_daily.c.charges + stmt.excluded.charges,
            "micro": ledger_daily.c.micro + stmt.excluded.micro,
        },
    )
    await sql.run(
        stmt,
        [
            {
                "guild_id": guild_id,
                "day": day,
                "dimension": dimension,
                "bucket": bucket,
                "charges": 1,
                "micro": micro,
            }
            for dimension, bucket in buckets.items()
        ],
    )


async def rebuild_daily(sql: Sql) -> None:
    """Compute ``ledger_daily`` again from the ledger.

    For rows written around ``LedgerStore.insert_charge``, such as a benchmark's bulk load.
    """
    if sql.dialect == "postgresql":
        day: ColumnElement[Any] = cast(func.floor(ledger.c.at / DAY), BigInteger) * int(DAY)
    else:
        day = cast(ledger.c.at / DAY, BigInteger) * int(DAY)
    buckets: dict[str, ColumnElement[Any]] = {
        "total": literal(""),
        "model": ledger.c.model,
        "kind": ledger.c.kind,
        "tier": func.coalesce(cast(ledger.c.tier_role_id, Text), ""),
        "member": cast(ledger.c.user_id, Text),
        "stage": func.coalesce(ledger.c.stage, ""),
    }
    columns = ["guild_id", "day", "dimension", "bucket", "charges", "micro"]
    async with sql.write() as tx:
        await tx.run(delete(ledger_daily))
        for dimension, bucket in buckets.items():
            source = select(
                ledger.c.guild_id,
                day,
                literal(dimension),
                bucket,
                func.count(),
                _sum_micro(ledger.c.cost_micro),
            )
            grouped = [ledger.c.guild_id, day] + ([] if dimension == "total" else [bucket])
            source = source.group_by(*grouped)
            await tx.run(insert(ledger_daily).from_select(columns, source))


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
    # A job's charge: its job's summary; a text charge: its own (0013_thumbnails).
    func.coalesce(jobs.c.prompt_summary, ledger.c.prompt_summary).label("prompt_summary"),
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


_PRIVATE_MEMBER: Final = (
    select(member_settings.c.user_id)
    .where(member_settings.c.user_id == jobs.c.user_id, member_settings.c.private == 1)
    .correlate(jobs)
)
"""The job's member keeps their results private (``/settings defaults private``)."""


class DashboardViews:
    """The dashboard's reads of the ledger, the jobs and the audit log.

    Args:
        sql: the database's executor.
    """

    def __init__(self, sql: Sql) -> None:
        self._sql = sql

    async def daily(
        self, guild_id: int, since: float, until: float, dimension: str
    ) -> list[SpendBucket]:
        """Return the server's charges in the UTC days ``[since, until)`` by ``dimension``.

        Read from ``ledger_daily`` (a few hundred rows a day, whatever the number of charges).

        Args:
            guild_id: the server.
            since: the first day's UTC midnight, epoch seconds.
            until: the UTC midnight after the last day, epoch seconds.
            dimension: ``day`` (key: the day's UTC midnight; days without charges left out),
                ``model``, ``kind``, ``tier`` (key: the role id, None without a tier),
                ``member`` (key: the user id) or ``stage`` (key: ``draft``, ``final``, or ``""``
                for every other charge).

        Returns:
            Days in order; the other groups by micro-cents, largest first.
        """
        by_day = dimension == "day"
        key = ledger_daily.c.day if by_day else ledger_daily.c.bucket
        micro = _sum_micro(ledger_daily.c.micro).label("micro")
        charges = _sum_micro(ledger_daily.c.charges).label("n")
        stmt = (
            select(key.label("k"), charges, micro)
            .where(
                ledger_daily.c.guild_id == guild_id,
                ledger_daily.c.dimension == ("total" if by_day else dimension),
                ledger_daily.c.day >= since,
                ledger_daily.c.day < until,
            )
            .group_by(key)
        )
        stmt = stmt.order_by(key) if by_day else stmt.order_by(micro.desc(), key)
        buckets = []
        for r in await self._sql.all(stmt):
            raw = r["k"]
            found: str | int | None = raw
            if dimension in ("day", "member"):
                found = int(raw)
            elif dimension == "tier":
                found = int(raw) if raw else None
            buckets.append(SpendBucket(found, int(r["n"]), int(r["micro"])))
        return buckets

    async def daily_kinds(
        self, guild_id: int, since: float, until: float
    ) -> dict[int, dict[str, int]]:
        """Return the server's micro-cents in the UTC days ``[since, until)`` by day and kind.

        Read from ``ledger_daily``'s ``kind`` rows (the Spend chart's stacks).

        Returns:
            day's UTC midnight (epoch seconds) -> kind -> micro-cents; days and kinds without
            charges left out.
        """
        micro = _sum_micro(ledger_daily.c.micro).label("micro")
        stmt = (
            select(ledger_daily.c.day.label("d"), ledger_daily.c.bucket.label("k"), micro)
            .where(
                ledger_daily.c.guild_id == guild_id,
                ledger_daily.c.dimension == "kind",
                ledger_daily.c.day >= since,
                ledger_daily.c.day < until,
            )
            .group_by(ledger_daily.c.day, ledger_daily.c.bucket)
        )
        found: dict[int, dict[str, int]] = {}
        for r in await self._sql.all(stmt):
            if int(r["micro"]):
                found.setdefault(int(r["d"]), {})[str(r["k"])] = int(r["micro"])
        return found

    async def total(self, guild_id: int, where: LedgerFilter) -> tuple[int, int]:
        """Return ``(charges, micro-cents)`` of the server's ledger lines that ``where`` keeps.

        From ``ledger_daily`` when the filter is whole UTC days and at most one of member,
        model and kind (the pages' common case); from the ledger itself otherwise.
        """
        narrowed = [
            (name, value)
            for name, value in (
                ("member", where.user_id),
                ("model", where.model),
                ("kind", where.kind),
            )
            if value is not None
        ]
        aligned = all(t is None or t % DAY == 0 for t in (where.since, where.until))
        if where.status is None and len(narrowed) <= 1 and aligned:
            dimension, bucket = narrowed[0] if narrowed else ("total", "")
            stmt = select(
                _sum_micro(ledger_daily.c.charges).label("n"),
                _sum_micro(ledger_daily.c.micro).label("micro"),
            ).where(
                ledger_daily.c.guild_id == guild_id,
                ledger_daily.c.dimension == dimension,
                ledger_daily.c.bucket == str(bucket),
            )
            if where.since is not None:
                stmt = stmt.where(ledger_daily.c.day >= where.since)
            if where.until is not None:
                stmt = stmt.where(ledger_daily.c.day < where.until)
            row = await self._sql.one(stmt)
        else:
            scan: Any = select(
                func.count().label("n"), _sum_micro(ledger.c.cost_micro).label("micro")
            )
            if where.status is not None:
                scan = scan.select_from(ledger.outerjoin(jobs, _JOB_OF_CHARGE))
            row = await self._sql.one(_filtered(scan, guild_id, where))
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
            # The bound on ``at`` alone first: an index range, not a scan from the newest.
            stmt = stmt.where(ledger.c.at <= at, or_(ledger.c.at < at, ledger.c.id < row_id))
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
                stmt = stmt.where(ledger.c.at >= at, or_(ledger.c.at > at, ledger.c.id > row_id))
            rows = [_line(r) for r in await self._sql.all(stmt.limit(batch))]
            if not rows:
                return
            yield rows
            if len(rows) < batch:
                return
            after = (rows[-1].at, rows[-1].id)

    async def credit_lines(
        self, guild_id: int, where: LedgerFilter, *, limit: int | None, newest_first: bool
    ) -> list[LedgerLine]:
        """Members' credit packs bought, and refunded, in the server, as ledger lines.

        A purchase or refund is the server's when it was made there (``credit_entries.
        guild_id``, docs/credits.md). ``kind`` is ``credit_purchase`` or ``credit_refund``,
        ``model`` the pack's SKU id, ``task_id`` the entitlement id, ``cost_micro`` the change
        of the member's balance (a refund's is negative), ``status`` empty. Filters on
        model, kind or status (a charge's) match none of them.

        Args:
            guild_id: the server.
            where: the filters (member, since, until apply).
            limit: at most this many lines; None: all.
            newest_first: the page's order (else an export's, oldest first).
        """
        if where.model is not None or where.kind is not None or where.status is not None:
            return []
        c = credit_entries.c
        stmt = select(c.id, c.at, c.user_id, c.kind, c.sku_id, c.entitlement_id, c.amount_micro)
        kinds = (CreditEntryKind.PURCHASE.value, CreditEntryKind.REFUND.value)
        stmt = stmt.where(c.guild_id == guild_id, c.kind.in_(kinds))
        if where.user_id is not None:
            stmt = stmt.where(c.user_id == where.user_id)
        if where.since is not None:
            stmt = stmt.where(c.at >= where.since)
        if where.until is not None:
            stmt = stmt.where(c.at < where.until)
        order = (c.at.desc(), c.id.desc()) if newest_first else (c.at, c.id)
        stmt = stmt.order_by(*order)
        if limit is not None:
            stmt = stmt.limit(limit)
        return [
            LedgerLine(
                id=row["id"],
                at=row["at"],
                user_id=row["user_id"],
                kind=f"credit_{row['kind']}",
                model="" if row["sku_id"] is None else str(row["sku_id"]),
                job_id=None,
                task_id=None if row["entitlement_id"] is None else str(row["entitlement_id"]),
                cost_micro=int(row["amount_micro"]),
                status="",
                prompt="",
            )
            for row in await self._sql.all(stmt)
        ]

    async def models(self, guild_id: int, since: float) -> list[str]:
        """Return the models charged in the server since the UTC day of ``since``, by name."""
        rows = await self._sql.all(
            select(ledger_daily.c.bucket)
            .where(
                ledger_daily.c.guild_id == guild_id,
                ledger_daily.c.dimension == "model",
                ledger_daily.c.day >= day_of(since),
            )
            .distinct()
            .order_by(ledger_daily.c.bucket)
        )
        return [r["bucket"] for r in rows]

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
                AuditEntry(
                    r["guild_id"], r["user_id"], r["what"], r["old"], r["new"], r["at"], r["via"]
                ),
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
        private_hidden_from: int | None = None,
        safety_hidden: bool = False,
    ) -> list[ResultItem]:
        """Return finished results with outputs, newest first (a server's, or a member's).

        Results the server's safety policy holds, withholds or rejected
        (:func:`bot.storage.repos.safety.job_hidden`) are left out unless ``safety_hidden``.

        Args:
            guild_id: one server's results; None for the member's in every server.
            user_id: one member's results; None for everyone's (a server's gallery).
            kind: one kind; None for all.
            model: one model; None for all.
            since: from, UTC epoch seconds; None: the beginning.
            until: to (excluded), UTC epoch seconds; None: now.
            limit: at most this many.
            before: ``(created_at, id)`` of the last result of the previous page.
            private_hidden_from: a viewer from whom the results of members with private
                results on (``member_settings.private``) are left out, but their own; None:
                none left out.
            safety_hidden: keep held and withheld results (never for a page members see).
        """
        stmt = select(jobs).where(jobs.c.status == "completed")
        if not safety_hidden:
            stmt = stmt.where(~job_hidden(jobs.c.id))
        if private_hidden_from is not None:
            stmt = stmt.where(or_(jobs.c.user_id == private_hidden_from, ~_PRIVATE_MEMBER.exists()))
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
                jobs.c.created_at <= at, or_(jobs.c.created_at < at, jobs.c.id < row_id)
            )
        stmt = stmt.order_by(jobs.c.created_at.desc(), jobs.c.id.desc()).limit(limit)
        return [_result(r) for r in await self._sql.all(stmt)]

    async def result(self, job_id: int) -> ResultItem | None:
        """Return a finished result by its job id, or None."""
        row = await self._sql.one(
            select(jobs).where(jobs.c.id == job_id, jobs.c.status == "completed")
        )
        return None if row is None else _result(row)

    async def card_takes(self, job_id: int) -> list[tuple[int, int | None, bool]]:
        """Return the takes of ``job_id``'s request, in order; empty when it is no take.

        Each ``(job id, card message id, finished with a result)``: the takes of one request
        share one card, whose files are their finished results' (``bot.discord.delivery``).
        """
        mine = takes.alias("mine")
        rows = await self._sql.all(
            select(jobs.c.id, jobs.c.message_id, jobs.c.status, jobs.c.outputs)
            .select_from(mine)
            .join(takes, takes.c.group_id == mine.c.group_id)
            .join(jobs, jobs.c.id == takes.c.job_id)
            .where(mine.c.job_id == job_id)
            .order_by(takes.c.position)
        )
        return [
            (
                r["id"],
                r["message_id"],
                r["status"] == "completed" and bool(json.loads(r["outputs"] or "[]")),
            )
            for r in rows
        ]

    async def private_members(self, user_ids: Sequence[int]) -> set[int]:
        """Return which of the members keep their results private (``/settings``)."""
        if not user_ids:
            return set()
        rows = await self._sql.all(
            select(member_settings.c.user_id).where(
                member_settings.c.user_id.in_(sorted(set(user_ids))),
                member_settings.c.private == 1,
            )
        )
        return {r["user_id"] for r in rows}

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
