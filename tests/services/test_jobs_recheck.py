"""``/jobs`` re-checks a job the poller stopped watching at most once per few minutes: each
poll spends the key's rate budget, which on the shared key is every server's.

The cog's re-check runs against the real poller, client, emulator and database; only the bot
around the cog is a stand-in holding the services.
"""

from __future__ import annotations

from types import SimpleNamespace

from bot.services.generation import Requester
from cogs.jobs import JobsCog
from tests.support.poller import RecordingAnnouncer, make_poller, run_until, submit
from tests.support.stack import Stack


def polls_of(stack: Stack, task_id: str) -> int:
    return len([r for r in stack.api.requests if r.method == "GET" and task_id in r.path])


async def test_jobs_polls_an_unwatched_job_at_most_once_per_five_minutes(
    stack: Stack, who: Requester
) -> None:
    stack.api.set_task_duration(lambda model, body: 100_000.0)
    (job,) = await submit(stack, who)
    announcer = RecordingAnnouncer()
    poller = make_poller(stack, announcer, job_timeout=600.0)
    await run_until(poller, lambda: bool(announcer.unwatched))
    stack.clock.advance(3600)
    services = stack.services
    cog = JobsCog(
        SimpleNamespace(),  # type: ignore[arg-type]
        services.generation,
        services.members,
        services.private_cards,
        services.schedule,
        poller,
        clock=services.clock,
        recheck_seconds=services.settings.jobs_recheck_seconds,
    )

    async def list_jobs() -> None:
        jobs = await stack.db.jobs.recent(who.guild_id, user_id=who.user_id, limit=50)
        await cog._check_again(jobs)

    before = polls_of(stack, job.task_id)
    await list_jobs()
    assert polls_of(stack, job.task_id) == before + 1
    for _ in range(5):  # a member running /jobs again and again
        stack.clock.advance(30)
        await list_jobs()
    assert polls_of(stack, job.task_id) == before + 1
    stack.clock.advance(300)  # JOBS_RECHECK_SECONDS after the check (150 s have passed)
    await list_jobs()
    assert polls_of(stack, job.task_id) == before + 2
