"""The poller against the emulator: every job finished once, announced once, within the limit.

The Discord side is replaced by a recorder here; the end-to-end tests drive the real one.
"""

import asyncio
import itertools
from collections.abc import Callable
from typing import Any

import pytest

from bot.domain import DeliveryRoute, Job, JobStatus
from bot.jobs.announcer import Attempt, Renew
from bot.jobs.poller import NOT_FOUND_FAILURES, NOT_FOUND_SECONDS, Poller
from bot.services.generation import Requester
from tests.support.poller import RecordingAnnouncer, make_poller, run_until, submit
from tests.support.stack import Stack


async def test_a_video_is_polled_to_completion_and_announced_once(
    stack: Stack, who: Requester
) -> None:
    (job,) = await submit(stack, who)
    announcer = RecordingAnnouncer()
    poller = make_poller(stack, announcer)
    await run_until(poller, lambda: bool(announcer.notified))
    finished = await stack.db.jobs.get(job.id)
    assert finished is not None
    assert finished.status is JobStatus.COMPLETED
    assert finished.outputs
    assert finished.announced_at is not None
    assert [r.id for r in announcer.results] == [job.id]
    assert announcer.notified == [job.id]
    # Not polled before it could plausibly have finished, nor every 3 s from the start.
    polls = [r for r in stack.api.requests if r.method == "GET" and job.task_id in r.path]
    assert 1 <= len(polls) <= 15


async def test_a_failed_video_is_announced_with_the_reason(stack: Stack, who: Requester) -> None:
    stack.api.fail_next_tasks(1, "the provider's moderation refused it")
    (job,) = await submit(stack, who)
    announcer = RecordingAnnouncer()
    await run_until(make_poller(stack, announcer), lambda: bool(announcer.notified))
    (shown,) = announcer.results
    assert shown.id == job.id
    assert shown.status is JobStatus.FAILED
    assert "moderation" in (shown.error or "")


async def test_a_transient_404_on_a_poll_does_not_fail_the_paid_video(
    stack: Stack, who: Requester
) -> None:
    # A node that does not know the task yet answers 404 to the first polls.
    (job,) = await submit(stack, who)
    stack.api.inject_fault("404", 2)
    announcer = RecordingAnnouncer()
    await run_until(make_poller(stack, announcer), lambda: bool(announcer.notified))
    (shown,) = announcer.results
    assert shown.id == job.id
    assert shown.status is JobStatus.COMPLETED
    assert shown.outputs
    assert [r.status for r in stack.api.requests if job.task_id in r.path][:2] == [404, 404]


async def test_a_task_the_service_keeps_not_knowing_fails_after_minutes_of_404s(
    stack: Stack, who: Requester
) -> None:
    (job,) = await submit(stack, who)
    del stack.api.tasks[job.task_id]  # every poll of it is now a 404
    announcer = RecordingAnnouncer()
    await run_until(make_poller(stack, announcer), lambda: bool(announcer.notified))
    (shown,) = announcer.results
    assert shown.status is JobStatus.FAILED
    assert "has not known this task" in (shown.error or "")
    not_found = [r for r in stack.api.requests if job.task_id in r.path and r.status == 404]
    assert len(not_found) >= NOT_FOUND_FAILURES
    assert not_found[-1].time - not_found[0].time >= NOT_FOUND_SECONDS
    assert len(not_found) <= 15  # backed off: a lost task does not eat the key's budget


async def test_a_restart_announces_what_finished_but_was_not_shown(
    stack: Stack, who: Requester
) -> None:
    (job,) = await submit(stack, who)
    now = stack.clock.time()
    assert await stack.db.jobs.finish(job.id, JobStatus.COMPLETED, ("http://x/v.mp4",), None, now)
    announcer = RecordingAnnouncer()
    await run_until(make_poller(stack, announcer), lambda: bool(announcer.notified))
    again = RecordingAnnouncer()
    poller = make_poller(stack, again)
    task = asyncio.create_task(poller.run())
    await asyncio.sleep(0.2)
    task.cancel()
    await asyncio.gather(task, return_exceptions=True)
    assert again.results == []


async def test_a_deleted_placeholder_gets_its_result_posted_as_a_new_message(
    stack: Stack, who: Requester
) -> None:
    (job,) = await submit(stack, who)
    announcer = RecordingAnnouncer(placeholder_exists=False)
    await run_until(make_poller(stack, announcer), lambda: bool(announcer.results))
    finished = await stack.db.jobs.get(job.id)
    assert finished is not None
    assert finished.status is JobStatus.COMPLETED
    assert finished.announced_at is not None
    assert finished.delivery_route is DeliveryRoute.CHANNEL
    assert announcer.routes == [DeliveryRoute.CHANNEL]
    assert announcer.notified == []  # the new message carries its own ping


async def test_permanent_failures_fall_back_in_order_down_to_jobs(
    stack: Stack, who: Requester
) -> None:
    (job,) = await submit(stack, who)
    refuse = (DeliveryRoute.PLACEHOLDER, DeliveryRoute.CHANNEL, DeliveryRoute.DM)
    announcer = RecordingAnnouncer(refuse=refuse)
    poller = make_poller(stack, announcer)

    async def delivered() -> bool:
        found = await stack.db.jobs.get(job.id)
        return found is not None and found.announced_at is not None

    await run_until(poller, lambda: len(announcer.attempts) >= 3)
    assert [route for _, route, _ in announcer.attempts] == list(refuse)
    assert await delivered()
    finished = await stack.db.jobs.get(job.id)
    assert finished is not None and finished.delivery_route is DeliveryRoute.JOBS
    assert "Unknown Message" in (finished.delivery_error or "")


async def test_a_transient_discord_failure_is_retried_with_backoff_then_shown_once(
    stack: Stack, who: Requester
) -> None:
    (job,) = await submit(stack, who)
    announcer = RecordingAnnouncer(failures=3, clock=stack.clock)
    await run_until(make_poller(stack, announcer), lambda: bool(announcer.notified), limit=30)
    routes = [route for _, route, _ in announcer.attempts]
    assert routes == [DeliveryRoute.PLACEHOLDER] * 4  # retried where it belongs, not elsewhere
    times = [at for _, _, at in announcer.attempts]
    gaps = [later - earlier for earlier, later in itertools.pairwise(times)]
    assert gaps[0] >= 30 and gaps[1] >= 60 and gaps[2] >= 120  # no retry storm
    assert announcer.notified == [job.id]
    finished = await stack.db.jobs.get(job.id)
    assert finished is not None and finished.announced_at is not None


async def test_an_outage_longer_than_the_timeout_still_delivers_every_job(
    stack: Stack, who: Requester
) -> None:
    await stack.db.guilds.update_limits(who.guild_id, max_pending_videos_per_user=5)
    jobs = await submit(stack, who, count=3)
    stack.clock.advance(3600)  # the bot was down for an hour; the service finished them
    announcer = RecordingAnnouncer()
    await run_until(
        make_poller(stack, announcer, job_timeout=1800.0), lambda: len(announcer.notified) == 3
    )
    assert sorted(announcer.notified) == sorted(job.id for job in jobs)
    for job in jobs:
        finished = await stack.db.jobs.get(job.id)
        assert finished is not None and finished.status is JobStatus.COMPLETED


async def test_a_job_still_processing_past_the_timeout_is_unwatched_then_rechecked(
    stack: Stack, who: Requester
) -> None:
    stack.api.set_task_duration(lambda model, body: 10_000.0)
    (job,) = await submit(stack, who)
    announcer = RecordingAnnouncer()
    poller = make_poller(stack, announcer, job_timeout=600.0)
    await run_until(poller, lambda: bool(announcer.unwatched))
    waiting = await stack.db.jobs.get(job.id)
    assert waiting is not None
    assert waiting.status is JobStatus.PENDING  # not failed: the service may still finish it
    assert waiting.unwatched_at is not None
    assert announcer.results == []
    assert announcer.progress_edits  # the placeholder showed it was alive meanwhile
    polls = len([r for r in stack.api.requests if r.method == "GET" and job.task_id in r.path])
    stack.clock.advance(3600)
    assert await stack.db.jobs.due(stack.clock.time(), 10) == []  # no longer polled

    still = await poller.recheck(job.id)
    assert still is not None and still.status is JobStatus.PENDING
    stack.clock.advance(10_000)
    done = await poller.recheck(job.id)
    assert done is not None and done.status is JobStatus.COMPLETED
    await run_until(poller, lambda: bool(announcer.notified))
    assert announcer.notified == [job.id]
    after = [r for r in stack.api.requests if r.method == "GET" and job.task_id in r.path]
    assert len(after) == polls + 2


async def test_a_job_is_due_only_once_its_placeholder_is_attached(
    stack: Stack, who: Requester
) -> None:
    stack.api.set_task_duration(lambda model, body: 0.0)
    (job,) = await submit(stack, who, placeholder=False)
    stack.clock.advance(25)  # a slow placeholder post: the job finished meanwhile (and the
    # first poll, at 24 s by the prior before any history, is due; the 30 s grace is not over)
    assert await stack.db.jobs.due(stack.clock.time(), 10) == []
    await stack.generation.attach_message(job, 555)
    (due,) = await stack.db.jobs.due(stack.clock.time(), 10)
    assert due.message_id == 555


async def test_a_job_whose_placeholder_never_came_is_still_delivered(
    stack: Stack, who: Requester
) -> None:
    (job,) = await submit(stack, who, placeholder=False)
    announcer = RecordingAnnouncer()
    await run_until(make_poller(stack, announcer), lambda: bool(announcer.results))
    finished = await stack.db.jobs.get(job.id)
    assert finished is not None and finished.status is JobStatus.COMPLETED
    assert announcer.routes == [DeliveryRoute.CHANNEL]  # as a message of its own


async def test_many_pending_videos_never_exceed_the_keys_rate_limit(
    stack: Stack, who: Requester
) -> None:
    jobs = 30
    stack.api.set_task_duration(lambda model, body: 20.0 + (hash(body["prompt"]) % 100))
    await stack.db.guilds.update_limits(who.guild_id, max_pending_videos_per_guild=100)
    submitted = []
    for i in range(jobs):
        stack.clock.advance(2.5)  # users submit over time; a burst would be told to wait
        submitted += await submit(stack, Requester(who.guild_id, who.channel_id, i), 1, f"v{i}")
    announcer = RecordingAnnouncer()
    await run_until(
        make_poller(stack, announcer), lambda: len(announcer.notified) == jobs, limit=60
    )
    assert sorted(announcer.notified) == sorted(job.id for job in submitted)
    assert stack.api.rate_limited_count(stack.key) == 0
    assert stack.api.max_requests_in_window(stack.key) <= 30


async def _first_poll(stack: Stack, poller: Poller, job: Job) -> None:
    """Claim and poll ``job`` once (one pass, without the loop that writes reschedules)."""
    stack.clock.advance(max(0.0, job.next_poll_at - stack.clock.time()))
    assert await poller.poll_due() == 1
    async with asyncio.timeout(10):
        while poller.in_flight:
            await asyncio.sleep(0.01)
    assert len([r for r in stack.api.requests if job.task_id in r.path]) == 1


async def test_a_reschedule_is_written_by_the_next_pass(stack: Stack, who: Requester) -> None:
    stack.api.set_task_duration(lambda model, body: 600.0)  # still processing at its first poll
    (job,) = await submit(stack, who)
    poller = make_poller(stack, RecordingAnnouncer())
    await _first_poll(stack, poller, job)
    queued = await stack.db.jobs.get(job.id)
    assert queued is not None and queued.poll_count == 0  # still held by its lease only

    task = asyncio.create_task(poller.run())
    async with asyncio.timeout(10):
        while (await stack.db.jobs.get(job.id)).poll_count == 0:  # type: ignore[union-attr]
            await asyncio.sleep(0.01)
    task.cancel()
    await asyncio.gather(task, return_exceptions=True)
    written = await stack.db.jobs.get(job.id)
    # The loop above ends only once a pass wrote the queued reschedule (poll_count is written
    # with it, never by the lease).
    assert written is not None and written.status is JobStatus.PENDING


async def test_a_crash_before_a_reschedule_is_written_costs_one_more_poll_only(
    stack: Stack, who: Requester
) -> None:
    stack.api.set_task_duration(lambda model, body: 60.0)
    (job,) = await submit(stack, who)
    await _first_poll(stack, make_poller(stack, RecordingAnnouncer()), job)
    leased = await stack.db.jobs.get(job.id)
    assert leased is not None and (leased.status, leased.poll_count) == (JobStatus.PENDING, 0)
    # The process dies here, its queued reschedule unwritten. The restarted poller leaves the
    # job alone while the dead one's lease runs, then polls it and delivers it as usual.
    announcer = RecordingAnnouncer()
    restarted = make_poller(stack, announcer)
    assert await restarted.poll_due() == 0
    stack.clock.advance(30.0)
    await run_until(restarted, lambda: bool(announcer.notified))
    finished = await stack.db.jobs.get(job.id)
    assert finished is not None and finished.status is JobStatus.COMPLETED
    assert announcer.notified == [job.id]


class HeldAnnouncer(RecordingAnnouncer):
    """Holds every delivery until ``gate`` opens; records a delivery cut short (cancelled)."""

    def __init__(self) -> None:
        super().__init__()
        self.gate = asyncio.Event()
        self.entered = asyncio.Event()
        self.cancelled: list[int] = []

    async def deliver(self, job: Job, route: DeliveryRoute, renew: Renew | None = None) -> Attempt:
        self.entered.set()
        try:
            await self.gate.wait()
        except asyncio.CancelledError:
            self.cancelled.append(job.id)
            raise
        return await super().deliver(job, route, renew)


async def wait_for(done: Callable[[], bool], limit: float = 20.0) -> None:
    async with asyncio.timeout(limit):
        while not done():
            await asyncio.sleep(0.01)


async def test_a_failing_pass_leaves_the_deliveries_under_way_alone(
    stack: Stack, who: Requester, monkeypatch: pytest.MonkeyPatch
) -> None:
    # One pass that raised (a locked database, a bug) cancelled every poll and
    # delivery under way; their leases then ran out (300 s) and a cancelled channel or DM send
    # could be posted twice.
    (job,) = await submit(stack, who)
    announcer = HeldAnnouncer()
    poller = make_poller(stack, announcer)
    task = asyncio.create_task(poller.run())
    try:
        async with asyncio.timeout(20):
            await announcer.entered.wait()
        failures: list[int] = []
        claim = stack.db.jobs.claim_due

        async def broken_claim(*args: Any, **kwargs: Any) -> list[Job]:
            failures.append(1)
            raise RuntimeError("the claim failed")

        monkeypatch.setattr(stack.db.jobs, "claim_due", broken_claim)
        poller.wake()
        await wait_for(lambda: len(failures) >= 1)
        monkeypatch.setattr(stack.db.jobs, "claim_due", claim)
        announcer.gate.set()
        await wait_for(lambda: bool(announcer.notified))
    finally:
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)
    assert announcer.cancelled == []
    assert [j.id for j in announcer.results] == [job.id]  # shown once, by the first attempt
    shown = await stack.db.jobs.get(job.id)
    assert shown is not None and shown.announced_at is not None


async def test_stop_drains_the_work_under_way_then_returns(stack: Stack, who: Requester) -> None:
    (job,) = await submit(stack, who)
    announcer = HeldAnnouncer()
    poller = make_poller(stack, announcer)
    task = asyncio.create_task(poller.run())
    async with asyncio.timeout(20):
        await announcer.entered.wait()
    poller.stop()  # SIGTERM: no new claims; what is under way may finish
    await asyncio.sleep(0)
    assert not task.done()
    announcer.gate.set()
    async with asyncio.timeout(20):
        await task  # returns by itself once drained
    assert announcer.cancelled == []
    assert announcer.notified == [job.id]
    shown = await stack.db.jobs.get(job.id)
    assert shown is not None and shown.announced_at is not None


async def test_stop_releases_the_leases_it_cut_short(
    stack: Stack, who: Requester, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Worker stop: what the grace did not let finish is cancelled and its lease handed back,
    # so that another worker claims the job at once instead of after the lease (300 s).
    (first,) = await submit(stack, who)
    announcer = HeldAnnouncer()
    poller = make_poller(stack, announcer, drain_grace=0.0)
    polled = asyncio.Event()

    async def endless_poll(*args: Any, **kwargs: Any) -> Any:
        polled.set()
        await asyncio.Event().wait()  # a poll that would outlast the grace

    task = asyncio.create_task(poller.run())
    async with asyncio.timeout(20):
        await announcer.entered.wait()  # the first job finished and is being delivered
    monkeypatch.setattr(stack.client, "poll", endless_poll)
    (second,) = await submit(stack, who, prompt="a second fox")
    await stack.db.jobs.schedule_poll(second.id, stack.clock.time(), 0)
    poller.wake()
    async with asyncio.timeout(20):
        await polled.wait()
    poller.stop()
    async with asyncio.timeout(20):
        await task
    assert announcer.cancelled == [first.id]
    now = stack.clock.time()
    delivery = await stack.db.jobs.claim_deliveries(now, now + 300, limit=10)
    assert [j.id for j in delivery] == [first.id]
    polls = await stack.db.jobs.claim_due(now, now + 30, limit=10, per_key=10)
    assert [j.id for j in polls] == [second.id]


async def test_a_delivery_longer_than_its_lease_is_never_taken_over(
    stack: Stack, who: Requester
) -> None:
    """Slow downloads (ten outputs, up to 120 s each) must not let the lease run out: another
    process (or this one's next pass) would deliver the result a second time."""
    (job,) = await submit(stack, who)
    await stack.db.jobs.finish(
        job.id, JobStatus.COMPLETED, ("http://x/1.png", "http://x/2.png"), None, stack.clock.time()
    )
    taken: list[Job] = []

    class SlowAnnouncer(RecordingAnnouncer):
        async def deliver(
            self, job: Job, route: DeliveryRoute, renew: Renew | None = None
        ) -> Attempt:
            # Four steps of 150 s (downloads), 600 s in all, the lease renewed between them
            # (the poller's own passes move the manual clock on a little too).
            for _ in range(4):
                stack.clock.advance(150.0)
                now = stack.clock.time()
                taken.extend(await stack.db.jobs.claim_deliveries(now, now + 300.0, limit=5))
                if renew is not None:
                    await renew()
            return await super().deliver(job, route, renew)

    announcer = SlowAnnouncer()
    await run_until(
        make_poller(stack, announcer, delivery_lease=300.0), lambda: bool(announcer.notified)
    )
    assert taken == []
    assert announcer.notified == [job.id]
    shown = await stack.db.jobs.get(job.id)
    assert shown is not None and shown.announced_at is not None


async def test_an_hour_old_jobs_placeholder_is_refreshed_every_quarter_hour_not_every_minute(
    stack: Stack, who: Requester
) -> None:
    # Its live timestamps move by themselves; an edit a minute per old job only
    # spends Discord's edit limits (and the poller's CPU) on what nobody may still watch.
    stack.api.set_task_duration(lambda model, body: 10_000.0)
    await submit(stack, who)
    ages: list[float] = []

    class Timed(RecordingAnnouncer):
        async def progress(self, job: Job, now: float) -> None:
            ages.append(now - job.created_at)
            await super().progress(job, now)

    poller = make_poller(stack, Timed(), job_timeout=7200.0)
    await run_until(poller, lambda: bool(ages) and ages[-1] >= 3600.0, limit=60.0)
    assert 5 <= len([age for age in ages if age < 600]) <= 10  # a young job: every minute
    assert len([age for age in ages if 1800 <= age < 3600]) <= 4
    assert all(later - age >= age / 4 for age, later in itertools.pairwise(ages) if age >= 240)
