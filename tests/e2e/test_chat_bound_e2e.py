"""A conversation longer than its bound: old turns dropped, the thread told, no call
over ``CHAT_MAX_PROMPT_CHARS``."""

from collections.abc import AsyncIterator
from pathlib import Path

import pytest
import pytest_asyncio

from tests.support.e2e.chat import reply_in, text_calls
from tests.support.e2e.harness import World, close_world, open_world

pytestmark = pytest.mark.asyncio(loop_scope="module")

BOUND = 4200


@pytest_asyncio.fixture(loop_scope="module", scope="module")
async def world(tmp_path_factory: pytest.TempPathFactory) -> AsyncIterator[World]:
    opened = await open_world(
        Path(tmp_path_factory.mktemp("e2e")), overrides={"CHAT_MAX_PROMPT_CHARS": str(BOUND)}
    )
    yield opened
    await close_world(opened)
    assert opened.discord.unhandled == []
    assert opened.discord.server_errors == []
    assert "Traceback" not in opened.bot.log()


async def test_the_bound_drops_old_turns_with_a_notice_and_no_call_exceeds_it(
    world: World,
) -> None:
    world.api.set_next_text("Noted.")
    handle = await world.command("chat", {"prompt": "Remember: " + "a" * 1200})
    answer = await world.answer(handle)
    thread = await world.discord.signal.wait_for(
        lambda: world.discord.world.channels.get(answer.id), 15, "the conversation's thread"
    )
    bot = world.discord.bot_user.id
    replies = []
    for n in range(4):
        world.api.set_next_text(f"Noted {n}.")
        asked = world.discord.member_message(
            thread.id, world.member.id, f"<@{bot}> {n}: " + "b" * 1200
        )
        replies.append(await reply_in(world, thread.id, asked))
    calls = text_calls(world)[-5:]
    assert all(len(call["prompt"]) <= BOUND for call in calls)
    assert "Remember: " not in calls[-1]["prompt"]  # the oldest turn went first
    assert "Earlier turns are no longer sent:" not in replies[0].content
    notice = next(line for line in replies[-1].content.splitlines() if "no longer sent" in line)
    assert notice == "-# Earlier turns are no longer sent: 2 of 4."

    # Summarise: the price first, to the clicker only; then one billed call; then the summary
    # stands for the dropped turns in the next call.
    last = replies[-1]
    (button,) = [
        c for c in last.all_components if str(c.get("custom_id", "")).startswith("gbchat:sum:")
    ]
    calls_before = len(text_calls(world))
    click = await world.discord.press_button(last.id, button["custom_id"], user_id=world.member.id)
    question = await world.answer(click)
    assert question.ephemeral and "about $" in question.content
    assert len(text_calls(world)) == calls_before  # nothing spent before the confirmation
    (confirm,) = [
        c for c in question.all_components if str(c.get("label", "")).startswith("Summarise")
    ]
    world.api.set_next_text("The member sent long rows of letters, numbered.")
    done = await world.discord.press_button(
        question.id, confirm["custom_id"], user_id=world.member.id
    )
    summarised = await world.discord.signal.wait_for(
        lambda: ((m := done.original()) is not None and "Summarised" in m.content and m) or None,
        15,
        "the summary's answer",
    )
    assert "charged" in summarised.content
    assert len(text_calls(world)) == calls_before + 1
    world.api.set_next_text("Noted again.")
    asked = world.discord.member_message(thread.id, world.member.id, f"<@{bot}> and now?")
    after = await reply_in(world, thread.id, asked)
    prompt = text_calls(world)[-1]["prompt"]
    assert prompt.startswith("⟦summary of earlier turns⟧\nThe member sent long rows")
    assert len(prompt) <= BOUND
    assert after.content
