"""Personal mode's scene for end-to-end tests: a server that never added the bot,
and a member who installed it to their account; the records the bot keeps of their jobs."""

import sqlite3
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

from tests.support.discord_emulator.interactions import InteractionHandle
from tests.support.discord_emulator.models import Channel, Guild, Message, User
from tests.support.e2e.harness import MEMBER_PERMISSIONS, World, action_buttons


@dataclass
class Elsewhere:
    """A server that never added the bot, and a member who installed it to their account."""

    guild: Guild
    channel: Channel
    user: User

    async def invoke(
        self,
        world: World,
        command: str,
        options: dict[str, Any] | None = None,
        *,
        dm: bool = False,
        **kwargs: Any,
    ) -> InteractionHandle:
        """Run ``command`` as the member, in that server or in the bot's DM.

        The handle is kept with the world's, whose answers its checks read.
        """
        where: dict[str, Any] = (
            {"guild_id": None, "channel_id": world.discord.dm_channel(self.user.id).id}
            if dm
            else {"guild_id": self.guild.id, "channel_id": self.channel.id}
        )
        handle = await world.discord.invoke(
            command,
            options or {},
            user_id=self.user.id,
            permissions=MEMBER_PERMISSIONS,
            **where,
            **kwargs,
        )
        world.handles.append(handle)
        return handle

    async def set_key(self, world: World, key: str) -> Message:
        """``/settings api-key set`` with ``key`` in its form; the bot's answer."""
        opened = await self.invoke(world, "settings", group="api-key", subcommand="set")
        await opened.wait_callback()
        assert opened.modal is not None
        field_id = opened.modal["components"][0]["components"][0]["custom_id"]
        submitted = await world.discord.submit_modal(
            opened.modal["custom_id"], {field_id: key}, permissions=MEMBER_PERMISSIONS
        )
        return await submitted.wait_original(timeout=15)


_elsewhere: dict[int, Elsewhere] = {}


def elsewhere(world: World) -> Elsewhere:
    """The world's server without the bot (made once per world)."""
    found = _elsewhere.get(id(world))
    if found is None:
        guild = world.discord.add_guild("No Bot Here", with_bot=False)
        channel = world.discord.add_channel(guild.id, "chat")
        user = world.discord.add_user("traveller")
        world.discord.install_for_user(user.id)
        found = _elsewhere[id(world)] = Elsewhere(guild, channel, user)
    return found


def ledger(world: World) -> Iterator[tuple[int, int, str]]:
    """``(guild_id, user_id, key_fingerprint)`` of every charge the bot recorded."""
    with sqlite3.connect(world.bot.env["DATABASE_PATH"]) as db:
        yield from db.execute("SELECT guild_id, user_id, key_fingerprint FROM ledger ORDER BY id")


def job_of(card: Message) -> int:
    """The job id behind a personal card's Show result button (``gb:show:j<id>``)."""
    show = next(b for b in action_buttons(card) if b["custom_id"].startswith("gb:show:"))
    return int(show["custom_id"].removeprefix("gb:show:j"))


def delivery(world: World, job_id: int) -> tuple[str, float | None]:
    """``(delivery_route, announced_at)`` of a job, as the bot recorded it."""
    with sqlite3.connect(world.bot.env["DATABASE_PATH"]) as db:
        row = db.execute(
            "SELECT delivery_route, announced_at FROM jobs WHERE id = ?", (job_id,)
        ).fetchone()
    return row[0], row[1]
