"""The spend guard: thresholds once per period, the key's runway, anomalies and the pause.

On the ``stack`` fixture (both engines): the real services over the API emulator, whose
charges report ``cost_cents`` and ``remaining_credits_cents`` as the service does.
"""

import asyncio
from collections.abc import Awaitable, Callable
from decimal import Decimal

import pytest
from cryptography.fernet import Fernet

from bot.clock import ManualClock
from bot.domain import Actor, Charge, Kind
from bot.errors import SpendingPaused, user_message
from bot.i18n import using
from bot.services.generation import ImageOptions, Requester
from bot.services.guard import SpendGuard, describe_alert
from bot.services.personal import wallet_id
from bot.storage import Database
from tests.support.poller import RecordingAnnouncer, make_poller, run_until, submit
from tests.support.stack import ADMIN_ACTOR, Stack

GUILD = 1
ADMIN_CHANNEL = 77
MODEL = "black-forest-labs/flux-schnell"
DAY = 86_400.0

OWN_KEYS = pytest.mark.parametrize(
    "stack_overrides", [{"key_encryption_key": Fernet.generate_key().decode()}]
)
"""Keys of a server's or a member's own can be stored (``KEY_ENCRYPTION_KEY`` set)."""


class Lines:
    """An admin channel: the lines the guard posted, per guild."""

    def __init__(self) -> None:
        self.posted: list[tuple[int, str]] = []

    async def post(self, guild_id: int, channel_id: int, text: str) -> None:
        assert channel_id == ADMIN_CHANNEL
        self.posted.append((guild_id, str(text)))

    def texts(self) -> list[str]:
        return [text for _, text in self.posted]


class DMs:
    """Members' DMs: what the guard sent each member."""

    def __init__(self) -> None:
        self.sent: list[tuple[int, str]] = []

    async def send(self, user_id: int, text: str) -> None:
        self.sent.append((user_id, str(text)))


def guard_on(stack: Stack, db: Database | None = None) -> tuple[SpendGuard, Lines]:
    """A guard as a (re)started process builds it, told of every charge, posting to Lines."""
    guard = SpendGuard(db or stack.db, stack.clock, stack.billing, stack.services.settings)
    lines = Lines()
    guard.set_outlets(lines.post, None)
    stack.billing.set_watcher(guard.after_charge)
    return guard, lines


async def budget(stack: Stack, cents: int) -> None:
    await stack.services.guild_config.set_budgets(GUILD, monthly=cents, actor=ADMIN_ACTOR)
    await stack.services.guild_config.set_admin_channel(GUILD, ADMIN_CHANNEL, actor=ADMIN_ACTOR)


async def spend(stack: Stack, who: Requester, cents: int | str, model: str = MODEL) -> None:
    """One image charged ``cents`` by the emulator (no budget: its hold is the model's last)."""
    stack.api.report_next_costs(Decimal(cents))
    await stack.generation.image(who, ImageOptions("a fox", model))


def a_charge(stack: Stack, cents: int, user: int = 100, task: str | None = None) -> Charge:
    return Charge(
        guild_id=GUILD,
        channel_id=10,
        user_id=user,
        kind=Kind.IMAGE,
        model=MODEL,
        task_id=task,
        cost_cents=Decimal(cents),
        remaining_credits_cents=None,
        key_fingerprint="fp",
        at=stack.clock.time(),
    )


async def charge(stack: Stack, cents: int) -> None:
    """A charge recorded through billing's record path (the guard is its watcher)."""
    await stack.billing.record_charge(a_charge(stack, cents))


async def test_each_threshold_fires_once_even_across_a_restart(
    stack: Stack, who: Requester
) -> None:
    await budget(stack, 100)
    guard, lines = guard_on(stack)
    await spend(stack, who, 60)  # 60 %: 50 % crossed
    await charge(stack, 5)
    await guard.idle()
    assert len(lines.texts()) == 1
    assert "$0.60" in lines.texts()[0] and "$1.00" in lines.texts()[0]
    assert "$0.40" in lines.texts()[0]  # what remains
    restarted, after = guard_on(stack)  # a new process over the same database
    await charge(stack, 5)  # 70 %: nothing new
    await charge(stack, 25)  # 95 %: 80 % crossed
    await restarted.idle()
    assert len(after.texts()) == 1 and "95 %" in after.texts()[0]
    again, last = guard_on(stack)
    await charge(stack, 1)  # still past 50 and 80 %, below 100 %: no line
    await again.idle()
    assert last.texts() == []


async def test_two_processes_on_one_database_post_a_threshold_once(
    stack: Stack, open_db: Callable[[ManualClock], Awaitable[Database]]
) -> None:
    await budget(stack, 100)
    other_db = await open_db(stack.clock)
    try:
        first = SpendGuard(stack.db, stack.clock, stack.billing)
        second = SpendGuard(other_db, stack.clock, stack.billing)
        lines = Lines()
        for guard in (first, second):
            guard.set_outlets(lines.post, None)
        made = a_charge(stack, 55, task="t1")
        assert await stack.db.ledger.insert_charge(made)
        # Both processes see the same charge past 50 % at once: one INSERT wins.
        await asyncio.gather(*(g.after_charge(made, None) for g in (first, second) * 3))
        await first.idle()
        await second.idle()
        assert len(lines.texts()) == 1
    finally:
        await other_db.close()


async def test_a_new_month_arms_the_thresholds_again(stack: Stack, who: Requester) -> None:
    await budget(stack, 100)
    guard, lines = guard_on(stack)
    await charge(stack, 60)
    stack.clock.advance(31 * DAY)  # January -> February: the budget's period rolled over
    await charge(stack, 10)
    await guard.idle()
    assert len(lines.texts()) == 1
    await charge(stack, 50)  # 60 % of February's budget
    await guard.idle()
    assert len(lines.texts()) == 2
    alerts = await guard.alerts(GUILD)
    assert [a.period for a in alerts if a.kind == "month"] == ["2026-02", "2026-01"]


async def test_a_member_reads_their_allowance_in_their_own_answer(
    stack: Stack, who: Requester
) -> None:
    await stack.services.guild_config.set_budgets(GUILD, daily_per_user=100, actor=ADMIN_ACTOR)
    guard, _ = guard_on(stack)
    await spend(stack, who, 50)  # held at the ceiling (25 ¢): no charge of the model yet
    assert guard.take_note(GUILD, who.user_id) is None
    await spend(stack, who, 35, model="stability/sdxl")
    note = guard.take_note(GUILD, who.user_id)
    assert note is not None and "80 %" in note and "$0.85" in note and "$1.00" in note
    assert guard.take_note(GUILD, who.user_id) is None  # once
    await guard.after_charge(a_charge(stack, 1, user=who.user_id), (100, None))
    assert guard.take_note(GUILD, who.user_id) is None  # 86 %: no second note
    await guard.update(GUILD, member_notes=False)
    await guard.after_charge(a_charge(stack, 14, user=who.user_id), (100, None))
    assert guard.take_note(GUILD, who.user_id) is None  # 100 %, but notes are off


async def own_key(stack: Stack, guild_id: int, cents: int, actor: Actor = ADMIN_ACTOR) -> str:
    """Give the server (or a member's wallet) a key of its own with ``cents`` of credit."""
    key = stack.api.create_key(balance_cents=cents)
    await stack.services.guild_config.set_api_key(guild_id, key, actor=actor)
    return key


@OWN_KEYS
async def test_the_runway_reads_the_emulators_remaining_credits(
    stack: Stack, who: Requester
) -> None:
    await stack.services.guild_config.set_admin_channel(GUILD, ADMIN_CHANNEL, actor=ADMIN_ACTOR)
    guard, lines = guard_on(stack)
    await guard.update(GUILD, anomaly_floor_cents=1_000_000)
    key = await own_key(stack, GUILD, 10_000)
    fingerprint = (await stack.keys.resolve(GUILD)).fingerprint
    await spend(stack, who, 1000)
    stack.clock.advance(DAY)
    await spend(stack, who, 1000)  # 2,000 ¢ over a day: 8,000 ¢ left last about 4 days
    runway = await guard.runway(fingerprint)
    assert runway is not None
    assert runway.remaining_cents == stack.api.balance(key) == 8000
    assert runway.days_left is not None and 3.9 < runway.days_left < 4.1
    await guard.idle()
    assert lines.texts() == []  # 4 days: above the default 3
    stack.clock.advance(DAY / 2)
    await spend(stack, who, 4000)  # 4,000 ¢ left at 4,000 ¢ a day: 1 day
    await spend(stack, who, 100)  # once per key and day
    await guard.idle()
    assert len(lines.texts()) == 1 and "runs dry in about" in lines.texts()[0]


async def test_a_server_on_the_shared_key_is_never_told_its_balance(
    stack: Stack, who: Requester
) -> None:
    # GENAPI_API_KEY is the bot owner's: its balance is not the server's to read (the rule of
    # /usage, test_keys_e2e), so neither its runway nor a floor speaks to the server.
    await stack.services.guild_config.set_admin_channel(GUILD, ADMIN_CHANNEL, actor=ADMIN_ACTOR)
    guard, lines = guard_on(stack)
    await guard.update(GUILD, anomaly_floor_cents=1_000_000, credits_floor_cents=1_000_000)
    stack.api.set_balance(stack.key, 3000)
    await spend(stack, who, 1000)
    stack.clock.advance(DAY)
    await spend(stack, who, 1000)  # 1,000 ¢ left at 1,000 ¢ a day, below the floor
    await guard.idle()
    assert lines.texts() == []


@OWN_KEYS
async def test_a_personal_keys_owner_hears_of_its_runway_by_dm_with_dm_notices_on(
    stack: Stack,
) -> None:
    member = 555
    mine = Requester(wallet_id(member), 10, member)
    guard, lines = guard_on(stack)
    dms = DMs()
    guard.set_outlets(lines.post, None, dms.send)
    await own_key(stack, mine.guild_id, 10_000, actor=Actor(member))
    await guard.update(mine.guild_id, credits_floor_cents=2_000)
    await spend(stack, mine, 1000)
    stack.clock.advance(DAY)
    await spend(stack, mine, 5000)  # 4,000 ¢ left at 6,000 ¢ a day: within 3 days
    await guard.idle()
    assert dms.sent == []  # DM notices are off: the member is not written to
    stack.clock.advance(DAY)
    await stack.services.members.update(member, {"notify_dm": True})
    await spend(stack, mine, 1000)  # a new day: 3,000 ¢ left, under a day at this pace
    await spend(stack, mine, 1500)  # 1,500 ¢ left: below the floor too
    await spend(stack, mine, 100)  # once per key and day, each
    await guard.idle()
    assert [user for user, _ in dms.sent] == [member, member]
    runway, floor = (text for _, text in dms.sent)
    assert "runs dry in about" in runway and "$30.00 left" in runway
    assert "below the floor of $20.00" in floor and "$15.00" in floor
    assert "/servers/" not in runway + floor  # no server's dashboard page
    assert lines.texts() == []  # a wallet has no admin channel


async def test_an_anomaly_pauses_paid_requests_while_a_pending_video_is_delivered(
    stack: Stack, who: Requester
) -> None:
    await stack.services.guild_config.set_admin_channel(GUILD, ADMIN_CHANNEL, actor=ADMIN_ACTOR)
    guard, lines = guard_on(stack)
    await guard.update(GUILD, pause_on_anomaly=True, anomaly_floor_cents=100)
    hours = stack.db.guard
    start = stack.clock.time()
    for hour in range(14 * 24):  # a steady 2 ¢ an hour for 14 days
        await hours.add_to_hours(GUILD, None, start + hour * 3600, 2_000_000)
    stack.clock.advance(14 * DAY)
    (video,) = await submit(stack, who)  # pending, 20 ¢
    await spend(stack, Requester(GUILD, 10, 555), 150)  # 172 ¢ this hour: > 5 x 2 ¢ and > $1
    await guard.idle()
    assert len(lines.texts()) == 1
    assert "<@555>" in lines.texts()[0] and MODEL in lines.texts()[0]
    assert "/config guard resume" in lines.texts()[0]
    with pytest.raises(SpendingPaused) as refused:
        await spend(stack, who, 3)
    assert "paused paid requests" in user_message(refused.value)
    assert "/config guard resume" in user_message(refused.value)
    announcer = RecordingAnnouncer()
    await run_until(make_poller(stack, announcer), lambda: bool(announcer.results))
    assert [job.id for job in announcer.results] == [video.id]  # still delivered
    audit = await stack.services.guild_config.audit(GUILD)
    assert audit[0].what == "spending" and audit[0].new.startswith("paused")
    assert await guard.resume(GUILD)
    await spend(stack, who, 3)  # restored


async def test_one_member_past_the_ten_minute_amount_is_an_anomaly(
    stack: Stack, who: Requester
) -> None:
    await stack.services.guild_config.set_admin_channel(GUILD, ADMIN_CHANNEL, actor=ADMIN_ACTOR)
    guard, lines = guard_on(stack)
    await guard.update(GUILD, member_10min_cents=50, anomaly_floor_cents=100_000)
    await spend(stack, who, 30)
    stack.clock.advance(300)
    await spend(stack, who, 30)
    await spend(stack, who, 30)
    await guard.idle()
    assert len(lines.texts()) == 1 and f"<@{who.user_id}>" in lines.texts()[0]
    assert not await guard.paused(GUILD)  # pause-on-anomaly is off by default


async def test_what_an_alert_measured_reads_in_the_readers_language(stack: Stack) -> None:
    await budget(stack, 100)
    guard, _ = guard_on(stack)
    await charge(stack, 60)
    (alert,) = await guard.alerts(GUILD)
    # Stored as figures, not as an English sentence: each reader reads their own language.
    assert "spend" not in str(await stack.db.guard.alerts(GUILD))
    assert str(describe_alert(alert)) == "The month's spend $0.60 of the $1.00 budget (50 %)"
    with using("de"):
        german = describe_alert(alert).translated()
    assert german.startswith("Ausgaben des Monats:") and "0,60" in german and "1,00" in german
