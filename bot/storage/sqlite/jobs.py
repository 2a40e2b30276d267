"""SQLite jobs: :class:`bot.storage.repositories.JobRepository` over an :class:`Executor`."""

from __future__ import annotations

import json
from collections.abc import Collection, Mapping, Sequence
from dataclasses import replace
from typing import Final

from bot.storage.models import DeliveryRoute, Job, JobStatus, Kind, NewJob, PollUpdate
from bot.storage.money import to_micro
from bot.storage.repositories import PollCandidate, PollRanking, last_per_job, per_key_cap
from bot.storage.rows import job_from_row
from bot.storage.sqlite.engine import Executor

JOB_COLUMNS: Final = (
    "id, task_id, provider, poll_url, kind, model, guild_id, channel_id, message_id, user_id, "
    "prompt_summary, details, cost_micro, key_fingerprint, created_at, next_poll_at, status, "
    "finished_at, outputs, error, poll_count, announced_at, last_progress_at, unwatched_at, "
    "delivery_route, delivery_attempts, next_delivery_at, delivery_error, poll_token, "
    "delivery_token"
)

# The hot queries of the poller, named so that tests can check their plans (query_plan).
# Literal 'pending' (not a parameter) is what lets SQLite use the partial indexes of 0002.
_DUE_JOBS_SQL: Final = (
    f"SELECT {JOB_COLUMNS} FROM jobs WHERE status = 'pending' AND next_poll_at <= ?"
    " AND unwatched_at IS NULL{skip} ORDER BY next_poll_at LIMIT ?"
)
DUE_JOBS_SQL: Final = _DUE_JOBS_SQL.format(skip="")
# The claim's candidates: the same rows in the same order as DUE_JOBS_SQL, but only the columns
# the claim needs, read from the covering index jobs_claim (0010) without visiting the table.
_CLAIM_CANDIDATES_SQL: Final = (
    "SELECT id, key_fingerprint, guild_id, next_poll_at FROM jobs"
    " WHERE status = 'pending' AND next_poll_at <= ? AND unwatched_at IS NULL{skip}"
    " ORDER BY next_poll_at LIMIT ?"
)
CLAIM_CANDIDATES_SQL: Final = _CLAIM_CANDIDATES_SQL.format(skip="")
NEXT_DUE_SQL: Final = (
    "SELECT MIN(next_poll_at) FROM jobs WHERE status = 'pending' AND unwatched_at IS NULL"
)
DUE_DELIVERIES_SQL: Final = (
    f"SELECT {JOB_COLUMNS} FROM jobs WHERE status <> 'pending' AND announced_at IS NULL"
    " AND next_delivery_at <= ? ORDER BY next_delivery_at LIMIT ?"
)
NEXT_DELIVERY_SQL: Final = (
    "SELECT MIN(next_delivery_at) FROM jobs WHERE status <> 'pending' AND announced_at IS NULL"
)
JOBS_LISTING_SQL: Final = {
    # Keyed by "for one member?"; served by jobs_listing and jobs_guild_listing (0003).
    True: f"SELECT {JOB_COLUMNS} FROM jobs WHERE guild_id = ? AND user_id = ?"
    " ORDER BY created_at DESC, id DESC LIMIT ?",
    False: f"SELECT {JOB_COLUMNS} FROM jobs WHERE guild_id = ?"
    " ORDER BY created_at DESC, id DESC LIMIT ?",
}
# Fenced per row like schedule_poll; "? IS NULL OR" keeps one statement for rows with and
# without a token, so that a batch is one executemany.
SCHEDULE_POLLS_SQL: Final = (
    "UPDATE jobs SET next_poll_at = ?, poll_count = ?,"
    " last_progress_at = COALESCE(?, last_progress_at)"
    " WHERE id = ? AND status = 'pending' AND (? IS NULL OR poll_token = ?)"
)
# A released lease only ever brings the due time forward: a job polled or delivered since
# (rescheduled later by its holder) keeps its own time.
RELEASE_POLL_SQL: Final = (
    "UPDATE jobs SET next_poll_at = ? WHERE id = ? AND status = 'pending' AND poll_token = ?"
    " AND next_poll_at > ?"
)
RELEASE_DELIVERY_SQL: Final = (
    "UPDATE jobs SET next_delivery_at = ? WHERE id = ? AND status <> 'pending'"
    " AND announced_at IS NULL AND delivery_token = ? AND next_delivery_at > ?"
)
PENDING_VIDEOS_SQL: Final = {
    # The literals stay literals: they are what lets SQLite use the partial index jobs_due.
    True: "SELECT COUNT(*) FROM jobs WHERE status = 'pending' AND kind = 'video'"
    " AND unwatched_at IS NULL AND guild_id = ? AND user_id = ?",
    False: "SELECT COUNT(*) FROM jobs WHERE status = 'pending' AND kind = 'video'"
    " AND unwatched_at IS NULL AND guild_id = ?",
}


def _marks(ids: Collection[object]) -> str:
    return ", ".join("?" * len(ids))


def _fence(token: int | None, column: str = "poll_token") -> tuple[str, tuple[int, ...]]:
    """The condition (and its parameter) that makes a write a no-op under a stale lease."""
    return ("", ()) if token is None else (f" AND {column} = ?", (token,))


class SqliteJobs:
    """The jobs table (see :class:`bot.storage.repositories.JobRepository` for the contract)."""

    def __init__(self, sql: Executor) -> None:
        self._sql = sql

    async def get(self, job_id: int) -> Job | None:
        """Return the job with the store's id ``job_id``, or None."""
        row = await self._sql.one(f"SELECT {JOB_COLUMNS} FROM jobs WHERE id = ?", (job_id,))
        return None if row is None else job_from_row(row)

    async def by_task(self, task_id: str) -> Job | None:
        """Return the job of the service's ``task_id``, or None."""
        row = await self._sql.one(f"SELECT {JOB_COLUMNS} FROM jobs WHERE task_id = ?", (task_id,))
        return None if row is None else job_from_row(row)

    async def insert(self, job: NewJob) -> Job:
        """Store a pending job and return it; if its task is stored already, return that one."""
        async with self._sql.write() as tx:
            await tx.run(
                "INSERT INTO jobs (task_id, provider, poll_url, kind, model, guild_id, channel_id,"
                " message_id, user_id, prompt_summary, details, cost_micro, key_fingerprint,"
                " created_at, next_poll_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)"
                " ON CONFLICT (task_id) DO NOTHING",
                (
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
                ),
            )
            stored = await SqliteJobs(tx).by_task(job.task_id)
        assert stored is not None
        return stored

    # -- polling ------------------------------------------------------------------------------

    async def due(self, now: float, limit: int, *, skip_keys: Collection[str] = ()) -> list[Job]:
        """Return up to ``limit`` watched pending jobs due at ``now``, earliest first.

        Served by the partial index ``jobs_due``: the cost follows the due jobs, not all jobs.
        """
        skip = ""
        if skip_keys:
            skip = f" AND key_fingerprint NOT IN ({_marks(skip_keys)})"
        rows = await self._sql.all(_DUE_JOBS_SQL.format(skip=skip), (now, *skip_keys, limit))
        return [job_from_row(r) for r in rows]

    async def next_due_at(self) -> float | None:
        """Return the earliest ``next_poll_at`` of the watched pending jobs; None if none."""
        row = await self._sql.one(NEXT_DUE_SQL)
        return None if row is None or row[0] is None else float(row[0])

    async def pending_count(self) -> int:
        """Return how many jobs are pending (counted on the ``jobs_due`` index)."""
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

        The due set is read first on the reader, so an idle pass takes no write lock; the
        claim itself re-reads it under ``BEGIN IMMEDIATE``, which serialises claims across
        processes on the file. Only the claimed jobs are read whole (``RETURNING``): a pass
        considers up to ``limit`` due jobs but claims ``per_key`` of each key with room.
        """
        skip = f" AND key_fingerprint NOT IN ({_marks(skip_keys)})" if skip_keys else ""
        candidates_sql = _CLAIM_CANDIDATES_SQL.format(skip=skip)
        if not await self._sql.all(candidates_sql, (now, *skip_keys, 1)):
            return []
        async with self._sql.write() as tx:
            due = [
                PollCandidate(row[0], row[1], row[2], row[3])
                for row in await tx.all(candidates_sql, (now, *skip_keys, limit))
            ]
            due_at = {
                c.id: c.next_poll_at for c in per_key_cap(rank(due) if rank else due, per_key)
            }
            if not due_at:
                return []
            rows = await tx.all(
                f"UPDATE jobs SET next_poll_at = ?, poll_token = poll_token + 1"
                f" WHERE id IN ({_marks(due_at)}) RETURNING {JOB_COLUMNS}",
                (until, *due_at),
            )
        # Earliest due first, with the new token; next_poll_at: when each fell due (not the
        # lease's expiry), for the poll-lag metric.
        by_id = {row["id"]: job_from_row(row) for row in rows}
        return [replace(by_id[i], next_poll_at=at) for i, at in due_at.items() if i in by_id]

    async def schedule_poll(
        self, job_id: int, next_poll_at: float, poll_count: int, *, token: int | None = None
    ) -> bool:
        """Set when a pending job is polled next and how many polls were made (fenced)."""
        fence, param = _fence(token)
        changed = await self._sql.run(
            "UPDATE jobs SET next_poll_at = ?, poll_count = ? WHERE id = ? AND status = 'pending'"
            + fence,
            (next_poll_at, poll_count, job_id, *param),
        )
        return changed > 0

    async def schedule_polls(self, updates: Sequence[PollUpdate]) -> int:
        """Apply many polls' outcomes in one transaction, each fenced on its own row."""
        rows = [
            (u.next_poll_at, u.poll_count, u.progress_at, u.job_id, u.token, u.token)
            for u in last_per_job(updates)
        ]
        if not rows:
            return 0
        return await self._sql.run_many(SCHEDULE_POLLS_SQL, rows)

    async def set_unwatched(
        self, job_id: int, at: float | None, *, token: int | None = None
    ) -> bool:
        """Stop (``at``) or resume (None) watching a pending job; True if it was pending."""
        fence, param = _fence(token)
        changed = await self._sql.run(
            "UPDATE jobs SET unwatched_at = ? WHERE id = ? AND status = 'pending'" + fence,
            (at, job_id, *param),
        )
        return changed > 0

    async def set_progress_at(self, job_id: int, at: float) -> None:
        """Record when the job's placeholder message was last updated."""
        await self._sql.run("UPDATE jobs SET last_progress_at = ? WHERE id = ?", (at, job_id))

    async def set_message(self, job_id: int, message_id: int, due_at: float | None = None) -> None:
        """Record the job's placeholder message; a pending job falls due by ``due_at``."""
        await self._sql.run(
            "UPDATE jobs SET message_id = ?,"
            " next_poll_at = CASE WHEN ? IS NULL OR status <> 'pending' THEN next_poll_at"
            " ELSE MIN(next_poll_at, ?) END WHERE id = ?",
            (message_id, due_at, due_at, job_id),
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
        """Mark a pending job finished; return True only the first time (exactly once).

        Raises:
            ValueError: if ``status`` is PENDING.
        """
        if status is JobStatus.PENDING:
            raise ValueError("a job cannot finish as pending")
        fence, param = _fence(token)
        changed = await self._sql.run(
            "UPDATE jobs SET status = ?, outputs = ?, error = ?, finished_at = ?,"
            " next_delivery_at = ?, unwatched_at = NULL WHERE id = ? AND status = 'pending'"
            + fence,
            (
                status.value,
                json.dumps(list(outputs)),
                error,
                finished_at,
                finished_at,
                job_id,
                *param,
            ),
        )
        return changed > 0

    # -- delivery -----------------------------------------------------------------------------

    async def due_deliveries(self, now: float, limit: int) -> list[Job]:
        """Return up to ``limit`` finished, undelivered jobs whose delivery is due, oldest first."""
        rows = await self._sql.all(DUE_DELIVERIES_SQL, (now, limit))
        return [job_from_row(r) for r in rows]

    async def next_delivery_at(self) -> float | None:
        """Return when the next delivery attempt is due (UTC epoch seconds), or None."""
        row = await self._sql.one(NEXT_DELIVERY_SQL)
        return None if row is None or row[0] is None else float(row[0])

    async def claim_deliveries(self, now: float, until: float, *, limit: int) -> list[Job]:
        """Lease due deliveries (``next_delivery_at = until``, ``delivery_token + 1``)."""
        if not await self.due_deliveries(now, 1):
            return []
        async with self._sql.write() as tx:
            ids = [job.id for job in await SqliteJobs(tx).due_deliveries(now, limit)]
            if not ids:
                return []
            await tx.run(
                f"UPDATE jobs SET next_delivery_at = ?, delivery_token = delivery_token + 1"
                f" WHERE id IN ({_marks(ids)})",
                (until, *ids),
            )
            rows = await tx.all(f"SELECT {JOB_COLUMNS} FROM jobs WHERE id IN ({_marks(ids)})", ids)
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
        """Set an undelivered job's next delivery attempt: its route, failures so far, when."""
        fence, param = _fence(token, "delivery_token")
        await self._sql.run(
            "UPDATE jobs SET delivery_route = ?, delivery_attempts = ?, next_delivery_at = ?,"
            " delivery_error = ? WHERE id = ? AND announced_at IS NULL AND status <> 'pending'"
            + fence,
            (route.value, attempts, next_at, error, job_id, *param),
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
        fence, param = _fence(token, "delivery_token")
        changed = await self._sql.run(
            "UPDATE jobs SET announced_at = ?, delivery_route = ?, next_delivery_at = NULL"
            " WHERE id = ? AND announced_at IS NULL" + fence,
            (at, route.value, job_id, *param),
        )
        return changed > 0

    async def release_leases(
        self, polls: Mapping[int, int], deliveries: Mapping[int, int], at: float
    ) -> int:
        """Make leased jobs due again at ``at`` (a stopping process's leases; fenced)."""
        changed = 0
        async with self._sql.write() as tx:
            if polls:
                changed += await tx.run_many(
                    RELEASE_POLL_SQL, [(at, job_id, token, at) for job_id, token in polls.items()]
                )
            if deliveries:
                changed += await tx.run_many(
                    RELEASE_DELIVERY_SQL,
                    [(at, job_id, token, at) for job_id, token in deliveries.items()],
                )
        return changed

    # -- listing and statistics ---------------------------------------------------------------

    async def recent(self, guild_id: int, *, user_id: int | None, limit: int) -> list[Job]:
        """Return a guild's (or a member's) most recent jobs, newest first (``/jobs``)."""
        if user_id is None:
            rows = await self._sql.all(JOBS_LISTING_SQL[False], (guild_id, limit))
        else:
            rows = await self._sql.all(JOBS_LISTING_SQL[True], (guild_id, user_id, limit))
        return [job_from_row(r) for r in rows]

    async def completion_seconds(self, model: str, limit: int = 20) -> list[float]:
        """Return how long the model's last ``limit`` completed jobs took, seconds, newest first."""
        rows = await self._sql.all(
            "SELECT finished_at - created_at FROM jobs WHERE status = 'completed' AND model = ?"
            " ORDER BY finished_at DESC LIMIT ?",
            (model, limit),
        )
        return [float(r[0]) for r in rows]

    async def pending_videos(self, guild_id: int, *, user_id: int | None = None) -> int:
        """Return how many of the guild's (or a member's) video jobs are pending and watched."""
        if user_id is None:
            return await self._sql.integer(PENDING_VIDEOS_SQL[False], (guild_id,))
        return await self._sql.integer(PENDING_VIDEOS_SQL[True], (guild_id, user_id))

    async def pending_on_key(self, guild_id: int, key_fingerprint: str) -> dict[Kind, int]:
        """Return how many of the guild's jobs submitted with the key are pending, by kind."""
        rows = await self._sql.all(
            "SELECT kind, COUNT(*) AS n FROM jobs WHERE status = 'pending'"
            " AND guild_id = ? AND key_fingerprint = ? GROUP BY kind",
            (guild_id, key_fingerprint),
        )
        return {Kind(row["kind"]): int(row["n"]) for row in rows}

    async def state_counts(self) -> dict[tuple[str, str], int]:
        """Count the open jobs by ``(state, kind)``: ``pending`` and ``undelivered``.

        Both halves read partial indexes (``jobs_due``, ``jobs_delivery_due``): a full scan took
        130 ms at 100,000 jobs, holding the reader at every metrics scrape.
        """
        rows = await self._sql.all(
            "SELECT 'pending' AS state, kind, COUNT(*) AS n FROM jobs"
            " WHERE status = 'pending' GROUP BY kind"
            " UNION ALL SELECT 'undelivered', kind, COUNT(*) FROM jobs"
            " WHERE status <> 'pending' AND announced_at IS NULL GROUP BY kind"
        )
        return {(str(row["state"]), str(row["kind"])): int(row["n"]) for row in rows}
