"""Start the two emulators and the unmodified ``python -m bot`` process, as the e2e tests do.

This reuses ``tests/support/e2e/harness.py`` (BotProcess, bot_env); the differences are parameters:
the real 60 s rate window, INFO logging, and per-scenario settings.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass
from pathlib import Path

from bot.sandbox import GenApiEmulator
from tests.support.discord_emulator import DiscordEmulator, InteractionHandle, Message
from tests.support.e2e.harness import BOT_TOKEN, BotProcess, bot_env

BENCH_ENV = {"LOG_LEVEL": "INFO", "GENAPI_RATE_WINDOW_SECONDS": "60", "WAIT_SCALE": "1"}
"""Overrides of the e2e settings: the spec's real window and the bot's real waits (the e2e
harness divides the poll priors, the longest poll gap and the delivery backoff by its
``WAIT_SCALE`` of 10, as it scales the window; unscaled here, or the bench would measure a bot
that polls a new video after 1 s and shows estimates a tenth of the prior), and no DEBUG
logging cost."""


@dataclass
class Bench:
    """Both emulators and the bot process of one scenario."""

    discord: DiscordEmulator
    api: GenApiEmulator
    key: str
    bot: BotProcess
    started_at: float
    """``time.monotonic()`` just before the bot process was spawned."""
    started_wall: float
    """``time.time()`` at the same moment (the bot's log lines carry wall time)."""

    @property
    def pid(self) -> int:
        assert self.bot.process is not None
        return self.bot.process.pid


async def wait_for_log(bot: BotProcess, needle: str, timeout: float) -> str:
    """Wait until the bot's log contains ``needle``; return that line."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        for line in bot.log().splitlines():
            if needle in line:
                return line
        if bot.process is not None and bot.process.returncode is not None:
            raise RuntimeError(f"the bot exited ({bot.process.returncode}); see {bot.log_path}")
        await asyncio.sleep(0.05)
    raise TimeoutError(f"no {needle!r} in the bot's log within {timeout} s ({bot.log_path})")


def new_discord() -> DiscordEmulator:
    """A Discord emulator for the bot's token; use it as ``async with``."""
    return DiscordEmulator(bot_token=BOT_TOKEN)


@asynccontextmanager
async def running_bot(
    workdir: Path,
    discord: DiscordEmulator,
    api: GenApiEmulator,
    key: str,
    env: dict[str, str] | None = None,
) -> AsyncIterator[Bench]:
    """Run the bot against both emulators (already started); stop it (Ctrl-C) after the block.

    Yields once the bot is on the gateway with its commands synced.
    """
    variables = bot_env(workdir, discord, api, key) | BENCH_ENV | (env or {})
    bot = BotProcess(variables, workdir / "bot.log")
    started, started_wall = time.monotonic(), time.time()
    await bot.start()
    try:
        await discord.wait_ready(timeout=120)
        await discord.wait_commands_synced(timeout=60)
        yield Bench(discord, api, key, bot, started, started_wall)
    finally:
        await bot.stop()


async def answer(discord: DiscordEmulator, handle: InteractionHandle, timeout: float) -> Message:
    """What the user sees: the original response once filled, or the bot's ephemeral followup
    (a public "thinking…" replaced by an error). A place in the key's queue ("Queued: …",
    then "Your turn…") is not an answer yet: taken for a refusal, it made the
    bench run a second ``/video`` for the same video."""

    def check() -> Message | None:
        original = handle.original()
        if (
            original is not None
            and not original.loading
            and not original.deleted
            and not original.text.startswith(("Queued:", "Your turn"))
        ):
            return original
        return handle.followups[-1] if handle.followups else None

    return await discord.signal.wait_for(check, timeout, f"an answer to {handle.id}")
