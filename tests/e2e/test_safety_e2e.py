"""Safety checking with the real bot: every result scored before it is shown, the policy applied.

The bot runs with ``SAFETY_MODEL`` set to the tiny red classifier
(``tests/support/safety_model.py``): a clip's score follows its frames' red, and the API
emulator makes a clip of the colour its prompt names (``color:red``). Below, between and
above the thresholds a result is shown, held, withheld; Approve shows the held one on its
card with the ping, also after a restart; Reject keeps it withheld; an age-restricted channel
gets a spoiler; a result that cannot be scored is held; three reports hide a shown result;
every charge is in the ledger once.
"""

from __future__ import annotations

import asyncio
import sqlite3
from collections.abc import AsyncIterator
from pathlib import Path

import pytest
import pytest_asyncio

from tests.support.discord_emulator.models import Channel, Message
from tests.support.e2e.harness import (
    ADMIN_PERMISSIONS,
    BOT_TOKEN,
    MEMBER_PERMISSIONS,
    World,
    close_world,
    open_world,
)
from tests.support.e2e.videos import video_model
from tests.support.safety_model import write_classifier

pytestmark = pytest.mark.asyncio(loop_scope="module")

BETWEEN = "#8c8080"
"""Red 140 of 255: the model scores it about 0.69, between review-above and block-above."""


@pytest_asyncio.fixture(loop_scope="module", scope="module")
async def world(tmp_path_factory: pytest.TempPathFactory) -> AsyncIterator[World]:
    folder = tmp_path_factory.mktemp("e2e")
    model = write_classifier(Path(folder) / "model")
    opened = await open_world(Path(folder), overrides={"SAFETY_MODEL": str(model)})
    opened.api.set_task_duration(lambda model, body: 3.0)
    yield opened
    await close_world(opened)
    assert opened.discord.unhandled == []
    assert opened.discord.server_errors == []
    log = opened.bot.log()
    assert opened.key not in log and BOT_TOKEN not in log
    assert "Traceback" not in log


@pytest_asyncio.fixture(loop_scope="module", scope="module")
async def review(world: World) -> Channel:
    """The review channel, set with ``/config safety``."""
    channel = world.discord.add_channel(world.guild.id, "review")
    answer = await world.answer(
        await world.command(
            "config", {"review-channel": channel.id}, admin=True, subcommand="safety"
        )
    )
    assert "Safety checking updated" in answer.content, answer.content
    return channel


async def order(world: World, prompt: str, channel: Channel | None = None) -> Message:
    """Order a video in ``channel``; return its card once it finished (shown or not)."""
    where = channel or world.channel
    model = video_model(world)
    handle = await world.command(
        "video",
        {"prompt": prompt, "model": model["id"], "duration": model["durations"][0]},
        channel_id=where.id,
    )
    await world.answer(handle)
    card = await world.discord.wait_for_message(
        lambda m: m.channel_id == where.id and prompt in m.text, include_existing=True
    )
    return await world.discord.wait_for_edit(
        card.id, lambda m: "done" in m.text or "held" in m.text or "withheld" in m.text, timeout=40
    )


def review_card(world: World, review: Channel, prompt: str) -> Message | None:
    found = [
        m
        for m in world.discord.world.messages.values()
        if m.channel_id == review.id and prompt in m.text and not m.deleted
    ]
    return found[-1] if found else None


async def wait_review(world: World, review: Channel, prompt: str) -> Message:
    return await world.discord.signal.wait_for(
        lambda: review_card(world, review, prompt), 20, f"the review card of {prompt!r}"
    )


def job_ref(card: Message, action: str) -> str:
    return next(
        str(c["custom_id"])
        for c in card.all_components
        if str(c.get("custom_id", "")).startswith(f"gb:{action}:")
    )


def identifies(world: World) -> int:
    return sum(1 for event in world.discord.gateway_received if event.op == 2)


def ledger_rows(world: World) -> dict[str, int]:
    with sqlite3.connect(world.bot.env["DATABASE_PATH"]) as db:
        rows = db.execute("SELECT task_id, COUNT(*) FROM ledger GROUP BY task_id").fetchall()
    return {str(task): int(count) for task, count in rows}


async def test_below_between_and_above_the_thresholds(world: World, review: Channel) -> None:
    shown, held, withheld = await asyncio.gather(
        order(world, "a blue lake color:blue"),
        order(world, f"a dusk sky color:{BETWEEN}"),
        order(world, "a red wall color:red"),
    )
    assert [a.filename.endswith(".mp4") for a in shown.attachments] == [True]
    assert any(c.get("custom_id", "").startswith("gb:report:") for c in shown.all_components)
    assert held.attachments == [] and "waiting for the server's moderators" in held.text
    assert "charge stays in the ledger" in held.text
    assert "/files/" not in held.text
    assert withheld.attachments == [] and "withheld" in withheld.text
    card = await wait_review(world, review, "a dusk sky")
    assert [a.filename.startswith("SPOILER_") for a in card.attachments] == [True]
    assert card.pinged_user_ids() == set()
    assert f"<@{world.member.id}>" in card.text
    await wait_review(world, review, "a red wall")


async def test_approve_shows_the_held_result_on_its_card_with_the_ping(
    world: World, review: Channel
) -> None:
    held = await order(world, f"an orange kite color:{BETWEEN}")
    card = await wait_review(world, review, "an orange kite")
    refused = await world.answer(
        await world.discord.press_button(
            card.id,
            job_ref(card, "approve"),
            user_id=world.member.id,
            permissions=MEMBER_PERMISSIONS,
        )
    )
    assert refused.ephemeral and "Manage Server" in refused.content
    await world.discord.press_button(
        card.id, job_ref(card, "approve"), user_id=world.admin.id, permissions=ADMIN_PERMISSIONS
    )
    shown = await world.discord.wait_for_edit(held.id, lambda m: bool(m.attachments), timeout=30)
    assert "/files/" in shown.text
    reply = await world.discord.wait_for_message(
        lambda m: str((m.message_reference or {}).get("message_id")) == str(held.id),
        include_existing=True,
        timeout=15,
    )
    assert reply.pinged_user_ids() == {world.member.id}


async def test_reject_keeps_it_withheld_and_tells_the_member(world: World, review: Channel) -> None:
    held = await order(world, f"a violet door color:{BETWEEN}")
    card = await wait_review(world, review, "a violet door")
    await world.discord.press_button(
        card.id, job_ref(card, "reject"), user_id=world.admin.id, permissions=ADMIN_PERMISSIONS
    )
    told = await world.discord.wait_for_message(
        lambda m: "rejected your video" in m.text, include_existing=True, timeout=15
    )
    assert told.pinged_user_ids() == {world.member.id}
    assert world.discord.world.messages[held.id].attachments == []
    assert "rejected" in world.discord.world.messages[held.id].text


async def test_an_age_restricted_channel_gets_a_spoiler(world: World, review: Channel) -> None:
    adult = world.discord.add_channel(world.guild.id, "after-dark", nsfw=True)
    await asyncio.sleep(0.5)  # the bot's cache learns the channel
    shown = await order(world, "a red lantern color:red", adult)
    assert [a.filename.startswith("SPOILER_") for a in shown.attachments] == [True]
    assert review_card(world, review, "a red lantern") is None


async def test_a_result_that_cannot_be_scored_is_held(world: World, review: Channel) -> None:
    world.api.set_file_size(12 * 1024 * 1024)  # above the upload limit: never downloaded
    try:
        held = await order(world, "a grey field color:blue")
    finally:
        world.api.set_file_size(None)
    assert held.attachments == [] and "waiting for the server's moderators" in held.text
    card = await wait_review(world, review, "a grey field")
    assert "failed" in card.text


async def test_three_reports_hide_a_shown_result(world: World, review: Channel) -> None:
    shown = await order(world, "a green hill color:green")
    report = job_ref(shown, "report")
    reporters = [world.discord.add_user(f"reporter{n}") for n in range(3)]
    for user in [reporters[0], reporters[0], reporters[1]]:
        await world.discord.select(
            shown.id, report, ["sexual"], user_id=user.id, permissions=MEMBER_PERMISSIONS
        )
    await asyncio.sleep(1)
    assert world.discord.world.messages[shown.id].attachments  # two members: still shown
    await world.discord.select(
        shown.id, report, ["other"], user_id=reporters[2].id, permissions=MEMBER_PERMISSIONS
    )
    hidden = await world.discord.wait_for_edit(shown.id, lambda m: not m.attachments, timeout=15)
    assert "withheld" in hidden.text
    card = await wait_review(world, review, "a green hill")
    assert "reported" in card.text


async def test_a_restart_between_hold_and_approve_loses_nothing(
    world: World, review: Channel
) -> None:
    held = await order(world, f"a copper bell color:{BETWEEN}")
    card = await wait_review(world, review, "a copper bell")
    identified = identifies(world)
    await world.bot.kill()
    await world.bot.start()
    await world.discord.signal.wait_for(
        lambda: True if identifies(world) > identified else None, 60, "a new IDENTIFY"
    )
    await world.discord.wait_ready(timeout=60)
    await asyncio.sleep(2)  # the new session's READY and guilds
    await world.discord.press_button(
        card.id, job_ref(card, "approve"), user_id=world.admin.id, permissions=ADMIN_PERMISSIONS
    )
    shown = await world.discord.wait_for_edit(held.id, lambda m: bool(m.attachments), timeout=30)
    assert "/files/" in shown.text


async def test_every_charge_is_in_the_ledger_once(world: World) -> None:
    charged = ledger_rows(world)
    tasks = [
        t for t, task in world.api.tasks.items() if "color:" in str(task.request.get("prompt"))
    ]
    assert tasks and all(charged.get(t) == 1 for t in tasks), charged
