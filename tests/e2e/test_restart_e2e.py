"""kill -9 with videos pending: after a restart every placeholder is finished exactly once."""

import asyncio
import sqlite3

import pytest

from bot.sandbox.catalogue import catalogue_json
from bot.storage.money import from_micro
from tests.support.e2e.harness import World

pytestmark = pytest.mark.asyncio(loop_scope="module")

PROMPTS = ("a lighthouse in a storm", "a fox in the snow", "a comet over the sea")


def identifies(world: World) -> int:
    return sum(1 for event in world.discord.gateway_received if event.op == 2)


async def test_pending_videos_survive_kill_9(world: World) -> None:
    model = next(m for m in catalogue_json()["models"]["video"] if "image" not in m["mode"])
    world.api.set_task_duration(lambda model, body: 10.0)
    placeholders = []
    for prompt in PROMPTS:
        handle = await world.command(
            "video", {"prompt": prompt, "model": model["id"], "duration": model["durations"][0]}
        )
        await world.answer(handle)
        placeholders.append(
            await world.discord.wait_for_message(
                lambda m, p=prompt: p in m.text, include_existing=True
            )
        )

    # A form and a list's pages, shown before the crash and used after it.
    form = await world.command("video-advanced")
    await form.wait_callback()
    assert form.modal is not None
    listing = await world.answer(await world.command("models", {}))
    pages = {b["label"]: b["custom_id"] for row in listing.components for b in row["components"]}

    await world.bot.kill()
    await asyncio.sleep(1)
    assert all("/files/" not in p.text for p in placeholders)  # none finished before the crash

    await world.bot.start()
    await world.discord.signal.wait_for(
        lambda: True if identifies(world) >= 2 else None, 60, "a second IDENTIFY"
    )
    await world.discord.wait_ready(timeout=60)
    late = await world.answer(
        await world.discord.submit_modal(
            form.modal["custom_id"], {form.modal["components"][0]["component"]["custom_id"]: "x"}
        )
    )
    assert late.ephemeral and "This form is no longer open" in late.content
    turned = await world.answer(
        await world.discord.press_button(listing.id, pages["Next"], user_id=world.member.id)
    )
    assert turned.ephemeral and "These buttons have expired" in turned.content
    # A button of an older version, whose view lived in that process's memory only.
    old = world.discord.msgs.create(
        world.channel.id,
        {
            "content": "Generate · $1.80?",
            "components": [
                {
                    "type": 1,
                    "components": [
                        {"type": 2, "style": 3, "label": "Generate", "custom_id": "9f" * 16}
                    ],
                }
            ],
        },
        [],
        can_mention_everyone=False,
    )
    gone = await world.answer(
        await world.discord.press_button(old.id, "9f" * 16, user_id=world.member.id)
    )
    assert gone.ephemeral and "This button no longer works" in gone.content
    for placeholder in placeholders:
        await world.discord.wait_for_edit(placeholder.id, lambda m: "/files/" in m.text, timeout=60)
    await asyncio.sleep(3)  # a few more poller passes: nothing may be announced twice

    for placeholder in placeholders:
        message = world.discord.messages[placeholder.id]
        finals = [v for v in message.history if "/files/" in v["text"]]
        assert len(finals) == 1, "finished more than once"
        replies = [
            m
            for m in world.discord.messages.values()
            if str((m.message_reference or {}).get("message_id")) == str(placeholder.id)
        ]
        assert len(replies) == 1
        assert replies[0].pinged_user_ids() == {world.member.id}

    assert world.discord.command_syncs == 1  # unchanged commands are not synced again
    charged = [t.cost_cents for t in world.api.tasks.values() if t.kind == "video"]
    with sqlite3.connect(world.bot.env["DATABASE_PATH"]) as db:
        rows = db.execute("SELECT cost_micro FROM ledger WHERE kind = 'video'").fetchall()
    assert sorted(from_micro(r[0]) for r in rows) == sorted(charged)
    assert len(rows) == len(PROMPTS)
