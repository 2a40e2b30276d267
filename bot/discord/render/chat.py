"""Answers of conversation turns (``/chat``): the answer, what it cost and carried."""

from __future__ import annotations

from dataclasses import replace
from decimal import Decimal

import discord

from bot.discord.render import limits
from bot.discord.render.parts import MessageParts
from bot.discord.render.results import answer_messages
from bot.discord.render.text import one_line, truncate
from bot.i18n import _, money, n_, number, using
from bot.services.conversations import ChatAnswer
from bot.services.personal import PAID_BY_CREDITS, PAID_BY_SERVER

THREAD_NAME_CHARS = 100
"""Discord's longest thread name (Channel docs: ``name``, 1-100 characters)."""

ATTACH_OVER = 6000
"""An answer longer than this is attached as ``answer.md``, as ``/text``'s are."""


def thread_name(prompt: str) -> str:
    """The name of a conversation's thread: the prompt on one line, cut to 100 characters."""
    return truncate(one_line(prompt), THREAD_NAME_CHARS) or _("Conversation")


def chat_footer(reply: ChatAnswer, *, sandbox: bool) -> str:
    """The subtext under an answer: model, tokens, cost, and the history the call carried.

    ``-# model · 1,234 tokens · $0.02 · paid by this server · carried 2 earlier turns``; when
    the bound dropped turns, a second line ``-# Earlier turns are no longer sent: 6 of 14.``
    """
    items = [discord.utils.escape_markdown(reply.model)]
    tokens = reply.prompt_tokens + reply.completion_tokens
    if tokens:
        items.append(n_("{count} token", "{count} tokens", tokens))
    items.append(money(reply.cost_cents))
    # A conversation lives in a server's channels and threads: the server pays, or the
    # member's credit balance where the server lets members pay (docs/credits.md).
    payer = PAID_BY_CREDITS if reply.by_credits else PAID_BY_SERVER
    items.append(_("paid by {payer}", payer=_(payer)))
    if reply.carried == 0:
        items.append(_("no earlier turns sent"))
    else:
        items.append(
            n_("carried {count} earlier turn", "carried {count} earlier turns", reply.carried)
        )
    if sandbox:
        items.append(_("sandbox"))
    footer = truncate("-# " + " · ".join(items), 200)
    if reply.dropped:
        dropped = _(
            "Earlier turns are no longer sent: {dropped} of {history}.",
            dropped=number(reply.dropped),
            history=number(reply.history),
        )
        footer += f"\n-# {dropped}"
    return footer


SUMMARISE_ID = "gbchat:sum:{thread_id}"
"""Custom id of the Summarise button of a conversation's thread (restart-safe)."""

SUMMARISE_TEMPLATE = r"gbchat:sum:(?P<thread>[0-9]{1,20})"


def summarise_button(thread_id: int) -> tuple[str, str]:
    """The ``(label, custom_id)`` of the Summarise button of ``thread_id``'s answers."""
    return (_("Summarise earlier turns"), SUMMARISE_ID.format(thread_id=thread_id))


def chat_answer(
    reply: ChatAnswer,
    *,
    sandbox: bool,
    thread_id: int | None = None,
    locale: str | None = None,
) -> list[MessageParts]:
    """The messages answering a turn, split as ``/text``'s are (code blocks intact).

    Past :data:`ATTACH_OVER` characters the answer is one message: an excerpt, the footer and
    the whole answer attached as ``answer.md``. Nothing pings (the answer is the model's text,
    the labels carry members' names). When the bound dropped turns and the thread is known,
    the last message carries the Summarise button. ``locale``: the server's (the thread is
    public); None: the current answer's. The model's answer is never translated.
    """
    with using(locale):
        parts = _chat_messages(reply, sandbox=sandbox)
        if reply.dropped and thread_id is not None:
            parts[-1] = replace(parts[-1], action_buttons=(summarise_button(thread_id),))
        return parts


def _chat_messages(reply: ChatAnswer, *, sandbox: bool) -> list[MessageParts]:
    return answer_messages(
        reply.answer, chat_footer(reply, sandbox=sandbox), attach_over=ATTACH_OVER
    )


def thread_lines(threads: list[tuple[int, int, Decimal]], limit: int = 10) -> str:
    """``/usage``'s conversations field: ``<#thread> · 3 turns · $0.02``, the first ``limit``."""
    lines = [
        f"<#{thread_id}> · {_turns(calls)} · {money(cents)}"
        for thread_id, calls, cents in threads[:limit]
    ]
    if len(threads) > limit:
        lines.append(_("and {count} more", count=number(len(threads) - limit)))
    return truncate("\n".join(lines), limits.FIELD_VALUE)


def _turns(calls: int) -> str:
    return n_("{count} turn", "{count} turns", calls)
