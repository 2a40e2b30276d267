"""Result buttons end to end: the buttons under results posted BEFORE a restart of the bot, the
Animate image / Edit image context menus, and confirming an expensive video.

Every accepted path is checked in the ledger (charged to whoever clicked, through the same
budgets and caps); every refused one costs nothing (no generation request reaches the API).
"""

import sqlite3
from typing import Any

import pytest

from tests.support.discord_emulator.errors import InvocationError
from tests.support.discord_emulator.models import Message, unsigned
from tests.support.e2e.harness import MEMBER_PERMISSIONS, World, action_buttons

pytestmark = pytest.mark.asyncio(loop_scope="module")

IMAGE_MODEL = "black-forest-labs/flux-schnell"
ASYNC_IMAGE_MODEL = "ideogram/ideogram-v2"
VIDEO_MODEL = "aurora-lite/text-to-video"
CHEAPEST_I2V = "aurora-lite/image-to-video"  # 25 c per 5 s, cheaper than Nimbus Pro (image)
EXPENSIVE_VIDEO = "zenith-ultra/text-to-video"  # 150 c per 5 s: 6 s cost $1.80
MANAGE_MESSAGES = 1 << 13
PNG = b"\x89PNG\r\n\x1a\n" + b"\0" * 64

results: dict[str, Message] = {}


def buttons(message: Message) -> dict[str, str]:
    """Action buttons of a message: label's first word -> custom id."""
    return {item["label"].split(" ")[0]: item["custom_id"] for item in action_buttons(message)}


def ledger(world: World) -> list[tuple[int, str, str]]:
    with sqlite3.connect(world.bot.env["DATABASE_PATH"]) as db:
        rows = db.execute("SELECT user_id, kind, model FROM ledger ORDER BY id").fetchall()
    return [(int(u), str(k), str(m)) for u, k, m in rows]


def generations(world: World) -> int:
    return sum(world.posts_to(f"/{kind}/generate") for kind in ("text", "image", "video"))


def last_request(world: World, kind: str) -> dict[str, Any]:
    found = [r for r in world.api.requests if r.method == "POST" and f"/{kind}/" in r.path]
    body = found[-1].json
    assert isinstance(body, dict)
    return body


async def press(world: World, message: Message, action: str, user_id: int, **kw: Any) -> Any:
    return await world.discord.press_button(
        message.id,
        buttons(message)[action],
        user_id=user_id,
        permissions=kw.pop("permissions", MEMBER_PERMISSIONS),
    )


async def wait_ready_again(world: World, identifies: int) -> None:
    await world.discord.signal.wait_for(
        lambda: (
            True
            if sum(1 for e in world.discord.gateway_received if e.op == 2) > identifies
            else None
        ),
        60,
        "a new IDENTIFY",
    )
    await world.discord.wait_ready(timeout=60)


async def test_results_carry_buttons_that_survive_a_restart(world: World) -> None:
    image = await world.answer(
        await world.command("image", {"prompt": "a red kite", "model": IMAGE_MODEL})
    )
    assert set(buttons(image)) == {"Again", "Animate", "Edit", "Share", "Delete", "Enhance"}
    text = await world.answer(await world.command("text", {"prompt": "say hi"}))
    assert set(buttons(text)) == {"Again", "Vary", "Delete"}
    await world.answer(
        await world.command("video", {"prompt": "waves at dusk", "model": VIDEO_MODEL})
    )
    card = await world.discord.wait_for_message(
        lambda m: "waves at dusk" in m.text, include_existing=True
    )
    card = await world.discord.wait_for_edit(card.id, lambda m: "/files/" in m.text, 30)
    labels = [item["label"] for item in action_buttons(card)]
    # The known video price; nothing to vary; a clip of its own has nothing to join.
    assert labels == ["Again · $0.20", "Continue", "Remix · $0.20", "Share", "Delete", "Enhance"]
    await world.answer(
        await world.command("image", {"prompt": "an owl at night", "model": ASYNC_IMAGE_MODEL})
    )
    owl = await world.discord.wait_for_message(
        lambda m: "an owl at night" in m.text, include_existing=True
    )
    owl = await world.discord.wait_for_edit(owl.id, lambda m: bool(m.attachments), 30)
    assert set(buttons(owl)) == {"Again", "Animate", "Edit", "Share", "Delete", "Enhance"}
    results.update(image=image, text=text, video=card, owl=owl)

    identifies = sum(1 for e in world.discord.gateway_received if e.op == 2)
    await world.bot.stop()
    await world.bot.start()
    await wait_ready_again(world, identifies)


async def test_again_is_charged_to_whoever_clicks(world: World) -> None:
    other = world.discord.add_user("other")
    before = len(ledger(world))
    again = await press(world, results["image"], "Again", other.id)
    answer = await world.answer(again)
    assert not answer.ephemeral and answer.is_v2 and "> a red kite" in answer.text
    assert set(buttons(answer)) == {"Again", "Animate", "Edit", "Share", "Delete", "Enhance"}
    assert ledger(world)[before:] == [(other.id, "image", IMAGE_MODEL)]

    video = await world.answer(await press(world, results["video"], "Again", other.id))
    assert video.ephemeral and "on its way" in video.content
    assert ledger(world)[-1] == (other.id, "video", VIDEO_MODEL)
    assert last_request(world, "video")["prompt"] == "waves at dusk"


async def test_vary_asks_the_text_again_hotter(world: World) -> None:
    answer = await world.answer(await press(world, results["text"], "Vary", world.member.id))
    assert set(buttons(answer)) == {"Again", "Vary", "Delete"}
    sent = last_request(world, "text")
    assert sent["prompt"] == "say hi"
    assert sent["temperature"] == pytest.approx(1.2)  # the default 0.7, plus 0.5


async def test_a_double_click_is_one_request(world: World) -> None:
    calls, spent = generations(world), len(ledger(world))
    first = await press(world, results["text"], "Again", world.member.id)
    second = await press(world, results["text"], "Again", world.member.id)
    refused = await world.answer(second)
    assert refused.ephemeral and "first click" in refused.content
    answer = await world.answer(first)
    assert not answer.ephemeral, answer.content
    assert set(buttons(answer)) == {"Again", "Vary", "Delete"}
    assert (generations(world), len(ledger(world))) == (calls + 1, spent + 1)


async def test_animate_lists_only_the_models_the_members_tier_allows(world: World) -> None:
    pro = world.discord.add_role(world.guild.id, "Pro only")
    member = world.discord.add_user("pro-member")
    world.discord.give_role(world.guild.id, member.id, pro.id)
    await world.answer(
        await world.command(
            "config",
            {"role": pro, "models": "nimbus-pro/"},
            admin=True,
            group="tier",
            subcommand="set",
        )
    )
    pressed = await press(world, results["image"], "Animate", member.id)
    await pressed.wait_callback()
    assert pressed.modal is not None
    select = pressed.modal["components"][1]["component"]
    # The cheaper Aurora Lite (image) is not theirs: it would be refused at reserve.
    assert [o["value"] for o in select["options"]] == ["nimbus-pro/image-to-video"]
    assert [o["value"] for o in select["options"] if o.get("default")] == [
        "nimbus-pro/image-to-video"
    ]


async def test_animate_opens_a_model_select_and_makes_a_video_from_the_image(
    world: World,
) -> None:
    before = len(ledger(world))
    pressed = await press(world, results["image"], "Animate", world.member.id)
    await pressed.wait_callback()
    modal = pressed.modal
    assert modal is not None and modal["title"] == "Animate image"
    select = modal["components"][1]["component"]
    default = [o["value"] for o in select["options"] if o.get("default")]
    assert default == [CHEAPEST_I2V]
    assert "$0.25 for 5 s" in str(select["options"])
    prompt_id = modal["components"][0]["components"][0]["custom_id"]
    submitted = await world.discord.submit_modal(modal["custom_id"], {prompt_id: "the kite climbs"})
    answer = await world.answer(submitted)
    assert "on its way" in answer.content
    sent = last_request(world, "video")
    assert sent["model"] == CHEAPEST_I2V
    assert sent["image_url"] == results["image"].media_urls[0]
    assert ledger(world)[before:] == [(world.member.id, "video", CHEAPEST_I2V)]


async def test_an_asynchronous_image_is_animated_from_its_attachment(world: World) -> None:
    owl = results["owl"]
    pressed = await press(world, owl, "Animate", world.member.id)
    await pressed.wait_callback()
    assert pressed.modal is not None
    prompt = pressed.modal["components"][0]["components"][0]
    assert prompt.get("value") == "an owl at night"  # the image's own prompt to start from
    answer = await world.answer(await world.discord.submit_modal(pressed.modal["custom_id"], {}))
    assert "on its way" in answer.content
    sent = last_request(world, "video")
    assert unsigned(sent["image_url"]) == owl.attachments[0].url  # the result as Discord keeps it
    assert sent["prompt"] == "an owl at night"


async def test_the_menus_find_the_image_in_a_cards_gallery(world: World) -> None:
    card = world.discord.messages[results["image"].id]
    assert card.is_v2 and not card.attachments and not card.embeds  # the gallery alone
    calls = generations(world)
    menu = await world.discord.invoke_message_command(
        "Edit image", card.id, user_id=world.member.id, permissions=MEMBER_PERMISSIONS
    )
    await menu.wait_callback()
    assert menu.modal is not None  # found the image: the edit's modal opens
    assert generations(world) == calls


async def test_edit_applies_a_new_prompt_to_the_image(world: World) -> None:
    pressed = await press(world, results["image"], "Edit", world.member.id)
    await pressed.wait_callback()
    modal = pressed.modal
    assert modal is not None and modal["title"] == "Edit image"
    prompt_id = modal["components"][0]["components"][0]["custom_id"]
    mode_id = modal["components"][1]["component"]["custom_id"]
    submitted = await world.discord.submit_modal(
        modal["custom_id"], {prompt_id: "make it blue", mode_id: ["i2i_text"]}
    )
    answer = await world.answer(submitted)
    assert set(buttons(answer)) == {"Again", "Animate", "Edit", "Share", "Delete", "Enhance"}
    sent = last_request(world, "image")
    assert (sent["prompt"], sent["mode"]) == ("make it blue", "i2i_text")
    assert sent["image_url"] == results["image"].media_urls[0]


async def test_delete_is_for_the_requester_or_manage_messages(world: World) -> None:
    stranger = world.discord.add_user("stranger")
    refused = await world.answer(await press(world, results["text"], "Delete", stranger.id))
    assert refused.ephemeral and "Manage Messages" in refused.content
    assert not world.discord.messages[results["text"].id].deleted
    done = await world.answer(await press(world, results["text"], "Delete", world.member.id))
    assert done.ephemeral and done.content == "Deleted."
    assert world.discord.messages[results["text"].id].deleted
    moderator = await press(
        world,
        results["video"],
        "Delete",
        stranger.id,
        permissions=MEMBER_PERMISSIONS | MANAGE_MESSAGES,
    )
    await world.answer(moderator)
    assert world.discord.messages[results["video"].id].deleted


async def test_refused_clicks_cost_nothing(world: World) -> None:
    other_channel = world.discord.add_channel(world.guild.id, "elsewhere")
    await world.answer(
        await world.command(
            "config",
            {"channel": other_channel.id},
            admin=True,
            group="channels",
            subcommand="allow",
        )
    )
    spent, calls = len(ledger(world)), generations(world)
    for action in ("Again", "Animate", "Edit"):
        refusal = await world.answer(await press(world, results["image"], action, world.member.id))
        assert refusal.ephemeral and "available in" in refusal.content, action
    for menu in ("Animate image", "Edit image"):
        refusal = await world.answer(
            await world.discord.invoke_message_command(
                menu, results["image"].id, user_id=world.member.id, permissions=MEMBER_PERMISSIONS
            )
        )
        assert refusal.ephemeral and "available in" in refusal.content, menu
    await world.answer(
        await world.command("config", {}, admin=True, group="channels", subcommand="everywhere")
    )
    await world.answer(
        await world.command("config", {"daily_per_user": "0.01"}, admin=True, subcommand="budget")
    )
    over = await world.answer(await press(world, results["image"], "Again", world.member.id))
    # The same refusal as the command's: the daily allowance and what is left of it.
    assert over.ephemeral and "daily allowance" in over.content.lower()
    assert (len(ledger(world)), generations(world)) == (spent, calls)
    await world.answer(
        await world.command(
            "config", {"daily_per_user": "unlimited"}, admin=True, subcommand="budget"
        )
    )


async def test_context_menus_animate_and_edit_a_members_image(world: World) -> None:
    posted = world.discord.post_user_message(
        world.channel.id, world.member.id, "look", attachment=("cat.png", PNG, "image/png")
    )
    before = len(ledger(world))
    menu = await world.discord.invoke_message_command(
        "Animate image", posted.id, user_id=world.member.id, permissions=MEMBER_PERMISSIONS
    )
    await menu.wait_callback()
    assert menu.modal is not None
    prompt_id = menu.modal["components"][0]["components"][0]["custom_id"]
    answer = await world.answer(
        await world.discord.submit_modal(menu.modal["custom_id"], {prompt_id: "the cat blinks"})
    )
    assert "on its way" in answer.content
    assert unsigned(last_request(world, "video")["image_url"]) == posted.attachments[0].url

    menu = await world.discord.invoke_message_command(
        "Edit image", posted.id, user_id=world.member.id, permissions=MEMBER_PERMISSIONS
    )
    await menu.wait_callback()
    assert menu.modal is not None
    prompt_id = menu.modal["components"][0]["components"][0]["custom_id"]
    answer = await world.answer(
        await world.discord.submit_modal(menu.modal["custom_id"], {prompt_id: "a hat"})
    )
    assert answer.media_urls and buttons(answer)
    assert unsigned(last_request(world, "image")["image_url"]) == posted.attachments[0].url
    assert [kind for _, kind, _ in ledger(world)[before:]] == ["video", "image"]

    plain = world.discord.post_user_message(world.channel.id, world.member.id, "no picture")
    calls = generations(world)
    refused = await world.answer(
        await world.discord.invoke_message_command(
            "Animate image", plain.id, user_id=world.member.id, permissions=MEMBER_PERMISSIONS
        )
    )
    assert refused.ephemeral and "no image" in refused.content
    assert generations(world) == calls


async def expensive_video(
    world: World, user_id: int, prompt: str
) -> tuple[Message, dict[str, str]]:
    """Ask for a 6 s video of the expensive model: the price question and its buttons."""
    ask = await world.answer(
        await world.command(
            "video", {"prompt": prompt, "model": EXPENSIVE_VIDEO, "duration": 6}, user_id=user_id
        )
    )
    return ask, {i["label"]: i["custom_id"] for row in ask.components for i in row["components"]}


async def confirmed(world: World, ask: Message, labels: dict[str, str], user_id: int) -> None:
    """Press Generate under the price question, then wait until the video is on its way."""
    go = await world.discord.press_button(
        ask.id, labels["Generate · $1.80"], user_id=user_id, permissions=MEMBER_PERMISSIONS
    )
    await go.wait_callback()
    await world.discord.signal.wait_for(
        lambda: True if "on its way" in world.discord.messages[ask.id].content else None,
        15,
        "the confirmed video",
    )


async def test_an_expensive_video_asks_first(world: World) -> None:
    await world.answer(
        await world.command("config", {"dollars": "1.00"}, admin=True, subcommand="confirm-above")
    )
    buyer = world.discord.add_user("buyer")  # the member may be at the cap of videos by now
    calls = generations(world)
    ask, labels = await expensive_video(world, buyer.id, "a storm")
    assert ask.ephemeral and "$1.80" in ask.content
    assert set(labels) == {"Generate · $1.80", "Cancel"}
    cancel = await world.discord.press_button(
        ask.id, labels["Cancel"], user_id=buyer.id, permissions=MEMBER_PERMISSIONS
    )
    await cancel.wait_callback()
    assert "nothing was charged" in world.discord.messages[ask.id].content
    assert generations(world) == calls

    ask, labels = await expensive_video(world, buyer.id, "a storm")
    await confirmed(world, ask, labels, buyer.id)
    assert ledger(world)[-1] == (buyer.id, "video", EXPENSIVE_VIDEO)
    # Below the threshold it runs at once, as before (asked by the admin: the member may be
    # at the cap of videos in progress).
    cheap = await world.answer(
        await world.command("video", {"prompt": "ripples", "model": VIDEO_MODEL}, admin=True)
    )
    assert "on its way" in cheap.content
    shown = await world.answer(await world.command("config", {}, admin=True, subcommand="show"))
    assert "$1.00" in shown.text


async def test_generate_pressed_before_the_bot_read_that_it_was_shown_is_answered(
    world: World,
) -> None:
    # Discord delivers the press on the gateway, the answer to the edit that showed the button
    # on HTTP: a busy bot can read the press first, which discord.py's views drop.
    await world.answer(
        await world.command("config", {"dollars": "1.00"}, admin=True, subcommand="confirm-above")
    )
    buyer = world.discord.add_user("quick buyer")
    world.discord.act_before_answer = True
    try:
        ask, labels = await expensive_video(world, buyer.id, "a quick storm")
        await confirmed(world, ask, labels, buyer.id)
    finally:
        world.discord.act_before_answer = False
    assert ledger(world)[-1] == (buyer.id, "video", EXPENSIVE_VIDEO)
    await world.answer(
        await world.command("config", {"dollars": "off"}, admin=True, subcommand="confirm-above")
    )


async def test_a_member_barred_from_video_in_integrations_cannot_click_again(
    world: World,
) -> None:
    """/video limited to @Patron in Server Settings -> Integrations, the usual way.

    Discord applies that to the command only; the bot holds the button behind it to the same
    rule, and hears the admin's later change on the gateway."""
    patron_role = world.discord.add_role(world.guild.id, "Patron")
    patron, barred = world.discord.add_user("patron"), world.discord.add_user("barred")
    world.discord.give_role(world.guild.id, patron.id, patron_role.id)
    world.discord.set_command_permissions(
        world.guild.id, "video", [(world.guild.id, 1, False), (patron_role.id, 1, True)]
    )
    await world.answer(
        await world.command(
            "video", {"prompt": "a patron's comet", "model": VIDEO_MODEL}, user_id=patron.id
        )
    )
    card = await world.discord.wait_for_message(
        lambda m: "a patron's comet" in m.text, include_existing=True
    )
    card = await world.discord.wait_for_edit(card.id, lambda m: "/files/" in m.text, 30)
    with pytest.raises(InvocationError, match="not available"):  # Discord hides /video
        await world.command("video", {"prompt": "mine", "model": VIDEO_MODEL}, user_id=barred.id)

    spent, calls = len(ledger(world)), generations(world)
    refusal = await world.answer(await press(world, card, "Again", barred.id))
    assert refusal.ephemeral and "/video" in refusal.content and "Integrations" in refusal.content
    animate = await world.answer(await press(world, results["image"], "Animate", barred.id))
    assert animate.ephemeral and "/video" in animate.content  # Animate makes a video too
    assert (len(ledger(world)), generations(world)) == (spent, calls)

    # The admin lets everyone use /video again: the bot hears it and the click now runs.
    world.discord.set_command_permissions(world.guild.id, "video", [])
    again = await world.answer(await press(world, card, "Again", barred.id))
    assert again.ephemeral and "on its way" in again.content
    assert ledger(world)[-1] == (barred.id, "video", VIDEO_MODEL)


async def test_a_drafts_final_sends_the_chosen_take_and_charges_the_right_models(
    world: World,
) -> None:
    """Draft → Final: 4 draft takes on the server's draft model, each with Final; Final on the
    third sends that take as the reference, on the server's default model (docs/creative.md)."""
    draft_model = "stability/sdxl"
    await world.answer(
        await world.command("config", {"image-model": draft_model}, admin=True, subcommand="draft")
    )
    handle = await world.command("image", {"prompt": "a fox in snow", "draft": True})
    first = await world.answer(handle)
    await world.discord.signal.wait_for(  # the other 3 takes, one message each (synchronous)
        lambda: True if sum(1 for f in handle.followups if f.media_urls) >= 3 else None,
        15,
        "the draft's other takes",
    )
    takes = [first] + [f for f in handle.followups if f.media_urls]
    assert len(takes) == 4
    assert all(next(iter(buttons(take))) == "Final" for take in takes)  # each take's first
    assert last_request(world, "image")["model"] == draft_model
    chosen = takes[2].media_urls[0]

    final = await world.answer(await press(world, takes[2], "Final", world.member.id))

    assert final.media_urls and "Final" not in buttons(final)  # a Final is no draft
    sent = last_request(world, "image")
    assert sent["model"] == IMAGE_MODEL  # the server's default: the member set none
    assert sent["image_urls"] == [chosen] and sent["prompt"] == "a fox in snow"
    with sqlite3.connect(world.bot.env["DATABASE_PATH"]) as db:
        rows = db.execute("SELECT model, stage FROM ledger ORDER BY id DESC LIMIT 5").fetchall()
    assert rows[::-1] == [(draft_model, "draft")] * 4 + [(IMAGE_MODEL, "final")]
