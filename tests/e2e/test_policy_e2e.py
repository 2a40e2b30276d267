"""A server's policy with the real bot process: role tiers, blocked terms, cooldowns,
and the audit of every ``/config`` change in the admin channel.

Members' roles travel in the interaction payload (``member.roles``), as Discord sends them.
The scenarios build on each other in order: one bot process for the module.
"""

from __future__ import annotations

import pytest

from tests.support.discord_emulator.models import Channel, Message, Role, User
from tests.support.e2e.harness import ADMIN_PERMISSIONS, World

pytestmark = pytest.mark.asyncio(loop_scope="module")

CHEAP = "aurora-lite/text-to-video"  # 20 cents per 5 s
DEAR = "zenith-ultra/text-to-video"  # 150 cents per 5 s: 6 s hold $1.80


class Cast:
    """Who plays the scenarios; filled by the first one."""

    admin_log: Channel
    patron: Role
    staff: Role
    patron_member: User
    both_member: User


async def config(world: World, options: dict[str, object], **where: str) -> Message:
    answer = await world.answer(await world.command("config", options, admin=True, **where))
    assert answer.ephemeral
    return answer


async def as_user(world: World, user: User, name: str, options: dict[str, object]) -> Message:
    return await world.answer(await world.command(name, options, user_id=user.id))


async def video(world: World, user: User, model: str, duration: int) -> Message:
    return await as_user(
        world, user, "video", {"prompt": "a fox", "model": model, "duration": duration}
    )


async def model_choices(world: World, user: User) -> set[str]:
    choices = await world.discord.autocomplete(
        "video",
        {"prompt": "x", "model": ""},
        "model",
        guild_id=world.guild.id,
        channel_id=world.channel.id,
        user_id=user.id,
    )
    return {c["value"] for c in choices}


async def admin_line(world: World, text: str) -> Message:
    return await world.discord.wait_for_message(
        lambda m: m.channel_id == Cast.admin_log.id and text in m.content,
        include_existing=True,
        timeout=10,
    )


async def test_tiers_change_the_models_offered_and_every_change_is_audited(world: World) -> None:
    Cast.admin_log = world.discord.add_channel(world.guild.id, "admin-log")
    Cast.patron = world.discord.add_role(world.guild.id, "Patron")
    Cast.staff = world.discord.add_role(world.guild.id, "Staff")
    Cast.patron_member = world.discord.add_user("patron")
    Cast.both_member = world.discord.add_user("staff-patron")
    world.discord.give_role(world.guild.id, Cast.patron_member.id, Cast.patron.id)
    for role in (Cast.patron, Cast.staff):
        world.discord.give_role(world.guild.id, Cast.both_member.id, role.id)

    await config(world, {"channel": Cast.admin_log}, subcommand="admin-channel")
    allowed = await config(
        world, {"models": "aurora-lite/, nobody/"}, group="models", subcommand="allow"
    )
    assert "`nobody/` matches no model" in allowed.content
    await config(world, {"daily_per_user": "0.30"}, subcommand="budget")
    saved = await config(
        world,
        {"role": Cast.patron, "daily_per_user": "0.50", "models": "all"},
        group="tier",
        subcommand="set",
    )
    assert "daily $0.50" in saved.content
    await config(world, {"role": Cast.staff, "daily_per_user": "5"}, group="tier", subcommand="set")

    line = await admin_line(world, "tier Patron")
    assert f"<@{world.admin.id}>" in line.content
    assert "daily per member: — → $0.50" in line.content
    budget = await admin_line(world, "daily budget per member")
    assert "unlimited → $0.30" in budget.content
    assert world.key not in str(
        [m.content for m in world.discord.channel_messages(Cast.admin_log.id)]
    )

    plain = await model_choices(world, world.member)
    assert plain == {"aurora-lite/text-to-video", "aurora-lite/image-to-video"}
    assert DEAR in await model_choices(world, Cast.patron_member)
    assert len(await model_choices(world, Cast.patron_member)) == 6

    shown = await config(world, {}, subcommand="show")
    assert "Role tiers" in str(shown.embeds) and f"<@&{Cast.patron.id}>" in str(shown.embeds)
    listing = await world.answer(await world.command("models", {"type": "video"}))
    assert str(listing.embeds).count("not available to you") == 4


async def test_tiers_refuse_differently_and_the_most_generous_wins(world: World) -> None:
    posts = world.posts_to("/video/generate")
    refused = await video(world, world.member, DEAR, 6)
    assert "not available to your roles" in refused.content
    refused = await video(world, Cast.patron_member, DEAR, 6)
    assert refused.content == (
        "Your daily allowance ($0.50, role Patron) has $0.50 left; this request needs about $1.80."
    )
    assert world.posts_to("/video/generate") == posts

    accepted = await video(world, Cast.both_member, DEAR, 6)  # Staff's $5 beats Patron's $0.50
    assert "on its way" in accepted.content
    assert "on its way" in (await video(world, world.member, CHEAP, 5)).content
    refused = await video(world, world.member, CHEAP, 5)
    assert "($0.30, server default) has $0.10 left" in refused.content
    assert world.posts_to("/video/generate") == posts + 2

    usage = await world.answer(await world.command("usage", {}, admin=True))
    assert "By tier" in str(usage.embeds)
    assert "Staff: $1.80" in str(usage.embeds) and "no tier: $0.20" in str(usage.embeds)


async def test_a_blocked_term_costs_nothing_and_is_logged(world: World) -> None:
    await config(world, {"term": "Forbidden Fruit"}, group="blocked-terms", subcommand="add")
    posts = world.posts_to("/text/generate")
    answer = await as_user(
        world, Cast.patron_member, "text", {"prompt": "the FORBIDDEN\u200b fruit"}
    )
    assert answer.ephemeral
    assert answer.content == "This prompt uses a term this server does not allow; nothing was sent."
    assert world.posts_to("/text/generate") == posts
    line = await admin_line(world, "Refused a prompt")
    assert f"<@{Cast.patron_member.id}>" in line.content and "`forbidden fruit`" in line.content


async def test_a_cooldown_refuses_the_second_command(world: World) -> None:
    await config(world, {"command": "text", "seconds": 600}, subcommand="cooldown")
    first = await as_user(world, Cast.patron_member, "text", {"prompt": "hello"})
    assert not first.ephemeral
    posts = world.posts_to("/text/generate")
    second = await as_user(world, Cast.patron_member, "text", {"prompt": "hello again"})
    assert second.ephemeral
    assert "/text has a cooldown here; try again <t:" in second.content
    assert second.content.endswith(":R>.")
    assert world.posts_to("/text/generate") == posts
    for prompt in ("exempt", "still exempt"):  # Manage Server: no cooldown
        handle = await world.command(
            "text", {"prompt": prompt}, user_id=Cast.both_member.id, permissions=ADMIN_PERMISSIONS
        )
        assert not (await world.answer(handle)).ephemeral
    await admin_line(world, "cooldown /text: — → 600 s")


async def test_a_blocked_term_is_found_in_chinese_and_behind_look_alike_letters(
    world: World,
) -> None:
    # No word spaces in Chinese; a Cyrillic а looks like a Latin a.
    for term in ("暴力", "bad apple"):
        await config(world, {"term": term}, group="blocked-terms", subcommand="add")
    posts = world.posts_to("/text/generate")
    for prompt in ("这是暴力视频", "a b\u0430d APPLE pie"):
        answer = await as_user(world, Cast.patron_member, "text", {"prompt": prompt})
        assert answer.ephemeral and "does not allow" in answer.content
    assert world.posts_to("/text/generate") == posts


async def test_a_request_refused_for_free_starts_no_cooldown(world: World) -> None:
    # A cooldown starts with a charged request, not a refused one (/text has a 600 s cooldown
    # since the scenario above).
    member = world.discord.add_user("unlucky")
    world.discord.give_role(world.guild.id, member.id, Cast.patron.id)  # any model
    # Short answers: their holds fit the Patron's $0.50 a day at the price learned so far.
    failed = await as_user(world, member, "text", {"prompt": "[fail] a poem", "max_tokens": 50})
    assert failed.ephemeral and "cooldown" not in failed.content
    answer = await as_user(world, member, "text", {"prompt": "a poem", "max_tokens": 50})
    assert not answer.ephemeral, answer.content


async def test_a_slow_admin_channel_never_fails_the_config_answer(world: World) -> None:
    # The audit post waited before the answer; a post held up past Discord's 3 s
    # (here a 20 s rate limit on the admin channel) made the admin see "interaction failed"
    # although the change was saved. Last in the module: the channel stays limited for 20 s.
    world.discord.inject_rate_limit(f"/channels/{Cast.admin_log.id}/messages", retry_after=20)
    answer = await config(world, {"command": "image", "seconds": 30}, subcommand="cooldown")
    assert answer.content == "Members now wait 30 s between two uses of /image."
