"""The showcase channel's post of a shared result, and the answers to Share and Vote.

Sentences a member reads are marked for the catalogue (``bot.i18n``); the post is the server's,
so its caller renders it in the server's language.
"""

from __future__ import annotations

from typing import Final

from bot.discord.render.buttons import vote_button
from bot.discord.render.parts import MessageParts
from bot.discord.render.text import truncate
from bot.domain import ShowcaseEntry
from bot.i18n import N_, _

SHARED: Final = N_("Shared to this server's showcase.")
SHARED_BEFORE: Final = N_("This result is in the showcase already (or an admin removed it).")
VOTED: Final = N_("Vote counted: {votes} in all.")
VOTED_BEFORE: Final = N_("You voted for this already (one vote each): {votes} in all.")


def showcase_post(entry: ShowcaseEntry) -> MessageParts:
    """The showcase channel's message of an entry: who, what, its file links, Vote.

    Pings nobody (the parts' allowed mentions are none). The files are the service's URLs of
    the result (Discord shows a preview of each).
    """
    result = entry.result
    prompt = truncate(result.prompt, 500)
    if result.kind == "image":
        head = _(
            "**Showcase** · <@{user}> shared an image: {prompt}", user=entry.user_id, prompt=prompt
        )
    else:
        head = _(
            "**Showcase** · <@{user}> shared a video: {prompt}", user=entry.user_id, prompt=prompt
        )
    links = "\n".join(result.outputs[:4])
    return MessageParts(
        content=truncate(f"{head}\n{links}", 2000),
        action_buttons=(vote_button(entry.id, entry.votes),),
    )
