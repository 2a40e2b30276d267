"""Delivering finished jobs through Discord's failures: a paid result always reaches its requester.

Each scenario makes Discord refuse something the way it does in production (a deleted
placeholder, a channel the bot lost, a 503, a 413, a slow placeholder post) and checks what the
requester ends up seeing: the result, once, with the file attached when it fits.
"""

import asyncio
import sqlite3

import pytest

from tests.support.discord_emulator.errors import DiscordAPIError
from tests.support.discord_emulator.models import Message
from tests.support.e2e.harness import MEMBER_PERMISSIONS, World, action_buttons, result_url
from tests.support.e2e.videos import submit_video, video_model

pytestmark = pytest.mark.asyncio(loop_scope="module")


def file_name(message: Message) -> str:
    """The provider's file name of the video linked in ``message`` (``<task_id>.mp4``)."""
    return result_url(message).rsplit("/", 1)[1]


def delivery_route(world: World, prompt: str) -> str:
    with sqlite3.connect(world.bot.env["DATABASE_PATH"]) as db:
        row = db.execute(
            "SELECT delivery_route FROM jobs WHERE prompt_summary = ?", (prompt,)
        ).fetchone()
    return str(row[0])


async def test_a_finished_video_is_attached_under_the_providers_file_name(world: World) -> None:
    world.api.set_task_duration(lambda model, body: 3.0)
    _, placeholder = await submit_video(world, "a heron taking off")
    done = await world.discord.wait_for_edit(
        placeholder.id, lambda m: "/files/" in m.text, timeout=40
    )
    (attachment,) = done.attachments
    assert attachment.filename == file_name(done)
    assert attachment.data[4:8] == b"ftyp"
    assert "Attached as" in done.text


async def test_a_transient_discord_failure_is_retried_and_shown_once(world: World) -> None:
    world.api.set_task_duration(lambda model, body: 3.0)
    _, placeholder = await submit_video(world, "a tram in the rain")
    unavailable = DiscordAPIError(503, 0, "503: Service Unavailable")
    world.discord.inject_error(f"/messages/{placeholder.id}", unavailable, method="PATCH")
    done = await world.discord.wait_for_edit(
        placeholder.id, lambda m: "/files/" in m.text, timeout=90
    )
    finals = [v for v in done.history if "/files/" in v["text"]]
    assert len(finals) == 1
    reply = await world.discord.wait_for_message(
        lambda m: str((m.message_reference or {}).get("message_id")) == str(placeholder.id),
        include_existing=True,
    )
    assert reply.pinged_user_ids() == {world.member.id}
    failed = [
        r
        for r in world.discord.requests
        if r.method == "PATCH" and str(placeholder.id) in r.path and r.status == 503
    ]
    assert len(failed) == 1  # then a backoff, not a storm


async def test_a_deleted_placeholder_gets_the_result_as_a_new_message(world: World) -> None:
    world.api.set_task_duration(lambda model, body: 4.0)
    _, placeholder = await submit_video(world, "a lantern on a lake")
    world.discord.delete_message(world.channel.id, placeholder.id)
    result = await world.discord.wait_for_message(
        lambda m: m.channel_id == world.channel.id and "/files/" in m.text, timeout=40
    )
    assert result.pinged_user_ids() == {world.member.id}
    assert [a.filename for a in result.attachments] == [file_name(result)]
    assert "lantern" in result.text
    assert delivery_route(world, "a lantern on a lake") == "channel"


async def test_a_channel_the_bot_lost_gets_the_result_by_direct_message(world: World) -> None:
    world.api.set_task_duration(lambda model, body: 4.0)
    lost = world.discord.add_channel(world.guild.id, "soon-hidden")
    model = video_model(world)
    handle = await world.command(
        "video",
        {"prompt": "a glacier calving", "model": model["id"], "duration": model["durations"][0]},
        channel_id=lost.id,
        permissions=MEMBER_PERMISSIONS,
    )
    await world.answer(handle)
    await world.discord.wait_for_message(
        lambda m: m.channel_id == lost.id and "glacier" in m.text, include_existing=True
    )
    world.discord.revoke_channel_access(lost.id)  # edits and posts there now get 403 50001
    dm = await world.discord.wait_for_message(
        lambda m: m.channel_id in world.discord.world.dm_recipients and "/files/" in m.text,
        timeout=40,
    )
    assert world.discord.world.dm_recipients[dm.channel_id] == world.member.id
    assert "glacier" in dm.text
    assert f"<#{lost.id}>" in dm.text
    assert delivery_route(world, "a glacier calving") == "dm"
    # A click in a DM has no server to check or charge: the card keeps only Delete.
    assert [b["label"] for b in action_buttons(dm)] == ["Delete"]


async def test_a_video_over_the_upload_limit_is_linked_with_the_reason(world: World) -> None:
    world.api.set_task_duration(lambda model, body: 3.0)
    world.api.set_file_size(11 * 1024 * 1024)  # over the 10 MiB of a guild without boosts
    try:
        _, placeholder = await submit_video(world, "a storm over the plains")
        done = await world.discord.wait_for_edit(
            placeholder.id, lambda m: "/files/" in m.text, timeout=40
        )
    finally:
        world.api.set_file_size(None)
    assert done.attachments == []
    assert "upload limit (10 MB)" in done.text


async def test_discord_refusing_the_file_as_too_large_falls_back_to_the_link(
    world: World,
) -> None:
    world.api.set_task_duration(lambda model, body: 3.0)
    _, placeholder = await submit_video(world, "a bridge in fog")
    too_large = DiscordAPIError(413, 40005, "Request entity too large")
    world.discord.inject_error(f"/messages/{placeholder.id}", too_large, method="PATCH")
    done = await world.discord.wait_for_edit(
        placeholder.id, lambda m: "/files/" in m.text, timeout=40
    )
    assert done.attachments == []
    assert "too large" in done.text


async def test_an_instant_job_ends_in_its_placeholder_even_if_posting_it_was_slow(
    world: World,
) -> None:
    world.api.set_task_duration(lambda model, body: 0.0)
    quiet = world.discord.add_channel(world.guild.id, "instant")  # no other traffic there
    # The placeholder's post waits out a 429 (longer than a first poll waits, 10 s) while the
    # service has already finished the job.
    world.discord.inject_rate_limit(f"/channels/{quiet.id}/messages", retry_after=14.0)
    prompt = "a paper boat racing"
    model = video_model(world)
    handle = await world.command(
        "video",
        {"prompt": prompt, "model": model["id"], "duration": model["durations"][0]},
        channel_id=quiet.id,
        permissions=MEMBER_PERMISSIONS,
    )
    await world.answer(handle, timeout=30)
    placeholder = await world.discord.wait_for_message(
        lambda m: m.channel_id == quiet.id and prompt in m.text, include_existing=True
    )
    done = await world.discord.wait_for_edit(
        placeholder.id, lambda m: "/files/" in m.text, timeout=40
    )
    assert done.id == placeholder.id
    shown = [m for m in world.discord.channel_messages(quiet.id) if prompt in m.text]
    assert [m.id for m in shown] == [placeholder.id]


def replies_to(world: World, message: Message) -> list[Message]:
    return [
        m
        for m in world.discord.world.messages.values()
        if str((m.message_reference or {}).get("message_id")) == str(message.id)
    ]


async def test_a_card_refusing_a_new_file_by_an_edit_gets_it_in_the_reply(world: World) -> None:
    world.api.set_task_duration(lambda model, body: 3.0)
    world.discord.refuse_v2_edit_attachments()  # Discord's known limit on V2 edits
    try:
        _, placeholder = await submit_video(world, "a kite over dunes")
        done = await world.discord.wait_for_edit(
            placeholder.id, lambda m: "/files/" in m.text, timeout=40
        )
        reply = await world.discord.wait_for_message(
            lambda m: m in replies_to(world, placeholder), include_existing=True
        )
    finally:
        world.discord.refuse_v2_edit_attachments(False)
    assert done.is_v2 and done.attachments == []
    assert done.media_urls == [result_url(done)]  # the card shows the service's URL
    assert "reply" in done.text
    assert [a.filename for a in reply.attachments] == [file_name(done)]
    assert reply.attachments[0].data[4:8] == b"ftyp"
    assert reply.pinged_user_ids() == {world.member.id}
    assert len([v for v in done.history if "/files/" in v["text"]]) == 1
    assert replies_to(world, placeholder) == [reply]


async def test_a_placeholder_posted_in_the_old_form_is_still_edited_into_the_result(
    world: World,
) -> None:
    world.api.set_task_duration(lambda model, body: 3.0)
    refused = DiscordAPIError(400, 50035, "Invalid Form Body")
    world.discord.inject_error(f"/channels/{world.channel.id}/messages", refused, method="POST")
    _, placeholder = await submit_video(world, "a fox in old form")
    assert not placeholder.is_v2 and "a fox in old form" in str(placeholder.embeds)
    done = await world.discord.wait_for_edit(
        placeholder.id, lambda m: "/files/" in m.text, timeout=40
    )
    # Discord lets an edit set IS_COMPONENTS_V2 (never remove it): the result is a card.
    assert done.is_v2 and not done.content and not done.embeds
    (attachment,) = done.attachments
    assert attachment.filename == file_name(done)
    assert done.media_urls == [f"attachment://{attachment.filename}"]
    reply = await world.discord.wait_for_message(
        lambda m: m in replies_to(world, placeholder), include_existing=True
    )
    assert reply.pinged_user_ids() == {world.member.id}


async def test_an_old_placeholder_refusing_the_card_keeps_the_old_form(world: World) -> None:
    world.api.set_task_duration(lambda model, body: 3.0)
    refused = DiscordAPIError(400, 50035, "Invalid Form Body")
    world.discord.inject_error(f"/channels/{world.channel.id}/messages", refused, method="POST")
    _, placeholder = await submit_video(world, "a crane in old form")
    assert not placeholder.is_v2
    # The card is refused twice (with the file, then without): the result comes in embeds.
    world.discord.inject_error(f"/messages/{placeholder.id}", refused, method="PATCH", count=2)
    done = await world.discord.wait_for_edit(
        placeholder.id, lambda m: "/files/" in m.text, timeout=40
    )
    assert not done.is_v2 and "a crane in old form" in str(done.embeds)
    assert "/files/" in done.content  # Discord's player for a video link
    (attachment,) = done.attachments
    assert attachment.filename == file_name(done)
    assert delivery_route(world, "a crane in old form") == "placeholder"
    reply = await world.discord.wait_for_message(
        lambda m: m in replies_to(world, placeholder), include_existing=True
    )
    assert reply.pinged_user_ids() == {world.member.id}


async def wait_delivered(world: World, prompt: str, timeout: float = 90) -> str:
    """Wait until the job of ``prompt`` is recorded as delivered; return its route."""

    def delivered() -> str | None:
        with sqlite3.connect(world.bot.env["DATABASE_PATH"]) as db:
            row = db.execute(
                "SELECT delivery_route, announced_at FROM jobs WHERE prompt_summary = ?", (prompt,)
            ).fetchone()
        return str(row[0]) if row is not None and row[1] is not None else None

    deadline = asyncio.get_running_loop().time() + timeout
    while (route := delivered()) is None:
        assert asyncio.get_running_loop().time() < deadline, f"{prompt!r} never delivered"
        await asyncio.sleep(0.2)
    return route


async def video_in(world: World, channel_id: int, prompt: str, guild_id: int | None = None) -> None:
    """``/video`` in another channel (of another guild, if given), up to its placeholder."""
    model = video_model(world)
    handle = await world.discord.invoke(
        "video",
        {"prompt": prompt, "model": model["id"], "duration": model["durations"][0]},
        guild_id=guild_id or world.guild.id,
        channel_id=channel_id,
        user_id=world.member.id,
        permissions=MEMBER_PERMISSIONS,
    )
    await world.answer(handle)
    await world.discord.wait_for_message(
        lambda m: m.channel_id == channel_id and prompt in m.text, include_existing=True
    )


async def test_a_channel_post_retried_after_a_lost_answer_is_shown_once(world: World) -> None:
    """Discord posted the result but answered 503: the retry must not post it again."""
    world.api.set_task_duration(lambda model, body: 4.0)
    lossy = world.discord.add_channel(world.guild.id, "lossy")
    prompt = "a swallow over a weir"
    await video_in(world, lossy.id, prompt)
    (placeholder,) = [m for m in world.discord.channel_messages(lossy.id) if prompt in m.text]
    world.discord.delete_message(lossy.id, placeholder.id)  # the channel route posts anew
    unavailable = DiscordAPIError(503, 0, "503: Service Unavailable")
    world.discord.inject_error(
        f"/channels/{lossy.id}/messages", unavailable, method="POST", late=True
    )
    assert await wait_delivered(world, prompt) == "channel"
    shown = [m for m in world.discord.channel_messages(lossy.id) if "/files/" in m.text]
    assert len(shown) == 1
    assert shown[0].pinged_user_ids() == {world.member.id}
    posts = [r for r in world.discord.requests if r.method == "POST" and str(lossy.id) in r.path]
    assert len(posts) == 3  # the placeholder, the post answered 503, its retry


async def test_the_file_for_the_reply_survives_a_failed_reply(world: World) -> None:
    """A card refusing the file by an edit: the reply carrying it fails once, then comes."""
    world.api.set_task_duration(lambda model, body: 3.0)
    world.discord.refuse_v2_edit_attachments()
    try:
        _, placeholder = await submit_video(world, "a hare in the snow")
        unavailable = DiscordAPIError(503, 0, "503: Service Unavailable")
        world.discord.inject_error(
            f"/channels/{world.channel.id}/messages", unavailable, method="POST"
        )
        reply = await world.discord.wait_for_message(
            lambda m: m in replies_to(world, placeholder) and bool(m.attachments),
            include_existing=True,
            timeout=90,
        )
    finally:
        world.discord.refuse_v2_edit_attachments(False)
    done = world.discord.messages[placeholder.id]
    assert [a.filename for a in reply.attachments] == [file_name(done)]
    assert reply.pinged_user_ids() == {world.member.id}
    assert replies_to(world, placeholder) == [reply]
    assert await wait_delivered(world, "a hare in the snow") == "placeholder"


async def test_a_server_that_removed_the_bot_gets_its_results_by_dm_without_failed_requests(
    world: World,
) -> None:
    world.api.set_task_duration(lambda model, body: 4.0)
    leaving = world.discord.add_guild("Leaving Guild", owner_id=world.admin.id)
    channel = world.discord.add_channel(leaving.id, "generate")
    prompt = "a lighthouse at dusk"
    await video_in(world, channel.id, prompt, guild_id=leaving.id)
    world.discord.remove_bot(leaving.id)  # GUILD_DELETE; its routes answer 403 50001
    dm = await world.discord.wait_for_message(
        lambda m: m.channel_id in world.discord.world.dm_recipients and prompt in m.text,
        timeout=40,
        include_existing=True,
    )
    assert "/files/" in dm.text and dm.attachments
    assert world.discord.world.dm_recipients[dm.channel_id] == world.member.id
    assert await wait_delivered(world, prompt) == "dm"
    ids = (str(leaving.id), *(str(c) for c in leaving.channels))
    failed = [
        r for r in world.discord.requests if r.status >= 400 and any(i in r.path for i in ids)
    ]
    assert len(failed) <= 1, [(r.method, r.path, r.status) for r in failed]
