"""The background task that finishes every pending job (videos and asynchronous images).

Jobs live in the database, so a restart (kill -9 included) loses none: :meth:`Poller.run`
first announces jobs that finished but were not yet shown, then polls whatever is due. Each job
is finished once (``Store.finish_job`` succeeds only for a pending job) and announced once.

Polls go through the client's per-key limiter at background priority, so they never take the
slots interactive commands keep, and at most ``per_key_in_flight`` polls of one key wait in that
limiter at a time; the rest stay due in the database, most overdue first. A job being polled is
leased (its next poll pushed ``lease`` seconds away) so that passes do not read it again, and
passes run at most every ``min_pass_interval`` seconds: at 10,000 jobs a pass per finished poll
cost a whole CPU core (docs/benchmarks.md).
"""

from __future__ import annotations

import asyncio
import logging
from collections import Counter
from typing import Protocol

from bot.clock import Clock, sleep_or_wake
from bot.genapi import errors as api
from bot.genapi.client import GenAPIClient
from bot.genapi.ratelimit import Priority
from bot.render import format_duration
from bot.services.keys import KEY_RETRY_SECONDS, KeyResolver, KeyUnavailable
from bot.services.schedule import PollSchedule
from bot.storage.database import Store
from bot.storage.models import Job, JobStatus
from bot.supervisor import database_busy

log = logging.getLogger(__name__)


class JobAnnouncer(Protocol):
    """Shows a job's progress and result where its requester asked (the Discord side)."""

    async def progress(self, job: Job, now: float) -> None:
        """Refresh the placeholder of a running job (elapsed time). Must not raise."""

    async def show_result(self, job: Job) -> bool:
        """Edit the placeholder into the result; False if it is gone. Must not raise."""

    async def notify(self, job: Job) -> None:
        """Tell the requester (an edit notifies nobody). Must not raise."""


class Poller:
    """Polls due jobs until they complete, fail or time out.

    Args:
        store: the database holding the jobs.
        client: the API client.
        keys: finds the key a job was submitted with.
        schedule: when to poll next.
        announcer: the Discord side.
        clock: wall time (UTC epoch seconds) and sleeping.
        job_timeout: seconds after which a job still processing is marked failed.
        progress_interval: seconds between two progress edits of a placeholder.
        per_key_in_flight: polls of one key that may wait in its limiter at once.
        batch: due jobs read per pass.
        lease: seconds a job being polled is kept out of the due set (its poll ends it sooner;
            after a crash it is polled again when the lease ends).
        min_pass_interval: seconds between two passes over the due jobs.
    """

    def __init__(
        self,
        *,
        store: Store,
        client: GenAPIClient,
        keys: KeyResolver,
        schedule: PollSchedule,
        announcer: JobAnnouncer,
        clock: Clock,
        job_timeout: float = 1800.0,
        progress_interval: float = 60.0,
        per_key_in_flight: int = 3,
        batch: int = 500,
        lease: float = 30.0,
        min_pass_interval: float = 0.25,
    ) -> None:
        self._store = store
        self._client = client
        self._keys = keys
        self._schedule = schedule
        self._announcer = announcer
        self._clock = clock
        self._timeout = job_timeout
        self._progress_interval = progress_interval
        self._per_key = per_key_in_flight
        self._batch = batch
        self._lease = lease
        self._min_pass_interval = min_pass_interval
        self._in_flight: dict[int, asyncio.Task[None]] = {}
        self._key_load: Counter[str] = Counter()
        self._wake = asyncio.Event()

    @property
    def in_flight(self) -> int:
        """Polls under way."""
        return len(self._in_flight)

    def wake(self) -> None:
        """Look for due jobs now (a job was just submitted, or a poll finished)."""
        self._wake.set()

    async def run(self) -> None:
        """Announce what a previous run left unannounced, then poll forever."""
        unannounced = await self._store.unannounced_jobs()
        for job in unannounced:
            await self._announce(job)
        log.info(
            "poller started: %d pending jobs resumed, %d finished jobs announced",
            await self._store.pending_count(),
            len(unannounced),
        )
        try:
            while True:
                self._wake.clear()
                await self.poll_due()
                await self._sleep_until_due()
        finally:
            for task in self._in_flight.values():
                task.cancel()
            await asyncio.gather(*self._in_flight.values(), return_exceptions=True)

    async def poll_due(self) -> int:
        """Start a poll for every due job its key has room for; return how many started."""
        now = self._clock.time()
        full = [key for key, load in self._key_load.items() if load >= self._per_key]
        started: list[Job] = []
        for job in await self._store.due_jobs(now, self._batch, skip_keys=full):
            if job.id in self._in_flight or self._key_load[job.key_fingerprint] >= self._per_key:
                continue
            self._key_load[job.key_fingerprint] += 1
            started.append(job)
        try:
            await self._store.lease_jobs([job.id for job in started], now + self._lease)
        except BaseException:
            # No poll starts (a locked database): give the keys their room back, or a few
            # failed passes would leave a key looking full for good.
            self._key_load.subtract(job.key_fingerprint for job in started)
            raise
        for job in started:
            self._in_flight[job.id] = asyncio.create_task(self._poll(job), name=f"poll-{job.id}")
        return len(started)

    async def _sleep_until_due(self) -> None:
        await self._clock.sleep(self._min_pass_interval)
        next_due = await self._store.next_due_at()
        delay = 5.0 if next_due is None else next_due - self._clock.time()
        if delay <= 0:
            delay = 1.0  # what is due waits for its key: a poll ending wakes us
        await sleep_or_wake(self._clock, self._wake, min(delay, 5.0))

    async def _poll(self, job: Job) -> None:
        try:
            await self._poll_once(job)
        except Exception as exc:
            if database_busy(exc):
                log.warning("polling job %s: %s; retrying in a minute", job.id, exc)
            else:
                log.exception("polling job %s failed unexpectedly; retrying in a minute", job.id)
            try:
                await self._store.schedule_poll(job.id, self._clock.time() + 60, job.poll_count)
            except Exception as again:  # the same locked database, most likely
                log.warning(
                    "job %s not rescheduled (%s); due again when its lease ends", job.id, again
                )
        finally:
            del self._in_flight[job.id]
            self._key_load[job.key_fingerprint] -= 1
            self.wake()

    async def _poll_once(self, job: Job) -> None:
        now = self._clock.time()
        if now - job.created_at > self._timeout:
            limit = format_duration(self._timeout)
            await self._finish(job, JobStatus.FAILED, (), f"It did not finish within {limit}.")
            return
        try:
            key = await self._keys.resolve_fingerprint(job.guild_id, job.key_fingerprint)
        except KeyUnavailable as exc:
            # A setting the owner can fix (KEY_ENCRYPTION_KEY, GENAPI_API_KEY): never fail for it.
            log.warning("job %s waits for its API key: %s", job.id, exc)
            await self._retry(job, KEY_RETRY_SECONDS)
            return
        if key is None:
            reason = "The API key it was submitted with is no longer configured."
            await self._finish(job, JobStatus.FAILED, (), reason)
            return
        try:
            state = await self._client.poll(key.key, job.poll_url, priority=Priority.BACKGROUND)
        except api.TaskNotFoundError:
            await self._finish(job, JobStatus.FAILED, (), "The service no longer knows this task.")
            return
        except api.RateLimitedError as exc:
            await self._retry(job, exc.retry_after)
            return
        except api.UnauthorizedError:
            await self._retry(job, 300.0)  # the key was revoked; an admin may restore it
            return
        except api.GenAPIError as exc:
            log.warning("poll of job %s failed: %s", job.id, exc)
            await self._retry(job, min(60.0, 5.0 * 2 ** min(job.poll_count, 4)))
            return
        if state.status == "completed" and state.outputs:
            await self._finish(job, JobStatus.COMPLETED, state.outputs, None)
        elif state.finished:
            reason = state.error or "The service gave no reason."
            await self._finish(job, JobStatus.FAILED, (), reason)
        else:
            now = self._clock.time()
            next_at = await self._schedule.next_poll_at(job.model, job.created_at, now)
            await self._store.schedule_poll(job.id, next_at, job.poll_count + 1)
            if now - (job.last_progress_at or job.created_at) >= self._progress_interval:
                await self._announcer.progress(job, now)
                await self._store.set_progress_at(job.id, now)

    async def _retry(self, job: Job, delay: float) -> None:
        await self._store.schedule_poll(job.id, self._clock.time() + delay, job.poll_count + 1)

    async def _finish(
        self, job: Job, status: JobStatus, outputs: tuple[str, ...], error: str | None
    ) -> None:
        if not await self._store.finish_job(job.id, status, outputs, error, self._clock.time()):
            return  # finished already (another pass); announced there
        self._schedule.forget(job.model)
        finished = await self._store.get_job(job.id)
        if finished is not None:
            await self._announce(finished)

    async def _announce(self, job: Job) -> None:
        # Edit first (idempotent), then record, then ping: a crash in between can cost a ping,
        # never a second one. A deleted placeholder means nobody is left to ping.
        shown = await self._announcer.show_result(job)
        await self._store.mark_announced(job.id, self._clock.time())
        if shown:
            await self._announcer.notify(job)
