"""PostgreSQL jobs: :class:`bot.storage.repositories.JobRepository` over an :class:`Executor`.

The poller's reads are served by the partial indexes of ``0001_initial.sql`` (``jobs_due``,
``jobs_delivery_due``...): their cost follows the due jobs, not all jobs ever.
"""

from __future__ import annotations

import json
from collections.abc import Collection, Mapping, Sequence
from dataclasses import replace
from typing import Final

from bot.storage.models import DeliveryRoute, Job, JobStatus, Kind, NewJob, PollUpdate
from bot.storage.money import to_micro
from bot.storage.postgres.engine import Executor
from bot.storage.repositories import PollCandidate, PollRanking, last_per_job
from bot.storage.rows import job_from_row

JOB_COLUMNS: Final = (
    "id, task_id, provider, poll_url, kind, model, guild_id, channel_id, message_id, user_id, "
    "prompt_summary, details, cost_micro, key_fingerprint, created_at, next_poll_at, status, "
    "finished_at, outputs, error, poll_count, announced_at, last_progress_at, unwatched_at, "
    "delivery_route, delivery_attempts, next_delivery_at, delivery_error, poll_token, "
    "delivery_token"
)

# Literal 'pending' (not a parameter) is what lets the planner use the partial indexes.
DUE_JOBS_SQL: Final = (
    f"SELECT {JOB_COLUMNS} FROM jobs WHERE status = 'pending' AND next_poll_at <= $1"
    " AND unwatched_at IS NULL AND key_fingerprint <> ALL($2::text[])"
    " ORDER BY next_poll_at LIMIT $3"
)
# The claim reads the due jobs as a ranking sees them (index-only on jobs_claim), ...
CLAIM_CANDIDATES_SQL: Final = (
    "SELECT id, key_fingerprint, guild_id, next_poll_at FROM jobs WHERE status = 'pending'"
    " AND next_poll_at <= $1 AND unwatched_at IS NULL AND key_fingerprint <> ALL($2::text[])"
    " ORDER BY next_poll_at LIMIT $3"
)
# ... then locks them row by row in the order given (``$1``: their ids, best first), ``$3`` of
# each key: a row another process is claiming right now is skipped rather than waited for (and
# one claimed since is no longer due), so concurrent claims split the due jobs between them.
# Per key (LATERAL), so that the rows locked are only the ones claimed.
CLAIM_RANKED_SQL: Final = (
    "SELECT j.id, j.next_poll_at FROM (SELECT DISTINCT key_fingerprint FROM jobs"
    " WHERE id = ANY($1::bigint[])) AS k"
    " CROSS JOIN LATERAL (SELECT id, next_poll_at FROM jobs WHERE id = ANY($1::bigint[])"
    " AND key_fingerprint = k.key_fingerprint AND status = 'pending' AND next_poll_at <= $2"
    " AND unwatched_at IS NULL ORDER BY array_position($1::bigint[], id) LIMIT $3"
    " FOR UPDATE SKIP LOCKED) AS j ORDER BY array_position($1::bigint[], j.id)"
)
CLAIM_DELIVERIES_SQL: Final = (
    f"SELECT {JOB_COLUMNS} FROM jobs WHERE status <> 'pending' AND announced_at IS NULL"
    " AND next_delivery_at <= $1 ORDER BY next_delivery_at LIMIT $2 FOR UPDATE SKIP LOCKED"
)
# Many polls' outcomes in one statement, each row fenced like schedule_poll's.
SCHEDULE_POLLS_SQL: Final = (
    "UPDATE jobs SET next_poll_at = u.at, poll_count = u.n,"
    " last_progress_at = COALESCE(u.progress, jobs.last_progress_at)"
    " FROM unnest($1::bigint[], $2::double precision[], $3::integer[], $4::bigint[],"
    " $5::double precision[]) AS u(id, at, n, token, progress)"
    " WHERE jobs.id = u.id AND jobs.status = 'pending'"
    " AND (u.token IS NULL OR jobs.poll_token = u.token)"
)
# A released lease only ever brings the due time forward: a job polled or delivered since
# (rescheduled later by its holder) keeps its own time.
RELEASE_POLLS_SQL: Final = (
    "UPDATE jobs SET next_poll_at = $3 FROM unnest($1::bigint[], $2::bigint[]) AS u(id, token)"
    " WHERE jobs.id = u.id AND jobs.status = 'pending' AND jobs.poll_token = u.token"
    " AND jobs.next_poll_at > $3"
)
RELEASE_DELIVERIES_SQL: Final = (
    "UPDATE jobs SET next_delivery_at = $3"
    " FROM unnest($1::bigint[], $2::bigint[]) AS u(id, token)"
    " WHERE jobs.id = u.id AND jobs.status <> 'pending' AND jobs.announced_at IS NULL"
    " AND jobs.delivery_token = u.token AND jobs.next_delivery_at > $3"
)
DUE_DELIVERIES_SQL: Final = (
    f"SELECT {JOB_COLUMNS} FROM jobs WHERE status <> 'pending' AND announced_at IS NULL"
    " AND next_delivery_at <= $1 ORDER BY next_delivery_at LIMIT $2"
)


class PgJobs:
    """Asynchronous jobs: storing, polling (with leases), delivery and listing."""

    def __init__(self, sql: Executor) -> None:
        self._sql = sql

    async def get(self, job_id: int) -> Job | None:
        """Return the job, or None."""
        row = await self._sql.one(f"SELECT {JOB_COLUMNS} FROM jobs WHERE id = $1", job_id)
        return None if row is None else job_from_row(row)

    async def by_task(self, task_id: str) -> Job | None:
        """Return the job of the service's ``task_id``, or None."""
        row = await self._sql.one(f"SELECT {JOB_COLUMNS} FROM jobs WHERE task_id = $1", task_id)
        return None if row is None else job_from_row(row)

    async def insert(self, job: NewJob) -> Job:
        """Store a pending job and return it; if its task is stored already, return that one.

        Takes the guild's lock first: a pending video replaces a reservation in the caps.

        Raises:
            ConstraintError: the job breaks a constraint (e.g. a negative cost).
        """
        async with self._sql.write() as tx:
            await tx.lock_guild(job.guild_id)
            await tx.run(
                "INSERT INTO jobs (task_id, provider, poll_url, kind, model, guild_id, channel_id,"
                " message_id, user_id, prompt_summary, details, cost_micro, key_fingerprint,"
                " created_at, next_poll_at)"
                " VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14, $15)"
                " ON CONFLICT (task_id) DO NOTHING",
                job.task_id,
                job.provider,
                job.poll_url,
                job.kind.value,
                job.model,
                job.guild_id,
                job.channel_id,
                job.message_id,
                job.user_id,
                job.prompt_summary,
                json.dumps(dict(job.details), sort_keys=True),
                to_micro(job.cost_cents),
                job.key_fingerprint,
                job.created_at,
                job.next_poll_at,
            )
            stored = await PgJobs(tx).by_task(job.task_id)
        assert stored is not None
        return stored

    # -- polling ------------------------------------------------------------------------------

    async def due(self, now: float, limit: int, *, skip_keys: Collection[str] = ()) -> list[Job]:
        """Return up to ``limit`` watched pending jobs with ``next_poll_at <= now``, earliest first.

        Args:
            now: UTC epoch seconds.
            limit: the most jobs to return.
            skip_keys: key fingerprints whose jobs are left out (keys with no room to poll now).
        """
        rows = await self._sql.all(DUE_JOBS_SQL, now, list(skip_keys), limit)
        return [job_from_row(r) for r in rows]

    async def next_due_at(self) -> float | None:
        """Return the earliest ``next_poll_at`` of the watched pending jobs; None if none."""
        value = await self._sql.value(
            "SELECT MIN(next_poll_at) FROM jobs WHERE status = 'pending' AND unwatched_at IS NULL"
        )
        return None if value is None else float(value)

    async def pending_count(self) -> int:
        """Return how many jobs are pending (watched or not)."""
        return await self._sql.integer("SELECT COUNT(*) FROM jobs WHERE status = 'pending'")

    async def claim_due(
        self,
        now: float,
        until: float,
        *,
        limit: int,
        per_key: int,
        skip_keys: Collection[str] = (),
        rank: PollRanking | None = None,
    ) -> list[Job]:
        """Lease due jobs (``next_poll_at = until``, ``poll_token + 1``) and return them.

        ``FOR UPDATE SKIP LOCKED``: concurrent claims from other processes (or machines) take
        disjoint jobs without waiting for each other; only the rows claimed are locked. The due
        jobs are read first (no lock), ranked (by ``rank``, else earliest due first), then
        claimed in that order.
        """
        candidates = [
            PollCandidate(r[0], r[1], r[2], r[3])
            for r in await self._sql.all(CLAIM_CANDIDATES_SQL, now, list(skip_keys), limit)
        ]
        ranked = [candidate.id for candidate in (rank(candidates) if rank else candidates)]
        if not ranked:
            return []
        async with self._sql.write() as tx:
            found = await tx.all(CLAIM_RANKED_SQL, ranked, now, per_key)
            due = {r["id"]: r["next_poll_at"] for r in found}
            if not due:
                return []
            rows = await tx.all(
                f"UPDATE jobs SET next_poll_at = $1, poll_token = poll_token + 1"
                f" WHERE id = ANY($2::bigint[]) RETURNING {JOB_COLUMNS}",
                until,
                list(due),
            )
        # next_poll_at: when each fell due, as on SQLite (the lease's expiry is ``until``).
        by_id = {row["id"]: job_from_row(row) for row in rows}
        return [replace(by_id[i], next_poll_at=at) for i, at in due.items()]

    async def schedule_poll(
        self, job_id: int, next_poll_at: float, poll_count: int, *, token: int | None = None
    ) -> bool:
        """Set when a pending job is polled next (UTC epoch seconds) and the polls made so far.

        Fenced: with a ``token``, only under that poll lease.
        """
        changed = await self._sql.run(
            "UPDATE jobs SET next_poll_at = $1, poll_count = $2"
            " WHERE id = $3 AND status = 'pending' AND ($4::bigint IS NULL OR poll_token = $4)",
            next_poll_at,
            poll_count,
            job_id,
            token,
        )
        return changed > 0

    async def schedule_polls(self, updates: Sequence[PollUpdate]) -> int:
        """Apply many polls' outcomes in one statement, each fenced on its own row."""
        kept = last_per_job(updates)
        if not kept:
            return 0
        return await self._sql.run(
            SCHEDULE_POLLS_SQL,
            [u.job_id for u in kept],
            [u.next_poll_at for u in kept],
            [u.poll_count for u in kept],
            [u.token for u in kept],
            [u.progress_at for u in kept],
        )

    async def set_unwatched(
        self, job_id: int, at: float | None, *, token: int | None = None
    ) -> bool:
        """Stop (``at``) or resume (None) watching a pending job; True if it was pending."""
        changed = await self._sql.run(
            "UPDATE jobs SET unwatched_at = $1 WHERE id = $2 AND status = 'pending'"
            " AND ($3::bigint IS NULL OR poll_token = $3)",
            at,
            job_id,
            token,
        )
        return changed > 0

    async def set_progress_at(self, job_id: int, at: float) -> None:
        """Record when the job's placeholder was last updated (UTC epoch seconds)."""
        await self._sql.run("UPDATE jobs SET last_progress_at = $1 WHERE id = $2", at, job_id)

    async def set_message(self, job_id: int, message_id: int, due_at: float | None = None) -> None:
        """Record the job's placeholder message; a pending job falls due by ``due_at``."""
        await self._sql.run(
            "UPDATE jobs SET message_id = $1,"
            " next_poll_at = CASE WHEN $2::double precision IS NULL OR status <> 'pending'"
            " THEN next_poll_at ELSE LEAST(next_poll_at, $2) END WHERE id = $3",
            message_id,
            due_at,
            job_id,
        )

    async def finish(
        self,
        job_id: int,
        status: JobStatus,
        outputs: Sequence[str],
        error: str | None,
        finished_at: float,
        *,
        token: int | None = None,
    ) -> bool:
        """Mark a pending job finished; True only the first time (exactly once, any process).

        Raises:
            ValueError: ``status`` is PENDING.
        """
        if status is JobStatus.PENDING:
            raise ValueError("a job cannot finish as pending")
        changed = await self._sql.run(
            "UPDATE jobs SET status = $1, outputs = $2, error = $3, finished_at = $4,"
            " next_delivery_at = $4, unwatched_at = NULL WHERE id = $5 AND status = 'pending'"
            " AND ($6::bigint IS NULL OR poll_token = $6)",
            status.value,
            json.dumps(list(outputs)),
            error,
            finished_at,
            job_id,
            token,
        )
        return changed > 0

    # -- delivery -----------------------------------------------------------------------------

    async def due_deliveries(self, now: float, limit: int) -> list[Job]:
        """Return up to ``limit`` finished, undelivered jobs due for delivery, oldest first."""
        return [job_from_row(r) for r in await self._sql.all(DUE_DELIVERIES_SQL, now, limit)]

    async def next_delivery_at(self) -> float | None:
        """Return when the next delivery attempt is due (UTC epoch seconds), or None."""
        value = await self._sql.value(
            "SELECT MIN(next_delivery_at) FROM jobs"
            " WHERE status <> 'pending' AND announced_at IS NULL"
        )
        return None if value is None else float(value)

    async def claim_deliveries(self, now: float, until: float, *, limit: int) -> list[Job]:
        """Lease due deliveries (``next_delivery_at = until``, ``delivery_token + 1``).

        ``FOR UPDATE SKIP LOCKED``, as :meth:`claim_due`.
        """
        async with self._sql.write() as tx:
            ids = [r["id"] for r in await tx.all(CLAIM_DELIVERIES_SQL, now, limit)]
            if not ids:
                return []
            rows = await tx.all(
                f"UPDATE jobs SET next_delivery_at = $1, delivery_token = delivery_token + 1"
                f" WHERE id = ANY($2::bigint[]) RETURNING {JOB_COLUMNS}",
                until,
                ids,
            )
        by_id = {row["id"]: job_from_row(row) for row in rows}
        return [by_id[i] for i in ids]

    async def schedule_delivery(
        self,
        job_id: int,
        route: DeliveryRoute,
        attempts: int,
        next_at: float,
        error: str | None,
        *,
        token: int | None = None,
    ) -> None:
        """Set a finished, undelivered job's next delivery attempt (``next_at``: UTC seconds)."""
        await self._sql.run(
            "UPDATE jobs SET delivery_route = $1, delivery_attempts = $2, next_delivery_at = $3,"
            " delivery_error = $4 WHERE id = $5 AND announced_at IS NULL AND status <> 'pending'"
            " AND ($6::bigint IS NULL OR delivery_token = $6)",
            route.value,
            attempts,
            next_at,
            error,
            job_id,
            token,
        )

    async def mark_announced(
        self,
        job_id: int,
        at: float,
        route: DeliveryRoute = DeliveryRoute.PLACEHOLDER,
        *,
        token: int | None = None,
    ) -> bool:
        """Record that the job's result was delivered by ``route``; True only the first time."""
        changed = await self._sql.run(
            "UPDATE jobs SET announced_at = $1, delivery_route = $2, next_delivery_at = NULL"
            " WHERE id = $3 AND announced_at IS NULL"
            " AND ($4::bigint IS NULL OR delivery_token = $4)",
            at,
            route.value,
            job_id,
            token,
        )
        return changed > 0

    async def release_leases(
        self, polls: Mapping[int, int], deliveries: Mapping[int, int], at: float
    ) -> int:
        """Make leased jobs due again at ``at`` (a stopping process's leases; fenced)."""
        changed = 0
        async with self._sql.write() as tx:
            if polls:
                changed += await tx.run(RELEASE_POLLS_SQL, list(polls), list(polls.values()), at)
            if deliveries:
                changed += await tx.run(
                    RELEASE_DELIVERIES_SQL, list(deliveries), list(deliveries.values()), at
                )
        return changed

    # -- listing and statistics ---------------------------------------------------------------

    async def recent(self, guild_id: int, *, user_id: int | None, limit: int) -> list[Job]:
        """Return a guild's (or one member's) most recent jobs, newest first (``/jobs``)."""
        if user_id is None:
            rows = await self._sql.all(
                f"SELECT {JOB_COLUMNS} FROM jobs WHERE guild_id = $1"
                " ORDER BY created_at DESC, id DESC LIMIT $2",
                guild_id,
                limit,
            )
        else:
            rows = await self._sql.all(
                f"SELECT {JOB_COLUMNS} FROM jobs WHERE guild_id = $1 AND user_id = $2"
                " ORDER BY created_at DESC, id DESC LIMIT $3",
                guild_id,
                user_id,
                limit,
            )
        return [job_from_row(r) for r in rows]

    async def completion_seconds(self, model: str, limit: int = 20) -> list[float]:
        """Return how long the model's last ``limit`` completed jobs took, seconds, newest first."""
        rows = await self._sql.all(
            "SELECT finished_at - created_at FROM jobs WHERE status = 'completed' AND model = $1"
            " ORDER BY finished_at DESC LIMIT $2",
            model,
            limit,
        )
        return [float(r[0]) for r in rows]

    async def pending_videos(self, guild_id: int, *, user_id: int | None = None) -> int:
        """Return how many of the guild's (or a member's) video jobs are pending and watched."""
        sql = (
            "SELECT COUNT(*) FROM jobs WHERE status = 'pending' AND kind = 'video'"
            " AND unwatched_at IS NULL AND guild_id = $1"
        )
        if user_id is None:
            return await self._sql.integer(sql, guild_id)
        return await self._sql.integer(sql + " AND user_id = $2", guild_id, user_id)

    async def pending_on_key(self, guild_id: int, key_fingerprint: str) -> dict[Kind, int]:
        """Return how many of the guild's jobs submitted with the key are pending, by kind."""
        rows = await self._sql.all(
            "SELECT kind, COUNT(*) AS n FROM jobs WHERE status = 'pending'"
            " AND guild_id = $1 AND key_fingerprint = $2 GROUP BY kind",
            guild_id,
            key_fingerprint,
        )
        return {Kind(row["kind"]): int(row["n"]) for row in rows}

    async def state_counts(self) -> dict[tuple[str, str], int]:
        """Count the open jobs by ``(state, kind)``: ``pending`` and ``undelivered``.

        Both halves read partial indexes (``jobs_due``, ``jobs_delivery_due``), never the
        finished and shown jobs, which only grow.
        """
        rows = await self._sql.all(
            "SELECT 'pending' AS state, kind, COUNT(*) AS n FROM jobs"
            " WHERE status = 'pending' GROUP BY kind"
            " UNION ALL SELECT 'undelivered', kind, COUNT(*) FROM jobs"
            " WHERE status <> 'pending' AND announced_at IS NULL GROUP BY kind"
        )
        return {(str(row["state"]), str(row["kind"])): int(row["n"]) for row in rows}
