"""A new operator's first start on the real service: a token, no server yet, no key yet.

The real ``python -m bot`` with ``GENAPI_BASE_URL`` set and no ``GENAPI_API_KEY``, against a
Discord with no server holding the bot: its log says so with the invite link; once invited,
the first admin to run a command is told to set the server's key.
"""

import asyncio
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path

import pytest
import pytest_asyncio

from bot.discord.permissions import invite_permissions
from bot.sandbox import GenApiEmulator
from tests.support.discord_emulator import DiscordEmulator
from tests.support.discord_emulator.interactions import InteractionHandle
from tests.support.e2e.harness import (
    ADMIN_PERMISSIONS,
    BOT_TOKEN,
    MEMBER_PERMISSIONS,
    BotProcess,
    bot_env,
)

pytestmark = pytest.mark.asyncio(loop_scope="module")


@dataclass
class FirstStart:
    discord: DiscordEmulator
    api: GenApiEmulator
    bot: BotProcess


@pytest_asyncio.fixture(loop_scope="module", scope="module")
async def first(tmp_path_factory: pytest.TempPathFactory) -> AsyncIterator[FirstStart]:
    world_dir = Path(tmp_path_factory.mktemp("first-start"))
    discord = DiscordEmulator(bot_token=BOT_TOKEN)
    await discord.start()
    api = GenApiEmulator()
    await api.start()
    env = bot_env(world_dir, discord, api, key="")
    del env["GENAPI_API_KEY"]  # servers bring their own key
    bot = BotProcess(env, world_dir / "bot.log")
    await bot.start()
    await discord.wait_ready(timeout=60)
    await discord.wait_commands_synced(timeout=60)
    yield FirstStart(discord, api, bot)
    await bot.stop()
    await api.stop()
    await discord.stop()


async def ready_line(bot: BotProcess) -> str:
    # on_ready follows READY (no GUILD_CREATE to wait for); the log file is its only signal.
    for _ in range(300):
        lines = [line for line in bot.log().splitlines() if " ready as " in line]
        if lines:
            (line,) = lines
            return line
        await asyncio.sleep(0.1)
    raise AssertionError("the bot never said it was ready")


async def test_a_bot_in_no_server_yet_says_so_with_the_invite_link(first: FirstStart) -> None:
    line = await ready_line(first.bot)
    assert "in no server yet" in line
    app_id = first.discord.world.application_id
    assert f"https://discord.com/oauth2/authorize?client_id={app_id}&" in line
    assert f"permissions={invite_permissions().value}" in line
    assert "python -m bot invite" in line


async def test_the_first_admin_to_run_a_command_is_told_to_set_the_key(
    first: FirstStart,
) -> None:
    admin = first.discord.add_user("admin")
    member = first.discord.add_user("member")
    guild = first.discord.add_guild("New Server", owner_id=admin.id)  # the invite, accepted
    channel = first.discord.add_channel(guild.id, "general")

    async def usage(user_id: int, permissions: int) -> InteractionHandle:
        handle = await first.discord.invoke(
            "usage",
            {},
            guild_id=guild.id,
            channel_id=channel.id,
            user_id=user_id,
            permissions=permissions,
        )
        await handle.wait_original(timeout=15)
        return handle

    def notices(handle: InteractionHandle) -> list[str]:
        return [m.content for m in handle.followups if "/config api-key set" in m.content]

    by_member = await usage(member.id, MEMBER_PERMISSIONS)
    by_admin = await usage(admin.id, ADMIN_PERMISSIONS)
    told = await by_admin.wait_followup(lambda m: "/config api-key set" in m.content, timeout=15)
    assert told.ephemeral
    assert "no Generation API key yet" in told.content
    # Once is enough: the admin's next command is answered as usual (the command after it
    # is the sign that the notice, which would follow at once, did not come).
    again = await usage(admin.id, ADMIN_PERMISSIONS)
    await usage(member.id, MEMBER_PERMISSIONS)
    assert notices(by_member) == []  # members cannot set a key: they are not told
    assert notices(by_admin) == [told.content]
    assert notices(again) == []
