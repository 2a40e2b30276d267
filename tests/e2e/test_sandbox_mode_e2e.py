"""A new admin's first run: no Generation API settings, so the built-in emulator answers."""

import asyncio
import sys
from collections.abc import AsyncIterator
from pathlib import Path

import pytest
import pytest_asyncio

from tests.e2e.harness import ROOT, World, close_world, open_world

pytestmark = pytest.mark.asyncio(loop_scope="module")


@pytest_asyncio.fixture(loop_scope="module", scope="module")
async def world(tmp_path_factory: pytest.TempPathFactory) -> AsyncIterator[World]:
    opened = await open_world(Path(tmp_path_factory.mktemp("sandbox")), sandbox=True)
    yield opened
    await close_world(opened)
    assert opened.api.requests == []  # everything went to the bot's own emulator


async def test_sandbox_mode_says_so_and_marks_results(world: World) -> None:
    assert "SANDBOX MODE" in world.bot.log()
    handle = await world.command("text", {"prompt": "hello sandbox"})
    answer = await world.answer(handle)
    assert "hello sandbox" in answer.content
    assert "sandbox" in answer.content.lower().split("hello sandbox", 1)[1]


async def test_a_rejected_discord_token_is_one_clear_line(world: World, tmp_path: Path) -> None:
    env = dict(world.bot.env, DISCORD_TOKEN="not-the-token", DATABASE_PATH=str(tmp_path / "x.db"))
    process = await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        "bot",
        cwd=ROOT,
        env=env,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )
    _, stderr = await asyncio.wait_for(process.communicate(), 60)
    assert process.returncode == 2
    assert (
        stderr.decode()
        .strip()
        .endswith("genbot: cannot start: DISCORD_TOKEN was rejected by Discord")
    )
    assert "not-the-token" not in stderr.decode()


async def test_sync_subcommand_registers_the_commands_and_exits(
    world: World, tmp_path: Path
) -> None:
    syncs = world.discord.command_syncs
    env = dict(world.bot.env, DATABASE_PATH=str(tmp_path / "sync.db"))
    process = await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        "bot",
        "sync",
        cwd=ROOT,
        env=env,
        stdout=asyncio.subprocess.DEVNULL,
        stderr=asyncio.subprocess.DEVNULL,
    )
    assert await asyncio.wait_for(process.wait(), 60) == 0
    assert world.discord.command_syncs == syncs + 1
    names = {c["name"] for c in world.discord.registered_commands()}
    assert names == {"text", "image", "video", "models", "config", "usage", "jobs"}
