"""The service gives a task id again: the real bot keeps each task in its own place.

The API emulator restarts its task counter (``restart_task_counter``) while the bot and its
database run on: server A's video gets ``task-1``, the counter restarts, and server B's video
gets ``task-1`` too, on the same key or on B's own. Each is charged to its own server, polled,
and delivered to its own channel; the clash leaves an anomaly for the admins of the server whose
task came second. The ledger is read from the bot's own database file.
"""

from __future__ import annotations

import sqlite3

import pytest

from bot.domain import TASK_ID_REUSED
from bot.genapi.client import key_fingerprint
from bot.sandbox.catalogue import catalogue_json
from tests.support.discord_emulator.models import Channel, Guild, Message
from tests.support.e2e.harness import ADMIN_PERMISSIONS, MEMBER_PERMISSIONS, World

pytestmark = pytest.mark.asyncio(loop_scope="module")


def rows(world: World, sql: str, *params: object) -> list[tuple[object, ...]]:
    conn = sqlite3.connect(f"file:{world.bot.env['DATABASE_PATH']}?mode=ro", uri=True)
    try:
        return conn.execute(sql, params).fetchall()
    finally:
        conn.close()


def shows(message: Message, task_id: str) -> bool:
    """Whether the message shows the task's video, as a link or as an attached file."""
    names = [a.filename for a in message.attachments]
    return f"{task_id}.mp4" in message.text + str(names)


@pytest.fixture(scope="module")
def other(world: World) -> tuple[Guild, Channel]:
    """Server B, owned by the world's admin, with a channel of its own."""
    guild = world.discord.add_guild("Other Guild", owner_id=world.admin.id)
    return guild, world.discord.add_channel(guild.id, "generate")


async def order_video(world: World, guild: Guild, channel: Channel, prompt: str) -> Message:
    """Order a video in ``channel`` as the member; return its placeholder."""
    model = next(m for m in catalogue_json()["models"]["video"] if "image" not in m["mode"])
    handle = await world.discord.invoke(
        "video",
        {"prompt": prompt, "model": model["id"], "duration": model["durations"][0]},
        guild_id=guild.id,
        channel_id=channel.id,
        user_id=world.member.id,
        permissions=MEMBER_PERMISSIONS,
    )
    answer = await world.answer(handle)
    assert answer.ephemeral
    return await world.discord.wait_for_message(
        lambda m: m.channel_id == channel.id and prompt in m.text, include_existing=True
    )


async def delivered(world: World, placeholder: Message, task_id: str) -> Message:
    return await world.discord.wait_for_edit(
        placeholder.id, lambda m: shows(m, task_id), timeout=40
    )


async def test_the_same_key_given_an_id_again_charges_and_delivers_both_in_their_servers(
    world: World, other: tuple[Guild, Channel]
) -> None:
    guild_b, channel_b = other
    world.api.restart_task_counter()
    first = await order_video(world, world.guild, world.channel, "a heron at dawn")
    await delivered(world, first, "task-1")

    world.api.restart_task_counter()
    second = await order_video(world, guild_b, channel_b, "a crane at dusk")
    done = await delivered(world, second, "task-1")
    assert done.channel_id == channel_b.id
    # A's message still shows A's video, B's shows B's: neither was merged into the other.
    assert "a heron at dawn" in world.discord.world.messages[first.id].text
    assert "a crane at dusk" in done.text

    fingerprint = key_fingerprint(world.key)
    charged = rows(
        world,
        "SELECT guild_id, channel_id, cost_micro > 0 FROM ledger WHERE task_id = 'task-1'"
        " AND key_fingerprint = ? ORDER BY id",
        fingerprint,
    )
    assert charged == [(world.guild.id, world.channel.id, 1), (guild_b.id, channel_b.id, 1)]
    assert rows(
        world, "SELECT guild_id, reason FROM charge_anomalies WHERE task_id = 'task-1'"
    ) == [(guild_b.id, TASK_ID_REUSED)]
    polled = [r for r in world.api.requests if r.method == "GET" and "/video/task-1" in r.path]
    assert {r.key for r in polled} == {world.key}
    usage = await world.discord.invoke(
        "usage",
        {},
        guild_id=guild_b.id,
        channel_id=channel_b.id,
        user_id=world.admin.id,
        permissions=ADMIN_PERMISSIONS,
    )
    report = (await world.answer(usage)).text
    assert "Task ids given again" in report
    assert "Charges to check" not in report  # not a charge of a wrong amount


async def test_two_keys_given_the_same_id_at_once_each_get_their_own_video(
    world: World, other: tuple[Guild, Channel]
) -> None:
    guild_b, channel_b = other
    own_key = world.api.create_key(balance_cents=100_000)
    opened = await world.discord.invoke(
        "config",
        {},
        guild_id=guild_b.id,
        channel_id=channel_b.id,
        user_id=world.admin.id,
        permissions=ADMIN_PERMISSIONS,
        group="api-key",
        subcommand="set",
    )
    await opened.wait_callback()
    assert opened.modal is not None
    field_id = opened.modal["components"][0]["components"][0]["custom_id"]
    submitted = await world.discord.submit_modal(
        opened.modal["custom_id"], {field_id: own_key}, permissions=ADMIN_PERMISSIONS
    )
    assert "key" in (await submitted.wait_original(timeout=15)).content

    # Long enough that both are still being made when the second is ordered.
    world.api.set_task_duration(lambda model, body: 8.0)
    try:
        world.api.restart_task_counter()
        first = await order_video(world, world.guild, world.channel, "a stork on a roof")
        world.api.restart_task_counter()
        second = await order_video(world, guild_b, channel_b, "a swan on a lake")
        assert world.api.tasks["task-1"].key == own_key
        done_a, done_b = (
            await delivered(world, first, "task-1"),
            await delivered(world, second, "task-1"),
        )
    finally:
        world.api.set_task_duration(lambda model, body: 4.0)
    assert (done_a.channel_id, done_b.channel_id) == (world.channel.id, channel_b.id)

    charged = rows(
        world,
        "SELECT guild_id FROM ledger WHERE task_id = 'task-1' AND key_fingerprint = ?",
        key_fingerprint(own_key),
    )
    assert charged == [(guild_b.id,)]
    # task-1 was already stored for A's task: the clash is recorded in B, where it came second.
    assert rows(
        world,
        "SELECT guild_id, reason FROM charge_anomalies WHERE key_fingerprint = ?",
        key_fingerprint(own_key),
    ) == [(guild_b.id, TASK_ID_REUSED)]
    polls = {r.key for r in world.api.requests if r.method == "GET" and "/video/task-1" in r.path}
    assert polls == {world.key, own_key}
    assert world.api.balance(own_key) < 100_000
