"""Credit packs bought in Discord: credited once, consumed once, refunded once, and spent.

The service runs on each engine (``store``); Discord's side is a desk that records what the
bot asks of it, as Discord would answer.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Collection
from dataclasses import replace
from decimal import Decimal
from typing import Any

import discord
import pytest
from discord import Client

from bot.clock import ManualClock
from bot.discord.credits import DiscordEntitlements
from bot.discord.render.chat import chat_footer
from bot.domain import BillingMode, CreditEntryKind, Entitlement, Kind, Reservation
from bot.errors import BudgetExceeded, CreditsNeeded
from bot.services.billing import DEFAULT_RESERVATION_TTL, Billing
from bot.services.credits import CreditService, MemberCredits, Reconciled, with_markup
from bot.services.generation import ImageOptions, Requester, TextOptions
from bot.services.personal import PAID_BY_CREDITS, PAID_BY_SERVER
from bot.storage.database import Database as SqlDatabase
from bot.wiring import RESERVATION_SWEEP_SECONDS, sweep_stale
from tests.support.billing import GUILD, charge_for, settings
from tests.support.discord_emulator import DiscordEmulator
from tests.support.stack import services_on_emulator

SKU_SMALL = 1_100_000_000_000_000_001
SKU_LARGE = 1_100_000_000_000_000_002
PACKS = f"{SKU_SMALL}=500,{SKU_LARGE}=2000"
MEMBER = 42
SYNC_IMAGE = "black-forest-labs/flux-schnell"


class Desk:
    """Discord's entitlements as the bot sees them: listed, and consumed on request."""

    def __init__(self) -> None:
        self.live: dict[int, Entitlement] = {}
        self.consumed: list[int] = []
        self.fail_consume = False

    def buy(
        self, entitlement_id: int, sku_id: int = SKU_SMALL, user_id: int = MEMBER
    ) -> Entitlement:
        bought = Entitlement(entitlement_id, sku_id, user_id)
        self.live[entitlement_id] = bought
        return bought

    async def listed(self, sku_ids: Collection[int]) -> list[Entitlement]:
        return [e for e in self.live.values() if e.sku_id in sku_ids]

    def refund(self, entitlement_id: int) -> None:
        self.live[entitlement_id] = replace(self.live[entitlement_id], deleted=True)

    async def consume(self, entitlement_id: int) -> None:
        if self.fail_consume:
            raise RuntimeError("Discord did not answer")
        self.consumed.append(entitlement_id)
        self.live[entitlement_id] = Entitlement(
            entitlement_id,
            self.live[entitlement_id].sku_id,
            self.live[entitlement_id].user_id,
            consumed=True,
        )


@pytest.fixture
def clock() -> ManualClock:
    return ManualClock(1_768_478_400.0)  # 2026-01-15 12:00 UTC


def credit_service(store: SqlDatabase, clock: ManualClock, desk: Desk | None) -> CreditService:
    service = CreditService(store, clock, settings(credit_packs=PACKS))
    service.set_desk(desk)
    return service


async def test_a_purchase_is_credited_once_and_consumed_once(
    store: SqlDatabase, clock: ManualClock
) -> None:
    desk = Desk()
    credits = credit_service(store, clock, desk)
    bought = desk.buy(9001)
    settled = await credits.settle(bought)
    assert settled.credited and settled.consumed
    assert desk.consumed == [9001]
    assert (await credits.balance(MEMBER)).balance_cents == 500
    # The gateway's event and the next interaction report the same purchase again.
    again = await credits.settle(bought)
    assert not again.credited
    assert desk.consumed == [9001]
    assert (await credits.balance(MEMBER)).balance_cents == 500


async def test_the_same_purchase_reported_together_is_credited_once(
    store: SqlDatabase, clock: ManualClock
) -> None:
    desk = Desk()
    credits = credit_service(store, clock, desk)
    bought = desk.buy(9002, SKU_LARGE)
    results = await asyncio.gather(*(credits.settle(bought) for _ in range(5)))
    assert sum(r.credited for r in results) == 1
    assert desk.consumed == [9002]
    assert (await credits.balance(MEMBER)).balance_cents == 2000
    history = (await credits.view(MEMBER, 0)).history
    assert [e.kind for e in history] == [CreditEntryKind.PURCHASE]


async def test_a_purchase_made_while_the_bot_was_stopped_is_settled_at_start_up(
    store: SqlDatabase, clock: ManualClock
) -> None:
    desk = Desk()
    desk.buy(9003)
    desk.buy(9004, user_id=7)
    desk.buy(9005, sku_id=555)  # not a pack of this bot: left alone
    credits = credit_service(store, clock, desk)
    assert await credits.reconcile() == Reconciled(credited=2)
    assert sorted(desk.consumed) == [9003, 9004]
    assert (await credits.balance(MEMBER)).balance_cents == 500
    assert (await credits.balance(7)).balance_cents == 500
    assert await credits.reconcile() == Reconciled()


async def test_a_crash_between_crediting_and_consuming_consumes_without_crediting_again(
    store: SqlDatabase, clock: ManualClock
) -> None:
    desk = Desk()
    bought = desk.buy(9006)
    desk.fail_consume = True  # the process stops before Discord confirms
    first = credit_service(store, clock, desk)
    settled = await first.settle(bought)
    assert settled.credited and not settled.consumed
    assert await store.credits.unconsumed() == [9006]
    desk.fail_consume = False
    restarted = credit_service(store, clock, desk)
    assert await restarted.reconcile() == Reconciled()
    assert desk.consumed == [9006]
    assert await store.credits.unconsumed() == []
    assert (await restarted.balance(MEMBER)).balance_cents == 500


async def test_a_refund_takes_the_amount_back_once_even_below_zero(
    store: SqlDatabase, clock: ManualClock
) -> None:
    desk = Desk()
    credits = credit_service(store, clock, desk)
    await credits.settle(desk.buy(9007))
    async with store.transaction() as tx:  # 3 dollars of it spent already
        await tx.credits.spend(
            user_id=MEMBER,
            paid_cents=Decimal(300),
            cost_cents=Decimal(300),
            guild_id=GUILD,
            model="m",
            task_id=None,
            at=clock.time(),
        )
    refund = await credits.refund(9007)
    assert refund is not None and refund.amount_cents == -500
    assert await credits.refund(9007) is None
    assert await credits.refund(123) is None  # never credited: nothing to take back
    assert (await credits.balance(MEMBER)).balance_cents == -300
    kinds = [e.kind for e in (await credits.view(MEMBER, 0)).history]
    assert kinds == [CreditEntryKind.REFUND, CreditEntryKind.PURCHASE]


async def test_a_refund_seen_only_in_the_listing_is_taken_back_once(
    store: SqlDatabase, clock: ManualClock
) -> None:
    desk = Desk()
    credits = credit_service(store, clock, desk)
    await credits.settle(desk.buy(9010))
    desk.fail_consume = True
    await credits.settle(desk.buy(9011))  # credited, not consumed yet
    desk.refund(9010)
    desk.refund(9011)
    desk.buy(9012)
    desk.refund(9012)  # refunded before the bot ever saw it: never credited
    assert await credits.reconcile() == Reconciled(refunded=2)
    assert (await credits.balance(MEMBER)).balance_cents == 0
    assert await credits.reconcile() == Reconciled()
    assert await credits.refund(9010) is None  # the late ENTITLEMENT_DELETE takes nothing more
    assert await store.credits.unconsumed() == []  # nothing left to consume of a refund
    kinds = [e.kind for e in (await credits.view(MEMBER, 0)).history]
    assert sorted(kinds) == sorted([CreditEntryKind.PURCHASE] * 2 + [CreditEntryKind.REFUND] * 2)


TOKEN = "credits.bot.token"


@pytest.fixture
async def shop(monkeypatch: pytest.MonkeyPatch) -> AsyncIterator[tuple[DiscordEmulator, Client]]:
    """The Discord emulator selling the small pack, and a bot logged in to its REST API."""
    async with DiscordEmulator(bot_token=TOKEN) as emulator:
        monkeypatch.setattr(discord.http.Route, "BASE", emulator.api_base_url)
        client = Client(intents=discord.Intents.none())
        await client.login(TOKEN)
        emulator.add_sku(SKU_SMALL, "500 credits")
        try:
            yield emulator, client
        finally:
            await client.close()


async def test_a_refund_made_while_the_bot_was_stopped_is_taken_back_at_start_up_once(
    store: SqlDatabase, clock: ManualClock, shop: tuple[DiscordEmulator, Client]
) -> None:
    emulator, client = shop
    bought = emulator.purchase(MEMBER, SKU_SMALL, dispatch=False)
    running = credit_service(store, clock, DiscordEntitlements(client))
    assert await running.reconcile() == Reconciled(credited=1)
    assert emulator.entitlement(bought).consumed
    # The bot stops; Discord refunds the purchase; its ENTITLEMENT_DELETE reaches no one.
    emulator.refund(bought, dispatch=False)
    restarted = credit_service(store, clock, DiscordEntitlements(client))
    assert await restarted.reconcile() == Reconciled(refunded=1)
    assert (await restarted.balance(MEMBER)).balance_cents == 0
    assert await restarted.reconcile() == Reconciled()  # the next hour: nothing more
    assert (await restarted.balance(MEMBER)).balance_cents == 0
    kinds = [e.kind for e in (await restarted.view(MEMBER, 0)).history]
    assert kinds == [CreditEntryKind.REFUND, CreditEntryKind.PURCHASE]
    assert emulator.entitlement(bought).consume_calls == 1


async def test_the_emulator_lists_deleted_entitlements_only_when_asked(
    shop: tuple[DiscordEmulator, Client],
) -> None:
    emulator, client = shop
    kept = emulator.purchase(MEMBER, SKU_SMALL, dispatch=False)
    refunded = emulator.purchase(MEMBER, SKU_SMALL, dispatch=False)
    emulator.refund(refunded, dispatch=False)
    app = client.application_id
    default = await client.http.get_entitlements(app)
    everything = await client.http.get_entitlements(app, exclude_deleted=False)
    assert [int(e["id"]) for e in default] == [kept]
    assert {int(e["id"]): e["deleted"] for e in everything} == {kept: False, refunded: True}
    assert await DiscordEntitlements(client).listed([SKU_SMALL]) == [
        Entitlement(kept, SKU_SMALL, MEMBER),
        Entitlement(refunded, SKU_SMALL, MEMBER, deleted=True),
    ]
    more = [emulator.purchase(7, SKU_SMALL, dispatch=False) for _ in range(120)]
    listed = await DiscordEntitlements(client).listed([SKU_SMALL])  # two pages
    assert [e.id for e in listed] == [kept, refunded, *more]


async def test_a_purchase_is_recorded_in_the_server_where_it_was_made(
    store: SqlDatabase, clock: ManualClock
) -> None:
    desk = Desk()
    credits = credit_service(store, clock, desk)
    await credits.settle(desk.buy(9020), guild_id=GUILD)  # carried by an interaction there
    await credits.offered(MEMBER, 777)  # shown the premium buttons in server 777
    await credits.offered(MEMBER, None)  # then in a DM: 777 stays the last server
    await credits.settle(desk.buy(9021))  # ENTITLEMENT_CREATE: no server of its own
    await credits.settle(desk.buy(9022, user_id=8))  # never shown the packs in a server
    await credits.refund(9021)
    servers = {e.entitlement_id: e.guild_id for e in await credits.history(MEMBER)}
    assert servers == {9020: GUILD, 9021: 777}
    assert [e.guild_id for e in await credits.history(8)] == [None]
    assert [e.guild_id for e in await credits.history(MEMBER) if e.kind.value == "refund"] == [777]


async def test_stale_credit_holds_are_swept_while_the_bot_runs(
    engine_settings: dict[str, Any], monkeypatch: pytest.MonkeyPatch
) -> None:
    clock = ManualClock(1_768_478_400.0)
    async with services_on_emulator(clock, credit_packs=PACKS, **engine_settings) as (
        services,
        _api,
        _key,
    ):
        await services.db.credits.set_mode(GUILD, BillingMode.MEMBERS)
        await fund(services.db, clock, 500)
        # A request held and never settled (its task lost): the hold outlives it.
        await services.billing.reserve(
            guild_id=GUILD, user_id=MEMBER, kind=Kind.TEXT, model="m", cost_cents=100
        )
        assert await services.db.credits.held(MEMBER, 0) == 100
        sweeps = 0

        async def sleep(seconds: float) -> None:  # the sweep's wait, on the manual clock
            nonlocal sweeps
            sweeps += 1
            clock.advance(seconds)
            if sweeps * RESERVATION_SWEEP_SECONDS > 2 * DEFAULT_RESERVATION_TTL:
                raise asyncio.CancelledError  # the bot stops

        monkeypatch.setattr(clock, "sleep", sleep)
        with pytest.raises(asyncio.CancelledError):
            await sweep_stale(services)
        assert await services.db.credits.held(MEMBER, 0) == 0  # the row itself is gone
        assert (await services.credits.balance(MEMBER)).available_cents == 500


# -- members pay ---------------------------------------------------------------------------------


def members_billing(
    store: SqlDatabase, clock: ManualClock, markup: int = 0, **extra: Any
) -> Billing:
    config = settings(credit_packs=PACKS, credit_markup_percent=markup, **extra)
    return Billing(store, config, clock, credits=MemberCredits(config.credit_pack_cents, markup))


async def fund(store: SqlDatabase, clock: ManualClock, cents: int, entitlement_id: int = 1) -> None:
    async with store.transaction() as tx:
        await tx.credits.credit_purchase(
            entitlement_id=entitlement_id,
            sku_id=SKU_SMALL,
            user_id=MEMBER,
            cents=cents,
            at=clock.time(),
        )


async def test_members_billing_charges_the_balance_with_the_markup_exactly(
    store: SqlDatabase, clock: ManualClock
) -> None:
    await store.credits.set_mode(GUILD, BillingMode.MEMBERS)
    await store.guilds.update_limits(GUILD, monthly_budget_cents=0)  # the server pays nothing
    billing = members_billing(store, clock, markup=15)
    await fund(store, clock, 500)
    held = await billing.reserve(
        guild_id=GUILD, user_id=MEMBER, kind=Kind.TEXT, model="m", cost_cents=Decimal(100)
    )
    credits = credit_service(store, clock, None)
    assert (await credits.balance(MEMBER)).held_cents == 115
    await billing.settle(held, replace(charge_for(held, 0, clock), cost_cents=Decimal("0.35")))
    balance = await credits.balance(MEMBER)
    assert balance.held_cents == 0
    assert balance.balance_cents == 500 - Decimal("0.4025")
    paid, cost = await credits.spent_since(MEMBER, 0)
    assert (paid, cost) == (Decimal("0.4025"), Decimal("0.35"))
    assert await store.ledger.spent_since(GUILD, 0) == Decimal("0.35")


async def test_concurrent_commands_cannot_overdraw_a_balance(
    store: SqlDatabase, clock: ManualClock
) -> None:
    await store.credits.set_mode(GUILD, BillingMode.MEMBERS)
    billing = members_billing(store, clock)
    await fund(store, clock, 1000)

    async def ask() -> Reservation | CreditsNeeded:
        try:
            return await billing.reserve(
                guild_id=GUILD, user_id=MEMBER, kind=Kind.IMAGE, model="m", cost_cents=100
            )
        except CreditsNeeded as refused:
            return refused

    results = await asyncio.gather(*(ask() for _ in range(25)))
    granted = [r for r in results if isinstance(r, Reservation)]
    assert len(granted) == 10
    refused = [r for r in results if isinstance(r, CreditsNeeded)]
    assert refused and refused[0].packs == ((SKU_SMALL, 500), (SKU_LARGE, 2000))
    assert (await credit_service(store, clock, None).balance(MEMBER)).available_cents == 0
    for reservation in granted[:3]:
        await billing.release(reservation)
    assert (await credit_service(store, clock, None).balance(MEMBER)).available_cents == 300


async def test_a_member_below_zero_cannot_spend_until_topped_up(
    store: SqlDatabase, clock: ManualClock
) -> None:
    await store.credits.set_mode(GUILD, BillingMode.MEMBERS)
    billing = members_billing(store, clock)
    await fund(store, clock, 100)
    await store.credits.refund(1, clock.time())
    with pytest.raises(CreditsNeeded):
        await billing.reserve(
            guild_id=GUILD, user_id=MEMBER, kind=Kind.TEXT, model="m", cost_cents=0
        )


async def test_server_then_members_pays_from_the_balance_past_the_servers_budget(
    store: SqlDatabase, clock: ManualClock
) -> None:
    await store.credits.set_mode(GUILD, BillingMode.SERVER_THEN_MEMBERS)
    await store.guilds.update_limits(GUILD, monthly_budget_cents=100)
    billing = members_billing(store, clock)
    first = await billing.reserve(
        guild_id=GUILD, user_id=MEMBER, kind=Kind.TEXT, model="m", cost_cents=100
    )
    assert (await credit_service(store, clock, None).balance(MEMBER)).held_cents == 0
    with pytest.raises(CreditsNeeded):  # the server's budget is held, the balance is empty
        await billing.reserve(
            guild_id=GUILD, user_id=MEMBER, kind=Kind.TEXT, model="m", cost_cents=50
        )
    await fund(store, clock, 500)
    second = await billing.reserve(
        guild_id=GUILD, user_id=MEMBER, kind=Kind.TEXT, model="m", cost_cents=50
    )
    assert (await credit_service(store, clock, None).balance(MEMBER)).held_cents == 50
    await billing.settle(second, charge_for(second, 40, clock))
    await billing.settle(first, charge_for(first, 100, clock))
    assert (await credit_service(store, clock, None).balance(MEMBER)).balance_cents == 460


async def test_a_server_that_pays_never_touches_balances(
    store: SqlDatabase, clock: ManualClock
) -> None:
    await store.guilds.update_limits(GUILD, monthly_budget_cents=10)
    billing = members_billing(store, clock)
    await fund(store, clock, 500)
    with pytest.raises(BudgetExceeded):
        await billing.reserve(
            guild_id=GUILD, user_id=MEMBER, kind=Kind.TEXT, model="m", cost_cents=50
        )


def test_the_markup_is_exact_to_the_micro_cent() -> None:
    assert with_markup(Decimal("0.35"), 15) == Decimal("0.4025")
    assert with_markup(Decimal("0.000001"), 50) == Decimal("0.000002")  # rounded up
    assert with_markup(Decimal(100), 0) == 100


async def test_the_answer_shows_what_the_balance_paid_with_the_markup(
    engine_settings: dict[str, Any],
) -> None:
    clock = ManualClock(1_768_478_400.0)
    async with services_on_emulator(
        clock, credit_packs=PACKS, credit_markup_percent=50, **engine_settings
    ) as (services, _api, _key):
        await services.db.credits.set_mode(GUILD, BillingMode.MEMBERS)
        await fund(services.db, clock, 500)
        who = Requester(GUILD, 10, MEMBER)
        assert await services.generation.paid_by(who) == PAID_BY_CREDITS
        result = await services.generation.text(who, TextOptions("hello"))
        charged = await services.db.ledger.total(GUILD)
        assert charged > 0
        assert result.cost_cents == with_markup(charged, 50)  # what the member paid
        assert await services.db.credits.balance(MEMBER) == 500 - result.cost_cents


class QuietDesk:
    """The adapter's side of a request, doing nothing (the answer's payer is what is read)."""

    @contextlib.asynccontextmanager
    async def waiting(self) -> AsyncIterator[None]:
        yield

    def charged(self) -> None:
        pass


async def test_server_then_members_answers_name_the_balance_when_it_paid(
    engine_settings: dict[str, Any],
) -> None:
    clock = ManualClock(1_768_478_400.0)
    async with services_on_emulator(clock, credit_packs=PACKS, **engine_settings) as (
        services,
        _api,
        _key,
    ):
        await services.db.credits.set_mode(GUILD, BillingMode.SERVER_THEN_MEMBERS)
        who = Requester(GUILD, 10, MEMBER)
        submissions = services.submissions
        within = await submissions.text(who, TextOptions("hello"), desk=QuietDesk())
        assert within.payer == PAID_BY_SERVER
        # The server's budget is spent: the member's balance pays, and their answers say so.
        await services.db.guilds.update_limits(GUILD, monthly_budget_cents=0)
        await fund(services.db, clock, 500)
        past = await submissions.text(who, TextOptions("again"), desk=QuietDesk())
        assert past.payer == PAID_BY_CREDITS
        image = ImageOptions("a fox in the snow", model=SYNC_IMAGE)
        made = await submissions.image(who, image, desk=QuietDesk(), public=True)
        assert made.answers and made.payer == PAID_BY_CREDITS
        job_id = made.answers[0].job_id
        job = None if job_id is None else await services.db.jobs.get(job_id)
        assert job is not None and job.details["paid_by"] == PAID_BY_CREDITS  # its card's
        assert Decimal(job.details["paid_cents"]) == made.answers[0].result.cost_cents
        turn = await services.conversations.ask(who, "Ann", "hello there")
        assert PAID_BY_CREDITS in chat_footer(turn, sandbox=False)
        spent = await services.credits.spent_since(MEMBER, 0)
        assert spent[0] > 0


async def test_a_refund_is_in_the_audit_log_of_the_server_the_purchase_was_made_in(
    store: SqlDatabase, clock: ManualClock
) -> None:
    desk = Desk()
    credits = credit_service(store, clock, desk)
    await credits.settle(desk.buy(9030), guild_id=GUILD)
    await credits.settle(desk.buy(9031))  # no server known: no server's log to write in
    await credits.refund(9030)
    await credits.refund(9031)
    await credits.refund(9030)  # a second report of the same refund writes nothing more
    entries = await store.policy.audit(GUILD)
    assert [(e.user_id, e.what, e.old, e.new) for e in entries] == [
        (MEMBER, f"credit pack {SKU_SMALL} refunded", "$5.00 credited", "$5.00 taken back")
    ]
