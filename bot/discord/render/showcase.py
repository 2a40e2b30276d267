"""The showcase channel's post of a shared result, and the answers to Share and Vote.

Sentences a member reads are module constants, one place, so they can be translated later.
"""

from __future__ import annotations

from typing import Final

from bot.discord.render.buttons import vote_button
from bot.discord.render.parts import MessageParts
from bot.discord.render.text import truncate
from bot.domain import ShowcaseEntry

SHARED: Final = "Shared to this server's showcase."
SHARED_BEFORE: Final = "This result is in the showcase already (or an admin removed it)."
VOTED: Final = "Vote counted: {votes} in all."
VOTED_BEFORE: Final = "You voted for this already (one vote each): {votes} in all."
POST: Final = "**Showcase** · <@{user}> shared {a_kind}: {prompt}"


def showcase_post(entry: ShowcaseEntry) -> MessageParts:
    """The showcase channel's message of an entry: who, what, its file links, Vote.

    Pings nobody (the parts' allowed mentions are none). The files are the service's URLs of
    the result (Discord shows a preview of each).
    """
    result = entry.result
    a_kind = "an image" if result.kind == "image" else "a video"
    head = POST.format(user=entry.user_id, a_kind=a_kind, prompt=truncate(result.prompt, 500))
    links = "\n".join(result.outputs[:4])
    return MessageParts(
        content=truncate(f"{head}\n{links}", 2000),
        action_buttons=(vote_button(entry.id, entry.votes),),
    )
