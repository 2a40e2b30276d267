"""The poll policy: hazard-based due times, honest estimates, fair shares between guilds."""

from dataclasses import replace

import pytest

from bot.clock import ManualClock
from bot.domain import Job, Kind
from bot.jobs.poller import Poller
from bot.services.generation import Requester
from bot.services.schedule import (
    LEARNED_TTL,
    MIN_INTERVAL,
    PRIORS,
    CompletionTimes,
    FairShare,
    PollSchedule,
)
from tests.support.jobs import make_job
from tests.support.poller import RecordingAnnouncer, run_until, submit
from tests.support.stack import Stack


def schedule(history: list[float]) -> PollSchedule:
    async def durations(model: str) -> list[float]:
        return list(history)

    return PollSchedule(durations)


def test_without_history_the_prior_alone_answers() -> None:
    times = CompletionTimes([], PRIORS[Kind.VIDEO])
    assert times.survival(0.0) == 1.0
    assert times.survival(PRIORS[Kind.VIDEO].median) == pytest.approx(0.5)
    assert 0.0 < times.hazard(30.0, 40.0) < 1.0


def test_history_beyond_its_longest_job_keeps_a_chance_to_finish() -> None:
    times = CompletionTimes([20.0, 22.0, 24.0], PRIORS[Kind.VIDEO])
    # Past every job seen, the prior still says a job may finish: polls never stop.
    assert times.hazard(60.0, 90.0) > 0.1


async def test_a_young_job_is_polled_when_it_has_likely_finished() -> None:
    plan = schedule([40.0] * 10)
    first = await plan.first_poll_at("m", Kind.VIDEO, 1000.0)
    assert first == pytest.approx(1030.0, abs=1)  # MAX_INTERVAL, the history says 40 s
    again = await plan.next_poll_at(make_job(created_at=1000.0, model="m"), 1039.0)
    assert 1039.0 + MIN_INTERVAL <= again <= 1045.0  # due around 40 s: soon


async def test_two_polls_of_one_job_are_at_least_three_seconds_apart() -> None:
    plan = schedule([10.0] * 50)
    job = make_job(created_at=0.0, model="m")
    assert await plan.next_poll_at(job, 9.9) >= 9.9 + MIN_INTERVAL


async def test_the_estimate_is_the_conditional_median() -> None:
    plan = schedule([30.0, 40.0, 50.0, 60.0, 70.0] * 4)
    job = make_job(created_at=1000.0, model="m")
    assert await plan.estimated_finish(job, now=1001.0) == pytest.approx(1050.0, abs=3)
    # Older than most: the estimate moves on, never into the past.
    late = await plan.estimated_finish(job, now=1065.0)
    assert late >= 1065.0
    assert late <= 1065.0 + 120


async def test_what_is_learned_is_refreshed_when_a_job_finishes() -> None:
    history: list[float] = []

    async def durations(model: str) -> list[float]:
        return list(history)

    plan = PollSchedule(durations)
    job = make_job(created_at=0.0, model="m")
    before = await plan.estimated_finish(job, now=0.0)
    history.extend([8.0] * 20)
    assert await plan.estimated_finish(job, now=0.0) == before  # cached
    plan.forget("m")
    assert await plan.estimated_finish(job, now=0.0) < before


async def test_what_is_learned_is_read_again_after_its_ttl() -> None:
    history: list[float] = []
    reads: list[str] = []

    async def durations(model: str) -> list[float]:
        reads.append(model)
        return list(history)

    clock = ManualClock()
    plan = PollSchedule(durations, clock=clock)
    job = make_job(created_at=0.0, model="m")
    before = await plan.estimated_finish(job, now=0.0)
    history.extend([8.0] * 20)  # another process finished these
    clock.advance(LEARNED_TTL - 1)
    assert await plan.estimated_finish(job, now=0.0) == before  # cached: one read a minute
    clock.advance(1)
    assert await plan.estimated_finish(job, now=0.0) < before
    assert reads == ["m", "m"]


def _due(guild: int, count: int, *, key: str = "shared", start: int = 0) -> list[Job]:
    job = make_job(created_at=0.0, guild=guild, key=key)
    return [replace(job, id=start + i, next_poll_at=float(i)) for i in range(count)]


def claim(fair: FairShare, due: list[Job], per_key: int) -> list[Job]:
    """What a claim takes: each key's first ``per_key`` jobs in the ranking."""
    taken: dict[str, int] = {}
    chosen = []
    for job in fair.rank(due):
        if taken.get(job.key_fingerprint, 0) < per_key:
            taken[job.key_fingerprint] = taken.get(job.key_fingerprint, 0) + 1
            chosen.append(job)
    fair.polled(chosen)
    return chosen


def test_a_busy_guild_cannot_stall_another_on_a_shared_key() -> None:
    fair = FairShare()
    busy, quiet = _due(1, 20), _due(2, 1, start=100)
    due = sorted([*busy, *quiet], key=lambda j: j.next_poll_at)
    polled = []
    for _ in range(6):
        [job] = claim(fair, due, 1)
        polled.append(job.guild_id)
    # The quiet guild's job, due after all of the busy guild's, is polled second, and every
    # other time while it stays due.
    assert polled == [1, 2, 1, 2, 1, 2]


def test_keys_are_shared_separately() -> None:
    fair = FairShare()
    chosen = claim(fair, [*_due(1, 3, key="a"), *_due(1, 3, key="b", start=10)], 2)
    assert sorted(j.key_fingerprint for j in chosen) == ["a", "a", "b", "b"]
    # Within a guild, earliest due first.
    assert [j.id for j in chosen if j.key_fingerprint == "a"] == [0, 1]


async def test_learned_timings_reach_a_gateway_without_a_poller(
    stack: Stack, who: Requester
) -> None:
    # The gateway (POLLER_ENABLED=false) shows the `ready` estimate and sets
    # every first poll, but only a worker finishes jobs (a process of its own: its own
    # schedule). The prior's median is 60 s; these videos take 8 s.
    stack.api.set_task_duration(lambda model, body: 8.0)
    (first,) = await submit(stack, who)  # the gateway learns the prior alone here
    prior = await stack.schedule.estimated_finish(first, now=first.created_at)
    announcer = RecordingAnnouncer()
    worker = Poller(
        db=stack.db,
        client=stack.client,
        keys=stack.keys,
        schedule=PollSchedule(stack.db.jobs.completion_seconds),  # the worker's own
        announcer=announcer,
        clock=stack.clock,
    )
    for user in range(1, 5):  # a member may have 3 videos pending
        await submit(stack, replace(who, user_id=who.user_id + user))
    await run_until(worker, lambda: len(announcer.notified) == 5)
    stack.clock.advance(LEARNED_TTL)

    (fresh,) = await submit(stack, replace(who, user_id=who.user_id + 5))
    ready = await stack.schedule.estimated_finish(fresh, now=fresh.created_at)
    learned = PollSchedule(stack.db.jobs.completion_seconds)  # what the jobs table says now
    assert ready == await learned.estimated_finish(fresh, now=fresh.created_at)
    assert ready - fresh.created_at != pytest.approx(prior - first.created_at), (
        "the gateway still shows the prior's estimate"
    )
