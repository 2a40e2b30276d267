"""The slash commands as Discord will see them: names, options and descriptions."""

import importlib
from collections.abc import AsyncIterator
from typing import Any

import discord
import pytest

from bot.discord.bot import EXTENSIONS, GenBot
from tests.support.command_list import (
    CONFIG,
    LANGUAGES,
    MESSAGE_MENUS,
    NAMED_SUBCOMMANDS,
    OPTIONS,
    SLASH_COMMANDS,
    SUBCOMMAND_OPTIONS,
)
from tests.support.stack import Stack


@pytest.fixture
async def tree(stack: Stack) -> AsyncIterator[list[dict[str, Any]]]:
    # ``async with``: an AutoShardedBot closed without its set-up (made on entering) fails.
    async with GenBot(stack.services) as bot:
        for extension in EXTENSIONS:
            await bot.load_extension(extension)
        yield [command.to_dict(bot.tree) for command in bot.tree.get_commands()]


def options_of(command: dict[str, Any], *path: str) -> dict[str, dict[str, Any]]:
    for name in path:
        command = next(o for o in command["options"] if o["name"] == name)
    return {o["name"]: o for o in command.get("options", [])}


def walk(command: dict[str, Any]) -> list[dict[str, Any]]:
    found = [command]
    for option in command.get("options", []):
        found += walk(option)
    return found


async def test_the_commands_and_options_are_the_interface(tree: list[dict[str, Any]]) -> None:
    commands = {c["name"]: c for c in tree if c.get("type", 1) == 1}
    assert set(commands) == SLASH_COMMANDS
    menus = {c["name"] for c in tree if c.get("type") == 3}  # message context menus
    assert menus == MESSAGE_MENUS
    assert {name: list(options_of(commands[name])) for name in OPTIONS} == OPTIONS


async def test_option_details_users_rely_on(tree: list[dict[str, Any]]) -> None:
    commands = {c["name"]: c for c in tree}
    text, image, video = (options_of(commands[n]) for n in ("text", "image", "video"))
    assert text["model"]["autocomplete"] and video["model"]["autocomplete"]
    assert video["duration"]["autocomplete"]
    # A member's default video model (/settings defaults) stands in for a missing one.
    assert not video["model"]["required"] and video["prompt"]["required"]
    assert (text["temperature"]["min_value"], text["temperature"]["max_value"]) == (0, 2)
    assert text["max_tokens"]["min_value"] == 1
    assert [c["value"] for c in image["mode"]["choices"]] == ["t2i", "i2i", "i2i_text"]
    assert image["image"]["type"] == discord.AppCommandOptionType.attachment.value
    assert video["image"]["type"] == discord.AppCommandOptionType.attachment.value
    assert (video["duration"]["min_value"], video["duration"]["max_value"]) == (1, 60)
    assert image["image_url"]["max_length"] == video["image_url"]["max_length"] == 2000


PERSONAL = {
    "text",
    "image",
    "video",
    "video-advanced",
    "video-join",
    "models",
    "jobs",
    "usage",
    "settings",
    "credits",
}
"""Installable to members too, usable in servers, the bot's DM and group DMs."""


async def test_installs_and_contexts(tree: list[dict[str, Any]]) -> None:
    # Application command docs: integration_types 0 = GUILD_INSTALL, 1 = USER_INSTALL;
    # contexts 0 = GUILD, 1 = BOT_DM, 2 = PRIVATE_CHANNEL.
    by_name = {c["name"]: c for c in tree}
    assert set(by_name) >= PERSONAL
    for name, command in by_name.items():
        if name in PERSONAL:
            assert sorted(command["integration_types"]) == [0, 1], name
            assert sorted(command["contexts"]) == [0, 1, 2], name
        else:  # /config and the context menus: servers that added the bot, only there
            assert command["integration_types"] == [0], name
            assert command.get("contexts") in (None, [0]), name
    assert options_of(by_name["settings"], "api-key", "set") == {}  # the key comes in a modal
    defaults = options_of(by_name["settings"], "defaults")
    assert all(defaults[f"{kind}_model"]["autocomplete"] for kind in ("text", "image", "video"))
    assert not any(option.get("required") for option in defaults.values())
    state = options_of(by_name["settings"], "notify", "dm")["state"]
    assert [c["value"] for c in state["choices"]] == ["on", "off"]


async def test_config_needs_manage_server_and_never_takes_the_key_as_an_option(
    tree: list[dict[str, Any]],
) -> None:
    config = next(c for c in tree if c["name"] == "config")
    assert int(config["default_member_permissions"]) == 1 << 5  # Manage Server
    assert options_of(config, "api-key", "set") == {}  # the key comes through a modal
    assert {o["name"] for o in config["options"]} == CONFIG
    language = options_of(config, "language")["language"]
    assert tuple(c["value"] for c in language["choices"]) == LANGUAGES
    assert language["required"]


async def test_subcommands_take_the_listed_options(tree: list[dict[str, Any]]) -> None:
    """``/config showcase channel:`` (optional: empty clears it), as the list says."""
    for (name, *path), options in SUBCOMMAND_OPTIONS.items():
        command = next(c for c in tree if c["name"] == name)
        found = options_of(command, *path)
        assert list(found) == options, (name, path)
        assert not any(o.get("required") for o in found.values())


async def test_styles_and_characters_take_their_named_options(
    tree: list[dict[str, Any]],
) -> None:
    """``/config style add name: suffix: [image1..4]``, ``/settings character add ...``."""
    for (name, *path), (required, optional) in NAMED_SUBCOMMANDS.items():
        command = next(c for c in tree if c["name"] == name)
        found = options_of(command, *path)
        assert list(found) == required + optional, (name, path)
        assert [o for o, v in found.items() if v.get("required")] == required, (name, path)
    video = options_of(next(c for c in tree if c["name"] == "video"))
    assert [c["value"] for c in video["camera"]["choices"]][:3] == [
        "static",
        "dolly-in",
        "dolly-out",
    ]
    assert video["style"]["autocomplete"] and video["character"]["autocomplete"]


async def test_every_command_and_option_is_described(tree: list[dict[str, Any]]) -> None:
    for command in tree:
        if command.get("type", 1) != 1:
            continue
        for item in walk(command):
            assert 1 <= len(item["description"]) <= 100, item["name"]
            assert item["description"] != "…"
            assert len(item.get("options", [])) <= 25


def test_every_extension_has_setup() -> None:
    for extension in EXTENSIONS:
        assert callable(importlib.import_module(extension).setup)
