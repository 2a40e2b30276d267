"""Holds that bound spending, with the real bot process: a video whose catalogue price
is unusable (NaN) is not free: it asks to confirm where the server set a threshold, and holds the
configured ceiling against budgets; long answers priced above their prompts, asked at once,
never spend past a member's allowance.

The API emulator runs in the test process: its catalogue is patched before the bot starts, so
the bot's first catalogue already carries the NaN price.
"""

from __future__ import annotations

import copy
import sqlite3
from collections.abc import AsyncIterator, Iterator
from decimal import Decimal
from pathlib import Path
from typing import Any

import pytest
import pytest_asyncio

from bot.sandbox import catalogue as sandbox_catalogue
from tests.support.e2e.harness import BOT_TOKEN, MEMBER_PERMISSIONS, World, close_world, open_world

pytestmark = pytest.mark.asyncio(loop_scope="module")

UNPRICED = "zenith-ultra/text-to-video"


@pytest.fixture(scope="module")
def _unpriced_catalogue() -> Iterator[None]:
    original = sandbox_catalogue.catalogue_json

    def catalogue() -> dict[str, Any]:
        body = copy.deepcopy(original())
        for entry in body["models"]["video"]:
            if entry["id"] == UNPRICED:
                entry["cost_cents_per_5s"] = float("nan")  # sent as the JSON constant NaN
        return body

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(sandbox_catalogue, "catalogue_json", catalogue)
        yield


@pytest_asyncio.fixture(loop_scope="module", scope="module")
async def world(
    tmp_path_factory: pytest.TempPathFactory, _unpriced_catalogue: None
) -> AsyncIterator[World]:
    opened = await open_world(Path(tmp_path_factory.mktemp("e2e")))
    yield opened
    await close_world(opened)
    assert opened.discord.unhandled == []
    assert opened.discord.server_errors == []
    log = opened.bot.log()
    assert opened.key not in log and BOT_TOKEN not in log
    assert "Traceback" not in log


def videos(world: World) -> int:
    return world.posts_to("/video/generate")


async def test_an_unusable_price_asks_to_confirm_above_the_threshold(world: World) -> None:
    await world.answer(
        await world.command("config", {"dollars": "1.00"}, admin=True, subcommand="confirm-above")
    )
    calls = videos(world)
    ask = await world.answer(
        await world.command("video", {"prompt": "a storm", "model": UNPRICED, "duration": 6})
    )
    assert ask.ephemeral and "unknown" in ask.content
    labels = {i["label"]: i["custom_id"] for row in ask.components for i in row["components"]}
    assert set(labels) == {"Generate · price unknown", "Cancel"}
    cancel = await world.discord.press_button(
        ask.id, labels["Cancel"], user_id=world.member.id, permissions=MEMBER_PERMISSIONS
    )
    await cancel.wait_callback()
    assert "nothing was charged" in world.discord.messages[ask.id].content
    assert videos(world) == calls


async def test_an_unusable_price_holds_the_ceiling_against_the_budget(world: World) -> None:
    await world.answer(
        await world.command("config", {"dollars": "off"}, admin=True, subcommand="confirm-above")
    )
    # $2 a day: a 6 s video holds VIDEO_HOLD_CEILING_CENTS_PER_5S (200) x 6 / 5 = 240 c.
    await world.answer(
        await world.command("config", {"daily_per_user": "2"}, admin=True, subcommand="budget")
    )
    buyer = world.discord.add_user("buyer")  # nothing spent today
    calls = videos(world)
    refused = await world.answer(
        await world.command(
            "video", {"prompt": "a storm", "model": UNPRICED, "duration": 6}, user_id=buyer.id
        )
    )
    assert refused.ephemeral and "$2.40" in refused.content
    assert videos(world) == calls


def spent_cents(world: World, user_id: int) -> Decimal:
    with sqlite3.connect(world.bot.env["DATABASE_PATH"]) as conn:
        (micro,) = conn.execute(
            "SELECT COALESCE(SUM(cost_micro), 0) FROM ledger WHERE user_id = ?", (user_id,)
        ).fetchone()
    return Decimal(int(micro)) / 1_000_000


async def test_five_concurrent_long_answers_never_overrun_a_small_allowance(world: World) -> None:
    # The service prices answer tokens 50 times prompt tokens (1 c and 50 c per 1,000).
    model = sandbox_catalogue.TEXT_MODELS[0].id
    world.api.price_completion(model, 50)
    reader = world.discord.add_user("reader")
    await world.answer(
        await world.command("config", {"daily_per_user": "off"}, admin=True, subcommand="budget")
    )
    # What the bot has seen: a 1,000-token answer to a short prompt (51 c), and a long prompt
    # with a 1-token answer (2 c).
    world.api.set_next_text("a" * 4000)
    await world.answer(
        await world.command("text", {"prompt": "hi", "max_tokens": 1000}, user_id=reader.id)
    )
    await world.answer(
        await world.command("text", {"prompt": "p" * 4000, "max_tokens": 1}, user_id=reader.id)
    )
    assert spent_cents(world, reader.id) == 2 + 51
    await world.answer(
        await world.command("config", {"daily_per_user": "2"}, admin=True, subcommand="budget")
    )
    # Five at once (each answer held back 2 s, so all are in flight together), each a
    # 1,000-token answer charged 51 c, against the 147 c left of $2.
    world.api.inject_fault("slow", count=5, delay=2.0)
    handles = [
        await world.command("text", {"prompt": "w" * 4000, "max_tokens": 1000}, user_id=reader.id)
        for _ in range(5)
    ]
    answers = [await world.answer(handle, timeout=60) for handle in handles]
    refused = [a for a in answers if "daily allowance" in a.text]
    assert 1 <= len(answers) - len(refused) <= 2
    assert spent_cents(world, reader.id) <= 200
    world.api.price_completion(model, None)
