"""``/jobs`` with the real bot process: a member finds every job of theirs, wherever it stands."""

from typing import Any

import pytest

from bot.sandbox.catalogue import catalogue_json
from tests.support.discord_emulator.models import Message
from tests.support.e2e.harness import World, result_url

pytestmark = pytest.mark.asyncio(loop_scope="module")


def text_to_video() -> dict[str, Any]:
    return next(m for m in catalogue_json()["models"]["video"] if "image" not in m["mode"])


def async_image() -> dict[str, Any]:
    return next(m for m in catalogue_json()["models"]["image"] if m.get("async"))


def shown(message: Message) -> str:
    return message.text


async def submit_video(world: World, prompt: str) -> Message:
    model = text_to_video()
    handle = await world.command("video", {"prompt": prompt, "model": model["id"]})
    await world.answer(handle)
    return await world.discord.wait_for_message(
        lambda m: m.channel_id == world.channel.id and prompt in m.text,
        include_existing=True,
    )


async def jobs(world: World, options: dict[str, Any] | None = None, **kw: Any) -> Message:
    answer = await world.answer(await world.command("jobs", options or {}, **kw))
    assert answer.ephemeral
    assert answer.pinged_user_ids() == set() and not answer.pings_everyone()
    return answer


async def test_the_default_key_without_a_budget_is_warned_of_at_start(world: World) -> None:
    warnings = [line for line in world.bot.log().splitlines() if "no default budget" in line]
    assert len(warnings) == 1
    assert "WARNING" in warnings[0]


async def test_no_jobs_yet(world: World) -> None:
    answer = await jobs(world)
    assert "No jobs" in shown(answer)


async def test_pending_then_finished_and_failed_jobs_are_listed(world: World) -> None:
    placeholder = await submit_video(world, "a heron fishing at dusk")
    pending = await jobs(world)
    assert "heron fishing" in shown(pending)
    assert "Processing" in shown(pending) and "elapsed" in shown(pending)
    assert "ready <t:" in shown(pending) or "no estimate yet" in shown(pending)

    done = await world.discord.wait_for_edit(
        placeholder.id, lambda m: "/files/" in m.text, timeout=40
    )
    finished = await jobs(world)
    assert "Completed in" in shown(finished)
    assert f"]({result_url(done)})" in shown(finished)  # a link to the video itself
    jump = f"/channels/{world.guild.id}/{world.channel.id}/{placeholder.id})"
    assert jump in shown(finished)

    world.api.fail_next_tasks(1, "the provider refused the prompt")
    failed_placeholder = await submit_video(world, "a forbidden thing")
    await world.discord.wait_for_edit(
        failed_placeholder.id, lambda m: "refused the prompt" in m.text, timeout=40
    )
    failed = await jobs(world)
    assert "Failed" in shown(failed) and "refused the prompt" in shown(failed)
    # Newest first: the failed job is listed before the finished one.
    assert shown(failed).index("forbidden thing") < shown(failed).index("heron fishing")


async def test_only_admins_see_other_members_and_the_whole_server(world: World) -> None:
    refused = await jobs(world, {"member": world.admin.id})
    assert "Manage Server" in refused.content
    refused = await jobs(world, {"everyone": True})
    assert "Manage Server" in refused.content

    theirs = await jobs(world, {"member": world.member.id}, admin=True)
    assert "heron fishing" in shown(theirs)
    server = await jobs(world, {"everyone": True}, admin=True)
    assert "this server's" in shown(server)
    assert f"by <@{world.member.id}>" in shown(server)
    mine = await jobs(world, {}, admin=True)  # an admin's own listing: their own jobs only
    assert "heron fishing" not in shown(mine)


async def test_many_jobs_are_paged_with_buttons(world: World) -> None:
    model = async_image()
    for number in range(10):
        handle = await world.command("image", {"prompt": f"fox {number}", "model": model["id"]})
        await world.answer(handle)
    first = await jobs(world)
    assert "Page 1/2" in shown(first)
    assert "fox 9" in shown(first)
    buttons = [c for row in first.components for c in row["components"]]
    next_button = next(b for b in buttons if b.get("label") == "Next")
    pressed = await world.discord.press_button(
        first.id, next_button["custom_id"], user_id=world.member.id
    )
    await pressed.wait_callback()
    second = world.discord.messages[first.id]
    assert "Page 2/2" in shown(second)
    assert "heron fishing" in shown(second)  # the oldest, on the last page
