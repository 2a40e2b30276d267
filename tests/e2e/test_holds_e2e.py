"""Holds that bound spending, with the real bot process: a video whose catalogue price
is unusable (NaN) is not free: it asks to confirm where the server set a threshold, and holds the
configured ceiling against budgets.

The API emulator runs in the test process: its catalogue is patched before the bot starts, so
the bot's first catalogue already carries the NaN price.
"""

from __future__ import annotations

import copy
from collections.abc import AsyncIterator, Iterator
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
