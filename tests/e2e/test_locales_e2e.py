"""The bot in the member's language, end to end: commands, answers, cards and amounts.

Discord sends each interaction with the member's client language (``locale``) and the server's
(``guild_locale``); the emulator lets a scene choose both. What only the member sees is in the
member's language; a public card is in the server's, or in the one an admin chose with
``/config language``.
"""

import re
import sqlite3
from decimal import Decimal
from typing import Any

import pytest
from babel.numbers import format_currency

from bot.i18n import translations
from tests.support.discord_emulator.models import Channel, Guild, User
from tests.support.e2e.harness import ADMIN_PERMISSIONS, MEMBER_PERMISSIONS, World
from tests.support.e2e.videos import shows, video_model

pytestmark = pytest.mark.asyncio(loop_scope="module")

KANA_OR_KANJI = re.compile(r"[\u3040-\u30ff\u4e00-\u9fff]")


def in_(locale: str, message: str) -> str:
    """``message`` as the shipped catalogue of ``locale`` words it."""
    return translations(locale).gettext(message)


async def run(
    world: World, user: User, channel: Channel, name: str, options: dict[str, Any], **kw: Any
):
    handle = await world.discord.invoke(
        name,
        options,
        guild_id=channel.guild_id,
        channel_id=channel.id,
        user_id=user.id,
        permissions=kw.pop("permissions", MEMBER_PERMISSIONS),
        **kw,
    )
    world.handles.append(handle)
    return handle


def berlin(world: World) -> tuple[Guild, Channel]:
    """A server whose Discord language is German (made once per module)."""
    found = [g for g in world.discord.world.guilds.values() if g.name == "Berlin"]
    guild = found[0] if found else world.discord.add_guild("Berlin", preferred_locale="de")
    channel = guild.channel("bilder") if found else world.discord.add_channel(guild.id, "bilder")
    return guild, channel


def haruto(world: World) -> User:
    """A member whose Discord client is in Japanese."""
    found = [u for u in world.discord.world.users.values() if u.username == "haruto"]
    return found[0] if found else world.discord.add_user("haruto", locale="ja")


async def test_the_registered_commands_carry_their_descriptions_in_every_language(
    world: World,
) -> None:
    commands = {c["name"]: c for c in world.discord.registered_commands()}
    video = commands["video"]
    localized = video["description_localizations"]
    assert {"es-ES", "es-419", "pt-BR", "fr", "de", "ja"} <= set(localized)
    assert localized["ja"] == in_("ja", video["description"]) != video["description"]
    assert KANA_OR_KANJI.search(localized["ja"])
    assert not video.get("name_localizations")  # names stay English: docs and help stay valid
    prompt = next(o for o in video["options"] if o["name"] == "prompt")
    assert prompt["description_localizations"]["de"] == in_("de", prompt["description"])
    mode = next(o for o in commands["image"]["options"] if o["name"] == "mode")
    for choice in mode["choices"]:
        assert choice["name_localizations"]["fr"] == in_("fr", choice["name"]) != choice["name"]
    config = commands["config"]
    language = next(o for o in config["options"] if o["name"] == "language")
    assert language["description_localizations"]["pt-BR"]


async def test_a_japanese_member_reads_japanese_while_the_german_server_card_is_german(
    world: World,
) -> None:
    _, channel = berlin(world)
    member = haruto(world)
    model = video_model(world)
    prompt = "ein Fuchs im Schnee"
    options = {"prompt": prompt, "model": model["id"], "duration": model["durations"][0]}
    answer = await world.answer(await run(world, member, channel, "video", options))
    assert answer.ephemeral
    assert KANA_OR_KANJI.search(answer.text), answer.text  # the member's own answer
    card = await world.discord.wait_for_message(
        lambda m: m.channel_id == channel.id and prompt in m.text, include_existing=True
    )
    assert not card.ephemeral
    assert f"**{in_('de', 'Video')}**" in card.text, card.text
    assert in_("de", "Requested by {member}").split("{")[0].strip() in card.text
    assert not KANA_OR_KANJI.search(card.text)
    (task_id,) = [t for t, task in world.api.tasks.items() if task.request.get("prompt") == prompt]
    done = await world.discord.wait_for_edit(card.id, lambda m: shows(m, task_id), timeout=40)
    assert in_("de", "done") in done.text
    reply = await world.discord.wait_for_message(
        lambda m: str((m.message_reference or {}).get("message_id")) == str(card.id),
        include_existing=True,
    )
    assert reply.content == in_("de", "{mention} your video is ready.").format(
        mention=f"<@{member.id}>"
    )


async def test_a_japanese_member_gets_japanese_errors_and_usage_with_japanese_amounts(
    world: World,
) -> None:
    guild, channel = berlin(world)
    member = haruto(world)
    refused = await world.answer(
        await run(world, member, channel, "usage", {"user": world.admin.id})
    )
    assert refused.ephemeral
    assert refused.content == in_("ja", "Seeing other members' usage needs Manage Server.")
    assert KANA_OR_KANJI.search(refused.content)
    usage = await world.answer(await run(world, member, channel, "usage", {}))
    embed = usage.embeds[0]
    assert embed["title"] == in_("ja", "Usage")
    fields = {f["name"]: f["value"] for f in embed["fields"]}
    with sqlite3.connect(world.bot.env["DATABASE_PATH"]) as db:
        (micro,) = db.execute(
            "SELECT SUM(cost_micro) FROM ledger WHERE guild_id = ? AND user_id = ?",
            (guild.id, member.id),
        ).fetchone()
    spent = Decimal(micro) / 1_000_000 / 100  # dollars
    assert spent > 0  # the video of the scene before
    shown = format_currency(spent, "USD", locale="ja", decimal_quantization=False)
    assert fields[in_("ja", "This month (UTC)")] == shown


async def test_a_server_that_chose_french_posts_french_cards(world: World) -> None:
    chosen = await world.answer(
        await world.command(
            "config",
            {"language": "fr"},
            admin=True,
            subcommand="language",
            permissions=ADMIN_PERMISSIONS,
        )
    )
    assert chosen.ephemeral
    model = video_model(world)
    prompt = "un chat sur un toit"
    options = {"prompt": prompt, "model": model["id"], "duration": model["durations"][0]}
    answer = await world.answer(await world.command("video", options))
    assert answer.ephemeral  # the member's own language, English here
    card = await world.discord.wait_for_message(
        lambda m: m.channel_id == world.channel.id and prompt in m.text, include_existing=True
    )
    assert f"**{in_('fr', 'Video')}**" in card.text, card.text
    assert in_("fr", "Requested by {member}").split("{")[0].strip() in card.text
    back = await world.answer(
        await world.command(
            "config",
            {"language": "default"},
            admin=True,
            subcommand="language",
            permissions=ADMIN_PERMISSIONS,
        )
    )
    assert back.ephemeral


async def test_the_admin_channel_of_a_german_server_reads_german_and_config_show_japanese(
    world: World,
) -> None:
    guild, channel = berlin(world)
    admin_log = world.discord.add_channel(guild.id, "admin-log")
    member = haruto(world)

    async def config(options: dict[str, Any], **where: str) -> Any:
        handle = await run(
            world, member, channel, "config", options, permissions=ADMIN_PERMISSIONS, **where
        )
        answer = await world.answer(handle)
        assert answer.ephemeral
        return answer

    await config({"channel": admin_log}, subcommand="admin-channel")
    await config({"command": "video", "seconds": 30}, subcommand="cooldown")
    heading = in_("de", "<@{user}> changed the bot's settings:").replace("{user}", str(member.id))
    line = await world.discord.wait_for_message(
        lambda m: m.channel_id == admin_log.id and "cooldown" in m.text, include_existing=True
    )
    assert line.text.startswith(heading), line.text
    shown = await config({}, subcommand="show")
    fields = {f["name"]: f["value"] for e in shown.embeds for f in e.get("fields", [])}
    assert fields[in_("ja", "Cooldowns per member")] == in_(
        "ja", "/{command}: {seconds} s"
    ).replace("{command}", "video").replace("{seconds}", "30")
