"""The video form end to end: ``/video-advanced``, a modal with a prompt, a model select and an
uploaded reference image (a File Upload inside a Label), through ``/video``'s checks and path.

An accepted form makes the same job and card as ``/video``, the upload passed as ``image_url``;
a refused one gets ``/video``'s ephemeral sentence and costs nothing (no generation request).
"""

import sqlite3
from typing import Any

import pytest

from tests.support.discord_emulator.interactions import InteractionHandle
from tests.support.e2e.harness import World

pytestmark = pytest.mark.asyncio(loop_scope="module")

CHEAPEST = "aurora-lite/text-to-video"  # 20 c per 5 s: the cheapest video model
I2V = "aurora-lite/image-to-video"
PNG = b"\x89PNG\r\n\x1a\n" + b"\0" * 64


def ledger(world: World) -> list[tuple[int, str, str]]:
    with sqlite3.connect(world.bot.env["DATABASE_PATH"]) as db:
        rows = db.execute("SELECT user_id, kind, model FROM ledger ORDER BY id").fetchall()
    return [(int(u), str(k), str(m)) for u, k, m in rows]


def generations(world: World) -> int:
    return sum(world.posts_to(f"/{kind}/generate") for kind in ("text", "image", "video"))


def last_video_request(world: World) -> dict[str, Any]:
    found = [r for r in world.api.requests if r.method == "POST" and "/video/" in r.path]
    body = found[-1].json
    assert isinstance(body, dict)
    return body


def fields(modal: dict[str, Any]) -> dict[str, dict[str, Any]]:
    """The modal's labels: label text -> the component under it."""
    return {row["label"]: row["component"] for row in modal["components"]}


async def open_form(world: World) -> dict[str, Any]:
    handle = await world.command("video-advanced")
    await handle.wait_callback()
    assert handle.modal is not None, "the form is the response itself"
    return handle.modal


async def submit(world: World, modal: dict[str, Any], values: dict[str, Any]) -> InteractionHandle:
    by_label = fields(modal)
    named = {by_label[label]["custom_id"]: value for label, value in values.items()}
    return await world.discord.submit_modal(modal["custom_id"], named)


async def test_the_form_offers_the_video_models_cheapest_first(world: World) -> None:
    modal = await open_form(world)
    assert modal["title"] == "Advanced video"
    by_label = fields(modal)
    assert list(by_label) == ["Prompt", "Model", "Reference image", "Duration"]
    assert by_label["Prompt"]["type"] == 4 and by_label["Prompt"]["required"]
    models = by_label["Model"]["options"]
    assert [o["value"] for o in models if o.get("default")] == [CHEAPEST]
    assert "$0.25 for 5 s · animates an image" in str(models)  # price and kind, to choose
    upload = by_label["Reference image"]
    assert (upload["type"], upload["required"], upload["max_values"]) == (19, False, 1)
    assert [o["value"] for o in by_label["Duration"]["options"]][:2] == ["4", "5"]


async def test_an_uploaded_image_is_animated_like_video(world: World) -> None:
    before = len(ledger(world))
    modal = await open_form(world)
    submitted = await submit(
        world,
        modal,
        {
            "Prompt": "the cat stretches",
            "Model": [I2V],
            "Reference image": [("cat.png", PNG, "image/png")],
            "Duration": ["10"],
        },
    )
    answer = await world.answer(submitted)
    assert answer.ephemeral and "on its way" in answer.content
    (uploaded,) = submitted.payload["data"]["resolved"]["attachments"].values()
    sent = last_video_request(world)
    assert (sent["model"], sent["prompt"], sent["duration"]) == (I2V, "the cat stretches", 10)
    assert sent["image_url"] == uploaded["url"]
    assert ledger(world)[before:] == [(world.member.id, "video", I2V)]
    card = await world.discord.wait_for_message(
        lambda m: "the cat stretches" in m.text, include_existing=True
    )
    await world.discord.wait_for_edit(card.id, lambda m: "/files/" in m.text, 30)


async def test_a_refused_form_costs_nothing(world: World) -> None:
    spent, calls = len(ledger(world)), generations(world)
    cases = [
        ({"Prompt": "x", "Model": [I2V]}, "animates an image"),
        (
            {"Prompt": "x", "Model": [CHEAPEST], "Reference image": [("a.png", PNG, "image/png")]},
            "does not take a source image",
        ),
        (
            {"Prompt": "x", "Model": [I2V], "Reference image": [("a.txt", b"hi", "text/plain")]},
            "not an image",
        ),
        ({"Prompt": "x", "Model": [CHEAPEST], "Duration": ["4"]}, "not 4 s"),
    ]
    for values, sentence in cases:
        answer = await world.answer(await submit(world, await open_form(world), values))
        assert answer.ephemeral and sentence in answer.content, (values, answer.content)
    assert (len(ledger(world)), generations(world)) == (spent, calls)


async def test_a_form_submitted_before_its_callback_answer_is_read_is_still_answered(
    world: World,
) -> None:
    # The submission comes on the gateway, the callback's answer on HTTP: a busy bot can read
    # the submission first, and discord.py alone would drop it ("This interaction failed").
    world.discord.act_before_answer = True
    try:
        modal = await open_form(world)
        answer = await world.answer(await submit(world, modal, {"Prompt": "x", "Model": [I2V]}))
    finally:
        world.discord.act_before_answer = False
    assert answer.ephemeral and "animates an image" in answer.content


async def test_a_channel_where_video_is_not_allowed_gets_no_form(world: World) -> None:
    elsewhere = world.discord.add_channel(world.guild.id, "elsewhere")
    allow = {"channel": elsewhere.id}
    await world.answer(
        await world.command("config", allow, admin=True, group="channels", subcommand="allow")
    )
    handle = await world.command("video-advanced")
    refusal = await world.answer(handle)
    assert handle.modal is None
    assert refusal.ephemeral and "available in" in refusal.content
    await world.answer(
        await world.command("config", {}, admin=True, group="channels", subcommand="everywhere")
    )
