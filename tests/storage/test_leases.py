"""Leases with fencing tokens: two processes (two ``Database`` objects on one database, each
engine in turn) never poll or deliver one job at once, and a holder whose lease ran out
changes nothing once another process has claimed the job.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Awaitable, Callable

import pytest

from bot.clock import ManualClock
from bot.domain import DeliveryRoute, JobStatus, PollUpdate
from bot.services.schedule import FairShare
from bot.storage import Database
from tests.support.jobs import new_job

NOW = 1_767_225_600.0
LEASE = 30.0


@pytest.fixture
async def two(
    open_db: Callable[[ManualClock], Awaitable[Database]],
) -> AsyncIterator[tuple[Database, Database]]:
    """Two "processes": two databases opened independently on the same file (or server)."""
    clock = ManualClock()
    one = await open_db(clock)
    other = await open_db(clock)
    yield one, other
    await other.close()
    await one.close()


async def test_concurrent_claims_split_the_due_jobs(two: tuple[Database, Database]) -> None:
    one, other = two
    for i in range(40):
        await one.jobs.insert(new_job(f"t{i}", next_poll_at=NOW - 1, key=f"k{i % 4}"))

    claims = await asyncio.gather(
        *(db.jobs.claim_due(NOW, NOW + LEASE, limit=500, per_key=3) for db in (one, other))
    )

    ids = [job.id for claim in claims for job in claim]
    assert len(ids) == len(set(ids)), "a job was leased to two pollers at once"
    assert len(ids) == 24  # each claim: 3 jobs of each of the 4 keys
    assert all(job.poll_token == 1 and job.next_poll_at == NOW - 1 for c in claims for job in c)
    # Leased jobs are not due for anyone until the lease expires.
    left = await other.jobs.claim_due(NOW + 1, NOW + LEASE, limit=500, per_key=100)
    assert {job.id for job in left}.isdisjoint(ids) and len(left) == 16


async def test_guilds_sharing_a_key_take_turns_across_processes(
    two: tuple[Database, Database],
) -> None:
    # A busy guild's 8 videos are all due before a quiet guild's one, on the same key.
    one, other = two
    for i in range(8):
        await one.jobs.insert(new_job(f"busy{i}", next_poll_at=NOW - 20 + i, guild=1, key="k"))
    quiet = await one.jobs.insert(new_job("quiet", next_poll_at=NOW - 1, guild=2, key="k"))
    fair = [FairShare(), FairShare()]
    claimed = []
    for turn in range(4):
        db = two[turn % 2]
        jobs = await db.jobs.claim_due(NOW, NOW + LEASE, limit=500, per_key=1, rank=fair[0].rank)
        fair[0].polled(jobs)
        claimed += jobs
    guilds = [job.guild_id for job in claimed]
    assert guilds[:2] == [1, 2]  # the quiet guild's job is polled second, not ninth
    assert quiet.id in {job.id for job in claimed}
    # Concurrent ranked claims still split the jobs: none is leased twice.
    rest = await asyncio.gather(
        *(
            db.jobs.claim_due(NOW, NOW + LEASE, limit=500, per_key=2, rank=f.rank)
            for db, f in zip((one, other), fair, strict=True)
        )
    )
    ids = [job.id for claim in [claimed, *rest] for job in claim]
    assert len(ids) == len(set(ids)) == 8


async def test_per_key_and_skipped_keys(two: tuple[Database, Database]) -> None:
    one, _ = two
    for i in range(5):
        await one.jobs.insert(new_job(f"a{i}", next_poll_at=NOW - 10 + i, key="busy"))
    calm = await one.jobs.insert(new_job("calm", next_poll_at=NOW, key="calm"))

    claimed = await one.jobs.claim_due(NOW, NOW + LEASE, limit=500, per_key=2)
    assert [job.task_id for job in claimed] == ["a0", "a1", "calm"]  # earliest first
    assert (
        await one.jobs.claim_due(NOW, NOW + LEASE, limit=500, per_key=9, skip_keys=["busy"]) == []
    )
    assert calm.id in {job.id for job in claimed}


async def test_an_expired_lease_is_taken_over_and_the_old_holder_is_fenced(
    two: tuple[Database, Database],
) -> None:
    first, second = two
    job = await first.jobs.insert(new_job("t1", next_poll_at=NOW))
    [held] = await first.jobs.claim_due(NOW, NOW + LEASE, limit=10, per_key=3)
    # The first process is killed (or stalls): nobody else polls the job during its lease...
    assert await second.jobs.claim_due(NOW + LEASE - 1, NOW + 2 * LEASE, limit=10, per_key=3) == []
    # ...and once it expires, the second process takes the job over with a newer token.
    [taken] = await second.jobs.claim_due(NOW + LEASE, NOW + 2 * LEASE, limit=10, per_key=3)
    assert taken.id == job.id and taken.poll_token == held.poll_token + 1

    # The old holder's late writes change nothing: no reschedule over the new lease...
    assert not await first.jobs.schedule_poll(job.id, NOW + 31, 1, token=held.poll_token)
    assert not await first.jobs.set_unwatched(job.id, NOW + 31, token=held.poll_token)
    assert not await first.jobs.finish(
        job.id, JobStatus.FAILED, [], "late", NOW + 31, token=held.poll_token
    )
    current = await second.jobs.get(job.id)
    assert current is not None
    assert (current.status, current.next_poll_at, current.unwatched_at) == (
        JobStatus.PENDING,
        NOW + 2 * LEASE,
        None,
    )
    # ...while the current holder's writes go through.
    assert await second.jobs.finish(
        job.id, JobStatus.COMPLETED, ["https://x/1.mp4"], None, NOW + 32, token=taken.poll_token
    )


async def test_deliveries_are_leased_and_fenced(two: tuple[Database, Database]) -> None:
    first, second = two
    job = await first.jobs.insert(new_job("t1", next_poll_at=NOW))
    assert await first.jobs.finish(job.id, JobStatus.COMPLETED, ["https://x/1.mp4"], None, NOW)

    claims = await asyncio.gather(
        first.jobs.claim_deliveries(NOW, NOW + 300, limit=20),
        second.jobs.claim_deliveries(NOW, NOW + 300, limit=20),
    )
    assert sorted(len(claim) for claim in claims) == [0, 1]
    [held] = [job for claim in claims for job in claim]

    # The holder dies; after the lease another process delivers it...
    [taken] = await second.jobs.claim_deliveries(NOW + 300, NOW + 600, limit=20)
    assert taken.delivery_token == held.delivery_token + 1
    # ...and the old holder, waking up late, can neither record it nor reschedule it.
    await first.jobs.schedule_delivery(
        job.id, DeliveryRoute.CHANNEL, 0, NOW + 301, "late", token=held.delivery_token
    )
    assert not await first.jobs.mark_announced(job.id, NOW + 301, token=held.delivery_token)
    assert await second.jobs.mark_announced(job.id, NOW + 302, token=taken.delivery_token)
    done = await first.jobs.get(job.id)
    assert done is not None
    assert (done.delivery_route, done.announced_at) == (DeliveryRoute.PLACEHOLDER, NOW + 302)


async def test_many_reschedules_in_one_write_are_fenced_row_by_row(
    two: tuple[Database, Database],
) -> None:
    first, second = two
    current, stale, finished, unleased = [
        await first.jobs.insert(new_job(f"t{i}", next_poll_at=NOW)) for i in range(4)
    ]
    held = {j.id: j for j in await first.jobs.claim_due(NOW, NOW + LEASE, limit=10, per_key=9)}
    # stale's lease ran out and another process took it; finished was settled meanwhile.
    await second.jobs.schedule_poll(stale.id, NOW, 0)
    [taken] = await second.jobs.claim_due(NOW, NOW + 2 * LEASE, limit=10, per_key=9)
    assert taken.id == stale.id
    assert await first.jobs.finish(finished.id, JobStatus.FAILED, [], "x", NOW + 1)

    changed = await first.jobs.schedule_polls(
        [
            PollUpdate(current.id, NOW + 5, 1, held[current.id].poll_token),
            PollUpdate(current.id, NOW + 9, 2, held[current.id].poll_token, progress_at=NOW + 2),
            PollUpdate(stale.id, NOW + 5, 1, held[stale.id].poll_token, progress_at=NOW + 2),
            PollUpdate(finished.id, NOW + 5, 1, held[finished.id].poll_token),
            PollUpdate(unleased.id, NOW + 7, 3, None),  # no lease checked, as schedule_poll
        ]
    )

    assert changed == 2
    jobs = {j: await second.jobs.get(j) for j in (current.id, stale.id, finished.id, unleased.id)}
    got = {i: (j.next_poll_at, j.poll_count, j.last_progress_at) for i, j in jobs.items() if j}
    assert got[current.id] == (NOW + 9, 2, NOW + 2)  # its last update only
    assert got[stale.id] == (NOW + 2 * LEASE, 0, None)  # the new holder's lease stands
    assert jobs[finished.id] is not None and jobs[finished.id].status is JobStatus.FAILED
    assert got[unleased.id] == (NOW + 7, 3, None)
    assert await first.jobs.schedule_polls([]) == 0


async def test_released_leases_are_claimed_by_another_process_at_once(
    two: tuple[Database, Database],
) -> None:
    # Worker stop: a stopping process hands back the leases it still holds, so the
    # other process claims those jobs now, not when the leases (30 s, 300 s) end.
    first, second = two
    for i in range(2):
        await first.jobs.insert(new_job(f"p{i}", next_poll_at=NOW, key=f"k{i}"))
    delivered = await first.jobs.insert(new_job("d", next_poll_at=NOW))
    assert await first.jobs.finish(delivered.id, JobStatus.COMPLETED, ["https://x/1"], None, NOW)
    held = await first.jobs.claim_due(NOW, NOW + LEASE, limit=10, per_key=9)
    [delivery] = await first.jobs.claim_deliveries(NOW, NOW + 300, limit=10)
    # One lease ran out and the job was claimed since by the other process: a stale token
    # releases nothing there.
    [retaken] = await second.jobs.claim_due(NOW + LEASE, NOW + 2 * LEASE, limit=1, per_key=9)
    [live] = [job for job in held if job.id != retaken.id]

    released = await first.jobs.release_leases(
        {job.id: job.poll_token for job in held},
        {delivery.id: delivery.delivery_token},
        NOW + 1,
    )

    assert released == 2  # the live poll lease and the delivery lease
    claimed = await second.jobs.claim_due(NOW + 1, NOW + LEASE, limit=10, per_key=9)
    assert [job.id for job in claimed] == [live.id]
    [again] = await second.jobs.claim_deliveries(NOW + 1, NOW + 300, limit=10)
    assert again.id == delivered.id and again.delivery_token == delivery.delivery_token + 1
    taken = await second.jobs.get(retaken.id)
    assert taken is not None and taken.next_poll_at == NOW + 2 * LEASE
