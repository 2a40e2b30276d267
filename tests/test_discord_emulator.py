"""Proves the Discord emulator against a real, in-process discord.py bot."""

from __future__ import annotations

import asyncio
import io
import logging
from collections.abc import AsyncIterator
from typing import Any

import aiohttp
import discord
import pytest
import yarl
from discord import app_commands
from discord.ext import commands

from tests.support.discord_emulator import DiscordEmulator, Guild, InvocationError, User
from tests.support.discord_emulator import permissions as perms

TOKEN = "emulated.bot.token"


class FakeClock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


class FeedbackModal(discord.ui.Modal, title="Feedback"):
    comment: discord.ui.TextInput[Any] = discord.ui.TextInput(label="Comment", custom_id="comment")

    async def on_submit(self, interaction: discord.Interaction) -> None:
        await interaction.response.send_message(f"thanks: {self.comment.value}", ephemeral=True)


class ReportModal(discord.ui.Modal, title="Report"):
    """A required screenshot upload (a File Upload inside a Label)."""

    def __init__(self) -> None:
        super().__init__()
        self.shot: discord.ui.FileUpload[Any] = discord.ui.FileUpload(custom_id="shot")
        self.add_item(discord.ui.Label(text="Screenshot", component=self.shot))

    async def on_submit(self, interaction: discord.Interaction) -> None:
        (shot,) = self.shot.values
        data = await shot.read()
        await interaction.response.send_message(
            f"got {shot.filename} {shot.content_type} {len(data)}", ephemeral=True
        )


class PostView(discord.ui.View):
    def __init__(self) -> None:
        super().__init__(timeout=None)

    @discord.ui.button(label="Press me", custom_id="press")
    async def press(self, interaction: discord.Interaction, button: discord.ui.Button[Any]) -> None:
        await interaction.response.send_message(f"pressed by {interaction.user.id}")


class EmuBot(commands.Bot):
    def __init__(self) -> None:
        super().__init__(command_prefix="!", intents=discord.Intents.default())
        self.release = asyncio.Event()
        self.release.set()
        self.outcomes: asyncio.Queue[BaseException | None] = asyncio.Queue()
        self.add_commands()

    async def setup_hook(self) -> None:
        await self.tree.sync()

    def add_commands(self) -> None:
        @self.tree.command(description="Defer, then edit the original response")
        async def slow(interaction: discord.Interaction, count: int = 1) -> None:
            await interaction.response.defer(thinking=True)
            await self.release.wait()
            try:
                await interaction.edit_original_response(content=f"done {count}")
            except discord.HTTPException as exc:
                await self.outcomes.put(exc)
            else:
                await self.outcomes.put(None)

        @self.tree.command(description="Pick a fruit")
        async def pick(interaction: discord.Interaction, fruit: str) -> None:
            await interaction.response.send_message(f"picked {fruit}")

        @pick.autocomplete("fruit")
        async def fruit_choices(
            interaction: discord.Interaction, current: str
        ) -> list[app_commands.Choice[str]]:
            fruits = ["apple", "apricot", "banana"]
            return [app_commands.Choice(name=f, value=f) for f in fruits if f.startswith(current)]

        @self.tree.command(description="Leave feedback")
        async def feedback(interaction: discord.Interaction) -> None:
            await interaction.response.send_modal(FeedbackModal())

        @self.tree.command(description="Report with a screenshot")
        async def report(interaction: discord.Interaction) -> None:
            await interaction.response.send_modal(ReportModal())

        @self.tree.command(description="Post a message with a button")
        async def post(interaction: discord.Interaction) -> None:
            assert isinstance(interaction.channel, discord.TextChannel)
            await interaction.channel.send("Click below", view=PostView())
            await interaction.response.send_message("posted", ephemeral=True)

        @self.tree.command(description="Answer, then send followups")
        @app_commands.allowed_installs(guilds=True, users=True)
        @app_commands.allowed_contexts(guilds=True, dms=True, private_channels=True)
        async def many(interaction: discord.Interaction, count: int = 6) -> None:
            await interaction.response.send_message("first")
            for n in range(count):
                try:
                    await interaction.followup.send(f"followup {n}")
                except discord.HTTPException as exc:
                    await self.outcomes.put(exc)
                    return
            await self.outcomes.put(None)

        tools = app_commands.Group(name="tools", description="Tools")

        @tools.command(description="Echo text")
        async def echo(interaction: discord.Interaction, text: str, times: int = 1) -> None:
            await interaction.response.send_message(" ".join([text] * times))

        self.tree.add_command(tools)


@pytest.fixture
def clock() -> FakeClock:
    return FakeClock()


@pytest.fixture
async def emu(clock: FakeClock) -> AsyncIterator[DiscordEmulator]:
    async with DiscordEmulator(bot_token=TOKEN, token_lifetime=0.5, clock=clock) as emulator:
        yield emulator


@pytest.fixture
def guild(emu: DiscordEmulator) -> Guild:
    return emu.add_guild("Test Guild")


@pytest.fixture
def user(emu: DiscordEmulator) -> User:
    return emu.add_user("alice")


@pytest.fixture
async def bot(
    emu: DiscordEmulator,
    guild: Guild,
    monkeypatch: pytest.MonkeyPatch,
    caplog: pytest.LogCaptureFixture,
) -> AsyncIterator[EmuBot]:
    caplog.set_level(logging.INFO, logger="discord")
    monkeypatch.setattr(discord.http.Route, "BASE", emu.api_base_url)
    monkeypatch.setattr(
        discord.gateway.DiscordWebSocket, "DEFAULT_GATEWAY", yarl.URL(emu.gateway_url)
    )
    client = EmuBot()
    task = asyncio.create_task(client.start(TOKEN))
    await emu.wait_ready(timeout=10)
    await emu.wait_commands_synced(timeout=10)
    yield client
    await client.close()
    await asyncio.wait_for(task, 10)
    assert emu.unhandled == []
    assert emu.server_errors == []
    records = [r for phase in ("setup", "call") for r in caplog.get_records(phase)]
    problems = [
        r.getMessage()
        for r in [*records, *caplog.records]
        if r.name.startswith("discord") and r.levelno >= logging.ERROR
    ]
    assert problems == []


def where(guild: Guild, user: User) -> dict[str, int]:
    return {"guild_id": guild.id, "channel_id": guild.channel("general").id, "user_id": user.id}


def channel_of(bot: EmuBot, guild: Guild) -> discord.TextChannel:
    channel = bot.get_channel(guild.channel("general").id)
    assert isinstance(channel, discord.TextChannel)
    return channel


async def test_ready_guild_create_and_command_sync(
    emu: DiscordEmulator, bot: EmuBot, guild: Guild
) -> None:
    assert [e.t for e in emu.events if e.op == 0][:2] == ["READY", "GUILD_CREATE"]
    cached = bot.get_guild(guild.id)
    assert cached is not None
    assert cached.me is not None
    assert bot.user is not None
    assert bot.user.id == emu.bot_user.id
    commands_by_name = {c["name"]: c for c in emu.registered_commands()}
    assert set(commands_by_name) == {
        "slow",
        "pick",
        "feedback",
        "report",
        "post",
        "many",
        "tools",
    }
    count = commands_by_name["slow"]["options"][0]
    assert (count["name"], count["type"], count.get("required", False)) == ("count", 4, False)
    assert commands_by_name["pick"]["options"][0]["autocomplete"] is True
    assert commands_by_name["tools"]["options"][0]["type"] == 1


async def test_defer_then_edit_original(
    emu: DiscordEmulator, bot: EmuBot, guild: Guild, user: User
) -> None:
    handle = await emu.invoke("slow", {"count": 3}, **where(guild, user))
    callback = await handle.wait_callback()
    assert callback.type == 5
    assert callback.accepted
    assert callback.latency < 3
    original = await handle.wait_original()
    assert original.content == "done 3"
    assert not original.loading
    assert original.is_interaction_response
    assert original.edited_at is None
    assert await bot.outcomes.get() is None
    assert handle.payload["data"]["options"] == [{"name": "count", "type": 4, "value": 3}]


async def test_subcommand_and_autocomplete(
    emu: DiscordEmulator, bot: EmuBot, guild: Guild, user: User
) -> None:
    choices = await emu.autocomplete("pick", {"fruit": "ap"}, "fruit", **where(guild, user))
    assert [c["value"] for c in choices] == ["apple", "apricot"]
    handle = await emu.invoke(
        "tools", {"text": "hi", "times": 2}, subcommand="echo", **where(guild, user)
    )
    assert (await handle.wait_original()).content == "hi hi"


async def test_modal_round_trip(
    emu: DiscordEmulator, bot: EmuBot, guild: Guild, user: User
) -> None:
    handle = await emu.invoke("feedback", **where(guild, user))
    assert (await handle.wait_callback()).type == 9
    assert handle.modal is not None
    assert handle.modal["title"] == "Feedback"
    submitted = await emu.submit_modal(handle.modal["custom_id"], {"comment": "great"})
    reply = await submitted.wait_original()
    assert reply.content == "thanks: great"
    assert reply.ephemeral


async def test_modal_file_upload(
    emu: DiscordEmulator, bot: EmuBot, guild: Guild, user: User
) -> None:
    handle = await emu.invoke("report", **where(guild, user))
    await handle.wait_callback()
    assert handle.modal is not None
    upload = handle.modal["components"][0]["component"]
    assert (upload["type"], upload["custom_id"]) == (19, "shot")
    with pytest.raises(InvocationError, match="required"):
        await emu.submit_modal(handle.modal["custom_id"], {})

    handle = await emu.invoke("report", **where(guild, user))
    await handle.wait_callback()
    assert handle.modal is not None
    files = {"shot": [("bug.png", b"\x89PNG data", "image/png")]}
    submitted = await emu.submit_modal(handle.modal["custom_id"], files)
    reply = await submitted.wait_original()
    assert reply.content == "got bug.png image/png 9"  # the bytes as the emulator serves them
    (sent,) = submitted.payload["data"]["components"]
    (attachment_id,) = sent["component"]["values"]
    resolved = submitted.payload["data"]["resolved"]["attachments"]
    assert resolved[attachment_id]["filename"] == "bug.png"


async def test_button_press(emu: DiscordEmulator, bot: EmuBot, guild: Guild, user: User) -> None:
    handle = await emu.invoke("post", **where(guild, user))
    posted = await emu.wait_for_message(lambda m: m.content == "Click below", include_existing=True)
    assert (await handle.wait_original()).ephemeral
    pressed = await emu.press_button(posted.id, "press", user_id=user.id)
    reply = await pressed.wait_original()
    assert reply.content == f"pressed by {user.id}"


async def test_discord_limits_and_errors(emu: DiscordEmulator, bot: EmuBot, guild: Guild) -> None:
    channel = channel_of(bot, guild)
    with pytest.raises(discord.HTTPException) as too_long:
        await channel.send("x" * 2001)
    assert too_long.value.status == 400
    assert too_long.value.code == 50035
    with pytest.raises(discord.HTTPException) as big_embed:
        await channel.send(embed=discord.Embed(title="t" * 257))
    assert big_embed.value.code == 50035
    assert "embeds.0.title" in big_embed.value.text
    message = await channel.send("hello")
    emu.delete_message(channel.id, message.id)
    with pytest.raises(discord.NotFound) as gone:
        await message.edit(content="edited")
    assert gone.value.code == 10008


async def test_permissions_and_rate_limit(emu: DiscordEmulator, bot: EmuBot, guild: Guild) -> None:
    channel = channel_of(bot, guild)
    emu.inject_rate_limit("/messages", count=1, retry_after=0.05)
    await channel.send("after a 429")
    assert [r.status for r in emu.requests if r.method == "POST"][-2:] == [429, 200]
    emu.set_bot_permissions(channel.id, perms.VIEW_CHANNEL | perms.READ_MESSAGE_HISTORY)
    with pytest.raises(discord.Forbidden) as forbidden:
        await channel.send("nope")
    assert forbidden.value.code == 50013
    emu.revoke_channel_access(channel.id)
    with pytest.raises(discord.Forbidden) as hidden:
        await channel.send("nope")
    assert hidden.value.code == 50001


async def test_expired_token_and_double_callback(
    emu: DiscordEmulator, bot: EmuBot, guild: Guild, user: User, clock: FakeClock
) -> None:
    bot.release.clear()
    handle = await emu.invoke("slow", **where(guild, user))
    await handle.wait_callback()
    clock.now += 1.0
    bot.release.set()
    outcome = await asyncio.wait_for(bot.outcomes.get(), 5)
    assert isinstance(outcome, discord.HTTPException)
    assert outcome.status == 401
    assert outcome.code == 50027
    url = f"{emu.api_base_url}/interactions/{handle.id}/{handle.token}/callback"
    async with aiohttp.ClientSession() as http, http.post(url, json={"type": 5}) as response:
        assert response.status == 400
        assert (await response.json())["code"] == 40060


async def test_allowed_mentions(emu: DiscordEmulator, bot: EmuBot, guild: Guild) -> None:
    channel = channel_of(bot, guild)
    quiet = await channel.send("@everyone hi", allowed_mentions=discord.AllowedMentions.none())
    assert not emu.messages[quiet.id].pings_everyone()
    loud = await channel.send("@everyone hi")
    assert emu.messages[loud.id].pings_everyone()


async def test_resume_after_drop(
    emu: DiscordEmulator, bot: EmuBot, guild: Guild, user: User
) -> None:
    await emu.drop_gateway()
    await emu.wait_resumed(timeout=15)
    assert any(e.t == "RESUMED" for e in emu.events)
    assert emu.hub.identify_count == 1
    handle = await emu.invoke("slow", {"count": 2}, **where(guild, user))
    assert (await handle.wait_original()).content == "done 2"


def card(*texts: str, media: tuple[str, ...] = ()) -> discord.ui.LayoutView:
    view = discord.ui.LayoutView()
    container: discord.ui.Container[discord.ui.LayoutView] = discord.ui.Container(
        accent_colour=0x2ECC71
    )
    for text in texts:
        container.add_item(discord.ui.TextDisplay(text))
    if media:
        container.add_item(discord.ui.MediaGallery(*(discord.MediaGalleryItem(u) for u in media)))
    view.add_item(container)
    return view


async def test_components_v2_messages_are_recorded_and_readable(
    emu: DiscordEmulator, bot: EmuBot, guild: Guild, user: User
) -> None:
    channel = channel_of(bot, guild)
    sent = await channel.send(
        view=card("**Video** · done", f"by <@{user.id}>", media=("attachment://t1.mp4",)),
        file=discord.File(io.BytesIO(b"data"), filename="t1.mp4"),
        allowed_mentions=discord.AllowedMentions.none(),
    )
    stored = emu.world.messages[sent.id]
    assert stored.is_v2
    assert stored.accent_colour == 0x2ECC71
    assert stored.card_texts == ["**Video** · done", f"by <@{user.id}>"]
    assert stored.media_urls == ["attachment://t1.mp4"]
    assert "**Video** · done" in stored.text
    assert [a.filename for a in stored.attachments] == ["t1.mp4"]
    assert stored.pinged_user_ids() == set()  # allowed mentions none
    pinging = await channel.send(
        view=card(f"<@{user.id}> ready"),
        allowed_mentions=discord.AllowedMentions(users=[discord.Object(user.id)]),
    )
    assert emu.world.messages[pinging.id].pinged_user_ids() == {user.id}


async def test_components_v2_rules_are_enforced(
    emu: DiscordEmulator, bot: EmuBot, guild: Guild
) -> None:
    channel = channel_of(bot, guild)
    with pytest.raises(discord.HTTPException) as legacy:
        await channel.send("content", view=card("text"))
    assert legacy.value.code == 50035
    with pytest.raises(discord.HTTPException) as too_much_text:
        await channel.send(view=card("a" * 2000, "b" * 2001))
    assert too_much_text.value.code == 50035
    # discord.py refuses more than 40 components itself; a raw request reaches the emulator.
    texts = [{"type": 10, "content": f"line {n}"} for n in range(40)]
    route = discord.http.Route("POST", "/channels/{channel_id}/messages", channel_id=channel.id)
    with pytest.raises(discord.HTTPException) as too_many:
        await bot.http.request(
            route,
            json={"flags": 1 << 15, "components": [{"type": 17, "components": texts}]},
        )
    assert too_many.value.code == 50035
    # An old message can be upgraded by an edit that clears content and embeds...
    old = await channel.send("old form", embed=discord.Embed(title="t"))
    upgraded = await old.edit(content=None, embeds=[], view=card("new form"))
    assert emu.world.messages[upgraded.id].is_v2
    assert emu.world.messages[upgraded.id].text == "new form"
    # ... but the flag stays: content and embeds are refused from then on.
    with pytest.raises(discord.HTTPException) as back:
        await upgraded.edit(content="old again", view=None)
    assert back.value.code == 50035
    emu.refuse_v2_edit_attachments()
    with pytest.raises(discord.HTTPException) as attach:
        await upgraded.edit(
            view=card("with file"),
            attachments=[discord.File(io.BytesIO(b"x"), filename="x.png")],
        )
    assert attach.value.code == 50035


async def test_command_permissions_are_served_sent_and_enforced(
    emu: DiscordEmulator, bot: EmuBot, guild: Guild, user: User
) -> None:
    """Server Settings -> Integrations: the bot token reads them, the gateway announces them,
    and the client no longer offers the command to a member they bar."""
    updates: asyncio.Queue[discord.RawAppCommandPermissionsUpdateEvent] = asyncio.Queue()

    async def on_update(event: discord.RawAppCommandPermissionsUpdateEvent) -> None:
        await updates.put(event)

    bot.add_listener(on_update, "on_raw_app_command_permissions_update")
    assert bot.application_id is not None
    http = bot.http
    assert await http.get_guild_application_command_permissions(bot.application_id, guild.id) == []
    patron = emu.add_role(guild.id, "Patron")
    emu.set_command_permissions(guild.id, "pick", [(guild.id, 1, False), (patron.id, 1, True)])
    event = await asyncio.wait_for(updates.get(), 5)
    pick = next(c for c in emu.registered_commands() if c["name"] == "pick")
    assert (event.target_id, event.guild.id) == (int(pick["id"]), guild.id)
    assert [(p.id, p.type.value, p.permission) for p in event.permissions] == [
        (guild.id, 1, False),
        (patron.id, 1, True),
    ]
    (listed,) = await http.get_guild_application_command_permissions(bot.application_id, guild.id)
    assert listed["id"] == pick["id"]
    assert len(listed["permissions"]) == 2
    one = await http.get_application_command_permissions(bot.application_id, guild.id, pick["id"])
    assert one["permissions"] == listed["permissions"]
    with pytest.raises(discord.NotFound):  # 10066: a command without its own entries
        await http.get_application_command_permissions(
            bot.application_id, guild.id, bot.application_id
        )

    with pytest.raises(InvocationError, match="not available"):
        await emu.invoke("pick", {"fruit": "apple"}, **where(guild, user))
    emu.give_role(guild.id, user.id, patron.id)
    handle = await emu.invoke("pick", {"fruit": "apple"}, **where(guild, user))
    assert (await handle.wait_original()).content == "picked apple"
    admin = await emu.invoke(
        "pick", {"fruit": "apple"}, **where(guild, emu.add_user("root")), permissions=1 << 3
    )
    assert (await admin.wait_original()).content == "picked apple"

    # The app-level entries (the application id) bar a channel for every command.
    general = guild.channel("general").id
    emu.set_command_permissions(guild.id, None, [(general, 3, False)])
    event = await asyncio.wait_for(updates.get(), 5)
    assert event.target_id == bot.application_id
    with pytest.raises(InvocationError, match="not available"):
        await emu.invoke("slow", **where(guild, user))
    emu.set_command_permissions(guild.id, None, [])
    assert (await asyncio.wait_for(updates.get(), 5)).permissions == []
    emu.set_command_permissions(guild.id, "pick", [])
    await asyncio.wait_for(updates.get(), 5)
    assert await http.get_guild_application_command_permissions(bot.application_id, guild.id) == []


async def test_a_nonce_enforced_returns_the_message_already_posted(
    emu: DiscordEmulator, bot: EmuBot, guild: Guild
) -> None:
    channel = channel_of(bot, guild)
    first = await channel.send("once", nonce="gb1c")  # discord.py sets enforce_nonce
    again = await channel.send("once", nonce="gb1c")
    other = await channel.send("twice", nonce="gb2c")
    assert again.id == first.id and other.id != first.id
    assert [m.content for m in emu.channel_messages(channel.id)] == ["once", "twice"]
    with pytest.raises(discord.HTTPException) as refused:
        await channel.send("too long", nonce="n" * 26)
    assert (refused.value.status, refused.value.code) == (400, 50035)


async def test_a_bot_removed_from_a_guild_gets_guild_delete_then_missing_access(
    emu: DiscordEmulator, bot: EmuBot, guild: Guild
) -> None:
    removed: asyncio.Queue[int] = asyncio.Queue()

    async def on_guild_remove(gone: discord.Guild) -> None:
        await removed.put(gone.id)

    bot.add_listener(on_guild_remove)
    channel = channel_of(bot, guild)
    emu.remove_bot(guild.id)
    assert await asyncio.wait_for(removed.get(), 5) == guild.id
    assert bot.get_guild(guild.id) is None
    for call in (bot.fetch_guild(guild.id), channel.send("still here?")):
        with pytest.raises(discord.Forbidden) as refused:
            await call
        assert refused.value.code == 50001


async def test_a_user_install_where_the_bot_is_not_a_member(
    emu: DiscordEmulator, bot: EmuBot, user: User
) -> None:
    elsewhere = emu.add_guild("No Bot", with_bot=False)
    assert bot.get_guild(elsewhere.id) is None  # no GUILD_CREATE
    with pytest.raises(InvocationError, match="not installed"):
        await emu.invoke("many", {"count": 0}, **where(elsewhere, user))
    emu.install_for_user(user.id)
    # A guild-install-only command is not offered through the user's install.
    with pytest.raises(InvocationError, match="not installed that way"):
        await emu.invoke("pick", {"fruit": "apple"}, **where(elsewhere, user))

    handle = await emu.invoke("many", {"count": 6}, **where(elsewhere, user))
    assert handle.payload["authorizing_integration_owners"] == {"1": str(user.id)}
    assert handle.payload["context"] == 0
    assert int(handle.payload["app_permissions"]) & perms.SEND_MESSAGES == 0
    refused = await bot.outcomes.get()
    # Discord: at most 5 followups when only the user's install authorised it (40094).
    assert isinstance(refused, discord.HTTPException)
    assert (refused.status, refused.code) == (400, 40094)
    assert len(handle.followups) == 5
    # The bot's token cannot reach that server's channels.
    with pytest.raises(discord.Forbidden) as denied:
        await bot.http.send_message(elsewhere.channel("general").id, params=_content("hi"))
    assert denied.value.code == 50001


async def test_both_installs_in_a_server_with_the_bot_and_the_bots_dm(
    emu: DiscordEmulator, bot: EmuBot, guild: Guild, user: User
) -> None:
    emu.install_for_user(user.id)
    handle = await emu.invoke("many", {"count": 6}, **where(guild, user))
    assert handle.payload["authorizing_integration_owners"] == {
        "0": str(guild.id),
        "1": str(user.id),
    }
    assert await bot.outcomes.get() is None  # the server's install: no followup limit
    assert len(handle.followups) == 6

    dm = emu.dm_channel(user.id)
    handle = await emu.invoke(
        "many", {"count": 1}, guild_id=None, channel_id=dm.id, user_id=user.id
    )
    assert handle.payload["authorizing_integration_owners"] == {"1": str(user.id)}
    assert handle.payload["context"] == 1
    assert "guild_id" not in handle.payload
    assert handle.payload["user"]["id"] == str(user.id)
    assert await bot.outcomes.get() is None
    assert (await handle.wait_original()).content == "first"


def _content(text: str) -> Any:
    return discord.http.handle_message_parameters(content=text)


async def test_threads_and_the_message_content_rule(
    emu: DiscordEmulator, bot: EmuBot, guild: Guild, user: User
) -> None:
    channel = channel_of(bot, guild)
    starter = await channel.send("start here")
    thread = await starter.create_thread(name="talk", auto_archive_duration=1440)
    assert thread.id == starter.id  # a thread started from a message has its id
    assert emu.world.channels[thread.id].parent_id == channel.id
    with pytest.raises(discord.HTTPException) as twice:
        await starter.create_thread(name="again")
    assert twice.value.code == 160004
    free = await channel.create_thread(name="free", type=discord.ChannelType.public_thread)
    assert emu.world.channels[free.id].is_thread

    async def delivered(content: str, **kw: Any) -> discord.Message:
        waiter = asyncio.ensure_future(
            bot.wait_for("message", check=lambda m: m.author.id == user.id, timeout=5)
        )
        await asyncio.sleep(0)
        emu.member_message(thread.id, user.id, content, **kw)
        message: discord.Message = await waiter
        return message

    plain = await delivered("hello all")
    assert plain.content == "" and isinstance(plain.channel, discord.Thread)
    mention = await delivered(f"<@{emu.bot_user.id}> hi bot")
    assert mention.content == f"<@{emu.bot_user.id}> hi bot"
    reply = await delivered("a reply", reply_to=starter.id)
    assert reply.content == "a reply" and reply.reference is not None
    assert reply.reference.message_id == starter.id
    quiet = await delivered("a quiet reply", reply_to=starter.id, ping_reply=False)
    assert quiet.content == ""

    updated = asyncio.ensure_future(bot.wait_for("raw_thread_update", timeout=5))
    await asyncio.sleep(0)
    emu.archive_thread(thread.id)
    assert (await updated).data["thread_metadata"]["archived"] is True
    await delivered("back again")  # a member's message unarchives the thread
    assert emu.world.channels[thread.id].archived is False

    deleted = asyncio.ensure_future(bot.wait_for("raw_thread_delete", timeout=5))
    await asyncio.sleep(0)
    emu.delete_thread(thread.id)
    assert (await deleted).thread_id == thread.id
