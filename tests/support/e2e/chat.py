"""Conversations through the harness: the bot's replies in a thread, the text calls it made."""

from typing import Any

from tests.support.discord_emulator.models import Message
from tests.support.e2e.harness import World


def text_calls(world: World) -> list[dict[str, Any]]:
    return [
        r.json
        for r in world.api.requests
        if r.method == "POST" and r.path.endswith("/text/generate") and r.json is not None
    ]


async def reply_in(world: World, thread_id: int, to: Message) -> Message:
    """The bot's reply to a member's message in the thread."""
    return await world.discord.wait_for_message(
        lambda m: (
            m.channel_id == thread_id
            and (m.message_reference or {}).get("message_id") == str(to.id)
        ),
        timeout=20,
    )
