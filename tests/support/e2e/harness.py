"""Runs the real ``python -m bot`` process against the Discord and Generation API emulators."""

import asyncio
import os
import signal
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from cryptography.fernet import Fernet

from bot.sandbox import GenApiEmulator
from tests.support.discord_emulator import DiscordEmulator
from tests.support.discord_emulator.interactions import InteractionHandle
from tests.support.discord_emulator.models import Channel, Guild, Message, User

ROOT = Path(__file__).resolve().parents[3]
BOT_TOKEN = "e2e.bot-token.secret"
MANAGE_GUILD = 1 << 5
RATE_WINDOW = 6.0
"""The API's rate window, scaled down from 60 s for both the emulator and the bot."""
WAIT_SCALE = 10
"""The bot's own fixed waits on the service (``WAIT_SCALE``: delivery backoff, poll priors) are
divided by this, as the rate window is."""
LATE_ACK_GRACE = 12.0
"""Seconds past Discord's 3 s in which the harness's emulator still accepts an
acknowledgement, recorded as late (``DiscordEmulator.late_acks``, reported as a warning): on
a CPU-starved CI machine a scenario must not fail for when it happened to run."""


class OffsetClock:
    """Real monotonic time plus an offset the test can advance (token lifetimes)."""

    def __init__(self) -> None:
        self.offset = 0.0

    def __call__(self) -> float:
        return time.monotonic() + self.offset

    def advance(self, seconds: float) -> None:
        self.offset += seconds

    def wall(self) -> float:
        """UTC epoch seconds plus the same offset (attachment URLs' ``ex``)."""
        return time.time() + self.offset


class BotProcess:
    """The unmodified bot as a subprocess, its log in a file."""

    def __init__(self, env: dict[str, str], log_path: Path, args: tuple[str, ...] = ()) -> None:
        self.env = env
        self.log_path = log_path
        self.args = args
        self.process: asyncio.subprocess.Process | None = None

    async def start(self) -> None:
        log = self.log_path.open("ab")
        self.process = await asyncio.create_subprocess_exec(
            sys.executable, "-m", "bot", *self.args, cwd=ROOT, env=self.env, stdout=log, stderr=log
        )
        log.close()

    async def kill(self) -> None:
        """SIGKILL: no chance to clean up, as in a crash."""
        if self.process is not None and self.process.returncode is None:
            self.process.kill()
            await self.process.wait()

    async def stop(self) -> None:
        """Ctrl-C, then wait for a clean exit."""
        if self.process is not None and self.process.returncode is None:
            self.process.send_signal(signal.SIGINT)
            try:
                await asyncio.wait_for(self.process.wait(), 15)
            except TimeoutError:
                await self.kill()

    def log(self) -> str:
        return self.log_path.read_text(errors="replace")


@dataclass
class World:
    """Both emulators, a guild with an admin and a member, and the bot process."""

    discord: DiscordEmulator
    api: GenApiEmulator
    discord_clock: OffsetClock
    key: str
    guild: Guild
    channel: Channel
    admin: User
    member: User
    bot: BotProcess
    handles: list[InteractionHandle] = field(default_factory=list)

    async def command(
        self, name: str, options: dict[str, Any] | None = None, *, admin: bool = False, **kw: Any
    ) -> InteractionHandle:
        """Invoke a slash command in the world's channel, as the member (or the admin)."""
        user = self.admin if admin else self.member
        kw.setdefault("permissions", ADMIN_PERMISSIONS if admin else MEMBER_PERMISSIONS)
        handle = await self.discord.invoke(
            name,
            options,
            guild_id=self.guild.id,
            channel_id=kw.pop("channel_id", self.channel.id),
            user_id=kw.pop("user_id", user.id),
            **kw,
        )
        self.handles.append(handle)
        return handle

    async def answer(self, handle: InteractionHandle, timeout: float = 15) -> Message:
        """What the user sees in answer: the original response once filled, or, when the bot
        replaced a public "thinking…" with an ephemeral error, that followup."""

        def check() -> Message | None:
            original = handle.original()
            if original is not None and not original.loading and not original.deleted:
                return original
            return handle.followups[-1] if handle.followups else None

        try:
            return await self.discord.signal.wait_for(check, timeout, f"an answer to {handle.id}")
        except TimeoutError as exc:
            # Say what the bot did send: a late or refused callback reads differently from none.
            sent = [(c.kind, round(c.latency, 2), c.status) for c in handle.state.callbacks]
            raise TimeoutError(f"{exc}; callbacks (type, s, status): {sent}") from None

    def posts_to(self, path_part: str) -> int:
        return sum(1 for r in self.api.requests if r.method == "POST" and path_part in r.path)


def result_url(message: Message) -> str:
    """The service's URL of the (first) result a job card or message shows."""
    return next(url for url in message.urls if "/files/" in url)


def action_buttons(message: Message) -> list[dict[str, Any]]:
    """The restart-safe action buttons of a message, in order, wherever they are nested."""
    return [
        c
        for c in message.all_components
        if c.get("type") == 2 and str(c.get("custom_id") or "").startswith("gb:")
    ]


def _perms(*bits: int) -> int:
    value = 0
    for bit in bits:
        value |= 1 << bit
    return value


# View Channel, Send Messages, Embed Links, Attach Files, Read History, Use App Commands
MEMBER_PERMISSIONS = _perms(10, 11, 14, 15, 16, 31)
ADMIN_PERMISSIONS = MEMBER_PERMISSIONS | MANAGE_GUILD


def bot_env(
    world_dir: Path, discord: DiscordEmulator, api: GenApiEmulator, key: str
) -> dict[str, str]:
    return {
        "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
        # The tests' own import path after the checkout's (a dependency installed beside the
        # venv for a run reaches the bot too).
        "PYTHONPATH": os.pathsep.join([str(ROOT), *filter(None, [os.environ.get("PYTHONPATH")])]),
        "DISCORD_TOKEN": BOT_TOKEN,
        "GENAPI_BASE_URL": api.base_url,
        "GENAPI_API_KEY": key,
        "KEY_ENCRYPTION_KEY": Fernet.generate_key().decode(),
        "DATABASE_PATH": str(world_dir / "bot.db"),
        "DISCORD_API_BASE_URL": discord.api_base_url,
        "DISCORD_GATEWAY_URL": discord.gateway_url,
        "LOG_LEVEL": "DEBUG",
        "GENAPI_RATE_WINDOW_SECONDS": str(RATE_WINDOW),
        "JOB_TIMEOUT_SECONDS": "600",
        # The bot's own waits scaled like the rate window: a video taking 4 s is polled after
        # 3 s (the spec's least interval), not after the 24 s of the unscaled prior.
        "WAIT_SCALE": str(WAIT_SCALE),
        # The emulator sends every GUILD_CREATE at once: no need for discord.py's 2 s wait.
        "GUILD_READY_TIMEOUT_SECONDS": "0.2",
    }


async def open_world(
    world_dir: Path,
    *,
    sandbox: bool = False,
    overrides: dict[str, str] | None = None,
    rate_window: float = RATE_WINDOW,
) -> World:
    """Start both emulators and the bot; return once its commands are synced.

    With ``sandbox`` the bot gets no ``GENAPI_*`` settings and runs its own built-in emulator;
    the world's API emulator is then idle. ``overrides`` replace parts of the bot's environment.
    ``rate_window`` is the API's rate window for both the emulator and the bot, seconds.
    """
    clock = OffsetClock()
    discord = DiscordEmulator(
        bot_token=BOT_TOKEN, clock=clock, wall_clock=clock.wall, late_ack_grace=LATE_ACK_GRACE
    )
    await discord.start()
    api = GenApiEmulator(rate_window=rate_window)
    await api.start()
    api.set_task_duration(lambda model, body: 4.0)
    key = api.create_key(balance_cents=1_000_000)
    admin = discord.add_user("admin")
    member = discord.add_user("member")
    guild = discord.add_guild("Test Guild", owner_id=admin.id)
    channel = discord.add_channel(guild.id, "generate")
    env = bot_env(world_dir, discord, api, key)
    env["GENAPI_RATE_WINDOW_SECONDS"] = str(rate_window)
    if sandbox:
        del env["GENAPI_BASE_URL"], env["GENAPI_API_KEY"]
    env.update(overrides or {})
    bot = BotProcess(env, world_dir / "bot.log")
    await bot.start()
    await discord.wait_ready(timeout=60)
    await discord.wait_commands_synced(timeout=60)
    return World(discord, api, clock, key, guild, channel, admin, member, bot)


async def close_world(world: World) -> None:
    await world.bot.stop()
    await world.api.stop()
    await world.discord.stop()
