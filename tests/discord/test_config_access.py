"""``/config`` needs Manage Server in every subcommand, whatever the server's overrides say.

``default_member_permissions`` only hides a command: a server may let any role run ``/config``
(Server Settings → Integrations), so each subcommand checks the member's permission itself,
those of the nested groups (``api-key``, ``style``, …) included.
"""

from collections.abc import AsyncIterator
from types import SimpleNamespace
from typing import Any

import discord
import pytest
from discord import app_commands

from bot.discord.bot import EXTENSIONS, GenBot
from tests.support.stack import Stack

pytestmark = pytest.mark.parametrize("engine_settings", ["sqlite"], indirect=True)


@pytest.fixture
async def config(stack: Stack) -> AsyncIterator[app_commands.Group]:
    async with GenBot(stack.services) as bot:
        for extension in EXTENSIONS:
            await bot.load_extension(extension)
        group = bot.tree.get_command("config")
        assert isinstance(group, app_commands.Group)
        yield group


def member(*, manage_guild: bool) -> Any:
    return SimpleNamespace(permissions=discord.Permissions(manage_guild=manage_guild))


async def test_every_config_subcommand_refuses_a_member_without_manage_server(
    config: app_commands.Group,
) -> None:
    commands = [c for c in config.walk_commands() if isinstance(c, app_commands.Command)]
    names = {c.qualified_name for c in commands}
    assert {"config budget", "config api-key set", "config guard show", "config style add"} <= names
    let_through = []
    for command in commands:
        try:
            await command._check_can_run(member(manage_guild=False))
        except app_commands.MissingPermissions:
            continue
        let_through.append(command.qualified_name)
    assert let_through == []
    for command in commands:
        assert await command._check_can_run(member(manage_guild=True))
