"""A member's own defaults with the real bot process (``/settings defaults``).

A member sets a default video model, duration and shape; ``/video`` without those options uses
them (the service sees them). Once the server's model list forbids the default model, it is
ignored with a note, and nothing is sent or charged for a video without a model. The scenarios
build on each other in order: one bot process for the module.
"""

from __future__ import annotations

from typing import Any

import pytest

from tests.support.discord_emulator import errors as err
from tests.support.discord_emulator.models import Message
from tests.support.e2e.harness import MEMBER_PERMISSIONS, World, action_buttons

pytestmark = pytest.mark.asyncio(loop_scope="module")

CHEAP = "aurora-lite/text-to-video"  # makes 5 or 10 s videos


async def settings(world: World, subcommand: str, options: dict[str, Any], **kw: Any) -> Message:
    answer = await world.answer(
        await world.command("settings", options, subcommand=subcommand, **kw)
    )
    assert answer.ephemeral
    return answer


def bodies(world: World, path: str) -> list[dict[str, Any]]:
    return [r.json for r in world.api.requests if r.method == "POST" and path in r.path and r.json]


async def test_video_without_model_and_duration_uses_the_members_defaults(world: World) -> None:
    saved = await settings(
        world,
        "defaults",
        {"video_model": CHEAP, "video_duration": 10, "aspect_ratio": "9:16"},
    )
    assert "Saved" in saved.content and f"video model: `{CHEAP}`" in saved.content

    answer = await world.answer(await world.command("video", {"prompt": "a fox in the snow"}))
    assert "on its way" in answer.content
    (sent,) = bodies(world, "/video/generate")
    assert (sent["model"], sent["duration"], sent["aspect_ratio"]) == (CHEAP, 10, "9:16")

    shown = await settings(world, "show", {})
    assert "video duration: 10 s" in shown.content and "aspect ratio: `9:16`" in shown.content
    # Another member's commands are not touched by these defaults.
    other = world.discord.add_user("other")
    refused = await world.answer(
        await world.command("video", {"prompt": "a fox"}, user_id=other.id)
    )
    assert "Choose a video model" in refused.content
    assert len(bodies(world, "/video/generate")) == 1


async def test_a_default_the_server_forbids_is_ignored_with_a_note(world: World) -> None:
    allowed = await world.answer(
        await world.command(
            "config",
            {"models": "flash-clip/, openai/"},
            admin=True,
            group="models",
            subcommand="allow",
        )
    )
    assert allowed.ephemeral
    videos = len(bodies(world, "/video/generate"))

    refused = await world.answer(await world.command("video", {"prompt": "a fox"}))
    assert refused.ephemeral
    assert f"Your default video model `{CHEAP}` is not available to you here" in refused.content
    assert "Choose a video model" in refused.content
    assert len(bodies(world, "/video/generate")) == videos  # nothing sent, nothing charged

    # A model given explicitly is the member's choice; only the left-out options are defaulted.
    answer = await world.answer(
        await world.command("video", {"prompt": "a fox", "model": "flash-clip/text-to-video"})
    )
    assert "on its way" in answer.content
    note = "Flash Clip does not make 10 s videos (your default); its default length was used."
    assert note in answer.content
    sent = bodies(world, "/video/generate")[-1]
    assert (sent["model"], sent["duration"], sent["aspect_ratio"]) == (
        "flash-clip/text-to-video",
        5,
        "9:16",
    )

    # /text: the forbidden default is left out, the answer comes with the usual model, and
    # the note follows it, for the member only.
    await settings(world, "defaults", {"text_model": "meta/llama-3.1-70b"})
    handle = await world.command("text", {"prompt": "say hi"})
    answer = await world.answer(handle)
    assert not answer.ephemeral
    (note_message,) = await world.discord.signal.wait_for(
        lambda: handle.followups or None, 15, "the note about the defaults"
    )
    assert note_message.ephemeral
    assert "`meta/llama-3.1-70b` is not available to you here" in note_message.content
    assert bodies(world, "/text/generate")[-1]["model"] == "openai/gpt-4o-mini"


async def test_private_results_answer_only_the_member(world: World) -> None:
    await settings(world, "defaults", {"private": True, "text_model": "none"})
    answer = await world.answer(await world.command("text", {"prompt": "a secret"}))
    assert answer.ephemeral
    assert "private results: on" in (await settings(world, "show", {})).content

    # A private answer whose response cannot be edited (the token died) goes to the member's
    # DM, never to the channel where everyone would see it.
    def public() -> list[str]:
        return [m.text for m in world.discord.channel_messages(world.channel.id) if not m.ephemeral]

    in_channel = public()
    world.discord.inject_error(
        "/messages/@original", err.invalid_webhook_token(), method="PATCH", count=1
    )
    await world.command("text", {"prompt": "another secret"})
    dm = await world.discord.wait_for_message(
        lambda m: (
            world.discord.world.dm_recipients.get(m.channel_id) == world.member.id
            and "could not be shown there" in m.text
        ),
        timeout=15,
    )
    assert dm is not None
    assert public() == in_channel
    # Its buttons could not act for the server from the DM (its stored request names no
    # channel), so the answer there has none (DM cards' buttons work or are absent).
    answer = await world.discord.wait_for_message(
        lambda m: m.channel_id == dm.channel_id and "Sandbox reply to: another secret" in m.text,
        timeout=15,
        include_existing=True,
    )
    assert [c for c in answer.all_components if c.get("custom_id")] == []


async def test_a_dm_when_a_video_is_finished_for_who_asked_and_silence_where_refused(
    world: World,
) -> None:
    # Private results (set above) would put the card itself in the DM (test_private_cards_e2e).
    await settings(world, "defaults", {"private": False})
    on = await settings(world, "dm", {"state": "on"}, group="notify")
    assert "I will DM you" in on.content
    closed = world.discord.add_user("closed-dms")
    world.discord.world.closed_dms.add(closed.id)
    await settings(world, "dm", {"state": "on"}, group="notify", user_id=closed.id)
    for user, prompt in ((world.member, "a heron at dawn"), (closed, "a crane at dusk")):
        answer = await world.answer(
            await world.command(
                "video",
                {"prompt": prompt, "model": "flash-clip/text-to-video"},
                user_id=user.id,
            )
        )
        assert "on its way" in answer.content

    dm = await world.discord.wait_for_message(
        lambda m: (
            world.discord.world.dm_recipients.get(m.channel_id) == world.member.id
            and "heron" in m.text
        ),
        timeout=40,
    )
    assert "Your video is ready" in dm.text
    card = next(
        m
        for m in world.discord.channel_messages(world.channel.id)
        if "heron" in m.text and "/files/" in m.text
    )
    assert f"/{world.channel.id}/{card.id}" in dm.text  # the DM links to the card, shown too
    # The member whose DMs are closed still gets the result in the channel, and nothing else.
    await world.discord.wait_for_message(
        lambda m: m.channel_id == world.channel.id and "crane" in m.text and "/files/" in m.text,
        include_existing=True,
        timeout=40,
    )
    closed_dm = world.discord.dm_channel(closed.id).id
    refused = await world.discord.signal.wait_for(
        lambda: [r for r in world.discord.requests if str(closed_dm) in r.path] or None,
        15,
        "the refused DM",
    )
    assert [r.status for r in refused] == [403]  # tried once, 50007, not retried
    assert not world.discord.channel_messages(closed_dm)


async def test_remix_opens_vary_as_a_form_with_the_prompt_to_change(world: World) -> None:
    remixer = world.discord.add_user("remixer")
    await settings(world, "defaults", {"remix": True}, user_id=remixer.id)
    answer = await world.answer(
        await world.command("text", {"prompt": "name a colour"}, user_id=remixer.id)
    )
    vary = next(b for b in action_buttons(answer) if b["label"].startswith("Vary"))
    texts = len(bodies(world, "/text/generate"))
    pressed = await world.discord.press_button(
        answer.id, vary["custom_id"], user_id=remixer.id, permissions=MEMBER_PERMISSIONS
    )
    await pressed.wait_callback()
    modal = pressed.modal
    assert modal is not None and modal["title"] == "Vary (remix)"
    prompt = modal["components"][0]["components"][0]
    assert prompt.get("value") == "name a colour"
    assert len(bodies(world, "/text/generate")) == texts  # a form costs nothing
    submitted = await world.discord.submit_modal(
        modal["custom_id"], {prompt["custom_id"]: "name a warm colour"}, user_id=remixer.id
    )
    await world.answer(submitted)
    sent = bodies(world, "/text/generate")[-1]
    assert sent["prompt"] == "name a warm colour"
    assert sent["temperature"] == pytest.approx(1.2)  # Vary's: the default 0.7, plus 0.5


async def test_video_advanced_preselects_the_default_model_and_applies_the_rest(
    world: World,
) -> None:
    await world.answer(
        await world.command(
            "config",
            {"models": "flash-clip/, nimbus-pro/, openai/"},
            admin=True,
            group="models",
            subcommand="allow",
        )
    )
    fan = world.discord.add_user("nimbus-fan")
    await settings(
        world,
        "defaults",
        {"video_model": "nimbus-pro/text-to-video", "aspect_ratio": "1:1", "video_duration": 8},
        user_id=fan.id,
    )
    opened = await world.command("video-advanced", {}, user_id=fan.id)
    await opened.wait_callback()
    modal = opened.modal
    assert modal is not None
    select = modal["components"][1]["component"]
    # Theirs, not the cheapest (Flash Clip), which the form preselects otherwise.
    assert [o["value"] for o in select["options"] if o.get("default")] == [
        "nimbus-pro/text-to-video"
    ]
    prompt_id = modal["components"][0]["component"]["custom_id"]
    answer = await world.answer(
        await world.discord.submit_modal(modal["custom_id"], {prompt_id: "a kite"}, user_id=fan.id)
    )
    assert "on its way" in answer.content
    sent = bodies(world, "/video/generate")[-1]
    assert (sent["model"], sent["duration"], sent["aspect_ratio"]) == (
        "nimbus-pro/text-to-video",
        8,
        "1:1",
    )
