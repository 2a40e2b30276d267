"""A new admin's first run: no Generation API settings, so the built-in emulator answers."""

import asyncio
import sys
from collections.abc import AsyncIterator
from pathlib import Path

import pytest
import pytest_asyncio

from bot.discord.permissions import invite_permissions
from tests.support.command_list import MESSAGE_MENUS, SLASH_COMMANDS
from tests.support.e2e.harness import ROOT, World, close_world, open_world

pytestmark = pytest.mark.asyncio(loop_scope="module")

SANDBOX_TIME_SCALE = 5
"""The built-in emulator's tasks run this much faster than real time (SANDBOX_TIME_SCALE)."""


@pytest_asyncio.fixture(loop_scope="module", scope="module")
async def world(tmp_path_factory: pytest.TempPathFactory) -> AsyncIterator[World]:
    opened = await open_world(
        Path(tmp_path_factory.mktemp("sandbox")),
        sandbox=True,
        overrides={"SANDBOX_TIME_SCALE": str(SANDBOX_TIME_SCALE)},
    )
    yield opened
    await close_world(opened)
    assert opened.api.requests == []  # everything went to the bot's own emulator


async def test_sandbox_mode_says_so_and_marks_results(world: World) -> None:
    assert "SANDBOX MODE" in world.bot.log()
    handle = await world.command("text", {"prompt": "hello sandbox"})
    answer = await world.answer(handle)
    assert "hello sandbox" in answer.text
    assert "sandbox" in answer.text.lower().split("hello sandbox", 1)[1]


async def test_start_up_says_ready_as_whom_where_and_the_invite_url(world: World) -> None:
    # on_ready follows the last GUILD_CREATE; the bot's log file is the only signal of it.
    for _ in range(300):
        log = world.bot.log()
        if " ready as " in log:
            break
        await asyncio.sleep(0.1)
    (line,) = [line for line in log.splitlines() if " ready as " in line]
    bot_user = world.discord.world.bot_user
    assert f"ready as {bot_user.username}" in line
    assert "in 1 server(s)" in line
    app_id = world.discord.world.application_id
    assert f"https://discord.com/oauth2/authorize?client_id={app_id}&" in line
    assert f"permissions={invite_permissions().value}" in line
    assert "PyNaCl" not in log
    assert "davey" not in log
    assert "voice will NOT be supported" not in log


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
    assert names == SLASH_COMMANDS | MESSAGE_MENUS


async def test_a_pending_sandbox_video_is_announced_after_a_restart(world: World) -> None:
    model = "aurora-lite/text-to-video"  # 30 service seconds in the built-in emulator: 6 s
    handle = await world.command("video", {"prompt": "a sandbox comet", "model": model})
    await world.answer(handle)
    placeholder = await world.discord.wait_for_message(
        lambda m: "a sandbox comet" in m.text, include_existing=True
    )
    identifies = sum(1 for event in world.discord.gateway_received if event.op == 2)

    await world.bot.kill()  # a crash: only what was saved before it survives
    assert "/files/" not in placeholder.text
    await world.bot.start()
    await world.discord.signal.wait_for(
        lambda: (
            True
            if sum(1 for e in world.discord.gateway_received if e.op == 2) > identifies
            else None
        ),
        60,
        "a second IDENTIFY",
    )
    done = await world.discord.wait_for_edit(
        placeholder.id, lambda m: "/files/" in m.text, timeout=90
    )
    assert "sandbox" in (done.content + done.text).lower()
    assert "no longer configured" not in world.bot.log()
