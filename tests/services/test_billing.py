"""Budgets, reservations, pending-video caps, UTC periods and usage reports."""

from __future__ import annotations

import asyncio
import math
import random
from collections.abc import Awaitable, Callable
from dataclasses import replace
from datetime import UTC, datetime
from decimal import Decimal
from fractions import Fraction
from pathlib import Path
from typing import Any

import pytest

from bot.clock import ManualClock
from bot.domain import JobStatus, Kind, NewJob, Reservation
from bot.errors import BudgetExceeded, ConcurrencyLimitReached
from bot.services.billing import (
    Billing,
    Limits,
    TextTokens,
    day_start,
    month_start,
    text_rate_bound,
    text_tokens_bound,
    video_cost_cents,
)
from bot.storage import Database
from bot.storage.database import Database as SqlDatabase
from tests.support.billing import GUILD, charge_for, settings

VIDEO = "vid/t2v"
CHAT = "acme/chat"


def ts(text: str) -> float:
    return datetime.fromisoformat(text).replace(tzinfo=UTC).timestamp()


@pytest.fixture
def clock() -> ManualClock:
    return ManualClock(ts("2026-01-15T12:00:00"))


@pytest.fixture
def billing(store: SqlDatabase, clock: ManualClock) -> Billing:
    return Billing(store, settings(), clock)


def job_for(reservation: Reservation, task_id: str, clock: ManualClock) -> NewJob:
    return NewJob(
        task_id=task_id,
        provider="alpha",
        poll_url=f"/api/v1/video/{task_id}",
        kind=reservation.kind,
        model=reservation.model,
        guild_id=reservation.guild_id,
        channel_id=7,
        message_id=None,
        user_id=reservation.user_id,
        prompt_summary="a cat",
        details={"duration": 5},
        cost_cents=reservation.amount_cents,
        key_fingerprint="fp-default",
        created_at=clock.time(),
        next_poll_at=clock.time() + 5,
    )


async def spend(
    billing: Billing,
    clock: ManualClock,
    cost: int,
    *,
    user: int = 1,
    kind: Kind = Kind.TEXT,
    model: str = CHAT,
    remaining: int = 10_000,
    key: str = "fp-default",
) -> None:
    """Reserve and settle one call that the service charged ``cost`` cents for."""
    known = cost if kind is Kind.VIDEO else None
    reservation = await billing.reserve(
        guild_id=GUILD, user_id=user, kind=kind, model=model, cost_cents=known
    )
    task_id = None if kind is Kind.TEXT else f"task-{clock.time()}-{user}-{cost}-{model}"
    await billing.settle(
        reservation,
        charge_for(reservation, cost, clock, task_id=task_id, remaining=remaining, key=key),
    )


# -- periods and prices --------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("now", "month", "day"),
    [
        ("2026-01-15T12:00:00", "2026-01-01T00:00:00", "2026-01-15T00:00:00"),
        ("2026-01-31T23:59:59.999", "2026-01-01T00:00:00", "2026-01-31T00:00:00"),
        ("2026-02-01T00:00:00", "2026-02-01T00:00:00", "2026-02-01T00:00:00"),
        ("2028-02-29T08:00:00", "2028-02-01T00:00:00", "2028-02-29T00:00:00"),
        ("2026-12-31T23:00:00", "2026-12-01T00:00:00", "2026-12-31T00:00:00"),
    ],
)
def test_month_and_day_start_are_utc(now: str, month: str, day: str) -> None:
    assert month_start(ts(now)) == ts(month)
    assert day_start(ts(now)) == ts(day)


@pytest.mark.parametrize(
    ("per_5s", "duration", "cents"),
    [(10, 5, 10), (10, 10, 20), (7, 4, 6), (12, 8, 20), (12, 12, 29), (0.7, 5, 1), (0, 8, 0)],
)
def test_video_cost_is_rounded_up(per_5s: float, duration: float, cents: int) -> None:
    assert video_cost_cents(per_5s, duration) == cents


# -- limits --------------------------------------------------------------------------------------


async def test_limits_come_from_the_guild_else_the_settings(
    store: SqlDatabase, clock: ManualClock
) -> None:
    billing = Billing(
        store,
        settings(default_guild_monthly_budget_cents=10_000, default_max_pending_videos_per_user=2),
        clock,
    )
    assert await billing.limits(GUILD) == Limits(10_000, None, 2, 20)
    await store.guilds.update_limits(GUILD, monthly_budget_cents=0, user_daily_budget_cents=300)
    assert await billing.limits(GUILD) == Limits(0, 300, 2, 20)
    await store.guilds.update_limits(GUILD, monthly_budget_cents=None)
    assert await billing.limits(GUILD) == Limits(10_000, 300, 2, 20)


# -- budgets -------------------------------------------------------------------------------------


async def test_a_video_that_exceeds_the_guild_budget_is_refused(
    billing: Billing, store: SqlDatabase, clock: ManualClock
) -> None:
    await store.guilds.update_limits(GUILD, monthly_budget_cents=1000)
    await spend(billing, clock, 700, kind=Kind.VIDEO, model=VIDEO)
    with pytest.raises(BudgetExceeded) as info:
        await billing.reserve(
            guild_id=GUILD, user_id=2, kind=Kind.VIDEO, model=VIDEO, cost_cents=301
        )
    assert (info.value.scope, info.value.remaining_cents, info.value.needed_cents) == (
        "guild",
        300,
        301,
    )
    exact = await billing.reserve(
        guild_id=GUILD, user_id=2, kind=Kind.VIDEO, model=VIDEO, cost_cents=300
    )
    assert exact.amount_cents == 300


async def test_the_user_daily_budget_is_per_user(
    billing: Billing, store: SqlDatabase, clock: ManualClock
) -> None:
    await store.guilds.update_limits(GUILD, user_daily_budget_cents=500)
    await spend(billing, clock, 400, user=1, kind=Kind.VIDEO, model=VIDEO)
    with pytest.raises(BudgetExceeded) as info:
        await billing.reserve(
            guild_id=GUILD, user_id=1, kind=Kind.VIDEO, model=VIDEO, cost_cents=200
        )
    assert (info.value.scope, info.value.remaining_cents, info.value.needed_cents) == (
        "user",
        100,
        200,
    )
    other = await billing.reserve(
        guild_id=GUILD, user_id=2, kind=Kind.VIDEO, model=VIDEO, cost_cents=200
    )
    assert other.amount_cents == 200


async def test_a_spent_budget_refuses_even_an_unknown_price(
    billing: Billing, store: SqlDatabase, clock: ManualClock
) -> None:
    await store.guilds.update_limits(GUILD, monthly_budget_cents=100)
    await spend(billing, clock, 100)  # no history: estimated 0, charged 100
    with pytest.raises(BudgetExceeded) as info:
        await billing.reserve(
            guild_id=GUILD, user_id=1, kind=Kind.IMAGE, model="img/new", cost_cents=None
        )
    assert (info.value.remaining_cents, info.value.needed_cents) == (0, 25)  # the ceiling
    await store.guilds.update_limits(GUILD, monthly_budget_cents=0)
    with pytest.raises(BudgetExceeded):
        await billing.reserve(guild_id=GUILD, user_id=1, kind=Kind.VIDEO, model=VIDEO, cost_cents=0)


async def test_an_overrun_leaves_the_budget_negative_and_refuses(
    billing: Billing, store: SqlDatabase, clock: ManualClock
) -> None:
    await store.guilds.update_limits(GUILD, monthly_budget_cents=100)
    await spend(billing, clock, 150)  # estimated 0, the service charged more than was left
    with pytest.raises(BudgetExceeded) as info:
        await billing.reserve(
            guild_id=GUILD, user_id=1, kind=Kind.TEXT, model=CHAT, cost_cents=None
        )
    assert info.value.remaining_cents == 0  # never negative in the message


async def learn_text(
    billing: Billing,
    clock: ManualClock,
    cost: int | str,
    prompt: int,
    completion: int,
    model: str = CHAT,
    key: str | None = "key-a",
) -> None:
    """One text call of ``prompt`` + ``completion`` tokens that was charged ``cost`` cents."""
    reservation = await billing.reserve(
        guild_id=GUILD,
        user_id=1,
        kind=Kind.TEXT,
        model=model,
        cost_cents=None,
        tokens=TextTokens(prompt, completion),
        key_fingerprint=key,
    )
    charge = replace(
        charge_for(reservation, 0, clock), cost_cents=Decimal(cost), key_fingerprint=key
    )
    await billing.settle(reservation, charge, tokens=TextTokens(prompt, completion))


async def text_hold(
    billing: Billing, prompt: int, completion: int, model: str = CHAT, key: str | None = "key-a"
) -> Decimal:
    reservation = await billing.reserve(
        guild_id=GUILD,
        user_id=2,
        kind=Kind.TEXT,
        model=model,
        cost_cents=None,
        tokens=TextTokens(prompt, completion),
        key_fingerprint=key,
    )
    await billing.release(reservation)
    return reservation.amount_cents


async def test_text_holds_its_tokens_at_the_models_observed_price(
    billing: Billing, store: SqlDatabase, clock: ManualClock
) -> None:
    # The mean of the last charges let ten 8,192-token answers pass a budget
    # that fits one. Nothing known yet: the ceiling (50 cents) is held.
    assert await text_hold(billing, 808, 8192) == 50
    # Charged 1 c per 1,000 tokens, rounded up: 3 c for 2,000 + 500 tokens, 1 c for 5 + 5.
    await learn_text(billing, clock, 3, 2000, 500)
    await learn_text(billing, clock, 1, 5, 5)
    await learn_text(billing, clock, 9, 100, 8100)
    # No prompt rate above 3 c / 2,000 and no answer rate above 9 c / 8,100 together fit
    # every charge: 40 + 8,192 tokens hold at most 9.16 c, rounded up to 10 c.
    assert await text_hold(billing, 40, 8192) == 10
    await store.guilds.update_limits(GUILD, user_daily_budget_cents=13 + 9)
    with pytest.raises(BudgetExceeded) as info:
        await billing.reserve(
            guild_id=GUILD,
            user_id=1,
            kind=Kind.TEXT,
            model=CHAT,
            cost_cents=None,
            tokens=TextTokens(40, 8192),
            key_fingerprint="key-a",
        )
    assert (info.value.remaining_cents, info.value.needed_cents) == (9, 10)


async def test_text_rates_are_learned_apart_and_an_answer_priced_above_its_prompt_is_held(
    billing: Billing, clock: ManualClock
) -> None:
    # Prompts at 1 c and answers at 10 c per 1,000 tokens: a long prompt with a short answer
    # (2 c) and a long answer (11 c). One price per token would hold 2 c / 1,010 x 8,292 = 17 c
    # for an answer charged 83 c.
    await learn_text(billing, clock, 2, 1000, 10)
    await learn_text(billing, clock, 11, 100, 1000)
    assert await text_hold(billing, 100, 8192) >= 83


async def test_text_holds_are_learned_per_account(billing: Billing, clock: ManualClock) -> None:
    await learn_text(billing, clock, 1, 500, 500, key="key-a")
    assert await text_hold(billing, 10, 1000, key="key-a") <= 2
    # Another key is another account, maybe priced otherwise: nothing is known of it yet.
    assert await text_hold(billing, 10, 1000, key="key-b") == 50


async def test_a_free_or_cached_text_answer_never_lowers_the_hold(
    billing: Billing, clock: ManualClock
) -> None:
    await learn_text(billing, clock, 0, 1000, 1000)
    assert await text_hold(billing, 10, 1000) == 50  # still the ceiling
    await learn_text(billing, clock, 2, 1000, 1000)
    await learn_text(billing, clock, 0, 2000, 8000)
    assert await text_hold(billing, 1000, 1000) == 2  # the free one changed nothing


async def test_a_raised_text_price_is_held_at_once(billing: Billing, clock: ManualClock) -> None:
    for _ in range(5):
        await learn_text(billing, clock, 1, 500, 500)
    assert await text_hold(billing, 500, 500) == 1
    # Charged 3 c for what the known rates allow at most 1 c: the price rose; the older
    # charges no longer bound it.
    await learn_text(billing, clock, 3, 500, 500)
    assert await text_hold(billing, 500, 500) == 3


async def test_an_image_holds_the_models_highest_recent_charge(
    billing: Billing, store: SqlDatabase, clock: ManualClock
) -> None:
    fresh = await billing.reserve(
        guild_id=GUILD, user_id=1, kind=Kind.IMAGE, model="img/a", cost_cents=None
    )
    assert fresh.amount_cents == 25  # IMAGE_HOLD_CEILING_CENTS: no charge known
    await billing.release(fresh)
    for cost in (3, 8, 3, 3):
        await spend(billing, clock, cost, kind=Kind.IMAGE, model="img/a")
        clock.advance(1)
    await store.guilds.update_limits(GUILD, user_daily_budget_cents=17 + 7)
    # The mean (4.25) would pass with 7 c left; the charge may be 8.
    with pytest.raises(BudgetExceeded) as info:
        await billing.reserve(
            guild_id=GUILD, user_id=1, kind=Kind.IMAGE, model="img/a", cost_cents=None
        )
    assert info.value.needed_cents == 8


async def test_settle_gives_back_what_the_hold_took_above_the_charge(
    billing: Billing, store: SqlDatabase, clock: ManualClock
) -> None:
    await store.guilds.update_limits(GUILD, user_daily_budget_cents=60)
    reservation = await billing.reserve(
        guild_id=GUILD,
        user_id=1,
        kind=Kind.TEXT,
        model=CHAT,
        cost_cents=None,
        tokens=TextTokens(50, 50),
    )
    assert await store.ledger.reserved_cents(GUILD, clock.time()) == 50
    await billing.settle(reservation, charge_for(reservation, 1, clock), tokens=TextTokens(50, 50))
    assert await store.ledger.reserved_cents(GUILD, clock.time()) == 0
    assert (await billing.report(GUILD, 1)).today_cents == 1


def test_the_text_token_bound_counts_bytes_and_the_default_max_tokens() -> None:
    assert text_tokens_bound("hi", None, None) == TextTokens(2, 1000)
    assert text_tokens_bound("暴力", "sys", 10) == TextTokens(6 + 3, 10)  # UTF-8 bytes


def _rate_bound_by_every_corner(
    charges: list[tuple[Decimal, int, int]], tokens: TextTokens
) -> Fraction | None:
    """The bound as first written: every corner, each checked against every charge, exactly."""
    rows = [(Fraction(c), p, k) for c, p, k in charges if c > 0 and (p > 0 or k > 0)]
    if (tokens.prompt > 0 and not any(p > 0 for _, p, _ in rows)) or (
        tokens.completion > 0 and not any(k > 0 for _, _, k in rows)
    ):
        return None
    zero = Fraction(0)
    corners = [(zero, zero)]
    corners += [(c / p, zero) for c, p, _ in rows if p > 0]
    corners += [(zero, c / k) for c, _, k in rows if k > 0]
    for i, (c1, p1, k1) in enumerate(rows):
        for c2, p2, k2 in rows[i + 1 :]:
            det = p1 * k2 - p2 * k1
            if det:
                a = (c1 * k2 - c2 * k1) / det
                b = (p1 * c2 - p2 * c1) / det
                if a >= 0 and b >= 0:
                    corners.append((a, b))
    return max(
        a * tokens.prompt + b * tokens.completion
        for a, b in corners
        if all(a * p + b * k <= c for c, p, k in rows)
    )


def test_the_text_hold_bound_is_exactly_the_best_corner_of_what_the_charges_allow() -> None:
    # The bound is computed fast (it held the event loop ~16 ms a /text with a full
    # history); it must stay exactly the linear program's optimum, ties and degenerate
    # histories (repeated, proportional, prompt-only, answer-only charges) included.
    rng = random.Random(36)
    for case in range(400):
        size = rng.randint(0, 20)
        charges = []
        for _ in range(size):
            prompt = rng.choice([0, rng.randint(1, 50), rng.randint(1, 5000)])
            answer = rng.choice([0, rng.randint(1, 50), rng.randint(1, 8192)])
            if case % 2:  # as a service charges: fixed rates, rounded up to a cent
                micro = math.ceil((prompt * 3 + answer * 11) / 1000) * 10**6
            else:
                micro = rng.choice([0, 1, rng.randint(1, 10**6), rng.randint(1, 10**9)])
            charges.append((Decimal(micro) / 10**6, prompt, answer))
        if case % 7 == 0 and charges:  # repeated and proportional charges
            cost, prompt, answer = charges[0]
            charges += [(cost, prompt, answer), (cost * 2, prompt * 2, answer * 2)]
        tokens = TextTokens(rng.choice([0, 1, rng.randint(1, 9000)]), rng.randint(0, 8192))
        expected = _rate_bound_by_every_corner(charges, tokens)
        assert text_rate_bound(charges, tokens) == expected, (charges, tokens)
        assert text_rate_bound(list(reversed(charges)), tokens) == expected


async def test_an_unusable_video_price_holds_the_ceiling(billing: Billing) -> None:
    assert billing.video_hold(Decimal(60), 4) == 48
    for price in (Decimal("NaN"), Decimal("Infinity"), Decimal(-5), float("nan")):
        assert billing.video_hold(price, 10) == 400  # 200 c per 5 s, the setting


async def test_settle_replaces_the_hold_by_the_reported_cost(
    billing: Billing, store: SqlDatabase, clock: ManualClock
) -> None:
    await store.guilds.update_limits(GUILD, monthly_budget_cents=1000)
    reservation = await billing.reserve(
        guild_id=GUILD, user_id=1, kind=Kind.VIDEO, model=VIDEO, cost_cents=400
    )
    assert await store.ledger.reserved_cents(GUILD, clock.time()) == 400
    job = await billing.settle(
        reservation,
        charge_for(reservation, 380, clock, task_id="t1"),
        job_for(reservation, "t1", clock),
    )
    assert job is not None
    assert job.status is JobStatus.PENDING
    assert job.task_id == "t1"
    assert await store.ledger.reserved_cents(GUILD, clock.time()) == 0
    assert await store.ledger.total(GUILD) == 380
    # 620 left: a 620 video fits, 621 does not.
    with pytest.raises(BudgetExceeded):
        await billing.reserve(
            guild_id=GUILD, user_id=1, kind=Kind.VIDEO, model=VIDEO, cost_cents=621
        )


async def test_release_gives_the_budget_back(
    billing: Billing, store: SqlDatabase, clock: ManualClock
) -> None:
    await store.guilds.update_limits(GUILD, monthly_budget_cents=500)
    held = await billing.reserve(
        guild_id=GUILD, user_id=1, kind=Kind.VIDEO, model=VIDEO, cost_cents=500
    )
    with pytest.raises(BudgetExceeded):
        await billing.reserve(guild_id=GUILD, user_id=2, kind=Kind.VIDEO, model=VIDEO, cost_cents=1)
    await billing.release(held)
    assert await store.ledger.total(GUILD) == 0
    again = await billing.reserve(
        guild_id=GUILD, user_id=2, kind=Kind.VIDEO, model=VIDEO, cost_cents=500
    )
    assert again.amount_cents == 500


async def test_a_stale_reservation_expires_after_the_ttl(
    open_db: Callable[[ManualClock], Awaitable[Database]], clock: ManualClock
) -> None:
    store = await open_db(clock)
    await store.guilds.update_limits(GUILD, monthly_budget_cents=500)
    held = await Billing(store, settings(), clock).reserve(
        guild_id=GUILD, user_id=1, kind=Kind.VIDEO, model=VIDEO, cost_cents=500
    )
    await store.close()  # the bot "crashes" before settling or releasing

    store = await open_db(clock)
    try:
        billing = Billing(store, settings(), clock)
        clock.advance(899)
        with pytest.raises(BudgetExceeded):
            await billing.reserve(
                guild_id=GUILD, user_id=1, kind=Kind.VIDEO, model=VIDEO, cost_cents=1
            )
        clock.advance(1)  # 15 minutes after the reservation
        fresh = await billing.reserve(
            guild_id=GUILD, user_id=1, kind=Kind.VIDEO, model=VIDEO, cost_cents=500
        )
        assert fresh.amount_cents == 500
        assert await store.ledger.reserved_cents(GUILD, 0.0) == 500  # the stale row was deleted
        # A late settle of the expired reservation still records what the service charged.
        await billing.settle(held, charge_for(held, 500, clock, task_id="late"))
        assert await store.ledger.total(GUILD) == 500
    finally:
        await store.close()


async def test_expire_stale_deletes_expired_reservations(
    store: SqlDatabase, clock: ManualClock
) -> None:
    billing = Billing(store, settings(), clock, reservation_ttl=60)
    for user in (1, 2):
        await billing.reserve(
            guild_id=GUILD, user_id=user, kind=Kind.TEXT, model=CHAT, cost_cents=5
        )
    assert await billing.expire_stale() == 0
    clock.advance(60)
    assert await billing.expire_stale() == 2


# -- concurrency ---------------------------------------------------------------------------------


async def attempt(billing: Billing, **kwargs: Any) -> Reservation | Exception:
    try:
        return await billing.reserve(guild_id=GUILD, model=VIDEO, kind=Kind.VIDEO, **kwargs)
    except (BudgetExceeded, ConcurrencyLimitReached) as exc:
        return exc


async def test_concurrent_reservations_never_overspend(
    store: SqlDatabase, clock: ManualClock
) -> None:
    billing = Billing(
        store,
        settings(
            default_max_pending_videos_per_user=1000, default_max_pending_videos_per_guild=1000
        ),
        clock,
    )
    await store.guilds.update_limits(GUILD, monthly_budget_cents=1000, user_daily_budget_cents=300)
    results = await asyncio.gather(
        *(attempt(billing, user_id=i % 5, cost_cents=100) for i in range(60))
    )
    granted = [r for r in results if isinstance(r, Reservation)]
    refused = [r for r in results if isinstance(r, BudgetExceeded)]
    assert len(granted) == 10
    assert len(refused) == 50
    assert sum(r.amount_cents for r in granted) == 1000
    per_user = {u: sum(r.amount_cents for r in granted if r.user_id == u) for u in range(5)}
    assert all(cents <= 300 for cents in per_user.values())
    assert await store.ledger.reserved_cents(GUILD, clock.time()) == 1000


async def test_concurrent_reservations_across_two_connections(
    open_db: Callable[[ManualClock], Awaitable[Database]], clock: ManualClock
) -> None:
    # Two databases opened on one file (SQLite: BEGIN IMMEDIATE serialises) or one server
    # (PostgreSQL: two pools, the guild's advisory lock) stand for two bot processes.
    first = await open_db(clock)
    second = await open_db(clock)
    try:
        await first.guilds.update_limits(GUILD, monthly_budget_cents=700)
        generous = settings(
            default_max_pending_videos_per_user=100, default_max_pending_videos_per_guild=100
        )
        billings = [Billing(first, generous, clock), Billing(second, generous, clock)]
        results = await asyncio.gather(
            *(attempt(billings[i % 2], user_id=i, cost_cents=100) for i in range(30))
        )
        assert sum(isinstance(r, Reservation) for r in results) == 7
        assert await first.ledger.reserved_cents(GUILD, clock.time()) == 700
    finally:
        await first.close()
        await second.close()


async def test_concurrent_video_requests_respect_the_pending_caps(
    store: SqlDatabase, clock: ManualClock
) -> None:
    billing = Billing(
        store,
        settings(default_max_pending_videos_per_user=2, default_max_pending_videos_per_guild=5),
        clock,
    )
    results = await asyncio.gather(
        *(attempt(billing, user_id=1, cost_cents=10) for _ in range(10)),
        *(attempt(billing, user_id=2 + i % 4, cost_cents=10) for i in range(10)),
    )
    granted = [r for r in results if isinstance(r, Reservation)]
    assert len(granted) == 5
    assert sum(r.user_id == 1 for r in granted) == 2
    scopes = {r.scope for r in results if isinstance(r, ConcurrencyLimitReached)}
    assert scopes == {"user", "guild"}


async def test_pending_jobs_count_against_the_caps_until_they_finish(
    store: SqlDatabase, clock: ManualClock
) -> None:
    billing = Billing(store, settings(default_max_pending_videos_per_user=2), clock)
    jobs = []
    for n in range(2):
        reservation = await billing.reserve(
            guild_id=GUILD, user_id=1, kind=Kind.VIDEO, model=VIDEO, cost_cents=10
        )
        jobs.append(
            await billing.settle(
                reservation,
                charge_for(reservation, 10, clock, task_id=f"t{n}"),
                job_for(reservation, f"t{n}", clock),
            )
        )
    with pytest.raises(ConcurrencyLimitReached) as info:
        await billing.reserve(
            guild_id=GUILD, user_id=1, kind=Kind.VIDEO, model=VIDEO, cost_cents=10
        )
    assert (info.value.scope, info.value.limit) == ("user", 2)
    # Text and images are not videos: no cap applies.
    text = await billing.reserve(
        guild_id=GUILD, user_id=1, kind=Kind.TEXT, model=CHAT, cost_cents=None
    )
    assert text.amount_cents == 50  # TEXT_HOLD_CEILING_CENTS: no price known

    job = jobs[0]
    assert job is not None
    await store.jobs.finish(job.id, JobStatus.FAILED, [], "provider error", clock.time())
    third = await billing.reserve(
        guild_id=GUILD, user_id=1, kind=Kind.VIDEO, model=VIDEO, cost_cents=10
    )
    assert third.kind is Kind.VIDEO


async def test_a_video_the_poller_stopped_watching_frees_its_place_under_the_caps(
    store: SqlDatabase, clock: ManualClock
) -> None:
    billing = Billing(
        store,
        settings(default_max_pending_videos_per_user=1, default_max_pending_videos_per_guild=1),
        clock,
    )
    reservation = await billing.reserve(
        guild_id=GUILD, user_id=1, kind=Kind.VIDEO, model=VIDEO, cost_cents=10
    )
    stuck = await billing.settle(
        reservation,
        charge_for(reservation, 10, clock, task_id="stuck"),
        job_for(reservation, "stuck", clock),
    )
    assert stuck is not None
    for user_id in (1, 2):  # the member's cap and the server's
        with pytest.raises(ConcurrencyLimitReached):
            await billing.reserve(
                guild_id=GUILD, user_id=user_id, kind=Kind.VIDEO, model=VIDEO, cost_cents=10
            )
    # Past the job timeout the poller stops watching it: still pending, no longer progressing.
    assert await store.jobs.set_unwatched(stuck.id, clock.time()) is True
    assert (await store.jobs.get(stuck.id)).status is JobStatus.PENDING  # type: ignore[union-attr]
    fresh = await billing.reserve(
        guild_id=GUILD, user_id=1, kind=Kind.VIDEO, model=VIDEO, cost_cents=10
    )
    assert fresh.kind is Kind.VIDEO


# -- periods -------------------------------------------------------------------------------------


async def test_the_monthly_budget_renews_at_the_utc_month_boundary(
    store: SqlDatabase, tmp_path: Path
) -> None:
    clock = ManualClock(ts("2026-01-31T23:00:00"))
    billing = Billing(store, settings(default_guild_monthly_budget_cents=1000), clock)
    await spend(billing, clock, 1000, kind=Kind.VIDEO, model=VIDEO)
    clock.advance(3599)  # 23:59:59
    with pytest.raises(BudgetExceeded) as info:
        await billing.reserve(guild_id=GUILD, user_id=1, kind=Kind.VIDEO, model=VIDEO, cost_cents=1)
    assert info.value.scope == "guild"
    clock.advance(1)  # 2026-02-01T00:00:00Z
    renewed = await billing.reserve(
        guild_id=GUILD, user_id=1, kind=Kind.VIDEO, model=VIDEO, cost_cents=1000
    )
    assert renewed.amount_cents == 1000
    report = await billing.report(GUILD)
    assert (report.month_cents, report.today_cents, report.reserved_cents) == (0, 0, 1000)


async def test_the_user_daily_budget_renews_at_utc_midnight(store: SqlDatabase) -> None:
    clock = ManualClock(ts("2026-03-10T23:30:00"))
    billing = Billing(store, settings(default_user_daily_budget_cents=200), clock)
    await spend(billing, clock, 200, user=1)
    with pytest.raises(BudgetExceeded) as info:
        await billing.reserve(
            guild_id=GUILD, user_id=1, kind=Kind.TEXT, model=CHAT, cost_cents=None
        )
    assert info.value.scope == "user"
    clock.advance(30 * 60)  # 2026-03-11T00:00:00Z
    next_day = await billing.reserve(
        guild_id=GUILD, user_id=1, kind=Kind.TEXT, model=CHAT, cost_cents=None
    )
    assert next_day.amount_cents == 50  # no price per token known: the ceiling
    report = await billing.report(GUILD)
    assert (report.month_cents, report.today_cents) == (200, 0)


# -- ledger and reports --------------------------------------------------------------------------


async def test_settling_twice_charges_once(
    billing: Billing, store: SqlDatabase, clock: ManualClock
) -> None:
    reservation = await billing.reserve(
        guild_id=GUILD, user_id=1, kind=Kind.VIDEO, model=VIDEO, cost_cents=250
    )
    the_charge = charge_for(reservation, 250, clock, task_id="t1")
    first = await billing.settle(reservation, the_charge, job_for(reservation, "t1", clock))
    second = await billing.settle(reservation, the_charge, job_for(reservation, "t1", clock))
    await billing.record_charge(the_charge)
    assert first == second
    assert await store.ledger.total(GUILD) == 250


async def test_ledger_total_equals_the_sum_of_reported_charges(
    billing: Billing, store: SqlDatabase, clock: ManualClock
) -> None:
    reported = 0
    for i in range(40):
        kind = [Kind.TEXT, Kind.IMAGE, Kind.VIDEO][i % 3]
        cost = (i * 53) % 97
        reservation = await billing.reserve(
            guild_id=GUILD,
            user_id=i % 4,
            kind=kind,
            model=VIDEO if kind is Kind.VIDEO else CHAT,
            cost_cents=cost if kind is Kind.VIDEO else None,
        )
        if i % 7 == 0:  # the call failed without a charge
            await billing.release(reservation)
            continue
        task_id = None if kind is Kind.TEXT else f"task-{i}"
        await billing.settle(reservation, charge_for(reservation, cost, clock, task_id=task_id))
        reported += cost
        if kind is Kind.VIDEO:  # the poller finishing the task must not charge it again
            await billing.record_charge(charge_for(reservation, cost, clock, task_id=task_id))
        clock.advance(600)
    assert await store.ledger.total(GUILD) == reported
    assert (await billing.report(GUILD)).month_cents == reported
    assert await store.ledger.reserved_cents(GUILD, clock.time()) == 0


async def test_report_breaks_spending_down(
    billing: Billing, store: SqlDatabase, clock: ManualClock
) -> None:
    clock.advance(-86_400)  # yesterday, same month
    await spend(billing, clock, 300, user=1, kind=Kind.VIDEO, model=VIDEO, remaining=9000)
    clock.advance(86_400)
    await spend(billing, clock, 40, user=2, kind=Kind.IMAGE, model="img/x", remaining=8960)
    await spend(billing, clock, 5, user=2, remaining=8955)
    await spend(billing, clock, 7, user=2, remaining=8948)
    await spend(billing, clock, 1, user=3, remaining=77, key="fp-guild-own")
    await billing.reserve(guild_id=GUILD, user_id=3, kind=Kind.VIDEO, model=VIDEO, cost_cents=90)

    report = await billing.report(GUILD, key_fingerprint="fp-default")
    assert report.month_cents == 353
    assert report.today_cents == 53
    assert report.reserved_cents == 90
    assert report.by_user == [(1, 300), (2, 52), (3, 1)]
    assert report.by_kind == {Kind.VIDEO: 300, Kind.IMAGE: 40, Kind.TEXT: 13}
    assert report.by_model == [(VIDEO, 1, 300), ("img/x", 1, 40), (CHAT, 3, 13)]
    assert report.last_remaining_credits_cents == 8948

    mine = await billing.report(GUILD, 2, key_fingerprint="fp-guild-own")
    assert (mine.month_cents, mine.today_cents, mine.reserved_cents) == (52, 52, 0)
    assert mine.by_user == [(2, 52)]
    assert mine.last_remaining_credits_cents == 77
    assert (await billing.report(GUILD + 1)).by_kind == dict.fromkeys(Kind, 0)
    assert (await billing.report(GUILD)).last_remaining_credits_cents is None


async def test_a_negative_cost_is_a_programming_error(billing: Billing) -> None:
    with pytest.raises(ValueError, match="negative"):
        await billing.reserve(
            guild_id=GUILD, user_id=1, kind=Kind.VIDEO, model=VIDEO, cost_cents=-1
        )


async def test_takes_are_held_together_all_or_none(store: SqlDatabase, clock: ManualClock) -> None:
    billing = Billing(
        store,
        settings(default_max_pending_videos_per_user=3, default_guild_monthly_budget_cents=100),
        clock,
    )
    # Four takes pass no cap of three pending videos, and hold nothing for being refused.
    with pytest.raises(ConcurrencyLimitReached):
        await billing.reserve_many(
            guild_id=GUILD, user_id=1, kind=Kind.VIDEO, model=VIDEO, cost_cents=10, count=4
        )
    # Three takes of 40 c are 120 c: over the 100 c budget though one take would fit.
    with pytest.raises(BudgetExceeded):
        await billing.reserve_many(
            guild_id=GUILD, user_id=1, kind=Kind.VIDEO, model=VIDEO, cost_cents=40, count=3
        )
    assert await store.ledger.reserved_cents(GUILD, clock.time()) == 0
    held = await billing.reserve_many(
        guild_id=GUILD, user_id=1, kind=Kind.VIDEO, model=VIDEO, cost_cents=30, count=3
    )
    assert [r.amount_cents for r in held] == [30, 30, 30]
    assert await store.ledger.reserved_cents(GUILD, clock.time()) == 90
    with pytest.raises(ConcurrencyLimitReached):  # the three count as pending videos
        await billing.reserve(guild_id=GUILD, user_id=1, kind=Kind.VIDEO, model=VIDEO, cost_cents=1)
