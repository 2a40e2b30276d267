"""Write-behind of the poller's reschedules: many polls' outcomes, one transaction.

At 80 polls a second, a write transaction per poll (``BEGIN IMMEDIATE``, the update, a
``COMMIT`` that SQLite syncs to disk) was a large share of the poller's CPU
(docs/benchmarks.md, "Cheaper polls"). A poll that only learns "still processing" (the common
case by far) queues its reschedule (and its placeholder's progress time) here instead, and the
poller writes the queue with ``db.jobs.schedule_polls`` at the start of each pass (passes are at
least ``Poller.min_pass_interval``, 0.25 s, apart), each row fenced by its lease's token exactly
as ``schedule_poll`` would be. Retries (429s, errors, a key that cannot be read) stay immediate.

Nothing paid can be lost this way. A reschedule still queued when the process dies only means
the job stays leased until its lease ends (30 s), then is polled again: the service is asked
once more about a task whose state we already knew. Settling a finished job
(``db.jobs.finish``: the ledger's counterpart, outputs, delivery) and every delivery write stay
immediate.
"""

from __future__ import annotations

import logging

from bot.domain import PollUpdate
from bot.storage import Database

log = logging.getLogger(__name__)


class PollWrites:
    """The queued reschedules of one poller, written together by :meth:`flush`.

    A job has at most one entry (its latest). Not shared between pollers or processes; the
    owner calls :meth:`flush` regularly and once more when it stops.

    Args:
        db: the database the jobs are in.
    """

    def __init__(self, db: Database) -> None:
        self._db = db
        self._queued: dict[int, PollUpdate] = {}

    def __len__(self) -> int:
        return len(self._queued)

    async def schedule_poll(
        self, job_id: int, next_poll_at: float, poll_count: int, *, token: int | None = None
    ) -> None:
        """Queue ``db.jobs.schedule_poll(job_id, next_poll_at, poll_count, token=token)``.

        Args:
            job_id: the job.
            next_poll_at: when to poll it next, UTC epoch seconds.
            poll_count: polls made so far.
            token: the poll lease's fencing token; None: no lease checked.
        """
        self._queued[job_id] = PollUpdate(job_id, next_poll_at, poll_count, token)

    async def set_progress_at(self, job_id: int, at: float) -> None:
        """Record when the job's placeholder was refreshed (UTC epoch seconds).

        With the job's queued reschedule (and under its lease's fence) when it has one; at
        once otherwise.
        """
        queued = self._queued.get(job_id)
        if queued is None:
            await self._db.jobs.set_progress_at(job_id, at)
        else:
            # Built directly: ``dataclasses.replace`` was 2 % of the poller's CPU.
            self._queued[job_id] = PollUpdate(
                queued.job_id, queued.next_poll_at, queued.poll_count, queued.token, at
            )

    async def flush(self) -> int:
        """Write every queued reschedule in one transaction; return how many jobs changed.

        Reschedules queued while it writes wait for the next flush. If the write fails (a
        locked database, most likely), they are dropped with a warning: their jobs are polled
        again when their leases end. Never raises (but for cancellation).
        """
        if not self._queued:
            return 0
        updates = list(self._queued.values())
        self._queued.clear()
        try:
            return await self._db.jobs.schedule_polls(updates)
        except Exception as exc:
            log.warning(
                "%d job reschedules not written (%s); those jobs are polled again when their "
                "leases end",
                len(updates),
                exc,
            )
            return 0
