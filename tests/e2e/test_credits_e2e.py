"""Credit packs end to end: a member buys in Discord, pays /text from the balance, is refunded.

The Discord emulator plays the purchases (an entitlement and ``ENTITLEMENT_CREATE``, or an
entitlement carried by the member's next interaction) and the refund (``ENTITLEMENT_DELETE``);
the balance, the credit ledger and the ledger are read from the bot's own database file and
must agree to the micro-cent.
"""

import asyncio
import sqlite3
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any

import pytest
import pytest_asyncio

from tests.support.e2e.harness import World, close_world, open_world

pytestmark = pytest.mark.asyncio(loop_scope="module")

PACK = 1_300_000_000_000_000_001
BIG_PACK = 1_300_000_000_000_000_002
MARKUP = 10


@pytest_asyncio.fixture(loop_scope="module", scope="module")
async def world(tmp_path_factory: pytest.TempPathFactory) -> AsyncIterator[World]:
    opened = await open_world(
        Path(tmp_path_factory.mktemp("e2e")),
        overrides={
            "CREDIT_PACKS": f"{PACK}=500,{BIG_PACK}=2000",
            "CREDIT_MARKUP_PERCENT": str(MARKUP),
        },
    )
    opened.discord.add_sku(PACK, "500 credits")
    opened.discord.add_sku(BIG_PACK, "2000 credits")
    yield opened
    await close_world(opened)
    assert opened.discord.unhandled == []
    assert opened.discord.server_errors == []
    assert "Traceback" not in opened.bot.log()


def rows(world: World, sql: str) -> list[tuple[Any, ...]]:
    conn = sqlite3.connect(f"file:{world.bot.env['DATABASE_PATH']}?mode=ro", uri=True)
    try:
        return conn.execute(sql).fetchall()
    finally:
        conn.close()


async def until(what: str, check: Callable[[], bool], timeout: float = 15) -> None:
    """Wait for the bot's own database (which signals nothing) to show ``what``."""
    async with asyncio.timeout(timeout):
        while not check():
            await asyncio.sleep(0.05)


def balance_micro(world: World) -> int:
    found = rows(
        world, f"SELECT balance_micro FROM credit_balances WHERE user_id = {world.member.id}"
    )
    return int(found[0][0]) if found else 0


def entries_micro(world: World) -> int:
    member = world.member.id
    (total,) = rows(
        world, f"SELECT COALESCE(SUM(amount_micro), 0) FROM credit_entries WHERE user_id = {member}"
    )[0]
    return int(total)


def premium_skus(components: list[dict[str, Any]]) -> list[int]:
    return [int(c["sku_id"]) for c in components if c.get("type") == 2 and c.get("style") == 6]


async def test_buy_spend_and_refund_agree_to_the_micro_cent(world: World) -> None:
    billing = await world.answer(
        await world.command("config", {"mode": "members"}, admin=True, subcommand="billing")
    )
    assert "Who pays for commands updated." in billing.text

    # Nothing bought yet: one sentence, and the packs on Discord's buy buttons.
    refused = await world.answer(await world.command("text", {"prompt": "a haiku on pennies"}))
    assert refused.ephemeral
    assert "Buy a credit pack below" in refused.text
    assert premium_skus(refused.all_components) == [PACK, BIG_PACK]

    # A purchase in the client: credited once, consumed once.
    bought = world.discord.purchase(world.member.id, PACK)
    await until("the pack credited", lambda: balance_micro(world) == 500 * 10**6)
    await until("the pack consumed", lambda: world.discord.entitlement(bought).consumed)
    assert world.discord.entitlement(bought).consume_calls == 1

    # /text paid from the balance: the service's price in the ledger, the price and the
    # markup taken from the balance, both kept exactly.
    answer = await world.answer(await world.command("text", {"prompt": "a haiku on pennies"}))
    assert not answer.ephemeral
    await until("the charge recorded", lambda: bool(rows(world, "SELECT 1 FROM ledger")))
    ((cost_micro,),) = rows(world, "SELECT cost_micro FROM ledger")
    ((paid_micro, spend_cost),) = rows(
        world, "SELECT -amount_micro, cost_micro FROM credit_entries WHERE kind = 'spend'"
    )
    assert spend_cost == cost_micro > 0
    assert paid_micro == -(-cost_micro * (100 + MARKUP) // 100)  # rounded up to a micro-cent
    assert balance_micro(world) == 500 * 10**6 - paid_micro == entries_micro(world)
    assert rows(world, "SELECT COUNT(*) FROM credit_holds") == [(0,)]

    # A purchase whose event was lost arrives with the member's next interaction.
    missed = world.discord.purchase(world.member.id, BIG_PACK, dispatch=False)
    shown = await world.answer(await world.command("credits"))
    assert premium_skus(shown.all_components) == [PACK, BIG_PACK]
    await until(
        "the missed pack credited", lambda: balance_micro(world) == 2500 * 10**6 - paid_micro
    )
    await until("the missed pack consumed", lambda: world.discord.entitlement(missed).consumed)

    # Refunded: the amount taken back, once.
    world.discord.refund(bought)
    await until("the refund", lambda: balance_micro(world) == 2000 * 10**6 - paid_micro)
    assert balance_micro(world) == entries_micro(world)
    kinds = rows(world, "SELECT kind, COUNT(*) FROM credit_entries GROUP BY kind ORDER BY kind")
    assert kinds == [("purchase", 2), ("refund", 1), ("spend", 1)]
    usage = await world.answer(await world.command("usage", {}))
    assert "Paid from the credit balance this month" in usage.text

    # Both purchases are in this server's ledger: the first made after its premium buttons
    # were shown here, the second carried by a command here.
    assert rows(world, "SELECT DISTINCT guild_id FROM credit_entries WHERE kind <> 'spend'") == [
        (world.guild.id,)
    ]

    # A refund made while the bot is stopped (its ENTITLEMENT_DELETE reaches no one) is taken
    # back at the next start, once.
    await world.bot.kill()
    world.discord.refund(missed, dispatch=False)
    await world.bot.start()
    await until("the refund made while stopped", lambda: balance_micro(world) == -paid_micro, 60)
    assert balance_micro(world) == entries_micro(world)
    kinds = rows(world, "SELECT kind, COUNT(*) FROM credit_entries GROUP BY kind ORDER BY kind")
    assert kinds == [("purchase", 2), ("refund", 2), ("spend", 1)]
