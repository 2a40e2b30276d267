"""Once the service has charged, the member gets the result, never
"Something went wrong".

What fails after the charge here is ours or Discord's: the write of the request behind the
result's buttons (a database that refuses it), or the edit of the deferred response (an
interaction token Discord no longer accepts). The answer is shown anyway (in the channel when
the response cannot take it), a video's card still comes, and the charge is in the ledger.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Iterator
from contextlib import contextmanager

import pytest

from bot.sandbox.catalogue import catalogue_json
from tests.support.discord_emulator import errors as err
from tests.support.discord_emulator.interactions import InteractionHandle
from tests.support.e2e.harness import World, action_buttons

pytestmark = pytest.mark.asyncio(loop_scope="module")

WENT_WRONG = "went wrong"


def ledger_kinds(world: World) -> list[str]:
    with sqlite3.connect(world.bot.env["DATABASE_PATH"]) as db:
        return [str(kind) for (kind,) in db.execute("SELECT kind FROM ledger ORDER BY id")]


@contextmanager
def requests_refused(world: World) -> Iterator[None]:
    """The database refuses to store the request behind a result (its buttons' row)."""
    with sqlite3.connect(world.bot.env["DATABASE_PATH"]) as db:
        db.execute(
            "CREATE TRIGGER refuse_requests BEFORE INSERT ON result_requests"
            " BEGIN SELECT RAISE(ABORT, 'disk trouble'); END"
        )
    try:
        yield
    finally:
        with sqlite3.connect(world.bot.env["DATABASE_PATH"]) as db:
            db.execute("DROP TRIGGER refuse_requests")


def told_it_failed(handle: InteractionHandle) -> bool:
    original = handle.original()
    texts = [m.text for m in handle.followups] + ([original.text] if original else [])
    return any(WENT_WRONG in text for text in texts)


async def test_a_paid_answer_is_shown_when_its_buttons_cannot_be_stored(world: World) -> None:
    before = len(ledger_kinds(world))
    model = next(m for m in catalogue_json()["models"]["video"] if "image" not in m["mode"])
    with requests_refused(world):
        text = await world.command("text", {"prompt": "a haiku about ledgers"})
        answer = await world.answer(text)
        video = await world.command(
            "video", {"prompt": "a ledger in the wind", "model": model["id"]}
        )
        note = await world.answer(video)

    assert not answer.ephemeral and "Sandbox reply to: a haiku about ledgers" in answer.text
    assert action_buttons(answer) == []  # no request behind them: no buttons that fail
    assert "on its way" in note.content, note.content
    assert not told_it_failed(text) and not told_it_failed(video)
    await world.discord.wait_for_message(
        lambda m: "a ledger in the wind" in m.text, include_existing=True
    )
    assert ledger_kinds(world)[before:] == ["text", "video"]


async def test_a_paid_answer_goes_to_the_channel_when_its_response_cannot_be_edited(
    world: World,
) -> None:
    before = len(ledger_kinds(world))
    # Discord no longer takes the interaction's token (it dies after 15 minutes: 401 / 50027).
    world.discord.inject_error(
        "/messages/@original", err.invalid_webhook_token(), method="PATCH", count=1
    )
    handle = await world.command("text", {"prompt": "a note for the channel"})
    posted = await world.discord.wait_for_message(
        lambda m: "Sandbox reply to: a note for the channel" in m.text and m.webhook_id is None
    )
    assert posted.channel_id == world.channel.id
    assert not told_it_failed(handle)
    assert ledger_kinds(world)[before:] == ["text"]


async def test_a_video_whose_note_cannot_be_shown_is_still_coming(world: World) -> None:
    before = len(ledger_kinds(world))
    model = next(m for m in catalogue_json()["models"]["video"] if "image" not in m["mode"])
    world.discord.inject_error(
        "/messages/@original", err.invalid_webhook_token(), method="PATCH", count=1
    )
    handle = await world.command("video", {"prompt": "a paid-for comet", "model": model["id"]})
    card = await world.discord.wait_for_message(lambda m: "a paid-for comet" in m.text)
    await world.discord.wait_for_edit(card.id, lambda m: "/files/" in m.text, timeout=60)
    assert not told_it_failed(handle)
    assert ledger_kinds(world)[before:] == ["video"]
