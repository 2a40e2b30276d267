"""``/chat`` conversations, their turns, and channels' personas.

Money is :class:`~decimal.Decimal` cents; times are UTC epoch seconds (``float``).
"""

from __future__ import annotations

from dataclasses import dataclass
from decimal import Decimal


@dataclass(frozen=True, slots=True)
class Conversation:
    """A ``/chat`` conversation, keyed by its Discord thread.

    Attributes:
        thread_id: the thread the conversation lives in (its id is the key).
        guild_id: the guild.
        channel_id: the thread's parent channel.
        user_id: the member who started it.
        model: the text model its turns use; None: the service's default.
        system: the starter's system prompt, sent with every turn; None if none.
        created_at: UTC epoch seconds.
        ended_at: when it ended (thread archived or deleted, turn cap), UTC epoch seconds;
            None while it goes on.
        end_reason: ``"archived"``, ``"deleted"`` or ``"turn cap"``; None while it goes on.
        summary: a summary of its first ``summary_upto`` turns (the Summarise button), sent
            instead of them; None if none was made.
        summary_upto: how many of the first turns ``summary`` stands for.
    """

    thread_id: int
    guild_id: int
    channel_id: int
    user_id: int
    model: str | None
    system: str | None
    created_at: float
    ended_at: float | None = None
    end_reason: str | None = None
    summary: str | None = None
    summary_upto: int = 0


@dataclass(frozen=True, slots=True)
class ConversationTurn:
    """One turn of a conversation: a member's text and the model's answer.

    Attributes:
        thread_id: the conversation's thread.
        user_id: who wrote the turn.
        author: their display name when they wrote it (the label the model sees).
        text: what they wrote (the bot's mention removed).
        answer: the model's answer as shown (cut where it began a next turn by itself).
        model: the model that answered.
        prompt_tokens: the service's ``usage.prompt_tokens`` (docs/genapi.md §2.5).
        completion_tokens: the service's ``usage.completion_tokens``.
        cost_cents: what the call was charged, cents; None when the service reported no
            usable number (the anomaly is recorded by billing).
        carried: how many earlier turns the call's prompt carried.
        at: UTC epoch seconds.
    """

    thread_id: int
    user_id: int
    author: str
    text: str
    answer: str
    model: str
    prompt_tokens: int
    completion_tokens: int
    cost_cents: Decimal | None
    carried: int
    at: float


@dataclass(frozen=True, slots=True)
class Persona:
    """A channel's persona (``/config persona``): for ``/chat`` and ``/text`` there.

    Attributes:
        guild_id: the guild.
        channel_id: the text channel (its threads inherit it).
        system: the system prompt, sent before the member's own.
        model: the default text model; None: the member's choice or the service's default.
        locked: an admin locked it: a member's ``system`` is refused in the channel and its
            threads, and a conversation's own ``system`` is no longer sent there.
    """

    guild_id: int
    channel_id: int
    system: str
    model: str | None = None
    locked: bool = False
