"""Messages about an asynchronous job: its placeholder, its result, the reply that notifies.

The placeholder is sent when the job starts and edited as it progresses and when it finishes;
an edit notifies nobody, so a finished job also gets :func:`completion_reply`, the one message
that pings (only the requester).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence
from decimal import Decimal
from typing import Any, Final, Protocol

import discord

from bot.discord.render import limits
from bot.discord.render.buttons import result_buttons
from bot.discord.render.parts import Card, MessageParts, ping_only
from bot.discord.render.results import image_buttons, is_web_url
from bot.discord.render.text import format_duration, one_line, truncate
from bot.errors import format_cents

PENDING_COLOUR = discord.Colour.blurple()
DONE_COLOUR = discord.Colour.green()
FAILED_COLOUR = discord.Colour.red()
QUEUED_COLOUR = discord.Colour.light_grey()
UNWATCHED_COLOUR = discord.Colour.orange()
NO_REASON = "The service gave no reason."
CARD_LINKS: Final = 1000
"""Characters of result links a card shows (long signed URLs add up)."""
CARD_PROMPT: Final = 1500
"""Characters of the prompt a card shows: with the reason (1024) and the rest, the card stays
well inside Discord's 4000 characters of text displays."""
# The failure reason in the notifying reply is a glimpse; the full text is in the edited embed.
_REPLY_REASON_CHARS: Final = 300


class JobView(Protocol):
    """What rendering needs of a job; :class:`bot.domain.Job` has all of it.

    Read-only properties, so a frozen dataclass satisfies it and ``kind`` and ``status`` may
    be ``str`` enums.
    """

    @property
    def prompt_summary(self) -> str:
        """A short, display-safe summary of the prompt."""

    @property
    def model(self) -> str:
        """The model id."""

    @property
    def kind(self) -> str:
        """``"video"`` or ``"image"``."""

    @property
    def details(self) -> Mapping[str, Any]:
        """Display options: ``duration`` (s), ``aspect_ratio``, ``generate_audio``, ..."""

    @property
    def cost_cents(self) -> Decimal:
        """What the service charged, exact cents."""

    @property
    def user_id(self) -> int:
        """The Discord user who asked."""

    @property
    def created_at(self) -> float:
        """When the job started, UTC epoch seconds."""

    @property
    def status(self) -> str:
        """``"pending"``, ``"completed"`` or ``"failed"``."""

    @property
    def finished_at(self) -> float | None:
        """When the job finished, UTC epoch seconds; None while pending."""

    @property
    def outputs(self) -> Sequence[str]:
        """Result URLs of a completed job."""

    @property
    def error(self) -> str | None:
        """The service's failure text, if any."""

    @property
    def poll_count(self) -> int:
        """How many times the service was polled."""


def posted_later(channel_id: int) -> str:
    """Where a job's result goes when its card could not be posted (delivery's fallbacks).

    Names the channel rather than "this channel": the request may come from a DM card's
    button, where "this channel" would be the DM (docs/architecture.md, delivery routes:
    the channel, then a direct message, then ``/jobs``).
    """
    return (
        f"the result will be posted in <#{channel_id}> when it is ready (or sent to you by "
        "direct message, or listed in `/jobs`, if I cannot post there)"
    )


def job_placeholder(
    job: JobView, *, now: float, sandbox: bool, ready_at: float | None = None
) -> MessageParts:
    """Build the public placeholder shown while ``job`` is pending.

    An embed titled "Generating video…" (or image) with the prompt as description (at most
    4096 characters, Discord's limit), the model, options, cost, requester and a status line
    with a live Discord timestamp of the start and the time elapsed at ``now``. The requester
    is mentioned inside the embed, where Discord never pings.

    Args:
        job: the pending job.
        now: the current time, UTC epoch seconds.
        sandbox: whether the job runs on the sandbox service (noted in the footer).
        ready_at: the estimated finish (``PollSchedule.estimated_finish``), UTC epoch
            seconds, shown as ``ready <t:…:R>``; None when there is no estimate.

    Returns:
        The message, to send first and then to edit in place; it pings nobody.
    """
    elapsed = format_duration(now - job.created_at)
    status = f"Running · started <t:{int(job.created_at)}:R> · {elapsed} elapsed"
    if ready_at is not None and ready_at > now:
        status += f" · ready <t:{int(ready_at)}:R>"
    embed = _job_embed(job, f"Generating {_noun(job)}…", PENDING_COLOUR, status, sandbox=sandbox)
    queued = job.poll_count == 0
    timing = f"started <t:{int(job.created_at)}:R> · {elapsed} elapsed"
    if ready_at is not None and ready_at > now:
        timing += f" · ready <t:{int(ready_at)}:R>"
    card = _card(
        job,
        "queued" if queued else "running",
        QUEUED_COLOUR if queued else PENDING_COLOUR,
        timing,
        sandbox=sandbox,
    )
    return MessageParts(embeds=(embed,), card=card)


def job_unwatched(job: JobView, *, now: float, sandbox: bool) -> MessageParts:
    """Build the placeholder of a job the bot stopped watching, still processing at the service.

    Not a failure: the service may still finish it (and charged for it), so the status says
    the bot stopped checking and that ``/jobs`` can check again and show the result.

    Args:
        job: the pending job.
        now: the current time, UTC epoch seconds.
        sandbox: whether the job runs on the sandbox service.

    Returns:
        The placeholder to edit in; it pings nobody.
    """
    elapsed = format_duration(now - job.created_at)
    status = (
        f"Still processing at the service after {elapsed}; the bot stopped checking it. "
        "Use `/jobs` to check again: a result that arrives later is still shown."
    )
    embed = _job_embed(
        job, f"{_noun(job).capitalize()} still processing", PENDING_COLOUR, status, sandbox=sandbox
    )
    card = _card(job, "stopped watching", UNWATCHED_COLOUR, status, sandbox=sandbox)
    return MessageParts(embeds=(embed,), card=card)


def job_finished(job: JobView, *, sandbox: bool, ref: str | None = None) -> MessageParts:
    """Build what the placeholder becomes once ``job`` has finished.

    A completed video puts its URL alone in the content, so Discord shows its player, with a
    green embed ("Completed in 1 m 23 s") and an "Open video" link button. A completed image
    shows each output as an embed image (Discord allows 10 embeds) with "Open image N"
    buttons. A failure gets a red embed with the service's reason (at most 1024 characters, a
    field's limit) and no content. Send it with ``edit_kwargs()`` so old parts are replaced.

    Args:
        job: the finished job.
        sandbox: whether the job ran on the sandbox service.
        ref: the job's button reference (``j<job id>``): adds the restart-safe action
            buttons (:func:`bot.discord.render.buttons.result_buttons`); None adds none.

    Returns:
        The message; it pings nobody, since an edit cannot notify (see :func:`completion_reply`).

    Raises:
        ValueError: when the job is still pending.
    """
    parts = dataclasses.replace(_finished(job, sandbox=sandbox), card=_finished_card(job, sandbox))
    if ref is None:
        return parts
    price = job.cost_cents if job.kind == "video" else None
    actions = result_buttons(
        job.kind,
        ref,
        completed=job.status == "completed",
        price_cents=price,
        joinable=clip_number(job) >= 2,
        shareable=ref.startswith("j"),
    )
    return dataclasses.replace(parts, action_buttons=actions)


def _finished(job: JobView, *, sandbox: bool) -> MessageParts:
    if job.status == "pending":
        raise ValueError("a pending job has not finished")
    noun = _noun(job)
    if job.status != "completed":
        embed = _job_embed(
            job, f"{noun.capitalize()} failed", FAILED_COLOUR, "Failed", sandbox=sandbox
        )
        embed.add_field(
            name="Reason", value=truncate(job.error or NO_REASON, limits.FIELD_VALUE), inline=False
        )
        return MessageParts(embeds=(embed,))

    took = ""
    if job.finished_at is not None:
        took = f" in {format_duration(job.finished_at - job.created_at)}"
    urls = [url for url in job.outputs if is_web_url(url)]
    embed = _job_embed(
        job, f"{noun.capitalize()} ready", DONE_COLOUR, f"Completed{took}", sandbox=sandbox
    )
    if not urls:
        embed.add_field(name="Result", value=f"The service returned no {noun}.", inline=False)
        return MessageParts(embeds=(embed,))
    if job.kind == "video":
        return _finished_video(embed, urls)
    embeds = [embed.set_image(url=urls[0])]
    embeds += [
        discord.Embed(colour=DONE_COLOUR).set_image(url=url)
        for url in urls[1 : limits.EMBEDS_PER_MESSAGE]
    ]
    return MessageParts(embeds=tuple(embeds), link_buttons=image_buttons(urls))


def _finished_video(embed: discord.Embed, urls: list[str]) -> MessageParts:
    # Discord renders a player for a video link only when it is in the content, not an embed.
    lines: list[str] = []
    for url in urls:
        if sum(len(line) + 1 for line in lines) + len(url) > limits.CONTENT:
            break
        lines.append(url)
    buttons = [url for url in urls if len(url) <= limits.BUTTON_URL][: limits.BUTTONS]
    labels = (
        ["Open video"]
        if len(buttons) == 1
        else [f"Open video {number}" for number in range(1, len(buttons) + 1)]
    )
    return MessageParts(
        content="\n".join(lines) or None,
        embeds=(embed,),
        link_buttons=tuple(zip(labels, buttons, strict=True)),
    )


def _finished_card(job: JobView, sandbox: bool) -> Card:
    took = ""
    if job.finished_at is not None:
        took = f"took {format_duration(job.finished_at - job.created_at)}"
    if job.status != "completed":
        reason = truncate(job.error or NO_REASON, limits.FIELD_VALUE)
        card = _card(job, "failed", FAILED_COLOUR, took, sandbox=sandbox)
        return dataclasses.replace(card, notes=(f"**Reason:** {reason}", *card.notes))
    card = _card(job, "done", DONE_COLOUR, took, sandbox=sandbox)
    urls = [url for url in job.outputs if is_web_url(url)][: limits.FILES_PER_MESSAGE]
    if not urls:
        note = f"The service returned no {_noun(job)}."
        return dataclasses.replace(card, notes=(note, *card.notes))
    media = tuple((url, f"{_noun(job)} {n}") for n, url in enumerate(urls, start=1))
    # The links stay in the text so the result can be found even when the media cannot show.
    links = truncate("\n".join(urls), CARD_LINKS)
    return dataclasses.replace(card, media=media, notes=(links, *card.notes))


def with_files(
    parts: MessageParts,
    files: Sequence[str],
    note: str | None,
    *,
    show_attached: bool = True,
) -> MessageParts:
    """Add the delivery's attachments and its note to a finished job's message.

    The old form gets the note as a "File" field; the card gets it as a text and, when
    ``show_attached``, its media gallery points at the attachments (``attachment://<name>``)
    instead of the service's URLs, which stay as links. Files are not part of the result;
    the caller attaches them (``dataclasses.replace(parts, files=...)``).

    Args:
        parts: what :func:`job_finished` built.
        files: the attachment names, in output order (``<task_id>.mp4``...).
        note: the text for people: what is attached, or why not; None for none.
        show_attached: False when the attachments go elsewhere (the completion reply).

    Returns:
        The message with the note, and the card pointing at the attachments.
    """
    if note is not None and parts.embeds:
        parts.embeds[0].add_field(name="File", value=note, inline=False)
    card = parts.card
    if card is None:
        return parts
    media = card.media
    if show_attached and files:
        kind = media[0][1] if media else "result"
        media = tuple((f"attachment://{name}", kind) for name in files)
    notes = card.notes if note is None else (*card.notes[:-1], note, card.notes[-1])
    return dataclasses.replace(parts, card=dataclasses.replace(card, media=media, notes=notes))


def completion_reply(job: JobView) -> MessageParts:
    """Build the reply to the placeholder that tells the requester their job is done.

    "<@user> your video is ready." or "<@user> your video failed: reason." It is the only job
    message that pings, and only the requester: the reason comes from the service, so its
    mentions are defused and its length capped (300 characters, well inside Discord's 2000).

    Args:
        job: the finished job.

    Returns:
        The reply, allowed to ping ``job.user_id`` only.

    Raises:
        ValueError: when the job is still pending.
    """
    if job.status == "pending":
        raise ValueError("a pending job has no completion to announce")
    mention = f"<@{job.user_id}>"
    noun = _noun(job)
    if job.status == "completed":
        content = f"{mention} your {noun} is ready."
    else:
        reason = one_line(job.error or "") or NO_REASON
        reason = discord.utils.escape_mentions(reason.rstrip(".")) or NO_REASON.rstrip(".")
        content = f"{mention} your {noun} failed: {truncate(reason, _REPLY_REASON_CHARS)}."
    return MessageParts(content=content, allowed_mentions=ping_only(job.user_id))


def _noun(job: JobView) -> str:
    return "video" if job.kind == "video" else "image"


def base_card(
    job: JobView, state: str, colour: discord.Colour, timing: str, *, sandbox: bool
) -> Card:
    """The card every job message shares (title, prompt, options, requester), to build on."""
    return _card(job, state, colour, timing, sandbox=sandbox)


def _card(job: JobView, state: str, colour: discord.Colour, timing: str, *, sandbox: bool) -> Card:
    """The card every job message shares; the last note is always the requester's line."""
    title = f"**{_noun(job).capitalize()}** · {state}"
    prompt = discord.utils.escape_mentions(truncate(job.prompt_summary, CARD_PROMPT))
    quoted = "\n".join(f"> {line}" for line in prompt.splitlines() if line.strip())
    shown = [
        v if n in ("Duration", "Aspect ratio") else f"{n.lower()} {v}"
        for n, v in _option_fields(job)
    ]
    options = " · ".join([f"`{truncate(job.model, 200)}`", *shown])
    spent = "charged" if job.status != "pending" else "reserved"
    lines = [
        title,
        quoted or "> (no prompt)",
        f"{options} · {format_cents(job.cost_cents)} {spent}",
    ]
    lines += sequence_lines(job)
    footer = f"Requested by <@{job.user_id}>"
    if timing:
        footer += f" · {timing}"
    if paid := _paid_by(job):
        footer += f" · {paid}"
    if sandbox:
        footer += " · sandbox"
    return Card(accent=colour.value, texts=("\n".join(lines),), notes=(f"-# {footer}",))


def _paid_by(job: JobView) -> str | None:
    """Whose money the job spent: ``paid by this server`` (``your key``, ``your allowance``).

    Recorded with the job when it was submitted (``details["paid_by"]``); None for older jobs.
    """
    paid = job.details.get("paid_by")
    return f"paid by {paid}" if isinstance(paid, str) and paid else None


def _job_embed(
    job: JobView, title: str, colour: discord.Colour, status: str, *, sandbox: bool
) -> discord.Embed:
    """The embed every job message shares: prompt, model, options, cost, requester, status."""
    embed = discord.Embed(
        title=title,
        description=truncate(job.prompt_summary, limits.EMBED_DESCRIPTION) or None,
        colour=colour,
    )
    embed.add_field(name="Model", value=truncate(f"`{job.model}`", limits.FIELD_VALUE))
    for name, value in _option_fields(job):
        embed.add_field(name=name, value=truncate(value, limits.FIELD_VALUE))
    embed.add_field(name="Cost", value=f"{format_cents(job.cost_cents)} charged")
    embed.add_field(name="Requested by", value=f"<@{job.user_id}>")
    embed.add_field(name="Status", value=status, inline=False)
    continued = sequence_lines(job)
    if continued:
        embed.add_field(name="Sequence", value="\n".join(continued), inline=False)
    footer = " · ".join(item for item in (_paid_by(job), "sandbox" if sandbox else None) if item)
    if footer:
        embed.set_footer(text=footer)
    return embed


SUGGEST_CUT_AFTER: Final = 3
"""Past this many clips a continued clip's card suggests a cut (as
:data:`bot.services.sequences.SUGGEST_CUT_AFTER`)."""


def clip_number(job: JobView) -> int:
    """The job's place in its sequence (``details["clip"]``), 1-based; 0 for a clip of its own."""
    value = job.details.get("clip")
    return value if isinstance(value, int) and not isinstance(value, bool) else 0


def sequence_lines(job: JobView) -> list[str]:
    """The lines that name a continued clip's previous clip, and suggest a cut past the third.

    ``details``: ``continues`` (the previous clip's job id), ``continues_link`` (its card's
    jump link, when it has one), ``clip`` (this clip's number in the sequence).
    """
    previous = job.details.get("continues")
    if not isinstance(previous, int) or isinstance(previous, bool):
        return []
    link = job.details.get("continues_link")
    named = f"video #{previous}"
    if isinstance(link, str) and link.startswith("https://discord.com/channels/"):
        named = f"[{named}]({link})"
    number = clip_number(job)
    lines = [f"Clip {number} · continues {named}" if number else f"Continues {named}"]
    if number > SUGGEST_CUT_AFTER:
        lines.append(
            "-# Continued clips drift in colour and contrast: consider a cut here (a fresh "
            "`/video`) and Join the parts."
        )
    return lines


def _option_fields(job: JobView) -> list[tuple[str, str]]:
    details = job.details
    fields: list[tuple[str, str]] = []
    duration = details.get("duration")
    if job.kind == "video" and isinstance(duration, int | float):
        fields.append(("Duration", f"{duration:g} s"))
    if details.get("aspect_ratio"):
        fields.append(("Aspect ratio", str(details["aspect_ratio"])))
    # Shown only when the request set them; otherwise the service's default applied.
    for key, name in (("generate_audio", "Audio"), ("lock_camera", "Camera lock")):
        if job.kind == "video" and isinstance(details.get(key), bool):
            fields.append((name, "yes" if details[key] else "no"))
    return fields
