"""A conversation's next turn asked by a command (``/chat`` or ``/text``) in its thread.

Shared by the ``/chat`` and ``/text`` cogs, which are given the conversation service in their
``setup`` and pass it here: every turn is a ``/text`` for money and policy
(:class:`bot.services.conversations.ConversationService`), and once paid it is kept and shown
whatever fails.
"""

from __future__ import annotations

import discord

from bot.discord.bot import GenBot
from bot.discord.render.chat import chat_answer
from bot.discord.request_flows import InteractionDesk, answer_locale, show_paid
from bot.domain import Conversation
from bot.services.conversations import ConversationService
from bot.services.generation import Requester


def display_name(user: discord.abc.User) -> str:
    """The name a turn is labelled with: the member's display name in the server."""
    return user.display_name


async def conversation_of(
    conversations: ConversationService, interaction: discord.Interaction[GenBot]
) -> Conversation | None:
    """The conversation of the thread ``interaction`` was used in; None elsewhere."""
    channel = interaction.channel
    if not isinstance(channel, discord.Thread):
        return None
    return await conversations.get(channel.id)


async def continue_conversation(
    conversations: ConversationService,
    interaction: discord.Interaction[GenBot],
    who: Requester,
    conversation: Conversation,
    prompt: str,
    *,
    sandbox: bool,
    model: str | None = None,
    system: str | None = None,
    max_tokens: int | None = None,
    temperature: float | None = None,
) -> None:
    """Answer ``/chat`` or ``/text`` used in a conversation's thread as its next turn.

    ``interaction`` must be deferred publicly (``PUBLIC_DEFER`` set). The turn is one service
    call (:meth:`ConversationService.turn`: asked, marked charged, kept); the answer is then
    shown whatever fails (:func:`bot.discord.request_flows.show_paid`: the response, else the
    thread, else the member's DM).

    Args:
        conversations: the conversation service (the cog's, given in its ``setup``).
        interaction: the command's interaction, deferred publicly.
        who: who asked, where.
        conversation: the thread's conversation.
        prompt: the member's turn.
        sandbox: results come from the built-in emulator, and the answer says so.
        model: the text model, if the member chose one.
        system: a system prompt for this turn, if any.
        max_tokens: the longest answer, in tokens, if set.
        temperature: randomness, from 0 to 2, if set.

    Raises:
        ConversationEnded, ValidationFailed, BudgetExceeded, GenAPIError...: as
            :meth:`ConversationService.ask`, before any charge.
    """
    author = display_name(interaction.user)
    reply = await conversations.turn(
        who,
        author,
        prompt,
        conversation,
        desk=InteractionDesk(interaction, who),
        model=model,
        system=system,
        max_tokens=max_tokens,
        temperature=temperature,
    )
    locale = await answer_locale(interaction, who)  # the thread is public: the server's
    parts = chat_answer(reply, sandbox=sandbox, thread_id=conversation.thread_id, locale=locale)
    await show_paid(interaction, who, parts)
