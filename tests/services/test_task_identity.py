"""A task id is the service's only within the account (key) that made it.

The API emulator restarts its task counter (``restart_task_counter``) while the bot's database
is kept, so that the service gives an id it gave before: to another server on the same key, or
to another key. Each task is then stored, charged and kept in its own place, and the clash is
an anomaly for the admins of the server whose task came second.
"""

from __future__ import annotations

from decimal import Decimal
from typing import Any

import pytest
from cryptography.fernet import Fernet

from bot.domain import TASK_ID_REUSED, JobStatus, Kind
from bot.services.generation import Requester, VideoOptions
from tests.support.stack import Stack

OTHER = Requester(guild_id=2, channel_id=20, user_id=200)


@pytest.fixture
def stack_overrides() -> dict[str, Any]:
    return {"key_encryption_key": Fernet.generate_key().decode()}


async def video_model_id(stack: Stack, who: Requester) -> str:
    catalogue = await stack.generation.catalogue(who.guild_id)
    return next(m.id for m in catalogue.video if not m.needs_image)


async def test_an_id_given_again_on_the_same_key_is_a_task_of_its_own_and_an_anomaly(
    stack: Stack, who: Requester
) -> None:
    model = await video_model_id(stack, who)
    stack.api.restart_task_counter()
    first = await stack.generation.video(who, VideoOptions("a fox", model, duration=5))
    stack.clock.advance(60)
    stack.api.restart_task_counter()
    second = await stack.generation.video(OTHER, VideoOptions("an owl", model, duration=5))

    assert first.task_id == second.task_id == "task-1"
    assert first.id != second.id
    assert (second.guild_id, second.channel_id, second.user_id) == (2, 20, 200)
    assert first.key_fingerprint == second.key_fingerprint
    # Each is charged to its own server, and neither job was overwritten by the other.
    assert await stack.db.ledger.total(who.guild_id) == first.cost_cents > 0
    assert await stack.db.ledger.total(OTHER.guild_id) == second.cost_cents > 0
    for job, guild in ((first, who.guild_id), (second, OTHER.guild_id)):
        stored = await stack.db.jobs.get(job.id)
        assert stored is not None
        assert (stored.guild_id, stored.status) == (guild, JobStatus.PENDING)
    # The key saw its own id again: kept for the admins of the server it happened in.
    assert await stack.db.ledger.anomalies(who.guild_id, since=0) == []
    (anomaly,) = await stack.db.ledger.anomalies(OTHER.guild_id, since=0)
    assert (anomaly.task_id, anomaly.reason, anomaly.kind) == ("task-1", TASK_ID_REUSED, Kind.VIDEO)
    # It is not a charge of a wrong amount: the report counts it apart.
    report = await stack.billing.report(OTHER.guild_id)
    assert (report.anomalies, report.reused_task_ids) == (0, 1)


async def test_the_same_id_on_two_keys_is_two_tasks_and_the_clash_is_recorded(
    stack: Stack, who: Requester
) -> None:
    other_key = stack.api.create_key(balance_cents=100_000)
    await stack.keys.store_key(OTHER.guild_id, other_key)
    model = await video_model_id(stack, who)
    stack.api.restart_task_counter()
    first = await stack.generation.video(who, VideoOptions("a fox", model, duration=5))
    stack.api.restart_task_counter()
    # Both pending at once, same id, different accounts.
    second = await stack.generation.video(OTHER, VideoOptions("an owl", model, duration=5))

    assert first.task_id == second.task_id == "task-1"
    assert first.key_fingerprint != second.key_fingerprint
    assert first.id != second.id
    assert second.guild_id == OTHER.guild_id
    assert await stack.db.ledger.total(who.guild_id) == first.cost_cents > 0
    assert await stack.db.ledger.total(OTHER.guild_id) == second.cost_cents > 0
    assert stack.api.balance(other_key) == Decimal(100_000) - second.cost_cents
    assert await stack.db.ledger.anomalies(who.guild_id, since=0) == []
    (clash,) = await stack.db.ledger.anomalies(OTHER.guild_id, since=0)
    assert (clash.task_id, clash.reason, clash.key_fingerprint) == (
        "task-1",
        TASK_ID_REUSED,
        second.key_fingerprint,
    )
    # Looked up by its task, each key finds its own job.
    mine = await stack.db.jobs.by_task(first.key_fingerprint, Kind.VIDEO, "task-1")
    theirs = await stack.db.jobs.by_task(second.key_fingerprint, Kind.VIDEO, "task-1")
    assert (mine and mine.id, theirs and theirs.id) == (first.id, second.id)
