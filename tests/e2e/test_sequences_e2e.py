"""Video sequences end to end: Continue a clip from its last frame, twice, then Join them into
one film; a sequence at its server's bound; ``/video-join`` of clips of different sizes and of a
film over the upload limit; Remix.

The API emulator serves real MP4s whose every frame's colour names its task and index
(``bot.sandbox.clips``), so the frame sent on and the joined film can be checked for what they
hold. Every continuation is a ``/video``: one service request, one ledger row.
"""

from __future__ import annotations

import io
import re
import sqlite3
import tempfile
from pathlib import Path
from typing import Any

import av
import av.video.frame
import httpx2 as httpx
import pytest

from bot.media.video import last_frame_png, probe
from bot.sandbox.clips import FRAME_CYCLE, SEED_CYCLE, identify, seed_of
from tests.support.discord_emulator.interactions import InteractionHandle
from tests.support.discord_emulator.models import Message
from tests.support.e2e.harness import MEMBER_PERMISSIONS, World, action_buttons

pytestmark = pytest.mark.asyncio(loop_scope="module")

TEXT_TO_VIDEO = "aurora-lite/text-to-video"
IMAGE_TO_VIDEO = "aurora-lite/image-to-video"  # the cheapest image-to-video model

cards: dict[str, Message] = {}


def buttons(message: Message) -> dict[str, str]:
    """Action buttons of a message: label's first word -> custom id."""
    return {item["label"].split(" ")[0]: item["custom_id"] for item in action_buttons(message)}


def job_id(message: Message) -> int:
    found = re.search(r":j([0-9]+)$", next(iter(buttons(message).values())))
    assert found is not None
    return int(found[1])


def ledger(world: World) -> list[tuple[int, str, str]]:
    with sqlite3.connect(world.bot.env["DATABASE_PATH"]) as db:
        rows = db.execute("SELECT user_id, kind, model FROM ledger ORDER BY id").fetchall()
    return [(int(u), str(k), str(m)) for u, k, m in rows]


def video_posts(world: World) -> list[dict[str, Any]]:
    found = [r.json for r in world.api.requests if r.method == "POST" and "/video/" in r.path]
    return [body for body in found if isinstance(body, dict)]


def task_of(world: World, message: Message) -> str:
    """The emulator's task id behind a finished card (its output file's name)."""
    url = next(u for u in message.urls if "/files/" in u)
    return next(t.task_id for t in world.api.tasks.values() if url in t.outputs)


async def fetch(url: str) -> bytes:
    async with httpx.AsyncClient() as http:
        response = await http.get(url)
        response.raise_for_status()
        return response.content


def collapsed(seeds: list[int]) -> list[int]:
    """``seeds`` with repeats in a row made one: each clip's run of frames, in order (two
    clips in a row may share a colour: their seeds are equal modulo 64 once in 64)."""
    return [seed for n, seed in enumerate(seeds) if n == 0 or seeds[n - 1] != seed]


def centre(frame: av.video.frame.VideoFrame) -> tuple[int, int]:
    """(clip seed mod 64, frame index mod 40) that the colour at the frame's centre says."""
    rgb = frame.reformat(format="rgb24")
    plane = rgb.planes[0]
    at = (rgb.height // 2) * plane.line_size + (rgb.width // 2) * 3
    pixel = bytes(plane)[at : at + 3]
    return identify((pixel[0], pixel[1], pixel[2]))


async def finished_card(world: World, prompt: str) -> Message:
    card = await world.discord.wait_for_message(
        lambda m: prompt in m.text and m.author_id == world.discord.bot_user.id,
        include_existing=True,
    )
    return await world.discord.wait_for_edit(card.id, lambda m: "/files/" in m.text, 60)


async def press(world: World, message: Message, action: str, **kw: Any) -> InteractionHandle:
    return await world.discord.press_button(
        message.id,
        buttons(message)[action],
        user_id=kw.pop("user_id", world.member.id),
        permissions=kw.pop("permissions", MEMBER_PERMISSIONS),
    )


async def continue_from(world: World, card: Message, prompt: str) -> Message:
    pressed = await press(world, card, "Continue")
    await pressed.wait_callback()
    modal = pressed.modal
    assert modal is not None and modal["title"] == "Continue video"
    submitted = await world.discord.submit_modal(modal["custom_id"], {"prompt": prompt})
    await said(world, submitted, "on its way")
    return await finished_card(world, prompt)


async def said(world: World, handle: InteractionHandle, words: str, timeout: float = 60) -> Message:
    """The response once it says ``words`` (it is edited along the way)."""

    def check() -> Message | None:
        original = handle.original()
        return original if original is not None and words in original.content else None

    return await world.discord.signal.wait_for(check, timeout, repr(words))


async def joined_film(world: World, handle: InteractionHandle, timeout: float = 60) -> Message:
    def check() -> Message | None:
        original = handle.original()
        if original is not None and original.attachments:
            return original
        return None

    return await world.discord.signal.wait_for(check, timeout, "the joined film")


async def test_a_clip_continued_twice_then_joined_is_one_film_of_the_three(world: World) -> None:
    before = len(ledger(world))
    await world.answer(
        await world.command(
            "video", {"prompt": "a red kite over the dunes", "model": TEXT_TO_VIDEO}
        )
    )
    first = await finished_card(world, "a red kite over the dunes")
    assert {"Again", "Continue", "Remix", "Share", "Delete", "Enhance"} == set(buttons(first))

    # The form: what happens next prefilled, only image-to-video models, priced.
    pressed = await press(world, first, "Continue")
    await pressed.wait_callback()
    assert pressed.modal is not None
    labels = {row["label"]: row["component"] for row in pressed.modal["components"]}
    assert list(labels) == ["What happens next", "Model", "Duration"]
    assert labels["What happens next"].get("value") == "a red kite over the dunes"
    models = [o["value"] for o in labels["Model"]["options"]]
    assert models and all("image-to-video" in m for m in models)
    assert [o["value"] for o in labels["Model"]["options"] if o.get("default")] == [IMAGE_TO_VIDEO]
    assert "$0.25 for 5 s" in str(labels["Model"]["options"])

    second = await continue_from(world, first, "the kite climbs")
    third = await continue_from(world, second, "the kite dives")
    sent = video_posts(world)[-2:]
    assert [s["model"] for s in sent] == [IMAGE_TO_VIDEO, IMAGE_TO_VIDEO]
    assert [s["prompt"] for s in sent] == ["the kite climbs", "the kite dives"]
    # Each continuation's image_url serves the previous clip's last frame.
    tasks = [task_of(world, card) for card in (first, second, third)]
    with tempfile.TemporaryDirectory() as folder:
        for previous, body in zip((first, second), sent, strict=True):
            clip = Path(folder) / "clip.mp4"
            clip.write_bytes(await fetch(next(u for u in previous.urls if "/files/" in u)))
            frame_png = await fetch(body["image_url"])
            assert frame_png == last_frame_png(clip)
            with av.open(io.BytesIO(frame_png)) as image:
                (frame,) = image.decode(video=0)
            last_index = round(probe(clip).duration * 24) - 1
            assert centre(frame) == (
                seed_of(task_of(world, previous)) % SEED_CYCLE,
                last_index % FRAME_CYCLE,
            )
    # One ledger row per clip, each a video of the member's.
    assert ledger(world)[before:] == [
        (world.member.id, "video", TEXT_TO_VIDEO),
        (world.member.id, "video", IMAGE_TO_VIDEO),
        (world.member.id, "video", IMAGE_TO_VIDEO),
    ]
    # The new cards name and link their previous clip; the continued ones offer Join.
    assert f"Clip 2 · continues [video #{job_id(first)}]" in second.text
    assert f"Clip 3 · continues [video #{job_id(second)}]" in third.text
    assert "Join" in buttons(third) and "Join" in buttons(second)

    spent = len(ledger(world))
    join = await press(world, third, "Join")
    film = await joined_film(world, join)
    assert "Joined film" in film.content and "3 videos" in film.content
    assert len(ledger(world)) == spent  # joining costs no credits
    with tempfile.TemporaryDirectory() as folder:
        clips = []
        for number, card in enumerate((first, second, third)):
            path = Path(folder) / f"{number}.mp4"
            path.write_bytes(await fetch(next(u for u in card.urls if "/files/" in u)))
            clips.append(probe(path).duration)
        joined = Path(folder) / "joined.mp4"
        joined.write_bytes(await fetch(film.attachments[0].url))
        assert abs(probe(joined).duration - sum(clips)) <= 0.1
        with av.open(str(joined)) as container:
            seeds = [centre(frame)[0] for frame in container.decode(video=0)]
    assert collapsed(seeds) == collapsed([seed_of(task) % SEED_CYCLE for task in tasks])
    cards.update(first=first, second=second, third=third)


async def test_a_sequence_at_its_bound_is_refused_and_costs_nothing(world: World) -> None:
    setting = await world.command("config", {"clips": 3}, admin=True, subcommand="sequence-length")
    await world.answer(setting)
    calls, spent = len(video_posts(world)), len(ledger(world))
    pressed = await press(world, cards["third"], "Continue")
    refusal = await world.answer(pressed)
    assert pressed.modal is None  # refused before the form
    assert refusal.ephemeral and "limit of 3 clips" in refusal.content
    assert (len(video_posts(world)), len(ledger(world))) == (calls, spent)
    await world.answer(await world.command("config", {}, admin=True, subcommand="sequence-length"))


async def test_clips_of_different_sizes_join_into_the_first_clips_size(world: World) -> None:
    await world.answer(
        await world.command(
            "video", {"prompt": "a tall lighthouse", "model": TEXT_TO_VIDEO, "aspect_ratio": "9:16"}
        )
    )
    tall = await finished_card(world, "a tall lighthouse")
    first = cards["first"]
    handle = await world.command("video-join", {"videos": f"{job_id(first)}, {job_id(tall)}"})
    film = await joined_film(world, handle)
    assert "re-encoded" in film.content
    with tempfile.TemporaryDirectory() as folder:
        joined = Path(folder) / "joined.mp4"
        joined.write_bytes(await fetch(film.attachments[0].url))
        info = probe(joined)
        assert (info.width, info.height) == (128, 72)  # the first clip's, letterboxed
        with av.open(str(joined)) as container:
            seeds = [centre(frame)[0] for frame in container.decode(video=0)]
    tasks = [task_of(world, first), task_of(world, tall)]
    assert collapsed(seeds) == collapsed([seed_of(task) % SEED_CYCLE for task in tasks])


async def test_a_join_over_the_upload_limit_is_refused_with_its_size_and_the_limit(
    world: World,
) -> None:
    world.discord.set_attachment_size_limit(world.member.id, 4000)
    try:
        ids = ", ".join(str(job_id(cards[n])) for n in ("first", "second", "third"))
        handle = await world.command("video-join", {"videos": ids})
        answer = await world.discord.signal.wait_for(
            lambda: handle.followups[-1] if handle.followups else None, 60, "the refusal"
        )
    finally:
        world.discord.set_attachment_size_limit(world.member.id, 10 * 1024 * 1024)
    assert answer.ephemeral and "over the upload limit here (4,000 bytes)" in answer.content
    assert re.search(r"The joined film is [0-9,]+ bytes", answer.content), answer.content
    assert handle.original() is None or handle.original().deleted  # no film, no card left


async def test_video_join_takes_only_the_members_own_finished_videos(world: World) -> None:
    other = world.discord.add_user("other")
    first = cards["first"]
    handle = await world.command(
        "video-join",
        {"videos": f"{job_id(first)} {job_id(cards['second'])}"},
        user_id=other.id,
    )
    refusal = await world.answer(handle)
    assert refusal.ephemeral and f"no video #{job_id(first)}" in refusal.content
    for bad, sentence in (("12", "Join 2 to 8"), ("a, b", "numbers from `/jobs`")):
        answer = await world.answer(await world.command("video-join", {"videos": bad}))
        assert answer.ephemeral and sentence in answer.content, answer.content


async def test_remix_changes_the_prompt_and_keeps_the_rest(world: World) -> None:
    before = len(ledger(world))
    pressed = await press(world, cards["first"], "Remix")
    await pressed.wait_callback()
    modal = pressed.modal
    assert modal is not None and modal["title"] == "Remix video"
    prompt_id = modal["components"][0]["components"][0]["custom_id"]
    submitted = await world.discord.submit_modal(modal["custom_id"], {prompt_id: "a blue kite"})
    await said(world, submitted, "on its way")
    sent = video_posts(world)[-1]
    assert (sent["model"], sent["prompt"]) == (TEXT_TO_VIDEO, "a blue kite")
    assert ledger(world)[before:] == [(world.member.id, "video", TEXT_TO_VIDEO)]
    await finished_card(world, "a blue kite")  # no longer pending (the caps)


async def test_the_context_menu_continues_a_video_card(world: World) -> None:
    menu = await world.discord.invoke_message_command(
        "Continue video",
        cards["second"].id,
        user_id=world.member.id,
        permissions=MEMBER_PERMISSIONS,
    )
    await menu.wait_callback()
    assert menu.modal is not None and menu.modal["title"] == "Continue video"
    labels = {row["label"]: row["component"] for row in menu.modal["components"]}
    assert labels["What happens next"].get("value") == "the kite climbs"  # the clip's prompt


async def test_three_takes_are_three_requests_and_rows_on_one_card_one_failing(
    world: World,
) -> None:
    before, calls = len(ledger(world)), len(video_posts(world))
    world.api.fail_next_tasks(1, "Sandbox: this take failed")
    handle = await world.command(
        "video", {"prompt": "three paper boats", "model": TEXT_TO_VIDEO, "takes": 3}
    )
    answer = await said(world, handle, "3 takes are on their way")
    assert answer.ephemeral
    assert len(video_posts(world)) == calls + 3
    assert ledger(world)[before:] == [(world.member.id, "video", TEXT_TO_VIDEO)] * 3
    cards_of = [
        m
        for m in world.discord.channel_messages(world.channel.id)
        if "three paper boats" in m.text and m.author_id == world.discord.bot_user.id
    ]
    assert len(cards_of) == 1  # one card for the three takes
    card = await world.discord.wait_for_edit(
        cards_of[0].id, lambda m: "2 done, 1 failed" in m.text, 45
    )
    assert "Take 1 · failed: Sandbox: this take failed" in card.text
    # The last take's delivery attached both results: the gallery shows the attachments.
    card = await world.discord.wait_for_edit(card.id, lambda m: len(m.attachments) == 2, 15)
    assert [u for u in card.media_urls if u.startswith("attachment://")] == [
        f"attachment://{a.filename}" for a in card.attachments
    ]
    assert len([u for u in card.urls if "/files/" in u]) == 2  # the links stay
    select = next(c for c in card.all_components if c.get("type") == 3)
    options = [o["value"] for o in select["options"]]
    assert len(options) == 3
    # The buttons act on the first take with a result; the select moves them to another.
    assert buttons(card)["Continue"] == f"gb:continue:{options[1]}"
    chosen = await world.discord.select(
        card.id, select["custom_id"], [options[2]], user_id=world.member.id
    )
    await chosen.wait_callback()
    moved = await world.discord.wait_for_edit(
        card.id, lambda m: buttons(m).get("Continue") == f"gb:continue:{options[2]}", 15
    )
    assert "Again" in buttons(moved)
    assert len(moved.attachments) == 2  # choosing a take keeps the attached results
    ping = await world.discord.wait_for_message(
        lambda m: "takes are ready" in m.content, include_existing=True
    )
    assert "your 3 video takes are ready (2 done, 1 failed)" in ping.content
    assert len(ledger(world)) == before + 3  # choosing costs nothing


async def test_takes_are_priced_together_for_the_confirmation(world: World) -> None:
    await world.answer(
        await world.command("config", {"dollars": "0.50"}, admin=True, subcommand="confirm-above")
    )
    calls = len(video_posts(world))
    try:
        answer = await world.answer(
            await world.command(
                "video", {"prompt": "a slow tide", "model": TEXT_TO_VIDEO, "takes": 4}
            )
        )
        # One take costs $0.20, under the threshold; four cost $0.80, above it.
        assert "4 takes · This costs $0.80" in answer.content
        assert len(video_posts(world)) == calls
    finally:
        await world.answer(
            await world.command(
                "config", {"dollars": "off"}, admin=True, subcommand="confirm-above"
            )
        )


async def test_image_takes_are_each_charged_and_each_shown(world: World) -> None:
    before = len(ledger(world))
    posts = world.posts_to("/image/generate")
    handle = await world.command(
        "image", {"prompt": "two teacups", "model": "black-forest-labs/flux-schnell", "takes": 2}
    )
    await world.discord.signal.wait_for(
        lambda: True if handle.followups else None, 30, "the second take"
    )
    assert world.posts_to("/image/generate") == posts + 2
    assert [row[1] for row in ledger(world)[before:]] == ["image", "image"]
    shown = [handle.original(), *handle.followups]
    assert all(m is not None and "Again" in buttons(m) for m in shown)


async def test_asynchronous_image_takes_share_one_card(world: World) -> None:
    before = len(ledger(world))
    handle = await world.command(
        "image", {"prompt": "two lanterns", "model": "ideogram/ideogram-v2", "takes": 2}
    )
    await said(world, handle, "2 takes are on their way")
    posted = [
        m
        for m in world.discord.channel_messages(world.channel.id)
        if "two lanterns" in m.text and m.author_id == world.discord.bot_user.id
    ]
    assert len(posted) == 1
    card = await world.discord.wait_for_edit(posted[0].id, lambda m: "2 done" in m.text, 45)
    assert len(card.attachments) == 2 and len(card.media_urls) == 2
    assert {"Again", "Animate", "Edit", "Delete"} <= set(buttons(card))
    assert [row[1] for row in ledger(world)[before:]] == ["image", "image"]


async def test_a_members_default_takes_apply_where_the_option_is_left_out(world: World) -> None:
    saved = await world.answer(await world.command("settings", {"takes": 2}, subcommand="defaults"))
    assert "takes: 2" in saved.content
    before = len(ledger(world))
    try:
        handle = await world.command("video", {"prompt": "twin comets", "model": TEXT_TO_VIDEO})
        await said(world, handle, "2 takes are on their way")
        assert len(ledger(world)) == before + 2
        once = await world.command(
            "video", {"prompt": "one comet", "model": TEXT_TO_VIDEO, "takes": 1}
        )
        await said(world, once, "on its way")
        assert len(ledger(world)) == before + 3  # the option wins over the default
    finally:
        await world.answer(await world.command("settings", {"takes": 0}, subcommand="defaults"))
