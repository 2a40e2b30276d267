"""Money is exact: fractional cents parsed, stored, summed and budgeted without rounding.

The spec types ``cost_cents`` and ``remaining_credits_cents`` as numbers (docs/genapi.md §6.1);
the ledger keeps them as integer micro-cents, and what breaks the protocol is recorded for the
admins, never dropped with the paid result.
"""

import asyncio
import copy
import sqlite3
from collections.abc import Callable
from decimal import Decimal
from pathlib import Path
from typing import Any

import httpx2 as httpx
import pytest
from pydantic import SecretStr

from bot.clock import ManualClock
from bot.discord.render.buttons import confirm_label, confirm_text
from bot.domain import Charge, ConstraintError, JobStatus, Kind
from bot.errors import BudgetExceeded, user_message
from bot.genapi import errors as api_errors
from bot.genapi.client import GenAPIClient
from bot.genapi.ratelimit import RateLimiter
from bot.genapi.wire import TextRequest
from bot.i18n import money
from bot.sandbox import catalogue as sandbox_catalogue
from bot.services.generation import ImageOptions, Requester, TextOptions, VideoOptions
from bot.services.submissions import needs_confirmation
from bot.storage.database import Database as SqlDatabase
from bot.storage.migrations.legacy import load, split_statements
from bot.storage.money import from_micro, to_micro
from tests.support.stack import Stack

GUILD = 1


async def text_only_client(body: str, clock: ManualClock) -> tuple[GenAPIClient, httpx.AsyncClient]:
    def handler(request: httpx.Request) -> httpx.Response:
        return httpx.Response(200, text=body, headers={"content-type": "application/json"})

    http = httpx.AsyncClient(transport=httpx.MockTransport(handler))
    client = GenAPIClient(
        "http://gen.test/api/v1", http=http, limiter=RateLimiter(clock), clock=clock
    )
    return client, http


async def video_model_id(stack: Stack) -> str:
    catalogue = await stack.generation.catalogue(GUILD)
    return next(m.id for m in catalogue.video if not m.needs_image)


# -- parsing ------------------------------------------------------------------------------------


async def test_the_client_reads_money_exactly_without_a_float_round_trip() -> None:
    clock = ManualClock()
    # 0.30000000000000001 is 0.3 as a float: only a decimal parse keeps the last digit.
    body = (
        '{"content": "ok", "model": "m", "cost_cents": 0.30000000000000001,'
        ' "remaining_credits_cents": 12345.65}'
    )
    client, http = await text_only_client(body, clock)
    async with http:
        result = await client.generate_text(SecretStr("sk-gen-x"), TextRequest(prompt="hi"))
    assert result.cost_cents == Decimal("0.30000000000000001")
    assert result.remaining_credits_cents == Decimal("12345.65")


async def test_a_video_charged_035_cents_is_stored_exactly_and_polled(
    stack: Stack, who: Requester
) -> None:
    stack.api.report_next_costs(Decimal("0.35"))
    job = await stack.generation.video(who, VideoOptions("a fox", await video_model_id(stack)))
    assert job.cost_cents == Decimal("0.35")
    assert await stack.db.ledger.total(who.guild_id) == Decimal("0.35")
    assert stack.api.balance(stack.key) == Decimal("99999.65")
    report = await stack.billing.report(who.guild_id, key_fingerprint=job.key_fingerprint)
    assert report.month_cents == Decimal("0.35")
    assert report.last_remaining_credits_cents == Decimal("99999.65")
    stack.clock.advance(600)
    assert [j.task_id for j in await stack.db.jobs.due(stack.clock.time(), 10)] == [job.task_id]
    key = await stack.keys.resolve(who.guild_id)
    state = await stack.client.poll(key.key, job.poll_url)
    assert state.status == "completed"


# -- budgets ------------------------------------------------------------------------------------


async def test_slotss_compare_exactly(stack: Stack, who: Requester) -> None:
    # Nine charges of 0.1 leave exactly 0.1 (as floats: 0.10000000000000009). The first,
    # before any charge is known, holds the ceiling: the budget is set after it.
    for n in range(9):
        stack.api.report_next_costs(Decimal("0.1"))
        await stack.generation.image(who, ImageOptions("hi"))
        if n == 0:
            await stack.db.guilds.update_limits(who.guild_id, user_daily_budget_cents=1)
    report = await stack.billing.report(who.guild_id, who.user_id)
    assert report.today_cents == Decimal("0.9")
    # The tenth, holding the highest charge 0.1, fits exactly; after it the budget is spent.
    stack.api.report_next_costs(Decimal("0.1"))
    await stack.generation.image(who, ImageOptions("hi"))
    assert (await stack.billing.report(who.guild_id, who.user_id)).today_cents == 1
    posts = stack.posts()
    with pytest.raises(BudgetExceeded) as refused:
        await stack.generation.image(who, ImageOptions("hi"))
    assert refused.value.remaining_cents == 0
    assert stack.posts() == posts


# -- holds that bound spending -------------------------------------------------


async def test_ten_long_answers_at_once_cannot_spend_past_a_members_budget(
    stack: Stack, who: Requester
) -> None:
    # One answer teaches the model's price: 1 c for the tokens of "hi" and its short reply.
    await stack.generation.text(who, TextOptions("hi"))
    await stack.db.guilds.update_limits(who.guild_id, user_daily_budget_cents=1 + 5)
    posts = stack.posts()
    # 5 c left: a hold bounded by 8,192 tokens at that price fits none of ten at once.
    outcomes = await asyncio.gather(
        *(stack.generation.text(who, TextOptions("write", max_tokens=8192)) for _ in range(10)),
        return_exceptions=True,
    )
    assert all(isinstance(o, BudgetExceeded) for o in outcomes)
    assert stack.posts() == posts
    # A short answer still fits, and settling gives back what its hold took above the charge.
    result = await stack.generation.text(who, TextOptions("hi", max_tokens=1))
    report = await stack.billing.report(who.guild_id, who.user_id)
    assert (report.today_cents, report.reserved_cents) == (1 + result.cost_cents, 0)


async def test_a_text_model_never_charged_holds_the_ceiling(stack: Stack, who: Requester) -> None:
    await stack.db.guilds.update_limits(who.guild_id, user_daily_budget_cents=5)
    posts = stack.posts()
    with pytest.raises(BudgetExceeded) as refused:
        await stack.generation.text(who, TextOptions("write", max_tokens=8192))
    assert refused.value.needed_cents == 50  # TEXT_HOLD_CEILING_CENTS
    assert stack.posts() == posts


TEXT_MODEL = "openai/gpt-4o-mini"  # the emulator's: 1 c per 1,000 prompt tokens


async def test_five_long_answers_priced_above_their_prompts_cannot_overrun_an_allowance(
    stack: Stack, who: Requester
) -> None:
    # Answers cost 50 times prompts. A long prompt with a short answer (2 c for 1,000 + 1
    # tokens) and a short prompt with a long answer (51 c for 1 + 1,000) are all it has seen:
    # one price per token (the cheapest, 2 c / 1,001) would hold 10 c for a 51 c answer.
    stack.api.price_completion(TEXT_MODEL, 50)
    stack.api.set_next_text("ok")
    await stack.generation.text(who, TextOptions("p" * 4000, model=TEXT_MODEL, max_tokens=1))
    stack.api.set_next_text("a" * 4000)
    await stack.generation.text(who, TextOptions("hi", model=TEXT_MODEL, max_tokens=1000))
    spent = (await stack.billing.report(who.guild_id, who.user_id)).today_cents
    assert spent == 2 + 51
    await stack.db.guilds.update_limits(who.guild_id, user_daily_budget_cents=int(spent) + 120)
    # Five at once, each a 4,000-character prompt whose answer is 1,000 tokens: 51 c each.
    outcomes = await asyncio.gather(
        *(
            stack.generation.text(who, TextOptions("w" * 4000, model=TEXT_MODEL, max_tokens=1000))
            for _ in range(5)
        ),
        return_exceptions=True,
    )
    answered = [o for o in outcomes if not isinstance(o, BaseException)]
    assert all(isinstance(o, BudgetExceeded) for o in outcomes if isinstance(o, BaseException))
    assert 1 <= len(answered) <= 2
    report = await stack.billing.report(who.guild_id, who.user_id)
    assert report.today_cents <= spent + 120
    assert report.reserved_cents == 0


async def test_a_free_answer_never_lowers_a_text_hold_to_zero(stack: Stack, who: Requester) -> None:
    # A cached answer charged 0 c proves no price: the next holds stay at the ceiling (50 c).
    stack.api.report_next_costs(Decimal(0))
    await stack.generation.text(who, TextOptions("hi", model=TEXT_MODEL))
    stack.api.price_completion(TEXT_MODEL, 50)
    await stack.db.guilds.update_limits(who.guild_id, user_daily_budget_cents=60)
    outcomes = await asyncio.gather(
        *(
            stack.generation.text(who, TextOptions("w" * 4000, model=TEXT_MODEL, max_tokens=1000))
            for _ in range(5)
        ),
        return_exceptions=True,
    )
    assert sum(not isinstance(o, BaseException) for o in outcomes) == 1
    report = await stack.billing.report(who.guild_id, who.user_id)
    assert report.today_cents == 51  # within the 60 c allowance
    assert report.reserved_cents == 0


def nan_price(model_id: str) -> Callable[[], dict[str, Any]]:
    """The emulator's catalogue with ``model_id`` priced NaN cents per 5 s."""
    original = sandbox_catalogue.catalogue_json

    def catalogue() -> dict[str, Any]:
        body = copy.deepcopy(original())
        for entry in body["models"]["video"]:
            if entry["id"] == model_id:
                entry["cost_cents_per_5s"] = float("nan")
        return body

    return catalogue


async def test_a_video_with_an_unusable_price_holds_the_ceiling(
    stack: Stack, who: Requester, monkeypatch: pytest.MonkeyPatch
) -> None:
    model = await video_model_id(stack)
    monkeypatch.setattr(sandbox_catalogue, "catalogue_json", nan_price(model))
    fresh = await stack.services.catalogue.refresh(SecretStr(stack.key))
    assert not next(m for m in fresh.video if m.id == model).cost_cents_per_5s.is_finite()
    await stack.db.guilds.update_limits(who.guild_id, user_daily_budget_cents=150)
    posts = stack.posts()
    with pytest.raises(BudgetExceeded) as refused:
        await stack.generation.video(who, VideoOptions("a fox", model, duration=5))
    assert refused.value.needed_cents == 200  # VIDEO_HOLD_CEILING_CENTS_PER_5S for 5 s
    assert stack.posts() == posts


def test_an_unknown_video_price_asks_for_confirmation_where_the_server_set_a_threshold() -> None:
    assert needs_confirmation(None, Decimal(100))
    assert needs_confirmation(Decimal(101), Decimal(100))
    assert not needs_confirmation(Decimal(100), Decimal(100))
    assert not needs_confirmation(None, None)
    assert "unknown" in confirm_text(None, Decimal(100))
    assert confirm_label(None) == "Generate · price unknown"


# -- protocol anomalies ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("reported", "reason", "kept"),
    [
        (Decimal("-5"), "negative", "-5"),
        (float("nan"), "not a finite number", "NaN"),
        (float("inf"), "not a finite number", "Infinity"),
        (Decimal("1000000000000000"), "above", "1000000000000000"),
        ("five cents", "not a finite number", "NaN"),
    ],
)
async def test_an_absurd_cost_is_recorded_for_admins_and_the_video_still_stored(
    stack: Stack, who: Requester, reported: object, reason: str, kept: str
) -> None:
    stack.api.set_balance(stack.key, Decimal("1e16"))  # room for the absurd charge
    stack.api.report_next_costs(reported)  # type: ignore[arg-type]
    job = await stack.generation.video(who, VideoOptions("a fox", await video_model_id(stack)))
    stored = await stack.db.jobs.by_task(job.key_fingerprint, job.kind, job.task_id)
    assert stored is not None
    assert stored.status is JobStatus.PENDING
    (anomaly,) = await stack.db.ledger.anomalies(who.guild_id, since=0)
    assert anomaly.task_id == job.task_id
    assert reason in anomaly.reason
    assert anomaly.reported_cost == kept
    # Nothing we cannot trust is summed into budgets.
    assert await stack.db.ledger.total(who.guild_id) == 0
    report = await stack.billing.report(who.guild_id)
    assert report.anomalies == 1


async def test_a_text_answer_with_an_unreadable_cost_is_still_given(
    stack: Stack, who: Requester
) -> None:
    stack.api.report_next_costs("free!")
    result = await stack.generation.text(who, TextOptions("hi"))
    assert result.content
    (anomaly,) = await stack.db.ledger.anomalies(who.guild_id, since=0)
    assert anomaly.kind is Kind.TEXT
    assert anomaly.task_id is None


async def test_a_sub_micro_cent_charge_is_rounded_up_and_its_exact_text_kept(
    stack: Stack, who: Requester
) -> None:
    stack.api.report_next_costs(Decimal("0.0000001"))
    await stack.generation.text(who, TextOptions("hi"))
    assert await stack.db.ledger.total(who.guild_id) == Decimal("0.000001")
    (anomaly,) = await stack.db.ledger.anomalies(who.guild_id, since=0)
    assert anomaly.reported_cost == "1E-7"
    assert "rounded up" in anomaly.reason


def test_micro_cents_round_up_on_every_digit_sent() -> None:
    assert to_micro(Decimal("0.35")) == 350_000
    # 38 significant digits: more than Decimal's default precision of 28 may not round down.
    assert to_micro(Decimal("0.0000010000000000000000000000000000001")) == 2
    assert from_micro(to_micro(Decimal("123.456789"))) == Decimal("123.456789")


# -- the ledger's constraints ---------------------------------------------------------------------


def charge(cost: Decimal, task_id: str | None = "t-1") -> Charge:
    return Charge(GUILD, 7, 1, Kind.VIDEO, "vid", task_id, cost, Decimal(100), "fp", 1000.0)


async def test_only_a_duplicate_task_is_ignored_by_the_ledger(tmp_path: Path) -> None:
    store = await SqlDatabase.open_sqlite(tmp_path / "bot.db", clock=ManualClock())
    try:
        assert await store.ledger.insert_charge(charge(Decimal("0.35"))) is True
        # the same task again
        assert await store.ledger.insert_charge(charge(Decimal("0.35"))) is False
        assert await store.ledger.total(GUILD) == Decimal("0.35")
        with pytest.raises(ConstraintError):
            await store.ledger.insert_charge(charge(Decimal(-1), task_id="t-2"))
        assert await store.ledger.total(GUILD) == Decimal("0.35")
    finally:
        await store.close()


# -- the migration --------------------------------------------------------------------------------


async def test_migrating_a_version_2_database_keeps_every_amount_exact(tmp_path: Path) -> None:
    path = tmp_path / "old.db"
    before = next(m.version for m in load("sqlite") if m.name == "exact_money") - 1
    conn = sqlite3.connect(path, isolation_level=None)
    for migration in load("sqlite")[:before]:
        for statement in split_statements(migration.sql):
            conn.execute(statement)
    conn.execute(f"PRAGMA user_version = {before}")
    big = 9_000_000_000_000  # cents: 90 billion dollars still fit in micro-cents
    conn.execute(
        "INSERT INTO ledger (guild_id, channel_id, user_id, kind, model, task_id, cost_cents,"
        " remaining_credits_cents, key_fingerprint, at) VALUES"
        " (1, 7, 1, 'video', 'v', 'a', 250, 9750, 'fp', 100.0),"
        " (1, 7, 1, 'text', 't', NULL, 3, ?, 'fp', 200.0)",
        (big,),
    )
    conn.execute(
        "INSERT INTO reservations (guild_id, user_id, kind, model, amount_cents, created_at,"
        " expires_at) VALUES (1, 1, 'video', 'v', 40, 100.0, 1e12)"
    )
    conn.execute(
        "INSERT INTO jobs (task_id, provider, poll_url, kind, model, guild_id, channel_id,"
        " user_id, prompt_summary, cost_cents, key_fingerprint, created_at, next_poll_at)"
        " VALUES ('a', 'alpha', '/p', 'video', 'v', 1, 7, 1, 'cat', 250, 'fp', 100.0, 150.0)"
    )
    conn.close()
    store = await SqlDatabase.open_sqlite(path, clock=ManualClock())
    try:
        assert await store.ledger.total(1) == Decimal(253)
        assert await store.ledger.last_remaining_credits("fp") == Decimal(big)
        assert await store.ledger.reserved_cents(1, 0.0) == Decimal(40)
        job = await store.jobs.by_task("fp", Kind.VIDEO, "a")
        assert job is not None
        assert job.cost_cents == Decimal(250)
        assert await store.ledger.recent_costs("v") == [Decimal(250)]
    finally:
        await store.close()
    conn = sqlite3.connect(path)
    assert conn.execute("SELECT SUM(cost_micro) FROM ledger").fetchone() == (253_000_000,)
    conn.close()


# -- what people see -----------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("cents", "shown"),
    [
        (Decimal("0.35"), "$0.0035"),
        (Decimal("1234"), "$12.34"),
        (Decimal("1234.5"), "$12.345"),
        (0, "$0.00"),
        (Decimal("0.0000001"), "less than $0.000001"),
        (Decimal("123456789"), "$1,234,567.89"),
        (Decimal("NaN"), "an unreadable amount"),
        (Decimal("-Infinity"), "an unreadable amount"),
        (Decimal("1E+400"), "$1.000E+398"),
    ],
)
def test_amounts_are_rounded_for_people(cents: Decimal, shown: str) -> None:
    assert money(cents) == shown


async def test_a_dropped_connection_after_sending_says_it_may_have_charged(
    stack: Stack, who: Requester
) -> None:
    model = await video_model_id(stack)
    stack.api.inject_fault("drop", 1)
    with pytest.raises(api_errors.APIConnectionError) as dropped:
        await stack.generation.video(who, VideoOptions("a fox", model))
    sentence = user_message(dropped.value)
    assert "may" in sentence and "charged" in sentence
    assert "`/usage`" in sentence and "`/jobs`" in sentence
    assert "try again later" not in sentence


def test_every_may_have_charged_error_points_to_usage_and_jobs() -> None:
    for exc in (
        api_errors.APITimeoutError(),
        api_errors.APIConnectionError("dropped", request_sent=True),
        api_errors.MalformedResponseError(200, "not JSON"),
    ):
        assert "`/usage`" in user_message(exc) and "`/jobs`" in user_message(exc)
    never_sent = user_message(api_errors.APIConnectionError("refused", request_sent=False))
    assert "try again later" in never_sent
    assert "charged" not in never_sent
