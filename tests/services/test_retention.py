"""Retention: rows that grow with use are swept after their period, on both engines."""

import asyncio
import contextlib

import pytest
from cryptography.fernet import Fernet
from prometheus_client.parser import text_string_to_metric_families
from pydantic import SecretStr
from sqlalchemy import func, insert, select

from bot.clock import ManualClock
from bot.domain import AuditEntry
from bot.jobs.supervisor import supervise
from bot.ops.metrics import Metrics
from bot.services.keys import KeyVault
from bot.services.response_tokens import ResponseToken, ResponseTokens
from bot.services.retention import DAY, Retention, RetentionPeriods
from bot.storage import Database
from bot.storage.schema import config_audit, meta, rate_blocks, rate_requests, result_requests
from tests.support.settings import make_settings


def sample(metrics: Metrics, name: str, **labels: str) -> float | None:
    for family in text_string_to_metric_families(metrics.render().decode()):
        for found in family.samples:
            if found.name == name and found.labels == labels:
                return float(found.value)
    return None


async def count(db: Database, table: object) -> int:
    return int(await db.engines.sql.scalar(select(func.count()).select_from(table)))  # type: ignore[arg-type]


async def add_request(db: Database, at: float) -> int:
    return await db.result_requests.add_request(
        kind="image", guild_id=1, user_id=2, options={"prompt": "a fox"}, at=at
    )


async def add_rate_rows(db: Database, *stamps: float) -> None:
    rows = [{"key_id": "k1", "at": at, "background": False} for at in stamps]
    await db.engines.sql.run(insert(rate_requests), rows)


async def seed(db: Database, clock: ManualClock, tokens: ResponseTokens) -> None:
    """Rows of every swept kind, one side of each period and the other."""
    now = clock.time()
    for days in (400, 120, 91, 89, 1):
        await add_request(db, now - days * DAY)
    for days in (400, 366, 364):
        await db.policy.add_audit(
            AuditEntry(
                guild_id=1, user_id=2, what="cooldown video", old="0", new="5", at=now - days * DAY
            )
        )
    # 600 old rate rows: more than one batch of the sweep; then two within the day.
    await add_rate_rows(db, *(now - 2 * DAY + n for n in range(600)))
    await add_rate_rows(db, now - 0.5 * DAY, now - 60)
    await db.engines.sql.run(
        insert(rate_blocks),
        [
            {"key_id": "ended", "blocked_until": now - 2 * DAY},
            {"key_id": "blocked", "blocked_until": now + 30},
        ],
    )
    # Personal jobs' tokens: one expired two days ago, one forgotten (blank), one alive.
    await tokens.keep(1, ResponseToken("aW50ZXJhY3Rpb246one", now - 2 * DAY))
    await tokens.keep(2, ResponseToken("aW50ZXJhY3Rpb246two", now + 600))
    await tokens.forget(2)
    await tokens.keep(3, ResponseToken("aW50ZXJhY3Rpb246three", now + 600))
    await db.meta.set("command_hash:global", "abc")  # not a token: never swept


@pytest.fixture
def tokens(store: Database, clock: ManualClock) -> ResponseTokens:
    return ResponseTokens(store, KeyVault(SecretStr(Fernet.generate_key().decode())), clock)


async def test_rows_past_their_period_are_swept_and_newer_ones_kept(
    store: Database, clock: ManualClock, tokens: ResponseTokens
) -> None:
    await seed(store, clock, tokens)
    metrics = Metrics()
    retention = Retention(store, clock, RetentionPeriods(), metrics=metrics)

    swept = await retention.sweep()

    assert swept == {
        "result_requests": 3,
        "config_audit": 2,
        "rate_requests": 600,
        "rate_blocks": 1,
        "meta": 2,
        "thumbnails": 0,
    }
    assert await count(store, result_requests) == 2
    assert await count(store, config_audit) == 1
    assert await count(store, rate_requests) == 2
    assert [row["key_id"] for row in await store.engines.sql.all(select(rate_blocks))] == [
        "blocked"
    ]
    keys = {row["key"] for row in await store.engines.sql.all(select(meta.c.key))}
    assert {key for key in keys if key.startswith("response:")} == {"response:3"}
    assert "command_hash:global" in keys
    assert (await tokens.get(3)) is not None  # a live token is still used
    # What a member sees: the newest requests still answer their buttons, the oldest do not.
    assert await store.result_requests.request("r1") is None
    assert await store.result_requests.request("r4") is not None
    text = metrics.render().decode()
    assert 'genbot_retention_swept_rows_total{table="rate_requests"} 600.0' in text
    assert 'genbot_retention_swept_rows_total{table="meta"} 2.0' in text
    assert sample(metrics, "genbot_retention_last_sweep_timestamp_seconds") == clock.time()

    assert set((await retention.sweep()).values()) == {0}  # nothing left: a few reads


async def test_a_period_of_zero_keeps_rows_for_ever(
    store: Database, clock: ManualClock, tokens: ResponseTokens
) -> None:
    await seed(store, clock, tokens)
    forever = RetentionPeriods(
        result_requests_days=0, audit_days=0, rate_rows_days=0, metadata_days=0
    )
    # Thumbnails are kept as long as their job (their own period is 0 by default).
    assert await Retention(store, clock, forever).sweep() == {"thumbnails": 0}
    assert await count(store, result_requests) == 5
    assert await count(store, rate_requests) == 602


async def test_the_periods_come_from_the_settings() -> None:
    settings = make_settings(
        retention_result_requests_days=30,
        retention_audit_days=0,
        retention_rate_rows_days=0.5,
        retention_metadata_days=2,
    )
    assert RetentionPeriods.from_settings(settings) == RetentionPeriods(30, 0, 0.5, 2, 0)
    assert RetentionPeriods.from_settings(make_settings()) == RetentionPeriods(90, 365, 1, 1, 0)
    assert make_settings().retention_sweep_seconds == 3600


async def test_the_sweep_runs_again_every_interval_under_the_supervisor(
    store: Database, clock: ManualClock
) -> None:
    metrics = Metrics()
    retention = Retention(store, clock, RetentionPeriods(), interval=3600, metrics=metrics)
    start = clock.time()
    await add_request(store, start - 89.9 * DAY)  # due in 0.1 day: 2.4 sweeps from now
    task = asyncio.create_task(supervise("retention-sweep", retention.run, clock=clock))
    try:
        swept = 'genbot_retention_swept_rows_total{table="result_requests"} 1.0'
        for _ in range(10_000):
            if swept in metrics.render().decode():
                break
            await asyncio.sleep(0)
    finally:
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task
    assert await count(store, result_requests) == 0
    assert clock.time() - start >= 3 * 3600  # by the sweep 3 hours in; not before it was due
    assert swept in metrics.render().decode()
