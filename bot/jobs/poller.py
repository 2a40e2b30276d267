"""The background task that finishes every pending job (videos and asynchronous images).

Jobs live in the database, so a restart (kill -9 included) loses none: :meth:`Poller.run`
polls whatever is due and delivers whatever finished and is not yet shown. Each job is polled
first, then settled once (``db.jobs.finish`` succeeds only for a pending job), then delivered
once, with its own retries and fallbacks (docs/architecture.md, "Delivery").

Which job to poll, and when, is the poll policy of docs/architecture.md: a job falls
due when it has likely finished since its last poll (:mod:`bot.services.schedule`), the due jobs
of a key are taken guild by guild (:class:`~bot.services.schedule.FairShare`), earliest due
first, and the key's limiter at background priority decides when each poll goes
(:mod:`bot.genapi.slots`). One poll per key waits in that limiter at a time, so the job polled
is chosen when the key has room; the rest stay due in the database. A job being polled is
leased (its next poll pushed ``lease`` seconds away) so that passes do not read it again, and
passes run at most every ``min_pass_interval`` seconds: at 10,000 jobs a pass per finished poll
cost a whole CPU core (docs/benchmarks.md).
"""

from __future__ import annotations

import asyncio
import logging
import secrets
from collections import Counter
from dataclasses import dataclass
from typing import TYPE_CHECKING, Final

from bot.clock import Clock, sleep_or_wake
from bot.domain import DeliveryRoute, Job, JobStatus
from bot.genapi import errors as api
from bot.genapi.client import GenAPIClient
from bot.genapi.ratelimit import Priority
from bot.jobs.announcer import JobAnnouncer, Renew
from bot.jobs.poll_writes import PollWrites
from bot.jobs.supervisor import database_busy
from bot.ops.logs import bind, set_context
from bot.services.keys import KEY_RETRY_SECONDS, KeyResolver, KeyUnavailable
from bot.services.schedule import FairShare, PollSchedule
from bot.storage import Database

if TYPE_CHECKING:
    from bot.ops.metrics import Metrics

log = logging.getLogger(__name__)


NEXT_ROUTE: Final = {
    DeliveryRoute.PLACEHOLDER: DeliveryRoute.CHANNEL,
    DeliveryRoute.CHANNEL: DeliveryRoute.DM,
    DeliveryRoute.DM: DeliveryRoute.JOBS,
}
"""The fallback order of a delivery: the placeholder, a new channel message, a DM, ``/jobs``."""

DELIVERY_BACKOFF_FIRST = 30.0
"""Seconds before the first retry of a transient delivery failure; doubled each time."""

DELIVERY_BACKOFF_MAX = 900.0
"""The longest wait between two delivery attempts, seconds."""

PROGRESS_AGE_SHARE = 0.25
"""A placeholder's progress edits are at least this share of the job's age apart."""

DRAIN_GRACE_SECONDS = 20.0
"""How long :meth:`Poller.stop` lets the polls and deliveries under way finish (as the bot's
shutdown grace for commands, ``SHUTDOWN_GRACE_SECONDS``)."""

PASS_RETRY_FIRST = 1.0
PASS_RETRY_MAX = 60.0
"""Seconds before the pass after a failed one: 1 s, doubling up to 60 s (as the supervisor's
restarts, ``bot/jobs/supervisor.py``)."""

DELIVERY_ATTEMPTS_PER_ROUTE = 8
"""Transient failures of one route (about 45 min of backoff) before falling back to the next."""


NOT_FOUND_FAILURES: Final = 5
NOT_FOUND_SECONDS: Final = 600.0
"""A job fails as unknown to the service only after :data:`NOT_FOUND_FAILURES` consecutive 404s
on its polls, the first at least :data:`NOT_FOUND_SECONDS` before the last. The
service defines no unknown-task error (docs/genapi.md §7.4), and a 404 can be transient (a node
that does not know the task yet); failing on the first would throw a paid result away
(docs/genapi-choices.md)."""

NOT_FOUND_RETRY: Final = (5.0, 15.0, 45.0, 60.0)
"""Seconds before polling again after the 1st, 2nd, 3rd, and each later 404 of a streak."""


@dataclass(slots=True)
class _NotFoundStreak:
    """Consecutive 404s of one job's polls, seen by this process.

    ``poll_count`` is the job's at the last 404; the streak goes on only if the next poll is
    the one right after it (anything else, a success, another error or another process's poll,
    moved the count on), so "consecutive" holds without a database column.
    """

    count: int
    first_at: float
    poll_count: int


def delivery_backoff(
    attempts: int,
    retry_after: float | None = None,
    *,
    first: float = DELIVERY_BACKOFF_FIRST,
    cap: float = DELIVERY_BACKOFF_MAX,
) -> float:
    """Seconds to wait after the ``attempts``-th transient failure (1-based): 30, 60, ... 900.

    A ``retry_after`` asked by Discord (a 429) is honoured when longer, within the cap.
    ``first`` and ``cap`` are the first wait and the longest, seconds (``WAIT_SCALE`` divides
    both in the end-to-end tests).
    """
    delay = min(cap, first * 2.0 ** max(0, attempts - 1))
    return min(cap, max(delay, retry_after or 0.0))


class Poller:
    """Polls due jobs until they finish, then delivers each result: poll, settle, deliver.

    A job is always polled before anything is decided about it: only one the service still
    reports processing past ``job_timeout`` stops being watched (it stays pending, and
    :meth:`recheck` polls it again on request). A finished job is settled once
    (``db.jobs.finish``), then delivered once by the first route that works, each transient
    failure retried with :func:`delivery_backoff` (docs/architecture.md, "Delivery").

    Args:
        db: the database holding the jobs.
        client: the API client.
        keys: finds the key a job was submitted with.
        schedule: when to poll next.
        announcer: the Discord side.
        clock: wall time (UTC epoch seconds) and sleeping.
        job_timeout: seconds after which a job the service still reports processing stops being
            watched (it is not failed: the service may still finish it).
        progress_interval: seconds between two progress edits of a placeholder, at least
            (a quarter of the job's age once that is longer: :meth:`_progress_gap`).
        per_key_in_flight: polls of one key that may wait in its limiter at once: 1, so that
            the job polled is chosen when its key has room, not several slots before.
        batch: due jobs read per pass.
        lease: seconds a job being polled is kept out of the due set (its poll ends it sooner;
            after a crash it is polled again when the lease ends).
        min_pass_interval: seconds between two passes over the due jobs.
        max_deliveries: deliveries under way at once.
        delivery_lease: seconds a job being delivered is kept out of the due deliveries
            (after a crash its delivery is attempted again when the lease ends).
        drain_grace: seconds :meth:`stop` lets the polls and deliveries under way finish
            before cancelling them (their leases are released either way).
        delivery_backoff_first: seconds before the first retry of a transient delivery
            failure, doubled each time (:func:`delivery_backoff`).
        delivery_backoff_max: the longest wait between two delivery attempts, seconds.
        metrics: observes poll lag, detection delay and delivery outcomes; None counts nothing.
        not_found_retry: seconds before polling again after the 1st, 2nd, 3rd, ... 404 of a
            streak, the last repeated (:data:`NOT_FOUND_RETRY`; ``WAIT_SCALE`` divides them).
    """

    def __init__(
        self,
        *,
        db: Database,
        client: GenAPIClient,
        keys: KeyResolver,
        schedule: PollSchedule,
        announcer: JobAnnouncer,
        clock: Clock,
        job_timeout: float = 1800.0,
        progress_interval: float = 60.0,
        per_key_in_flight: int = 1,
        batch: int = 500,
        lease: float = 30.0,
        min_pass_interval: float = 0.25,
        max_deliveries: int = 20,
        delivery_lease: float = 300.0,
        drain_grace: float = DRAIN_GRACE_SECONDS,
        delivery_backoff_first: float = DELIVERY_BACKOFF_FIRST,
        delivery_backoff_max: float = DELIVERY_BACKOFF_MAX,
        metrics: Metrics | None = None,
        not_found_retry: tuple[float, ...] = NOT_FOUND_RETRY,
    ) -> None:
        self._not_found_retry = not_found_retry
        self._backoff_first = delivery_backoff_first
        self._backoff_max = delivery_backoff_max
        self._db = db
        self._metrics = metrics
        self.last_pass_at: float | None = None
        """Monotonic time the last pass over the due jobs ended; None before the first."""
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
        self._max_deliveries = max_deliveries
        self._delivery_lease = delivery_lease
        self._in_flight: dict[int, asyncio.Task[None]] = {}
        self._delivering: dict[int, asyncio.Task[None]] = {}
        # The fencing tokens of the leases behind them, to release what a stop cuts short.
        self._poll_tokens: dict[int, int] = {}
        self._delivery_tokens: dict[int, int] = {}
        self._drain_grace = drain_grace
        self._stopping = asyncio.Event()
        self._key_load: Counter[str] = Counter()
        self._not_found: dict[int, _NotFoundStreak] = {}
        self._fair = FairShare()
        self._wake = asyncio.Event()
        # Reschedules are written behind, once a pass (bot/jobs/poll_writes.py); settling and
        # delivery are not.
        self._writes = PollWrites(db)

    @property
    def in_flight(self) -> int:
        """Polls and deliveries under way."""
        return len(self._in_flight) + len(self._delivering)

    def wake(self) -> None:
        """Look for due jobs now (a job was just submitted, or a poll finished)."""
        self._wake.set()

    async def run(self) -> None:
        """Poll and deliver until stopped; what a previous run left undelivered is simply due.

        Each pass (claim, start polls and deliveries, sleep until something is due) stands
        alone: a pass that fails (a locked database, a bug) is logged and the next one comes
        after a backoff (1 s doubling to 60 s), while the polls and deliveries already under
        way carry on (cancelling them left their leases to run out and could
        post a cancelled channel message twice). In-flight work ends only on shutdown:
        :meth:`stop` drains it (``drain_grace``), and a cancellation (a second signal) cancels
        it at once; either way the leases still held are released.

        Raises:
            asyncio.CancelledError: when cancelled, after releasing the leases it held.
        """
        log.info("poller started: %d pending jobs resumed", await self._db.jobs.pending_count())
        failures = 0
        try:
            while not self._stopping.is_set():
                try:
                    await self._pass()
                    failures = 0
                except Exception as exc:  # CancelledError is a BaseException: shutdown passes
                    failures += 1
                    delay = min(PASS_RETRY_MAX, PASS_RETRY_FIRST * 2.0 ** (failures - 1))
                    self._pass_failed(exc, delay)
                    await sleep_or_wake(self._clock, self._stopping, delay)
        finally:
            await self._wind_down()

    async def _pass(self) -> None:
        """One pass: write the queued reschedules, claim and start, sleep until due."""
        self._wake.clear()
        await self._writes.flush()  # before the claim, which reads what it wrote
        await self.poll_due()
        await self.deliver_due()
        self.last_pass_at = self._clock.monotonic()
        if self._metrics is not None:
            self._metrics.poller_last_pass.set(self._clock.time())
        await self._sleep_until_due()

    def _pass_failed(self, exc: Exception, delay: float) -> None:
        under_way = self.in_flight
        if database_busy(exc):
            log.warning(
                "poller pass: the database is locked by another connection (%s); %d polls and "
                "deliveries under way carry on; next pass in %.0f s",
                exc,
                under_way,
                delay,
            )
            return
        error_id = secrets.token_hex(4)
        log.error(
            "poller pass failed (error id %s); %d polls and deliveries under way carry on; "
            "next pass in %.0f s",
            error_id,
            under_way,
            delay,
            exc_info=exc,
        )

    @property
    def stopping(self) -> bool:
        """True once :meth:`stop` was called."""
        return self._stopping.is_set()

    def stop(self) -> None:
        """Stop claiming work; :meth:`run` then drains what is under way and returns.

        For a graceful shutdown (SIGTERM): the polls and deliveries under way get up to
        ``drain_grace`` seconds to finish; whatever is left is cancelled and its lease
        released, so that another process takes the job at once.
        """
        self._stopping.set()
        self._wake.set()

    async def _wind_down(self) -> None:
        """Drain (after :meth:`stop`) or cancel the work under way; release its leases."""
        tasks = [*self._in_flight.values(), *self._delivering.values()]
        if tasks and self._stopping.is_set() and self._drain_grace > 0:
            log.info(
                "stopping: waiting up to %.0f s for %d polls and deliveries",
                self._drain_grace,
                len(tasks),
            )
            # Real seconds: this bounds how long the process takes to exit (the operator's
            # stop timeout), it is no rule of the poll schedule.
            await asyncio.wait(tasks, timeout=self._drain_grace)
        polls = {i: self._poll_tokens[i] for i in self._in_flight if i in self._poll_tokens}
        deliveries = {
            i: self._delivery_tokens[i] for i in self._delivering if i in self._delivery_tokens
        }
        left = [*self._in_flight.values(), *self._delivering.values()]
        for task in left:
            task.cancel()
        await asyncio.gather(*left, return_exceptions=True)
        await self._writes.flush()
        if not polls and not deliveries:
            return
        try:
            released = await self._db.jobs.release_leases(polls, deliveries, self._clock.time())
        except Exception as exc:
            log.warning(
                "%d leases not released (%s); their jobs are due again when the leases end",
                len(polls) + len(deliveries),
                exc,
            )
            return
        log.info(
            "released %d leases (%d polls, %d deliveries cut short): due again at once",
            released,
            len(polls),
            len(deliveries),
        )

    async def poll_due(self) -> int:
        """Claim every due job its key has room for and start polling it; return how many.

        The claim is a lease (``lease`` seconds) with a fencing token, atomic across processes
        (``db.jobs.claim_due``): several pollers on one database never poll one job at once,
        and every write this poll makes about the job carries the token, so a poll that
        outlived its lease (the job claimed by another process since) changes nothing.
        """
        now = self._clock.time()
        full = [key for key, load in self._key_load.items() if load >= self._per_key]
        claimed = await self._db.jobs.claim_due(
            now,
            now + self._lease,
            limit=self._batch,
            per_key=self._per_key,
            skip_keys=full,
            rank=self._fair.rank,
        )
        self._fair.polled(claimed)
        if claimed:
            log.debug("claimed %s", " ".join(f"job {j.id} token {j.poll_token}" for j in claimed))
        started = 0
        for job in claimed:
            if job.id in self._in_flight or self._key_load[job.key_fingerprint] >= self._per_key:
                # More than the key's room (it had polls under way already): due again now,
                # for this process's next pass or another process.
                try:
                    await self._db.jobs.schedule_poll(
                        job.id, now, job.poll_count, token=job.poll_token
                    )
                except Exception as exc:
                    # This job only: the rest of the claim is still started.
                    log.warning(
                        "job %s not handed back (%s); due again when its lease ends", job.id, exc
                    )
                continue
            self._key_load[job.key_fingerprint] += 1
            if self._metrics is not None:
                self._metrics.poll_lag.observe(max(0.0, now - job.next_poll_at))
            self._poll_tokens[job.id] = job.poll_token
            self._in_flight[job.id] = asyncio.create_task(self._poll(job), name=f"poll-{job.id}")
            started += 1
        return started

    async def deliver_due(self) -> int:
        """Claim and start the due deliveries, within ``max_deliveries``; return how many.

        Leased like polls (``db.jobs.claim_deliveries``, ``delivery_lease`` seconds, fenced):
        one process delivers a job at a time, and a holder whose lease ran out cannot record
        the delivery (so it never pings the requester a second time).
        """
        room = self._max_deliveries - len(self._delivering)
        if room <= 0:
            return 0
        now = self._clock.time()
        claimed = await self._db.jobs.claim_deliveries(now, now + self._delivery_lease, limit=room)
        for job in claimed:
            self._delivery_tokens[job.id] = job.delivery_token
            self._delivering[job.id] = asyncio.create_task(
                self._deliver_task(job), name=f"deliver-{job.id}"
            )
        return len(claimed)

    async def recheck(self, job_id: int) -> Job | None:
        """Poll one job now, even one no longer watched; deliver it if it is done.

        For "check again" on a job listed by ``/jobs``. The result is delivered by the poller's
        next pass (moments later), by the usual routes.

        Returns:
            The job as it stands after the poll; None if there is no such job.
        """
        job = await self._db.jobs.get(job_id)
        if job is None or job.status is not JobStatus.PENDING or job_id in self._in_flight:
            return job
        await self._poll_once(job)
        await self._writes.flush()
        return await self._db.jobs.get(job_id)

    def _token(self, job: Job) -> int | None:
        # A job this process claimed carries its lease's fencing token; one polled on request
        # (recheck) holds no lease, and its writes are not fenced.
        return job.poll_token if job.id in self._in_flight else None

    async def _sleep_until_due(self) -> None:
        await self._clock.sleep(self._min_pass_interval)
        times = [await self._db.jobs.next_due_at(), await self._db.jobs.next_delivery_at()]
        upcoming = [at for at in times if at is not None]
        delay = 5.0 if not upcoming else min(upcoming) - self._clock.time()
        if delay <= 0:
            delay = 1.0  # what is due waits for its key: a poll ending wakes us
        await sleep_or_wake(self._clock, self._wake, min(delay, 5.0))

    async def _poll(self, job: Job) -> None:
        # The poll's own task: its context ends with it, so nothing needs resetting (the
        # context manager ``bind`` was 2 % of the poller's CPU).
        set_context(job_id=job.id, task_id=job.task_id, guild_id=job.guild_id)
        await self._poll_logged(job)

    async def _poll_logged(self, job: Job) -> None:
        try:
            await self._poll_once(job)
        except Exception as exc:
            if database_busy(exc):
                log.warning("polling job %s: %s; retrying in a minute", job.id, exc)
            else:
                log.exception("polling job %s failed unexpectedly; retrying in a minute", job.id)
            try:
                await self._db.jobs.schedule_poll(
                    job.id, self._clock.time() + 60, job.poll_count, token=self._token(job)
                )
            except Exception as again:  # the same locked database, most likely
                log.warning(
                    "job %s not rescheduled (%s); due again when its lease ends", job.id, again
                )
        finally:
            del self._in_flight[job.id]
            self._poll_tokens.pop(job.id, None)
            self._key_load[job.key_fingerprint] -= 1
            self.wake()

    async def _poll_once(self, job: Job) -> None:
        try:
            key = await self._keys.resolve_fingerprint(job.guild_id, job.key_fingerprint)
        except KeyUnavailable as exc:
            # A setting the owner can fix (KEY_ENCRYPTION_KEY, GENAPI_API_KEY), or a key known
            # nowhere that the owner may bring back: a paid task is never failed for it.
            log.warning("job %s waits for its API key: %s", job.id, exc)
            await self._retry(job, KEY_RETRY_SECONDS)
            return
        try:
            state = await self._client.poll(key.key, job.poll_url, priority=Priority.BACKGROUND)
        except api.TaskNotFoundError:
            await self._task_not_found(job)
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
        self._not_found.pop(job.id, None)
        if state.status == "completed" and state.outputs:
            await self._finish(job, JobStatus.COMPLETED, state.outputs, None)
        elif state.finished:
            reason = state.error or "The service gave no reason."
            await self._finish(job, JobStatus.FAILED, (), reason)
        else:
            now = self._clock.time()
            if now - job.created_at > self._timeout:
                await self._stop_watching(job, now)
                return
            next_at = await self._schedule.next_poll_at(job, now)
            await self._writes.schedule_poll(
                job.id, next_at, job.poll_count + 1, token=self._token(job)
            )
            if now - (job.last_progress_at or job.created_at) >= self._progress_gap(job, now):
                await self._announcer.progress(job, now)
                await self._writes.set_progress_at(job.id, now)

    def _progress_gap(self, job: Job, now: float) -> float:
        """Seconds between two progress edits of ``job``'s placeholder.

        ``progress_interval``, then a quarter of the job's age (:data:`PROGRESS_AGE_SHARE`).

        Its "started <t:…:R>" and "ready <t:…:R>" move by themselves in every client; the edit
        refreshes the elapsed time and the estimate, which change less and less for a job
        that has run for a long time (and that nobody may still be watching): an hour-old job
        is edited every 15 minutes, not every minute, sparing Discord's per-channel edit
        limits and the poller's CPU (docs/benchmarks.md).
        """
        return max(self._progress_interval, PROGRESS_AGE_SHARE * (now - job.created_at))

    async def _task_not_found(self, job: Job) -> None:
        """A 404 on a poll: fail the job only at the end of a long streak of them.

        The streak lives in this process: a restart starts it again, which only delays a
        failure, never brings one forward.
        """
        now = self._clock.time()
        streak = self._not_found.get(job.id)
        if streak is None or job.poll_count != streak.poll_count + 1:
            streak = _NotFoundStreak(count=0, first_at=now, poll_count=job.poll_count)
        streak.count += 1
        streak.poll_count = job.poll_count
        self._not_found[job.id] = streak
        if streak.count >= NOT_FOUND_FAILURES and now - streak.first_at >= NOT_FOUND_SECONDS:
            del self._not_found[job.id]
            minutes = round((now - streak.first_at) / 60)
            reason = f"The service has not known this task for {minutes} minutes."
            await self._finish(job, JobStatus.FAILED, (), reason)
            return
        delay = self._not_found_retry[min(streak.count, len(self._not_found_retry)) - 1]
        log.warning(
            "job %s: the service does not know its task (404 #%d); polling again in %.0f s",
            job.id,
            streak.count,
            delay,
        )
        await self._retry(job, delay)

    async def _retry(self, job: Job, delay: float) -> None:
        await self._db.jobs.schedule_poll(
            job.id, self._clock.time() + delay, job.poll_count + 1, token=self._token(job)
        )

    async def _stop_watching(self, job: Job, now: float) -> None:
        # Still processing past the timeout: polling it forever would spend the key's requests
        # on a task that may never end, but failing it would throw away a result the service
        # may still deliver (and has charged for). /jobs lists it; recheck() polls it again.
        if job.unwatched_at is not None:
            # Never due again: its next_poll_at records when it was last checked, which
            # /jobs reads to check it at most once per JOBS_RECHECK_SECONDS.
            await self._db.jobs.schedule_poll(
                job.id, now, job.poll_count + 1, token=self._token(job)
            )
            return
        if await self._db.jobs.set_unwatched(job.id, now, token=self._token(job)):
            log.info(
                "job %s still processing after %.0f s; stopped watching it",
                job.id,
                self._timeout,
            )
            await self._db.jobs.schedule_poll(
                job.id, now, job.poll_count + 1, token=self._token(job)
            )
            await self._announcer.stopped_watching(job, now)

    async def _finish(
        self, job: Job, status: JobStatus, outputs: tuple[str, ...], error: str | None
    ) -> None:
        finished = await self._db.jobs.finish(
            job.id, status, outputs, error, self._clock.time(), token=self._token(job)
        )
        if not finished:
            # Finished already, or claimed since by another poll (a stale lease).
            self._count_lost_lease("poll")
            return
        log.info("job %s %s after %d polls", job.id, status.value, job.poll_count + 1)
        if self._metrics is not None:
            self._metrics.jobs_finished.labels(status.value, job.kind.value).inc()
        self._schedule.forget(job.model)
        self.wake()  # its delivery is due now

    async def _deliver_task(self, job: Job) -> None:
        with bind(job_id=job.id, task_id=job.task_id, guild_id=job.guild_id):
            await self._deliver_logged(job)

    def _backoff(self, attempts: int, retry_after: float | None = None) -> float:
        return delivery_backoff(
            attempts, retry_after, first=self._backoff_first, cap=self._backoff_max
        )

    async def _deliver_logged(self, job: Job) -> None:
        try:
            await self._deliver(job)
        except Exception:
            # A bug must not lose a paid result: retry it like a transient failure.
            log.exception("delivery of job %s failed unexpectedly", job.id)
            attempts = job.delivery_attempts + 1
            try:
                await self._db.jobs.schedule_delivery(
                    job.id,
                    job.delivery_route,
                    attempts,
                    self._clock.time() + self._backoff(attempts),
                    "unexpected error",
                    token=job.delivery_token,
                )
            except Exception as again:  # the same locked database, most likely
                log.warning(
                    "delivery of job %s not rescheduled (%s); due again when its lease ends",
                    job.id,
                    again,
                )
        finally:
            del self._delivering[job.id]
            self._delivery_tokens.pop(job.id, None)
            self.wake()

    async def _deliver(self, job: Job) -> None:
        # Route by route in fallback order. Each step is recorded before the next, so a crash
        # resumes where it stopped; the placeholder edit is idempotent and the ping comes only
        # after the delivery is recorded, so a crash can cost a ping, never send two.
        route, attempts, error = job.delivery_route, job.delivery_attempts, job.delivery_error
        while route is not DeliveryRoute.JOBS:
            outcome = await self._announcer.deliver(
                job, route, self._renewal(job, route, attempts, error)
            )
            now = self._clock.time()
            if outcome.shown:
                if await self._db.jobs.mark_announced(job.id, now, route, token=job.delivery_token):
                    self._count_shown(job, route, now)
                    log.info("job %s shown by %s", job.id, route.value)
                    await self._announcer.notify(job, route)
                else:  # another process holds its delivery now: it records it and pings
                    self._count_lost_lease("delivery")
                return
            if self._metrics is not None:
                self._metrics.delivery_failures.labels(route.value, outcome.code).inc()
            if not outcome.permanent:
                attempts += 1
                if attempts < DELIVERY_ATTEMPTS_PER_ROUTE:
                    delay = self._backoff(attempts, outcome.retry_after)
                    log.info(
                        "delivery of job %s by %s failed (%s); retrying in %.0f s",
                        job.id,
                        route,
                        outcome.error,
                        delay,
                    )
                    await self._db.jobs.schedule_delivery(
                        job.id,
                        route,
                        attempts,
                        now + delay,
                        outcome.error,
                        token=job.delivery_token,
                    )
                    return
            log.info("delivery of job %s by %s impossible (%s)", job.id, route, outcome.error)
            route, attempts, error = NEXT_ROUTE[route], 0, outcome.error
            await self._db.jobs.schedule_delivery(
                job.id,
                route,
                attempts,
                now + self._delivery_lease,
                outcome.error,
                token=job.delivery_token,
            )
        # No route took it: /jobs lists it for its requester, who is told nothing else.
        log.warning("job %s could not be shown anywhere; /jobs lists it", job.id)
        now = self._clock.time()
        if await self._db.jobs.mark_announced(
            job.id, now, DeliveryRoute.JOBS, token=job.delivery_token
        ):
            self._count_shown(job, DeliveryRoute.JOBS, now)

    def _renewal(self, job: Job, route: DeliveryRoute, attempts: int, error: str | None) -> Renew:
        # Rewrites what is stored (route, attempts, last error) with a later lease end.
        async def renew() -> None:
            until = self._clock.time() + self._delivery_lease
            await self._db.jobs.schedule_delivery(
                job.id, route, attempts, until, error, token=job.delivery_token
            )

        return renew

    def _count_lost_lease(self, what: str) -> None:
        if self._metrics is not None:
            self._metrics.leases_lost.labels(what).inc()

    def _count_shown(self, job: Job, route: DeliveryRoute, now: float) -> None:
        if self._metrics is None:
            return
        self._metrics.deliveries.labels(route.value).inc()
        if job.finished_at is not None:
            delay = max(0.0, now - job.finished_at)
            self._metrics.detection_delay.labels(job.kind.value).observe(delay)
