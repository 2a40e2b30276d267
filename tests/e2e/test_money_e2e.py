"""The real bot process charged fractions of a cent, or nonsense: the user still gets the video.

The API emulator reports the charge a test asks for (``report_next_costs``); the ledger is read
from the bot's own database file.
"""

import sqlite3
from decimal import Decimal

import pytest

from bot.sandbox.catalogue import catalogue_json
from tests.support.discord_emulator.interactions import InteractionHandle
from tests.support.e2e.harness import ADMIN_PERMISSIONS, MEMBER_PERMISSIONS, World
from tests.support.e2e.videos import video_for

pytestmark = pytest.mark.asyncio(loop_scope="module")


def ledger(world: World, sql: str) -> list[tuple[object, ...]]:
    conn = sqlite3.connect(f"file:{world.bot.env['DATABASE_PATH']}?mode=ro", uri=True)
    try:
        return conn.execute(sql).fetchall()
    finally:
        conn.close()


async def test_a_video_charged_035_cents_is_delivered_and_the_ledger_is_exact(
    world: World,
) -> None:
    balance = world.api.balance(world.key)
    world.api.report_next_costs(Decimal("0.35"))
    task_id, _ = await video_for(world, "a fox counting pennies")
    assert world.api.balance(world.key) == balance - Decimal("0.35")
    assert ledger(world, f"SELECT cost_micro FROM ledger WHERE task_id = '{task_id}'") == [
        (350_000,)
    ]
    usage = await world.answer(await world.command("usage", {}))
    assert "$0.0035" in usage.text


async def test_a_negative_charge_is_kept_for_admins_and_the_video_still_delivered(
    world: World,
) -> None:
    world.api.report_next_costs(Decimal("-2"))
    task_id, _ = await video_for(world, "a fox refunded by mistake")
    assert ledger(world, f"SELECT COUNT(*) FROM ledger WHERE task_id = '{task_id}'") == [(0,)]
    assert ledger(
        world, f"SELECT reported_cost FROM charge_anomalies WHERE task_id = '{task_id}'"
    ) == [("-2",)]
    report = await world.answer(await world.command("usage", {}, admin=True))
    assert "Charges to check" in report.text


async def test_a_connection_dropped_after_sending_is_not_an_invitation_to_pay_twice(
    world: World,
) -> None:
    model = next(m for m in catalogue_json()["models"]["video"] if "image" not in m["mode"])
    world.api.inject_fault("drop", 1)
    handle = await world.command(
        "video", {"prompt": "a fox on a bad line", "model": model["id"], "duration": 5}
    )
    answer = await world.answer(handle)
    assert answer.ephemeral
    assert "may still have been charged" in answer.content
    assert "`/usage`" in answer.content and "`/jobs`" in answer.content
    assert "try again later" not in answer.content


async def test_a_one_dollar_budget_crossed_at_half_and_whole_gives_two_admin_lines(
    world: World,
) -> None:
    # A server of its own: the module's other scenarios spend in the world's server.
    guild = world.discord.add_guild("Guarded", owner_id=world.admin.id)
    generate = world.discord.add_channel(guild.id, "generate")
    admin_log = world.discord.add_channel(guild.id, "admin-log")

    async def as_admin(options: dict[str, object], **where: str) -> None:
        handle = await world.discord.invoke(
            "config",
            options,
            guild_id=guild.id,
            channel_id=generate.id,
            user_id=world.admin.id,
            permissions=ADMIN_PERMISSIONS,
            **where,
        )
        world.handles.append(handle)
        assert (await world.answer(handle)).ephemeral

    await as_admin({"channel": admin_log}, subcommand="admin-channel")
    await as_admin({"monthly": "1.00"}, subcommand="budget")
    model = next(m for m in catalogue_json()["models"]["video"] if "image" not in m["mode"])
    for cents, prompt in ((60, "a fox saving half"), (40, "a fox spending the rest")):
        world.api.report_next_costs(Decimal(cents))
        handle = await world.discord.invoke(
            "video",
            {"prompt": prompt, "model": model["id"], "duration": model["durations"][0]},
            guild_id=guild.id,
            channel_id=generate.id,
            user_id=world.member.id,
            permissions=MEMBER_PERMISSIONS,
        )
        world.handles.append(handle)
        await world.answer(handle)
    await world.discord.wait_for_message(
        lambda m: m.channel_id == admin_log.id and "100 %" in m.content,
        include_existing=True,
        timeout=10,
    )
    lines = [
        m.content
        for m in world.discord.channel_messages(admin_log.id)
        if "This server has spent" in m.content
    ]
    assert len(lines) == 2, lines
    assert "$0.60 of its $1.00 monthly budget (60 %); $0.40 remains" in lines[0]
    assert "$1.00 of its $1.00 monthly budget (100 %); $0.00 remains" in lines[1]


async def test_a_key_whose_credits_run_low_gives_the_runway_alert_once(world: World) -> None:
    # A server of its own, on a key of its own with $1.00 left: the shared key's balance is the
    # bot owner's and is told to no server.
    guild = world.discord.add_guild("Runway", owner_id=world.admin.id)
    generate = world.discord.add_channel(guild.id, "generate")
    admin_log = world.discord.add_channel(guild.id, "admin-log")

    async def invoke(
        name: str, options: dict[str, object], *, admin: bool = False, **sub: str
    ) -> InteractionHandle:
        handle = await world.discord.invoke(
            name,
            options,
            guild_id=guild.id,
            channel_id=generate.id,
            user_id=world.admin.id if admin else world.member.id,
            permissions=ADMIN_PERMISSIONS if admin else MEMBER_PERMISSIONS,
            **sub,
        )
        world.handles.append(handle)
        return handle

    await world.answer(
        await invoke("config", {"channel": admin_log}, admin=True, subcommand="admin-channel")
    )
    key = world.api.create_key(balance_cents=100)
    opened = await invoke("config", {}, admin=True, group="api-key", subcommand="set")
    await opened.wait_callback()
    assert opened.modal is not None
    field_id = opened.modal["components"][0]["components"][0]["custom_id"]
    stored = await world.discord.submit_modal(
        opened.modal["custom_id"], {field_id: key}, permissions=ADMIN_PERMISSIONS
    )
    assert key[-4:] in (await stored.wait_original(timeout=15)).content

    for cents, prompt in ((60, "a fox spending most of the key"), (10, "and a little more")):
        world.api.report_next_costs(Decimal(cents))
        await world.answer(await invoke("text", {"prompt": prompt}))
    assert world.api.balance(key) == 30
    # $0.40 left after a first day's pace of $0.60: under the 3 days of runway-days' default.
    alert = await world.discord.wait_for_message(
        lambda m: m.channel_id == admin_log.id and "runs dry in about" in m.content,
        include_existing=True,
        timeout=10,
    )
    assert "$0.40 left" in alert.content
    lines = [
        m.content for m in world.discord.channel_messages(admin_log.id) if "runs dry" in m.content
    ]
    assert len(lines) == 1, lines  # once per key and day
