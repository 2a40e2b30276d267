"""Key changes, the shared key and redaction, with the real bot process."""

from __future__ import annotations

import sqlite3

import pytest

from bot.services.keys import fingerprint
from tests.support.e2e.harness import World, result_url
from tests.support.e2e.keys import set_key
from tests.support.e2e.videos import submit_video

pytestmark = pytest.mark.asyncio(loop_scope="module")


async def test_a_video_outlives_the_key_that_made_it(world: World) -> None:
    old_key = world.api.create_key(balance_cents=50_000)
    await set_key(world, old_key)
    _, placeholder = await submit_video(world, "a lighthouse in a storm")

    new_key = world.api.create_key(balance_cents=50_000)
    # Another admin: one member checks one key per 30 s, on every surface.
    co_admin = world.discord.add_user("co-admin")
    answer = await set_key(world, new_key, user_id=co_admin.id)
    assert "1 video is still being made with the old key" in answer
    assert old_key not in answer

    remove = await world.command("config", {}, admin=True, group="api-key", subcommand="remove")
    removed = await world.answer(remove)
    assert "removed" in removed.content
    assert "shared key" in removed.content

    done = await world.discord.wait_for_edit(
        placeholder.id, lambda m: "/files/" in m.text, timeout=40
    )
    assert result_url(done).endswith(".mp4")
    task_polls = [r for r in world.api.requests if r.method == "GET" and "/video/" in r.path]
    assert task_polls and {r.key for r in task_polls} == {old_key}
    log = world.bot.log()
    assert "no longer configured" not in log
    for key in (old_key, new_key):
        assert key not in log


def identifies(world: World) -> int:
    return sum(1 for event in world.discord.gateway_received if event.op == 2)


async def test_a_video_outlives_a_change_of_the_bots_default_key(world: World) -> None:
    """The owner restarts with a new GENAPI_API_KEY (after a leak) mid-video."""
    old_key = world.key
    world.api.set_task_duration(lambda model, body: 10.0)
    try:
        _, placeholder = await submit_video(world, "a harbour at night")  # on the default key
        await world.bot.stop()
        assert "/files/" not in world.discord.messages[placeholder.id].text
        new_key = world.api.create_key(balance_cents=1_000_000)
        world.bot.env["GENAPI_API_KEY"] = new_key
        world.key = new_key  # what the other scenarios, and the module's checks, now use
        before = identifies(world)
        await world.bot.start()
        await world.discord.signal.wait_for(
            lambda: True if identifies(world) > before else None, 60, "IDENTIFY after restart"
        )
        await world.discord.wait_ready(timeout=60)

        done = await world.discord.wait_for_edit(
            placeholder.id, lambda m: "/files/" in m.text, timeout=40
        )
    finally:
        world.api.set_task_duration(lambda model, body: 4.0)
    assert result_url(done).endswith(".mp4")
    task_id = result_url(done).rsplit("/", 1)[1].removesuffix(".mp4")
    polls = [r for r in world.api.requests if r.path.startswith(f"/api/v1/video/{task_id}")]
    assert polls and {r.key for r in polls} == {old_key}  # a task belongs to its key
    log = world.bot.log()
    assert f"previous GENAPI_API_KEY {fingerprint(old_key)} kept" in log
    assert "known nowhere" not in log and "no longer configured" not in log
    for key in (old_key, new_key):
        assert key not in log
    # Its last job ended: only the current default key is still stored (encrypted).
    with sqlite3.connect(world.bot.env["DATABASE_PATH"]) as db:
        stored = db.execute("SELECT fingerprint, ciphertext FROM default_keys").fetchall()
    assert [row[0] for row in stored] == [fingerprint(new_key)]
    assert new_key.encode() not in stored[0][1]


async def test_a_server_on_the_shared_key_sees_neither_its_balance_nor_top_up_advice(
    world: World,
) -> None:
    text = await world.command("text", {"prompt": "a charge on the shared key"})
    await world.answer(text)
    usage = await world.command("usage", {}, admin=True)
    report = await world.answer(usage)
    assert "Credits left" not in report.text

    world.api.set_balance(world.key, 0)
    handle = await world.command("text", {"prompt": "no credits left"})
    answer = await world.answer(handle)
    assert "shared" in answer.content
    assert "top it up" not in answer.content
    world.api.set_balance(world.key, 1_000_000)


async def test_a_key_echoed_by_the_service_is_never_logged_or_shown(world: World) -> None:
    world.api.echo_keys_in_errors()
    world.api.revoke_key(world.key)
    handle = await world.command("text", {"prompt": "on a revoked key"})
    answer = await world.answer(handle)
    assert answer.ephemeral
    assert "rejected" in answer.content
    # Logged before the answer was sent: the service's message, with the key taken out.
    log = world.bot.log()
    assert "upstream refused a command: 401" in log
    assert "revoked: [redacted]" in log
    assert world.key not in log
    everything = " ".join(m.content + m.text for m in world.discord.messages.values())
    assert world.key not in everything
