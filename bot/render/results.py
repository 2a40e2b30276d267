"""Replies to the synchronous commands: a text answer, a set of images."""

from __future__ import annotations

import dataclasses

import discord

from bot.errors import format_cents
from bot.genapi.models import ImageResult, TextResult
from bot.render import limits
from bot.render.cards import result_buttons
from bot.render.parts import MessageParts
from bot.render.text import ends_inside_fence, excerpt, one_line, split_message, truncate

ANSWER_FILENAME = "answer.md"
# Long enough to show what the answer is about, short enough not to bury the attachment.
EXCERPT_CHARS = 400
EXCERPT_LINES = 12
IMAGE_COLOUR = discord.Colour.blurple()


def text_answer(
    result: TextResult, *, sandbox: bool, attach_over: int = 6000, ref: str | None = None
) -> list[MessageParts]:
    """Build the messages answering ``/text``, with the action buttons on the last one.

    As :func:`_text_messages`; ``ref`` (``r<id>``) adds Again, Vary and Delete
    (:func:`bot.render.cards.result_buttons`) to the last message; None adds none.
    """
    messages = _text_messages(result, sandbox=sandbox, attach_over=attach_over)
    if ref is not None:
        messages[-1] = dataclasses.replace(messages[-1], action_buttons=result_buttons("text", ref))
    return messages


def _text_messages(result: TextResult, *, sandbox: bool, attach_over: int) -> list[MessageParts]:
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

    Returns:
        The messages to send in order, the first as the interaction's reply.
    """
    footer = _text_footer(result, sandbox=sandbox)
    content = result.content
    if len(content) > attach_over:
        note = f"-# The full answer ({len(content):,} characters) is attached as {ANSWER_FILENAME}."
        return [
            MessageParts(
                content=f"{_excerpt(content)}\n…\n{note}\n{footer}",
                files=((ANSWER_FILENAME, content.encode("utf-8")),),
            )
        ]
    chunks = split_message(content, limits.CONTENT)
    if not chunks:
        return [MessageParts(content=f"*The model gave an empty answer.*\n{footer}")]
    last = chunks[-1].rstrip()
    if len(last) + 1 + len(footer) <= limits.CONTENT and not ends_inside_fence(last):
        chunks[-1] = f"{last}\n{footer}"
    else:
        chunks.append(footer)
    return [MessageParts(content=chunk) for chunk in chunks]


def _excerpt(content: str) -> str:
    # Lines are capped too: 400 characters of short code lines would still be a long message.
    head = excerpt("\n".join(content.split("\n")[:EXCERPT_LINES]), EXCERPT_CHARS).rstrip()
    return f"{head}\n```" if ends_inside_fence(head) else head


def _text_footer(result: TextResult, *, sandbox: bool) -> str:
    items = [discord.utils.escape_markdown(result.model)]
    # A service that does not report usage sends zeros; "0 tokens" would be misleading.
    if result.usage.total_tokens:
        items.append(f"{result.usage.total_tokens:,} tokens")
    items.append(format_cents(result.cost_cents))
    if sandbox:
        items.append("sandbox")
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
) -> MessageParts:
    """Build the reply to ``/image``: one embed per image and a link button to each.

    Discord allows 10 embeds per message and 25 link buttons (5 rows of 5), so the first 10
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

    Returns:
        The message; it pings nobody, as the requester is waiting on the reply anyway.
    """
    urls = [url for url in result.outputs if is_web_url(url)]
    embeds = [
        discord.Embed(colour=IMAGE_COLOUR).set_image(url=url)
        for url in urls[: limits.EMBEDS_PER_MESSAGE]
    ]
    if not embeds:
        embeds = [discord.Embed(colour=IMAGE_COLOUR)]
    first = embeds[0]
    first.title = truncate(one_line(prompt) or "Image", limits.EMBED_TITLE)
    first.description = f"Requested by <@{requester_id}>"
    if not urls:
        first.description += "\nThe service returned no image."
    footer = [model, format_cents(result.cost_cents)] + (["sandbox"] if sandbox else [])
    first.set_footer(text=truncate(" · ".join(footer), limits.EMBED_FOOTER))
    actions = () if ref is None or not urls else result_buttons("image", ref)
    return MessageParts(
        embeds=tuple(embeds), link_buttons=image_buttons(urls), action_buttons=actions
    )


def is_web_url(url: str) -> bool:
    """Whether Discord can show ``url`` as an embed image or a link (http or https only)."""
    return url.startswith(("https://", "http://"))


def image_buttons(urls: list[str] | tuple[str, ...]) -> tuple[tuple[str, str], ...]:
    """Link buttons "Open image N" for up to 25 images (Discord: 5 rows of 5 buttons).

    A URL longer than a link button allows (512 characters) gets no button.
    """
    return tuple(
        (f"Open image {number}", url)
        for number, url in enumerate(urls, start=1)
        if is_web_url(url) and len(url) <= limits.BUTTON_URL
    )[: limits.BUTTONS]
