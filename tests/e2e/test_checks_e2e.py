"""What a member gets wrong, and what an admin limits: one ephemeral sentence, no charge."""

import aiohttp
import pytest

from bot.sandbox.catalogue import catalogue_json
from tests.support.discord_emulator.models import ATTACHMENT_URL_SECONDS, unsigned
from tests.support.discord_emulator.permissions import (
    ATTACH_FILES,
    DEFAULT_BOT_PERMISSIONS,
    EMBED_LINKS,
)
from tests.support.e2e.harness import ADMIN_PERMISSIONS, World
from tests.support.e2e.refusals import generation_posts, refused

pytestmark = pytest.mark.asyncio(loop_scope="module")


def text_to_video() -> dict:
    return next(m for m in catalogue_json()["models"]["video"] if "image" not in m["mode"])


async def test_a_duration_the_model_does_not_offer(world: World) -> None:
    model = text_to_video()
    sentence = await refused(world, "video", {"prompt": "x", "model": model["id"], "duration": 7.5})
    assert "7.5 s" in sentence
    assert f"{model['durations'][0]:g} s" in sentence


async def test_audio_on_a_model_without_it(world: World) -> None:
    model = next(m for m in catalogue_json()["models"]["video"] if not m["supports_audio"])
    sentence = await refused(
        world, "video", {"prompt": "x", "model": model["id"], "generate_audio": True}
    )
    assert "cannot generate audio" in sentence


async def test_an_image_edit_without_a_source_image(world: World) -> None:
    sentence = await refused(world, "image", {"prompt": "fix the sign", "mode": "i2i"})
    assert "attach one" in sentence


async def test_an_uploaded_image_becomes_the_source(world: World) -> None:
    handle = await world.command(
        "image",
        {"prompt": "make it blue", "mode": "i2i"},
        attachments={"image": ("fox.png", b"\x89PNG fake", "image/png")},
    )
    answer = await world.answer(handle)
    assert answer.media_urls, answer.text
    (call,) = [r for r in world.api.requests if r.json and r.json.get("prompt") == "make it blue"]
    assert call.json["image_url"].startswith(world.discord.base_url)
    assert unsigned(call.json["image_url"]).endswith("fox.png")


async def test_a_missing_permission_is_named(world: World) -> None:
    channel = world.discord.add_channel(world.guild.id, "no-embeds")
    world.discord.set_bot_permissions(channel.id, DEFAULT_BOT_PERMISSIONS & ~EMBED_LINKS)
    model = text_to_video()
    sentence = await refused(
        world, "video", {"prompt": "x", "model": model["id"]}, channel_id=channel.id
    )
    assert "Embed Links" in sentence


async def test_a_channel_where_the_result_file_cannot_be_attached_is_refused(
    world: World,
) -> None:
    channel = world.discord.add_channel(world.guild.id, "no-files")
    world.discord.set_bot_permissions(channel.id, DEFAULT_BOT_PERMISSIONS & ~ATTACH_FILES)
    model = text_to_video()
    sentence = await refused(
        world, "video", {"prompt": "x", "model": model["id"]}, channel_id=channel.id
    )
    assert "Attach Files" in sentence


async def test_commands_limited_to_a_channel(world: World) -> None:
    elsewhere = world.discord.add_channel(world.guild.id, "elsewhere")
    allow = await world.command(
        "config", {"channel": world.channel.id}, admin=True, group="channels", subcommand="allow"
    )
    assert (await world.answer(allow)).ephemeral
    sentence = await refused(world, "text", {"prompt": "hi"}, channel_id=elsewhere.id)
    assert f"<#{world.channel.id}>" in sentence
    answer = await world.answer(await world.command("text", {"prompt": "hi here"}))
    assert "hi here" in answer.text
    reset = await world.command("config", {}, admin=True, group="channels", subcommand="everywhere")
    await world.answer(reset)


async def test_a_budget_that_is_not_an_amount(world: World) -> None:
    answer = await world.answer(
        await world.command("config", {"monthly": "lots"}, admin=True, subcommand="budget")
    )
    assert answer.ephemeral
    assert "not an amount" in answer.content


async def test_models_pages_turn_with_buttons(world: World) -> None:
    handle = await world.command("models", {})
    first = await world.answer(handle)
    buttons = [c for row in first.components for c in row["components"]]
    next_button = next(b for b in buttons if b.get("label") == "Next")
    title = first.embeds[0].get("title")
    pressed = await world.discord.press_button(
        first.id, next_button["custom_id"], user_id=world.member.id
    )
    callback = await pressed.wait_callback()
    assert callback.type == 7  # UPDATE_MESSAGE: the same message shows the next page
    assert world.discord.messages[first.id].embeds[0].get("title") != title
    # Anyone else is told the pages are not theirs to turn, and the page stays.
    shown = world.discord.messages[first.id].embeds[0].get("title")
    other = world.discord.add_user("someone else")
    refused = await world.answer(
        await world.discord.press_button(first.id, next_button["custom_id"], user_id=other.id)
    )
    assert refused.ephemeral and "Only the member who asked" in refused.content
    assert world.discord.messages[first.id].embeds[0].get("title") == shown


async def test_usage_members_see_their_own_and_admins_everyone(world: World) -> None:
    mine = await world.answer(await world.command("usage", {}))
    assert mine.ephemeral
    assert f"<@{world.member.id}>" in mine.text
    other = await world.answer(await world.command("usage", {"user": world.admin.id}))
    assert "Manage Server" in other.content
    guild = await world.answer(await world.command("usage", {}, admin=True))
    assert "This server's usage" in guild.text
    assert "Top members" in guild.text
    # The server runs on the bot's shared key: its balance is the owner's, not shown here.
    assert "Credits left" not in guild.text


async def test_threads_and_forum_posts_inherit_their_parents_setting(world: World) -> None:
    thread = world.discord.add_thread(world.channel.id, "ideas")
    forum = world.discord.add_forum(world.guild.id, "gallery")
    post = world.discord.add_thread(forum.id, "my post")
    for channel in (world.channel, forum):
        allow = await world.command(
            "config", {"channel": channel.id}, admin=True, group="channels", subcommand="allow"
        )
        assert "allowed" in (await world.answer(allow)).content
    try:
        for place in (thread, post):
            answer = await world.answer(
                await world.command("text", {"prompt": f"hi in {place.name}"}, channel_id=place.id)
            )
            assert f"hi in {place.name}" in answer.text
        # A video's placeholder goes into the forum post itself (Send Messages in Threads).
        handle = await world.command(
            "video",
            {"prompt": "a heron in a post", "model": text_to_video()["id"]},
            channel_id=post.id,
        )
        assert (await world.answer(handle)).ephemeral
        await world.discord.wait_for_message(
            lambda m: m.channel_id == post.id and "heron in a post" in m.text,
            include_existing=True,
        )
        elsewhere = world.discord.add_channel(world.guild.id, "off-topic")
        stray = world.discord.add_thread(elsewhere.id, "stray")
        sentence = await refused(world, "text", {"prompt": "hi"}, channel_id=stray.id)
        assert f"<#{world.channel.id}>" in sentence
    finally:
        reset = await world.command(
            "config", {}, admin=True, group="channels", subcommand="everywhere"
        )
        await world.answer(reset)


async def test_an_attachment_that_is_not_an_image_is_refused(world: World) -> None:
    posts = generation_posts(world)
    handle = await world.command(
        "image",
        {"prompt": "make it blue", "mode": "i2i"},
        attachments={"image": ("notes.txt", b"not an image", "text/plain")},
    )
    answer = await world.answer(handle)
    assert answer.ephemeral
    assert "not an image" in answer.content
    assert generation_posts(world) == posts


async def test_a_plain_http_url_is_refused_with_the_rule(world: World) -> None:
    sentence = await refused(
        world,
        "image",
        {"prompt": "make it blue", "mode": "i2i", "image_url": "http://example.com/fox.png"},
    )
    assert "must start with https://" in sentence


async def test_a_styles_references_are_read_from_the_kept_message_after_urls_expired(
    world: World,
) -> None:
    handle = await world.command(
        "config",
        {"name": "ink", "suffix": "ink wash painting"},
        admin=True,
        group="style",
        subcommand="add",
        attachments={"image1": ("ink.png", b"\x89PNG fake", "image/png")},
    )
    added = await world.answer(handle)
    assert "Style `ink` added" in added.content, added.content
    kept = await world.discord.wait_for_message(
        lambda m: "`ink`" in m.text and bool(m.attachments), include_existing=True
    )
    signed_then = world.discord.world.url_signer.sign(kept.attachments[0])
    world.discord_clock.advance(2 * ATTACHMENT_URL_SECONDS)  # every URL signed so far expired

    handle = await world.command("image", {"prompt": "a crane", "style": "ink"})
    card = await world.answer(handle)
    assert card.media_urls
    (call,) = [r for r in world.api.requests if r.path.endswith("/image/generate")][-1:]
    assert call.json["prompt"] == "a crane, ink wash painting"
    # The kept message's attachment, asked for when sent: not the interaction's upload, and
    # signed anew: the service can fetch it although every earlier URL of it has expired.
    (sent,) = call.json["image_urls"]
    assert unsigned(sent) == kept.attachments[0].url
    async with (
        aiohttp.ClientSession() as http,
        http.get(signed_then) as stale,
        http.get(sent) as fresh,
    ):
        assert (stale.status, fresh.status) == (404, 200)

    # The result just made, picked by its prompt as a reference of another style. Its card
    # shows the service's URL (a synchronous image): the file is kept in a message too.
    (choice,) = await world.discord.autocomplete(
        "config",
        {"name": "cranes", "suffix": "x", "from-results": "crane"},
        "from-results",
        guild_id=world.guild.id,
        channel_id=world.channel.id,
        user_id=world.admin.id,
        permissions=ADMIN_PERMISSIONS,
        group="style",
        subcommand="add",
    )
    options = {"name": "cranes", "suffix": "x", "from-results": choice["value"]}
    handle = await world.command("config", options, admin=True, group="style", subcommand="add")
    assert "with 1 reference image" in (await world.answer(handle)).content
    await world.answer(await world.command("image", {"prompt": "a heron", "style": "cranes"}))
    (call,) = [r for r in world.api.requests if r.path.endswith("/image/generate")][-1:]
    picked = await world.discord.wait_for_message(
        lambda m: "`cranes`" in m.text and bool(m.attachments), include_existing=True
    )
    assert [unsigned(url) for url in call.json["image_urls"]] == [picked.attachments[0].url]

    world.discord.delete_message(kept.channel_id, kept.id)
    listed = await world.answer(
        await world.command("config", {}, admin=True, group="style", subcommand="list")
    )
    assert "1 of them is gone" in listed.content


async def test_a_character_applies_for_its_owner_only(world: World) -> None:
    handle = await world.command(
        "settings",
        {"name": "kit"},
        group="character",
        subcommand="add",
        attachments={"image": ("kit.png", b"\x89PNG fake", "image/png")},
    )
    assert "kit" in (await world.answer(handle)).content
    kept = await world.discord.wait_for_message(
        lambda m: "`kit`" in m.text and bool(m.attachments), include_existing=True
    )

    await world.answer(await world.command("image", {"prompt": "a fox", "character": "kit"}))
    (call,) = [r for r in world.api.requests if r.path.endswith("/image/generate")][-1:]
    assert [unsigned(url) for url in call.json["image_urls"]] == [kept.attachments[0].url]

    def generations() -> int:
        return sum(r.path.endswith("/generate") for r in world.api.requests)

    made = generations()
    handle = await world.command("image", {"prompt": "a fox", "character": "kit"}, admin=True)
    refused = await world.answer(handle)
    assert "You have no character named `kit`" in refused.content, refused.content
    assert generations() == made  # nothing asked of the service, nothing charged
