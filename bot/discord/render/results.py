"""Replies to the synchronous commands: a text answer, a set of images."""

from __future__ import annotations

import dataclasses
from decimal import Decimal

import discord

from bot.discord.render import limits
from bot.discord.render.buttons import result_buttons
from bot.discord.render.parts import Card, MessageParts
from bot.discord.render.text import ends_inside_fence, excerpt, one_line, split_message, truncate
from bot.genapi.wire import ImageResult, TextResult
from bot.i18n import N_, _, money, n_, number, using

EMPTY_ANSWER = N_("The model gave an empty answer.")
"""Said (in italics) where the model's answer is empty."""

ANSWER_FILENAME = "answer.md"
# Long enough to show what the answer is about, short enough not to bury the attachment.
EXCERPT_CHARS = 400
EXCERPT_LINES = 12
IMAGE_COLOUR = discord.Colour.blurple()
DONE_COLOUR = discord.Colour.green()
CARD_ANSWER = 3700
"""Characters of a text answer a card holds: with the 200 of the footer, inside Discord's
4000 characters of text displays per message."""
CARD_PROMPT = 1500
"""Characters of the prompt a card shows (as the job card, :mod:`bot.discord.render.jobs`)."""


def text_answer(
    result: TextResult,
    *,
    sandbox: bool,
    attach_over: int = 6000,
    ref: str | None = None,
    paid_by: str | None = None,
    locale: str | None = None,
) -> list[MessageParts]:
    """Build the messages answering ``/text``, with the action buttons on the last one.

    As :func:`_text_messages`; ``ref`` (``r<id>``) adds Again, Vary and Delete
    (:func:`bot.discord.render.buttons.result_buttons`) to the last message; None adds none. This is
    the form of answers too long for :func:`text_card`, and its fallback. ``locale``: the
    server's, for a public answer (None: the current answer's); the model's words are its own.
    """
    with using(locale):
        messages = _text_messages(result, sandbox=sandbox, attach_over=attach_over, paid_by=paid_by)
        if ref is not None:
            actions = result_buttons("text", ref)
            messages[-1] = dataclasses.replace(messages[-1], action_buttons=actions)
        return messages


def _text_messages(
    result: TextResult, *, sandbox: bool, attach_over: int, paid_by: str | None = None
) -> list[MessageParts]:
    """Build the messages answering ``/text``: the model's answer and a subtext footer.

    The answer is split with :func:`split_message` into messages of at most 2000 characters
    (Discord's content limit); the footer ``-# model · 123 tokens · $0.02`` (`` · sandbox``
    added in sandbox mode) goes at the end of the last one, or in a message of its own when it
    does not fit or the last chunk ends inside an unclosed code block. An answer longer than
    ``attach_over`` characters is sent as one message instead: an excerpt, the footer, and
    the whole answer attached as ``answer.md`` (UTF-8), since a wall of messages is harder to
    read than a file. Nothing pings: the answer is the model's text.

    Args:
        result: the service's answer.
        sandbox: whether the answer came from the sandbox service.
        attach_over: the answer length above which it is attached instead of split.
        paid_by: who paid, named in the footer (``"this server"``, ``"your key"``...).

    Returns:
        The messages to send in order, the first as the interaction's reply.
    """
    return answer_messages(
        result.content,
        _text_footer(result, sandbox=sandbox, paid_by=paid_by),
        attach_over=attach_over,
    )


def answer_messages(content: str, footer: str, *, attach_over: int) -> list[MessageParts]:
    """A model's answer as messages, ``footer`` last (``/text`` and ``/chat`` answers).

    Split with :func:`split_message` into messages of at most 2000 characters (Discord's
    content limit), code blocks intact; ``footer`` ends the last one, or is a message of its own
    when it does not fit or the last chunk ends inside an unclosed code block. Longer than
    ``attach_over`` characters: one message instead, an excerpt, the footer, and the whole
    answer attached as ``answer.md`` (UTF-8).

    Args:
        content: the model's answer.
        footer: a subtext line (``-# …``).
        attach_over: the answer length above which it is attached instead of split.

    Returns:
        The messages to send in order.
    """
    if len(content) > attach_over:
        note = "-# " + _(
            "The full answer ({count} characters) is attached as {file}.",
            count=number(len(content)),
            file=ANSWER_FILENAME,
        )
        return [
            MessageParts(
                content=f"{_excerpt(content)}\n…\n{note}\n{footer}",
                files=((ANSWER_FILENAME, content.encode("utf-8")),),
            )
        ]
    chunks = split_message(content, limits.CONTENT)
    if not chunks:
        return [MessageParts(content=f"*{_(EMPTY_ANSWER)}*\n{footer}")]
    last = chunks[-1].rstrip()
    if len(last) + 1 + len(footer) <= limits.CONTENT and not ends_inside_fence(last):
        chunks[-1] = f"{last}\n{footer}"
    else:
        chunks.append(footer)
    return [MessageParts(content=chunk) for chunk in chunks]


def text_card(
    result: TextResult,
    *,
    sandbox: bool,
    ref: str | None = None,
    paid_by: str | None = None,
    locale: str | None = None,
) -> MessageParts | None:
    """Build the answer to ``/text`` as one Components V2 card, when it fits one.

    The answer goes in a text display and the footer (``-# model · 123 tokens · $0.02``)
    below it: at most :data:`CARD_ANSWER` characters of answer, inside Discord's 4000
    characters of text displays per message. Nothing pings: the answer is the model's text.

    Args:
        result: the service's answer.
        sandbox: whether the answer came from the sandbox service.
        ref: the result's button reference (``r<id>``): adds Again, Vary and Delete.
        paid_by: who paid, named in the footer (``"this server"``, ``"your key"``...).
        locale: the server's, for a public answer; None: the current answer's.

    Returns:
        The card, or None for a longer answer (:func:`text_answer` splits or attaches it,
        and is the fallback when Discord refuses the card).
    """
    content = result.content.strip()
    if len(content) > CARD_ANSWER:
        return None
    with using(locale):
        footer = _text_footer(result, sandbox=sandbox, paid_by=paid_by)
        answer = content or f"*{_(EMPTY_ANSWER)}*"
        card = Card(DONE_COLOUR.value, (answer,), notes=(footer,))
        actions = () if ref is None else result_buttons("text", ref)
        return MessageParts(card=card, action_buttons=actions)


def _excerpt(content: str) -> str:
    # Lines are capped too: 400 characters of short code lines would still be a long message.
    head = excerpt("\n".join(content.split("\n")[:EXCERPT_LINES]), EXCERPT_CHARS).rstrip()
    return f"{head}\n```" if ends_inside_fence(head) else head


def _text_footer(result: TextResult, *, sandbox: bool, paid_by: str | None = None) -> str:
    items = [discord.utils.escape_markdown(result.model)]
    # A service that does not report usage sends zeros; "0 tokens" would be misleading.
    if result.usage.total_tokens:
        tokens = result.usage.total_tokens
        items.append(n_("{count} token", "{count} tokens", tokens))
    items.append(money(result.cost_cents))
    if paid_by:
        items.append(_("paid by {payer}", payer=_(paid_by)))
    if sandbox:
        items.append(_("sandbox"))
    # "-# " makes the line Discord's small grey subtext.
    return truncate("-# " + " · ".join(items), 200)


def image_result(
    result: ImageResult,
    *,
    prompt: str,
    model: str,
    requester_id: int,
    sandbox: bool,
    ref: str | None = None,
    paid_by: str | None = None,
    locale: str | None = None,
    job_id: int | None = None,
    draft: bool = False,
) -> MessageParts:
    """Build the reply to ``/image``: a card like a finished job's, with embeds as fallback.

    The card (Components V2) shows the state, the prompt, model and cost, the images in a
    media gallery (at most 10), their links, the first 5 link buttons and the actions.
    The fallback form has one embed per image and a link button to each: Discord allows
    10 embeds per message and 25 link buttons (5 rows of 5), so the first 10
    images are shown and the first 25 linked. The first embed carries the prompt as its title
    (at most 256 characters), who asked, and the footer ``model · $0.04`` (`` · sandbox``).
    Outputs that are not web addresses are skipped, as Discord can show only those.

    Args:
        result: the service's response.
        prompt: the user's prompt, shown in the embed (where it can ping nobody).
        model: the model id used.
        requester_id: the Discord user who asked.
        sandbox: whether the image came from the sandbox service.
        ref: the result's button reference (``r<id>``): adds Again, Vary, Animate, Edit and
            Delete; None adds none.
        paid_by: who paid, named in the footer (``"this server"``, ``"your key"``...).
        locale: the server's, for a public answer; None: the current answer's.
        job_id: the finished job recorded for it: adds Share (``gb:share:j<job id>``)
            beside ``ref``'s buttons.
        draft: a draft's take (``draft:true``): adds **Final** first.

    Returns:
        The message; it pings nobody, as the requester is waiting on the reply anyway.
    """
    with using(locale):
        return _image_result(
            result, prompt, model, requester_id, sandbox, ref, paid_by, job_id, draft
        )


def _image_result(
    result: ImageResult,
    prompt: str,
    model: str,
    requester_id: int,
    sandbox: bool,
    ref: str | None,
    paid_by: str | None,
    job_id: int | None = None,
    draft: bool = False,
) -> MessageParts:
    urls = [url for url in result.outputs if is_web_url(url)]
    embeds = [
        discord.Embed(colour=IMAGE_COLOUR).set_image(url=url)
        for url in urls[: limits.EMBEDS_PER_MESSAGE]
    ]
    if not embeds:
        embeds = [discord.Embed(colour=IMAGE_COLOUR)]
    first = embeds[0]
    first.title = truncate(one_line(prompt) or _("Image"), limits.EMBED_TITLE)
    member = f"<@{requester_id}>"
    first.description = _("Requested by {member}", member=member)
    if not urls:
        first.description += "\n" + _("The service returned no image.")
    footer = [model, money(result.cost_cents)]
    footer += [_("paid by {payer}", payer=_(paid_by))] if paid_by else []
    footer += [_("sandbox")] if sandbox else []
    first.set_footer(text=truncate(" · ".join(footer), limits.EMBED_FOOTER))
    share = None if job_id is None else f"j{job_id}"
    actions = (
        ()
        if ref is None or not urls
        else result_buttons("image", ref, share_ref=share, draft=draft)
    )
    return MessageParts(
        embeds=tuple(embeds),
        link_buttons=image_buttons(urls),
        action_buttons=actions,
        card=_image_card(urls, prompt, model, result.cost_cents, requester_id, sandbox, paid_by),
    )


def _image_card(
    urls: list[str],
    prompt: str,
    model: str,
    cost_cents: Decimal,
    requester_id: int,
    sandbox: bool,
    paid_by: str | None = None,
) -> Card:
    """The job card's look for a synchronous image: done, the gallery, the links."""
    shown = discord.utils.escape_mentions(truncate(prompt, CARD_PROMPT))
    quoted = "\n".join(f"> {line}" for line in shown.splitlines() if line.strip())
    charged = _("{amount} charged", amount=money(cost_cents))
    head = "\n".join(
        (
            f"**{_('Image')}** · {_('done')}",
            quoted or "> " + _("(no prompt)"),
            f"`{truncate(model, 200)}` · {charged}",
        )
    )
    member = f"<@{requester_id}>"
    footer = "-# " + _("Requested by {member}", member=member)
    footer += (" · " + _("paid by {payer}", payer=_(paid_by))) if paid_by else ""
    footer += (" · " + _("sandbox")) if sandbox else ""
    if not urls:
        note = _("The service returned no image.")
        return Card(DONE_COLOUR.value, (head,), notes=(note, footer))
    shown_urls = urls[: limits.FILES_PER_MESSAGE]
    media = tuple((url, _("image {number}", number=n)) for n, url in enumerate(shown_urls, 1))
    links = truncate("\n".join(urls[: limits.FILES_PER_MESSAGE]), 1500)
    return Card(DONE_COLOUR.value, (head,), media=media, notes=(links, footer))


def is_web_url(url: str) -> bool:
    """Whether Discord can show ``url`` as an embed image or a link (http or https only)."""
    return url.startswith(("https://", "http://"))


def image_buttons(urls: list[str] | tuple[str, ...]) -> tuple[tuple[str, str], ...]:
    """Link buttons "Open image N" for up to 25 images (Discord: 5 rows of 5 buttons).

    A URL longer than a link button allows (512 characters) gets no button.
    """
    return tuple(
        (_("Open image {number}", number=index), url)
        for index, url in enumerate(urls, start=1)
        if is_web_url(url) and len(url) <= limits.BUTTON_URL
    )[: limits.BUTTONS]
