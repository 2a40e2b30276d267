"""The poller against the emulator: every job finished once, announced once, within the limit.

The Discord side is replaced by a recorder here; the end-to-end tests drive the real one.
"""

import asyncio
from collections.abc import Callable

from bot.poller import Poller
from bot.services.generation import Requester, VideoOptions
from bot.storage import Job, JobStatus
from tests.conftest import Stack


class RecordingAnnouncer:
    def __init__(self, *, placeholder_exists: bool = True) -> None:
        self.placeholder_exists = placeholder_exists
        self.progress_edits: list[int] = []
        self.results: list[Job] = []
        self.notified: list[int] = []

    async def progress(self, job: Job, now: float) -> None:
        self.progress_edits.append(job.id)

    async def show_result(self, job: Job) -> bool:
        self.results.append(job)
        return self.placeholder_exists

    async def notify(self, job: Job) -> None:
        self.notified.append(job.id)


def make_poller(stack: Stack, announcer: RecordingAnnouncer, **kw: float) -> Poller:
    return Poller(
        store=stack.store,
        client=stack.client,
        keys=stack.keys,
        schedule=stack.schedule,
        announcer=announcer,
        clock=stack.clock,
        **kw,  # type: ignore[arg-type]
    )


async def submit(stack: Stack, who: Requester, count: int = 1, prompt: str = "a fox") -> list[Job]:
    catalogue = await stack.generation.catalogue(who.guild_id)
    model = next(m for m in catalogue.video if not m.needs_image)
    return [await stack.generation.video(who, VideoOptions(prompt, model.id)) for _ in range(count)]


async def run_until(poller: Poller, done: Callable[[], bool], limit: float = 20.0) -> None:
    """Run the poller until ``done()`` and it has nothing left to poll or announce."""
    task = asyncio.create_task(poller.run())
    try:
        async with asyncio.timeout(limit):
            while not (done() and poller.in_flight == 0):
                await asyncio.sleep(0.01)
    finally:
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)


async def test_a_video_is_polled_to_completion_and_announced_once(
    stack: Stack, who: Requester
) -> None:
    (job,) = await submit(stack, who)
    announcer = RecordingAnnouncer()
    poller = make_poller(stack, announcer)
    await run_until(poller, lambda: bool(announcer.notified))
    finished = await stack.store.get_job(job.id)
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


async def test_a_restart_announces_what_finished_but_was_not_shown(
    stack: Stack, who: Requester
) -> None:
    (job,) = await submit(stack, who)
    now = stack.clock.time()
    assert await stack.store.finish_job(job.id, JobStatus.COMPLETED, ("http://x/v.mp4",), None, now)
    announcer = RecordingAnnouncer()
    await run_until(make_poller(stack, announcer), lambda: bool(announcer.notified))
    again = RecordingAnnouncer()
    poller = make_poller(stack, again)
    task = asyncio.create_task(poller.run())
    await asyncio.sleep(0.2)
    task.cancel()
    await asyncio.gather(task, return_exceptions=True)
    assert again.results == []


async def test_a_deleted_placeholder_still_finishes_the_job_without_pinging(
    stack: Stack, who: Requester
) -> None:
    (job,) = await submit(stack, who)
    announcer = RecordingAnnouncer(placeholder_exists=False)
    await run_until(make_poller(stack, announcer), lambda: bool(announcer.results))
    finished = await stack.store.get_job(job.id)
    assert finished is not None
    assert finished.status is JobStatus.COMPLETED
    assert finished.announced_at is not None
    assert announcer.notified == []


async def test_a_job_past_the_limit_is_failed_with_a_clear_message(
    stack: Stack, who: Requester
) -> None:
    stack.api.set_task_duration(lambda model, body: 10_000.0)
    (job,) = await submit(stack, who)
    announcer = RecordingAnnouncer()
    await run_until(
        make_poller(stack, announcer, job_timeout=600.0), lambda: bool(announcer.results)
    )
    (shown,) = announcer.results
    assert shown.id == job.id
    assert shown.status is JobStatus.FAILED
    assert "did not finish within 10 m" in (shown.error or "")
    assert announcer.progress_edits  # the placeholder showed it was alive meanwhile


async def test_many_pending_videos_never_exceed_the_keys_rate_limit(
    stack: Stack, who: Requester
) -> None:
    jobs = 30
    stack.api.set_task_duration(lambda model, body: 20.0 + (hash(body["prompt"]) % 100))
    await stack.store.update_limits(who.guild_id, max_pending_videos_per_guild=100)
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
