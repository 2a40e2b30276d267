"""What safety checking shows: a held or withheld card, the review card, Report (no I/O).

Custom ids: ``gb:approve:<ref>`` and ``gb:reject:<ref>`` under a review card,
``gb:report:<ref>`` on the Report select under a shown result (``ref``: ``j<job id>`` or
``r<result request id>``), answered by ``cogs/safety.py`` after any restart. docs/safety.md.
"""

from __future__ import annotations

import dataclasses
from typing import Final

import discord

from bot.discord.render import limits
from bot.discord.render.jobs import JobView, base_card
from bot.discord.render.parts import NO_PINGS, Card, MessageParts, Select
from bot.discord.render.text import truncate
from bot.domain import Visibility
from bot.i18n import N_, _

REVIEW_CUSTOM_ID: Final = r"gb:(?P<action>approve|reject):(?P<ref>[jr][0-9]{1,20})"
"""Approve and Reject under a review card."""

REPORT_CUSTOM_ID: Final = r"gb:report:(?P<ref>[jr][0-9]{1,20})"
"""The Report select under a shown result."""

HELD_COLOUR = discord.Colour.orange()
WITHHELD_COLOUR = discord.Colour.dark_grey()

REASON_LABELS: Final = {
    "sexual": N_("Sexual content"),
    "violent": N_("Violence or gore"),
    "hateful": N_("Hateful content"),
    "other": N_("Something else"),
}
"""The Report select's reasons (``bot.services.safety.REPORT_REASONS``), in English."""

HELD_TEXT = N_("This result is waiting for the server's moderators.")
WITHHELD_TEXT = N_("This result is withheld by the server's safety policy.")
REJECTED_TEXT = N_("The server's moderators rejected this result; it stays withheld.")
CHARGE_KEPT = N_("The service charged for it, so the charge stays in the ledger.")


def hidden_card(job: JobView, visibility: Visibility) -> MessageParts:
    """The member's card of a held, withheld or rejected result: no file, no link, no button.

    Says why, and in one sentence that the charge stays (the service made the result).
    """
    if visibility is Visibility.HELD:
        state, colour, text = _("held for review"), HELD_COLOUR, _(HELD_TEXT)
    elif visibility is Visibility.REJECTED:
        state, colour, text = _("rejected"), WITHHELD_COLOUR, _(REJECTED_TEXT)
    else:
        state, colour, text = _("withheld"), WITHHELD_COLOUR, _(WITHHELD_TEXT)
    card = base_card(job, state, colour, "", sandbox=False)
    note = f"{text} {_(CHARGE_KEPT)}"
    card = dataclasses.replace(card, notes=(note, *card.notes))
    embed = discord.Embed(
        title=truncate(job.prompt_summary, limits.EMBED_TITLE) or None,
        description=note,
        colour=colour,
    )
    return MessageParts(embeds=(embed,), card=card)


def report_select(ref: str) -> Select:
    """The Report select under a shown result: its reasons (choosing one reports it)."""
    return Select(
        custom_id=f"gb:report:{ref}",
        options=tuple((_(label), value) for value, label in REASON_LABELS.items()),
        placeholder=_("Report this result…"),
    )


def review_card(
    *,
    ref: str,
    kind: str,
    prompt: str,
    user_id: int,
    score: float | None,
    visibility: Visibility,
    reason: str,
    files: tuple[tuple[str, bytes], ...],
) -> MessageParts:
    """The review channel's card of a held or withheld result, with Approve and Reject.

    The files go as spoilers (``SPOILER_`` names, blurred until clicked); the member is named
    without a ping.

    Args:
        ref: the result (``j12``).
        kind: ``image`` or ``video``.
        prompt: the prompt's summary.
        user_id: who asked.
        score: the highest score, 0-1; None when the scorer failed.
        visibility: held or withheld.
        reason: ``score``, ``failed`` or ``reports``.
        files: its files, already named ``SPOILER_…``.
    """
    if reason == "reports":
        why = _("Members reported it.")
    elif score is None:
        why = _("The safety check failed, so it is held (fail closed).")
    else:
        why = _("Safety score {score}.", score=f"{score:.2f}")
    state = _("Held for review") if visibility is Visibility.HELD else _("Withheld")
    title = _("Video") if kind == "video" else _("Image")
    quoted = "\n".join(
        f"> {line}"
        for line in discord.utils.escape_mentions(truncate(prompt, 500)).splitlines()
        if line.strip()
    )
    lines = [
        f"**{title}** · {state} · `{ref}`",
        quoted or "> " + _("(no prompt)"),
        why,
        _("Requested by {member}", member=f"<@{user_id}>"),
    ]
    if not files:
        lines.append(
            _("The file could not be attached here; the dashboard's Review page lists it.")
        )
    text = "\n".join(lines)
    card = Card(
        accent=(HELD_COLOUR if visibility is Visibility.HELD else WITHHELD_COLOUR).value,
        texts=(text,),
        media=tuple((f"attachment://{name}", title) for name, _data in files),
        spoiler=True,
    )
    return MessageParts(
        content=truncate(text, limits.CONTENT),
        files=files,
        action_buttons=(
            (_("Approve"), f"gb:approve:{ref}"),
            (_("Reject"), f"gb:reject:{ref}"),
        ),
        allowed_mentions=NO_PINGS,
        card=card,
    )


def review_decided(ref: str, kind: str, prompt: str, decision: str) -> MessageParts:
    """The review card once decided: what it was and who decided, without buttons or files."""
    title = _("Video") if kind == "video" else _("Image")
    quoted = discord.utils.escape_mentions(truncate(prompt, 300)).replace("\n", " ")
    content = truncate(f"**{title}** · `{ref}`\n> {quoted}\n{decision}", limits.CONTENT)
    return MessageParts(content=content, card=Card(accent=WITHHELD_COLOUR.value, texts=(content,)))


def safety_answer(
    answer: MessageParts,
    visibility: Visibility,
    files: tuple[tuple[str, bytes], ...],
    ref: str,
) -> MessageParts:
    """A synchronous image's answer as its safety decision allows.

    Shown: unchanged, with the Report select. Spoiler: its files attached as ``SPOILER_…``
    (blurred until clicked) instead of the service's links. Held or withheld: no image, no
    link and no button, saying why and that the charge stays.
    """
    if visibility.hidden:
        text = _(HELD_TEXT) if visibility is Visibility.HELD else _(WITHHELD_TEXT)
        note = f"{text} {_(CHARGE_KEPT)}"
        first = answer.embeds[0] if answer.embeds else None
        title = first.title if first is not None else None
        colour = HELD_COLOUR if visibility is Visibility.HELD else WITHHELD_COLOUR
        embed = discord.Embed(title=title, description=note, colour=colour)
        card = None
        if answer.card is not None:
            card = Card(accent=colour.value, texts=(answer.card.texts[0], note))
        return MessageParts(embeds=(embed,), card=card)
    select = report_select(ref)
    if visibility is not Visibility.SPOILER:
        return dataclasses.replace(answer, select=select)
    named = tuple((f"SPOILER_{name}", data) for name, data in files)
    card = answer.card
    if card is not None:
        abouts = [about for _url, about in card.media] or [_("image")] * len(named)
        media = tuple(
            (f"attachment://{name}", about)
            for (name, _d), about in zip(named, abouts, strict=False)
        )
        notes = card.notes[1:] if card.media else card.notes  # the service's links
        card = dataclasses.replace(card, media=media, notes=notes, spoiler=True)
    embeds: tuple[discord.Embed, ...] = ()
    if answer.embeds:
        first = answer.embeds[0].copy()
        first.set_image(url=None)
        embeds = (first,)
    return dataclasses.replace(
        answer, embeds=embeds, card=card, link_buttons=(), files=named, select=select
    )
