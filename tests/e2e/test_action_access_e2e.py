"""Buttons, forms and conversation turns held to what Discord holds commands to, and answered
before any REST call; re-shows of a result that cannot crowd out anything.

The real bot process against the Discord emulator. Discord refuses a slash command to a
timed-out member and where the member lacks Use Application Commands, but lets their clicks,
form submissions and messages through: the bot refuses those the same way, with one short
ephemeral sentence, and charges nothing. A click is acknowledged within Discord's 3 seconds
before the bot asks Discord anything (the command permissions a button is checked against are
read ahead, at ``GUILD_CREATE``). Show result and ``/jobs show`` do not download a result again
for every click.
"""

import sqlite3

import pytest

from tests.support.discord_emulator.errors import DiscordAPIError, InvocationError
from tests.support.discord_emulator.interactions import InteractionHandle
from tests.support.discord_emulator.models import Message
from tests.support.discord_emulator.permissions import USE_APPLICATION_COMMANDS
from tests.support.discord_emulator.recorder import RecordedRequest
from tests.support.e2e.harness import MEMBER_PERMISSIONS, World, action_buttons

pytestmark = pytest.mark.asyncio(loop_scope="module")

IMAGE_MODEL = "black-forest-labs/flux-schnell"
VIDEO_MODEL = "aurora-lite/text-to-video"


def spent(world: World) -> tuple[int, int]:
    """Ledger rows, and generation requests the service received."""
    with sqlite3.connect(world.bot.env["DATABASE_PATH"]) as db:
        (rows,) = db.execute("SELECT COUNT(*) FROM ledger").fetchone()
    calls = sum(world.posts_to(f"/{kind}/generate") for kind in ("text", "image", "video"))
    return int(rows), calls


def button(message: Message, label: str) -> str:
    """The custom id of the action button whose label starts with ``label``."""
    return next(b["custom_id"] for b in action_buttons(message) if b["label"].startswith(label))


async def click(world: World, message: Message, label: str, user_id: int) -> InteractionHandle:
    handle = await world.discord.press_button(
        message.id, button(message, label), user_id=user_id, permissions=MEMBER_PERMISSIONS
    )
    world.handles.append(handle)
    return handle


async def reply_to(world: World, thread_id: int, to: Message) -> Message:
    """The bot's reply to a member's message in a thread."""
    return await world.discord.wait_for_message(
        lambda m: (
            m.channel_id == thread_id
            and (m.message_reference or {}).get("message_id") == str(to.id)
        ),
        timeout=20,
    )


async def test_a_click_a_form_and_a_turn_in_a_channel_denying_application_commands(
    world: World,
) -> None:
    channel = world.discord.add_channel(world.guild.id, "no-apps")
    member = world.member.id
    text = await world.answer(
        await world.command("text", {"prompt": "a calm sea"}, channel_id=channel.id)
    )
    image = await world.answer(
        await world.command(
            "image", {"prompt": "a lighthouse", "model": IMAGE_MODEL}, channel_id=channel.id
        )
    )
    form = await click(world, image, "Edit", member)
    await form.wait_callback()
    assert form.modal is not None
    chat = await world.answer(
        await world.command("chat", {"prompt": "Tell me about tides"}, channel_id=channel.id)
    )
    thread = await world.discord.signal.wait_for(
        lambda: world.discord.world.channels.get(chat.id), 15, "the conversation's thread"
    )

    # An admin denies @everyone Use Application Commands in the channel.
    world.discord.set_channel_overwrite(channel.id, world.guild.id, deny=USE_APPLICATION_COMMANDS)
    with pytest.raises(InvocationError, match="may not use application commands"):
        await world.command("text", {"prompt": "again"}, channel_id=channel.id)
    before = spent(world)

    refused = await world.answer(await click(world, text, "Again", member))
    assert refused.ephemeral
    assert "Use Application Commands" in refused.content

    prompt_id = form.modal["components"][0]["components"][0]["custom_id"]
    submitted = await world.discord.submit_modal(form.modal["custom_id"], {prompt_id: "blue"})
    world.handles.append(submitted)
    refused = await world.answer(submitted)
    assert refused.ephemeral
    assert "Use Application Commands" in refused.content

    bot = world.discord.bot_user.id
    asked = world.discord.member_message(thread.id, member, f"<@{bot}> and the moon?")
    refused = await reply_to(world, thread.id, asked)
    assert "Use Application Commands" in refused.content

    assert spent(world) == before  # nothing reached the service, nothing was charged


async def test_a_timed_out_member_cannot_click_until_the_timeout_ends(world: World) -> None:
    restless = world.discord.add_user("restless")
    text = await world.answer(
        await world.command("text", {"prompt": "a short poem"}, user_id=restless.id)
    )
    world.discord.time_out(world.guild.id, restless.id, 600)
    with pytest.raises(InvocationError, match="timed-out"):
        await world.command("text", {"prompt": "another"}, user_id=restless.id)
    before = spent(world)
    refused = await world.answer(await click(world, text, "Again", restless.id))
    assert refused.ephemeral
    assert "timed out" in refused.content
    assert spent(world) == before

    world.discord.time_out(world.guild.id, restless.id, None)  # a moderator lifts it
    again = await world.answer(await click(world, text, "Again", restless.id))
    assert "timed out" not in again.content
    assert spent(world)[0] == before[0] + 1


def before_ack(world: World, handle: InteractionHandle, since: int) -> list[RecordedRequest]:
    """The bot's REST calls after ``since`` that came before ``handle``'s acknowledgement."""
    calls = world.discord.requests[since:]
    ack = next(i for i, r in enumerate(calls) if r.path.startswith(f"/interactions/{handle.id}/"))
    return calls[:ack]


def permission_reads(world: World, guild_id: int) -> list[RecordedRequest]:
    return [
        r
        for r in world.discord.requests
        if r.method == "GET" and r.path.endswith(f"/guilds/{guild_id}/commands/permissions")
    ]


async def new_guild(world: World, name: str) -> tuple[int, int]:
    """A server that adds the bot now (GUILD_CREATE); its guild and channel ids."""
    guild = world.discord.add_guild(name, owner_id=world.admin.id)
    channel = world.discord.add_channel(guild.id, "generate")
    return guild.id, channel.id


async def first_click(world: World, guild_id: int, channel_id: int) -> InteractionHandle:
    """A /text answer in a new server, then the first click on a button there."""
    asked = await world.discord.invoke(
        "text",
        {"prompt": "hello there"},
        guild_id=guild_id,
        channel_id=channel_id,
        user_id=world.member.id,
        permissions=MEMBER_PERMISSIONS,
    )
    world.handles.append(asked)
    text = await world.answer(asked)
    since = len(world.discord.requests)
    handle = await click(world, text, "Again", world.member.id)
    answer = await world.answer(handle)
    assert not answer.ephemeral, answer.content  # the request ran again, publicly
    assert before_ack(world, handle, since) == []
    return handle


async def test_a_click_is_acknowledged_before_the_bot_asks_discord_anything(
    world: World,
) -> None:
    guild_id, channel_id = await new_guild(world, "Second server")
    before = spent(world)
    handle = await first_click(world, guild_id, channel_id)
    assert spent(world)[0] == before[0] + 2  # the /text and its Again
    # The command permissions the click was checked against were read when the server came.
    [read] = permission_reads(world, guild_id)
    ack = next(
        r for r in world.discord.requests if r.path.startswith(f"/interactions/{handle.id}/")
    )
    assert world.discord.requests.index(read) < world.discord.requests.index(ack)

    # Where that read failed, the click is still acknowledged first, and reads them after.
    world.discord.inject_error(
        "/commands/permissions", DiscordAPIError(403, 50001, "Missing Access"), method="GET"
    )
    guild_id, channel_id = await new_guild(world, "Third server")
    await world.discord.signal.wait_for(
        lambda: permission_reads(world, guild_id) or None, 15, "the failed read ahead"
    )
    handle = await first_click(world, guild_id, channel_id)
    reads = permission_reads(world, guild_id)
    assert [r.status for r in reads] == [403, 200]
    ack = next(
        r for r in world.discord.requests if r.path.startswith(f"/interactions/{handle.id}/")
    )
    assert world.discord.requests.index(ack) < world.discord.requests.index(reads[-1])


def downloads(world: World, url: str) -> int:
    """GETs of one result file from the service."""
    path = url.split("://", 1)[1].split("/", 1)[1]
    return sum(1 for r in world.api.requests if r.method == "GET" and path in r.path)


async def jobs_show(world: World, job_id: int, *, admin: bool = False) -> InteractionHandle:
    return await world.command("jobs", {"show": job_id}, admin=admin)


async def test_re_shows_are_debounced_and_reuse_the_file_fetched(world: World) -> None:
    await world.answer(await world.command("video", {"prompt": "a heron", "model": VIDEO_MODEL}))
    card = await world.discord.wait_for_message(
        lambda m: "a heron" in m.text, include_existing=True
    )
    done = await world.discord.wait_for_edit(card.id, lambda m: "/files/" in m.text, 40)
    job_id = int(button(done, "Again").rsplit(":j", 1)[1])
    url = next(u for u in done.urls if "/files/" in u)
    fetched = downloads(world, url)

    shown = await world.answer(await jobs_show(world, job_id))
    assert shown.attachments, shown.text
    assert downloads(world, url) == fetched + 1
    # The same member again at once: told it was just shown; nothing fetched.
    repeat = await world.answer(await jobs_show(world, job_id))
    assert repeat.ephemeral and "a moment ago" in repeat.content
    # Another member (an admin sees the server's jobs) within a minute: the same file, reused.
    other = await world.answer(await jobs_show(world, job_id, admin=True))
    assert other.attachments
    assert downloads(world, url) == fetched + 1
