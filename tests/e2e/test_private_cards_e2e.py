"""Private results for video cards with the real bot process (``/settings defaults``).

A member with private results on asks for a video in a server: its card (placeholder, progress,
the finished result with its files and buttons) lives in the member's DM, never in the
channel; the command's answer, ephemeral, says so. The card's buttons work there as in the
channel, charged to the server the job came from. A member whose DMs are closed (Discord:
50007) still gets the result: on the ephemeral response while its token lives, else in the
channel, saying why. In a personal context the card is the response itself, ephemeral.
"""

from __future__ import annotations

import sqlite3
from typing import Any

import pytest

from bot.services.keys import fingerprint
from tests.support.discord_emulator.models import Message, User
from tests.support.e2e.harness import MEMBER_PERMISSIONS, World, action_buttons, result_url
from tests.support.e2e.personal import delivery, elsewhere, job_of, ledger

pytestmark = pytest.mark.asyncio(loop_scope="module")

MODEL = "flash-clip/text-to-video"


async def private_member(world: World, name: str) -> User:
    """A new member of the world's server with private results on."""
    user = world.discord.add_user(name)
    saved = await world.answer(
        await world.command("settings", {"private": True}, subcommand="defaults", user_id=user.id)
    )
    assert saved.ephemeral and "Saved" in saved.content
    return user


def in_dm(world: World, user: User) -> list[Message]:
    """The messages of the bot's DM channel with ``user``."""
    return world.discord.channel_messages(world.discord.dm_channel(user.id).id)


def public(world: World, words: str) -> list[Message]:
    """Messages everyone in the world's channel sees that mention ``words``."""
    return [
        m
        for m in world.discord.channel_messages(world.channel.id)
        if not m.ephemeral and words in m.text
    ]


async def finished(world: World, message_id: int, timeout: float = 40) -> Message:
    """The card ``message_id`` once it shows its result (the service's file link)."""

    def check() -> Message | None:
        message = world.discord.messages[message_id]
        return message if any("/files/" in url for url in message.urls) else None

    return await world.discord.signal.wait_for(check, timeout, "the card to show its result")


async def video(world: World, prompt: str, user: User, **kw: Any) -> Message:
    handle = await world.command("video", {"prompt": prompt, "model": MODEL}, user_id=user.id, **kw)
    return await world.answer(handle)


async def test_a_private_video_card_lives_in_the_members_dm(world: World) -> None:
    user = await private_member(world, "private-person")
    answer = await video(world, "a secret garden", user)
    assert answer.ephemeral
    assert "DM" in answer.text

    card = await world.discord.wait_for_message(
        lambda m: (
            m.channel_id == world.discord.dm_channel(user.id).id and "secret garden" in m.text
        ),
        include_existing=True,
        timeout=15,
    )
    done = await finished(world, card.id)
    assert done.attachments  # the file, as on a channel card
    assert {b["custom_id"].split(":")[1] for b in action_buttons(done)} >= {"again", "delete"}
    # The completion ping goes to the DM too, and nothing reaches the channel.
    await world.discord.wait_for_message(
        lambda m: m.channel_id == card.channel_id and m.id != card.id and "ready" in m.text,
        include_existing=True,
        timeout=15,
    )
    assert public(world, "secret garden") == []


async def test_jobs_links_a_private_result_to_its_card_in_the_dm(world: World) -> None:
    """``/jobs``'s Message link of a private result opens its card in the member's DM."""
    user = await private_member(world, "private-lister")
    await video(world, "a paper boat", user)
    dm = world.discord.dm_channel(user.id)
    card = await world.discord.wait_for_message(
        lambda m: m.channel_id == dm.id and "paper boat" in m.text,
        include_existing=True,
        timeout=15,
    )
    await finished(world, card.id)
    listed = await world.answer(await world.command("jobs", {}, user_id=user.id))
    assert listed.ephemeral
    assert f"[Message](https://discord.com/channels/@me/{dm.id}/{card.id})" in listed.text
    assert f"/{world.guild.id}/{world.channel.id}/{card.id}" not in listed.text


async def test_a_private_asynchronous_image_card_lives_in_the_dm_too(world: World) -> None:
    user = await private_member(world, "private-painter")
    handle = await world.command(
        "image", {"prompt": "a private owl", "model": "ideogram/ideogram-v2"}, user_id=user.id
    )
    world.handles.append(handle)
    answer = await world.answer(handle)
    assert answer.ephemeral and "DM" in answer.text, answer.text
    card = await world.discord.wait_for_message(
        lambda m: m.channel_id == world.discord.dm_channel(user.id).id and "private owl" in m.text,
        include_existing=True,
        timeout=15,
    )
    done = await finished(world, card.id)
    assert done.attachments
    assert public(world, "private owl") == []

    # Animate on the DM card: its form, submitted there, makes a video paid by the server.
    animate = next(b for b in action_buttons(done) if b["custom_id"].startswith("gb:animate:"))
    pressed = await world.discord.press_button(
        done.id, animate["custom_id"], user_id=user.id, permissions=MEMBER_PERMISSIONS
    )
    world.handles.append(pressed)
    await pressed.wait_callback()
    assert pressed.modal is not None, pressed.state.callbacks
    charges = len(list(ledger(world)))
    submitted = await world.discord.submit_modal(pressed.modal["custom_id"], {}, user_id=user.id)
    world.handles.append(submitted)
    answer = await world.answer(submitted)
    assert answer.ephemeral and "DM" in answer.text, answer.text
    (charge,) = list(ledger(world))[charges:]
    assert charge == (world.guild.id, user.id, fingerprint(world.key))


async def test_the_dm_cards_buttons_work_and_charge_the_server(world: World) -> None:
    user = world.discord.add_user("private-clicker")
    await world.answer(
        await world.command("settings", {"private": True}, subcommand="defaults", user_id=user.id)
    )
    await video(world, "a quiet harbour", user)
    card = await world.discord.wait_for_message(
        lambda m: (
            m.channel_id == world.discord.dm_channel(user.id).id and "quiet harbour" in m.text
        ),
        include_existing=True,
        timeout=15,
    )
    done = await finished(world, card.id)
    again = next(b for b in action_buttons(done) if b["custom_id"].startswith("gb:again:"))
    charges = len(list(ledger(world)))
    posts = world.posts_to("/video/generate")

    clicked = await world.discord.press_button(
        done.id, again["custom_id"], user_id=user.id, permissions=MEMBER_PERMISSIONS
    )
    world.handles.append(clicked)
    answer = await world.answer(clicked)
    assert answer.ephemeral, answer.text
    assert "DM" in answer.text, answer.text
    assert world.posts_to("/video/generate") == posts + 1
    (charge,) = list(ledger(world))[charges:]
    # The server's key and the server's ledger, as a click in its channel.
    assert charge == (world.guild.id, user.id, fingerprint(world.key))
    second = await world.discord.wait_for_message(
        lambda m: m.channel_id == card.channel_id and m.id != card.id and "quiet harbour" in m.text,
        include_existing=True,
        timeout=15,
    )
    await finished(world, second.id)
    assert public(world, "quiet harbour") == []

    # Delete works on the DM card as on a channel card.
    delete = next(b for b in action_buttons(done) if b["custom_id"].startswith("gb:delete:"))
    removed = await world.discord.press_button(
        done.id, delete["custom_id"], user_id=user.id, permissions=MEMBER_PERMISSIONS
    )
    world.handles.append(removed)
    await removed.wait_followup(lambda m: "Deleted" in m.text, timeout=15)
    assert world.discord.messages[done.id].deleted


async def test_a_result_resent_by_dm_keeps_the_cards_working_buttons(world: World) -> None:
    """A DM card that can no longer be edited (Discord: 10008 Unknown Message) gets its result
    as a new DM; its Again is the server's, as on the card."""
    user = await private_member(world, "private-resent")
    dm = world.discord.dm_channel(user.id)
    world.api.set_task_duration(lambda model, body: 10.0)
    try:
        await video(world, "a copper kettle", user)
        card = await world.discord.wait_for_message(
            lambda m: m.channel_id == dm.id and "copper kettle" in m.text,
            include_existing=True,
            timeout=15,
        )
        world.discord.delete_message(dm.id, card.id)
        resent = await world.discord.wait_for_message(
            lambda m: (
                m.channel_id == dm.id and m.id != card.id and any("/files/" in u for u in m.urls)
            ),
            include_existing=True,
            timeout=60,
        )
    finally:
        world.api.set_task_duration(lambda model, body: 4.0)
    assert "copper kettle" in resent.text
    kept = {b["custom_id"].split(":")[1] for b in action_buttons(resent)}
    # Its owner may share it (and enhance its prompt).
    assert kept == {"again", "continue", "remix", "share", "enhance", "delete"}, kept
    again = next(b for b in action_buttons(resent) if b["custom_id"].startswith("gb:again:"))
    charges, posts = len(list(ledger(world))), world.posts_to("/video/generate")
    clicked = await world.discord.press_button(
        resent.id, again["custom_id"], user_id=user.id, permissions=MEMBER_PERMISSIONS
    )
    world.handles.append(clicked)
    answer = await world.answer(clicked)
    assert answer.ephemeral and "DM" in answer.text, answer.text
    assert world.posts_to("/video/generate") == posts + 1
    (charge,) = list(ledger(world))[charges:]
    assert charge == (world.guild.id, user.id, fingerprint(world.key))
    assert public(world, "copper kettle") == []


async def test_the_servers_policy_still_holds_on_the_dm_card(world: World) -> None:
    user = await private_member(world, "private-barred")
    await video(world, "a locked gate", user)
    card = await world.discord.wait_for_message(
        lambda m: m.channel_id == world.discord.dm_channel(user.id).id and "locked gate" in m.text,
        include_existing=True,
        timeout=15,
    )
    done = await finished(world, card.id)
    again = next(b for b in action_buttons(done) if b["custom_id"].startswith("gb:again:"))
    # The server bars this member from /video (Server Settings -> Integrations) afterwards.
    world.discord.set_command_permissions(world.guild.id, "video", [(user.id, 2, False)])
    try:
        charges, posts = len(list(ledger(world))), world.posts_to("/video/generate")
        clicked = await world.discord.press_button(
            done.id, again["custom_id"], user_id=user.id, permissions=MEMBER_PERMISSIONS
        )
        world.handles.append(clicked)
        refusal = await world.answer(clicked)
        assert refusal.ephemeral and "/video" in refusal.text and "Integrations" in refusal.text
        assert (len(list(ledger(world))), world.posts_to("/video/generate")) == (charges, posts)
    finally:
        world.discord.set_command_permissions(world.guild.id, "video", [])


async def test_closed_dms_the_result_reaches_the_member_on_the_response(world: World) -> None:
    user = await private_member(world, "closed-private")
    world.discord.world.closed_dms.add(user.id)
    handle = await world.command(
        "video", {"prompt": "a hidden waterfall", "model": MODEL}, user_id=user.id
    )
    world.handles.append(handle)
    answer = await world.answer(handle)
    assert answer.ephemeral
    # It says so, to the member only.
    note = await handle.wait_followup(lambda m: "DMs are closed" in m.text, timeout=15)
    assert note.ephemeral
    # The ephemeral response is the card while its token lives: edited into the result.
    assert "hidden waterfall" in answer.text
    done = await finished(world, answer.id)
    assert done.ephemeral and result_url(done)
    assert public(world, "hidden waterfall") == []
    assert in_dm(world, user) == []
    # Its card was an ephemeral response: /jobs has no message to link it to.
    listed = await world.answer(await world.command("jobs", {}, user_id=user.id))
    assert "hidden waterfall" in listed.text
    assert "[Message](" not in listed.text


async def test_closed_dms_and_an_expired_token_post_in_the_channel_saying_why(
    world: World,
) -> None:
    user = await private_member(world, "closed-late")
    world.discord.world.closed_dms.add(user.id)
    world.api.set_task_duration(lambda model, body: 10.0)
    try:
        handle = await world.command(
            "video", {"prompt": "a lost lantern", "model": MODEL}, user_id=user.id
        )
        answer = await world.answer(handle)
        assert answer.ephemeral
        # Discord's 15 minutes pass before the service finishes: the token dies (401 50027).
        world.discord_clock.advance(16 * 60)
        posted = await world.discord.wait_for_message(
            lambda m: (
                m.channel_id == world.channel.id and not m.ephemeral and "lost lantern" in m.text
            ),
            include_existing=True,
            timeout=60,
        )
    finally:
        world.api.set_task_duration(lambda model, body: 4.0)
    assert f"<@{user.id}>" in posted.text
    assert "privately" in posted.text  # it says why it is posted here
    assert result_url(posted)


async def test_a_private_personal_video_card_is_the_ephemeral_response(world: World) -> None:
    place = elsewhere(world)
    own = world.api.create_key(balance_cents=10_000)
    await place.set_key(world, own)
    where = {"guild_id": place.guild.id, "channel_id": place.channel.id}
    saved = await world.answer(
        await world.discord.invoke(
            "settings",
            {"private": True},
            user_id=place.user.id,
            permissions=MEMBER_PERMISSIONS,
            subcommand="defaults",
            **where,  # type: ignore[arg-type]
        )
    )
    assert "Saved" in saved.text
    handle = await world.discord.invoke(
        "video",
        {"prompt": "a private comet", "model": MODEL},
        user_id=place.user.id,
        permissions=MEMBER_PERMISSIONS,
        **where,  # type: ignore[arg-type]
    )
    world.handles.append(handle)
    card = await world.answer(handle)
    assert card.ephemeral, card.text
    job_id = job_of(card)
    done = await finished(world, card.id)
    assert done.ephemeral
    # The ping is a followup only the member sees. It follows the recorded delivery (the
    # notice is sent after the card's edit is stored), so wait for it rather than the record.
    ping = await handle.wait_followup(lambda m: f"<@{place.user.id}>" in m.text, timeout=30)
    assert ping.ephemeral
    assert all(m.ephemeral for m in handle.followups)
    assert delivery(world, job_id)[1] is not None
    with sqlite3.connect(world.bot.env["DATABASE_PATH"]) as db:
        (guild_id,) = db.execute("SELECT guild_id FROM jobs WHERE id = ?", (job_id,)).fetchone()
    assert guild_id == -place.user.id


async def test_a_dm_card_is_finished_there_by_a_restarted_bot(world: World) -> None:
    """Where the card is lives in the database: a bot killed mid-job still finishes it in the DM."""
    user = await private_member(world, "private-restart")
    world.api.set_task_duration(lambda model, body: 10.0)
    try:
        await video(world, "a night train", user)
        card = await world.discord.wait_for_message(
            lambda m: (
                m.channel_id == world.discord.dm_channel(user.id).id and "night train" in m.text
            ),
            include_existing=True,
            timeout=15,
        )

        def identifies() -> int:
            return sum(1 for event in world.discord.gateway_received if event.op == 2)

        identified = identifies()
        await world.bot.kill()
        assert "/files/" not in world.discord.messages[card.id].text  # not finished before
        await world.bot.start()
        await world.discord.signal.wait_for(
            lambda: identifies() > identified or None, 60, "a second IDENTIFY"
        )
        await world.discord.wait_ready(timeout=60)
        done = await finished(world, card.id, timeout=60)
    finally:
        world.api.set_task_duration(lambda model, body: 4.0)
    assert done.attachments
    assert public(world, "night train") == []


async def test_an_admins_jobs_show_keeps_a_private_result_private(world: World) -> None:
    """``/jobs show`` of someone else's job honours its owner's private results: the card
    is shown to the admin alone, never posted for the channel to see."""
    user = await private_member(world, "private-owner")
    await video(world, "a hidden lighthouse", user)
    card = await world.discord.wait_for_message(
        lambda m: (
            m.channel_id == world.discord.dm_channel(user.id).id and "hidden lighthouse" in m.text
        ),
        include_existing=True,
        timeout=15,
    )
    done = await finished(world, card.id)
    again = next(b for b in action_buttons(done) if b["custom_id"].startswith("gb:again:j"))
    job_id = int(again["custom_id"].removeprefix("gb:again:j"))

    shown = await world.answer(await world.command("jobs", {"show": job_id}, admin=True))
    assert "hidden lighthouse" in shown.text
    assert shown.ephemeral
    assert public(world, "hidden lighthouse") == []
