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
from bot.domain import DRAFT
from bot.i18n import N_, _, money, number, using

PENDING_COLOUR = discord.Colour.blurple()
DONE_COLOUR = discord.Colour.green()
FAILED_COLOUR = discord.Colour.red()
QUEUED_COLOUR = discord.Colour.light_grey()
UNWATCHED_COLOUR = discord.Colour.orange()
NO_REASON = N_("The service gave no reason.")
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
    channel = f"<#{channel_id}>"
    return _(
        "the result will be posted in {channel} when it is ready (or sent to you by "
        "direct message, or listed in `/jobs`, if I cannot post there)",
        channel=channel,
    )


def job_placeholder(
    job: JobView,
    *,
    now: float,
    sandbox: bool,
    ready_at: float | None = None,
    locale: str | None = None,
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
        locale: the server's locale (a public card); None: the current answer's.

    Returns:
        The message, to send first and then to edit in place; it pings nobody.
    """
    with using(locale):
        elapsed = format_duration(now - job.created_at)
        started = f"<t:{int(job.created_at)}:R>"
        timing = _("started {when} · {elapsed} elapsed", when=started, elapsed=elapsed)
        if ready_at is not None and ready_at > now:
            ready = f"<t:{int(ready_at)}:R>"
            timing += " · " + _("ready {when}", when=ready)
        status = _("Running") + " · " + timing
        title = _("Generating video…") if job.kind == "video" else _("Generating image…")
        embed = _job_embed(job, title, PENDING_COLOUR, status, sandbox=sandbox)
        queued = job.poll_count == 0
        card = _card(
            job,
            _("queued") if queued else _("running"),
            QUEUED_COLOUR if queued else PENDING_COLOUR,
            timing,
            sandbox=sandbox,
        )
        return MessageParts(embeds=(embed,), card=card)


def job_unwatched(
    job: JobView, *, now: float, sandbox: bool, locale: str | None = None
) -> MessageParts:
    """Build the placeholder of a job the bot stopped watching, still processing at the service.

    Not a failure: the service may still finish it (and charged for it), so the status says
    the bot stopped checking and that ``/jobs`` can check again and show the result.

    Args:
        job: the pending job.
        now: the current time, UTC epoch seconds.
        sandbox: whether the job runs on the sandbox service.
        locale: the server's locale (a public card); None: the current answer's.

    Returns:
        The placeholder to edit in; it pings nobody.
    """
    with using(locale):
        status = _(
            "Still processing at the service after {elapsed}; the bot stopped checking it. "
            "Use `/jobs` to check again: a result that arrives later is still shown.",
            elapsed=format_duration(now - job.created_at),
        )
        title = _("Video still processing") if job.kind == "video" else _("Image still processing")
        embed = _job_embed(job, title, PENDING_COLOUR, status, sandbox=sandbox)
        card = _card(job, _("stopped watching"), UNWATCHED_COLOUR, status, sandbox=sandbox)
        return MessageParts(embeds=(embed,), card=card)


def job_finished(
    job: JobView, *, sandbox: bool, ref: str | None = None, locale: str | None = None
) -> MessageParts:
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
        locale: the server's locale (a public card); None: the current answer's.

    Returns:
        The message; it pings nobody, since an edit cannot notify (see :func:`completion_reply`).

    Raises:
        ValueError: when the job is still pending.
    """
    with using(locale):
        finished = _finished(job, sandbox=sandbox)
        parts = dataclasses.replace(finished, card=_finished_card(job, sandbox))
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
            draft=job.details.get("stage") == DRAFT,
        )
        return dataclasses.replace(parts, action_buttons=actions)


def _finished(job: JobView, *, sandbox: bool) -> MessageParts:
    if job.status == "pending":
        raise ValueError("a pending job has not finished")
    video = job.kind == "video"
    if job.status != "completed":
        title = _("Video failed") if video else _("Image failed")
        embed = _job_embed(job, title, FAILED_COLOUR, _("Failed"), sandbox=sandbox)
        # The service's reason is its own words, never translated.
        reason = truncate(job.error or _(NO_REASON), limits.FIELD_VALUE)
        embed.add_field(name=_("Reason"), value=reason, inline=False)
        return MessageParts(embeds=(embed,))

    status = _("Completed")
    if job.finished_at is not None:
        took = format_duration(job.finished_at - job.created_at)
        status = _("Completed in {duration}", duration=took)
    urls = [url for url in job.outputs if is_web_url(url)]
    title = _("Video ready") if video else _("Image ready")
    embed = _job_embed(job, title, DONE_COLOUR, status, sandbox=sandbox)
    if not urls:
        embed.add_field(name=_("Result"), value=_none_returned(job), inline=False)
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
        [_("Open video")]
        if len(buttons) == 1
        else [_("Open video {number}", number=number) for number in range(1, len(buttons) + 1)]
    )
    return MessageParts(
        content="\n".join(lines) or None,
        embeds=(embed,),
        link_buttons=tuple(zip(labels, buttons, strict=True)),
    )


def _finished_card(job: JobView, sandbox: bool) -> Card:
    took = ""
    if job.finished_at is not None:
        took = _("took {duration}", duration=format_duration(job.finished_at - job.created_at))
    if job.status != "completed":
        reason = truncate(job.error or _(NO_REASON), limits.FIELD_VALUE)
        card = _card(job, _("failed"), FAILED_COLOUR, took, sandbox=sandbox)
        note = _("**Reason:** {reason}", reason=reason)
        return dataclasses.replace(card, notes=(note, *card.notes))
    card = _card(job, _("done"), DONE_COLOUR, took, sandbox=sandbox)
    urls = [url for url in job.outputs if is_web_url(url)][: limits.FILES_PER_MESSAGE]
    if not urls:
        return dataclasses.replace(card, notes=(_none_returned(job), *card.notes))
    media = tuple((url, _media_name(job, n)) for n, url in enumerate(urls, start=1))
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
        parts.embeds[0].add_field(name=_("File"), value=note, inline=False)
    card = parts.card
    if card is None:
        return parts
    media = card.media
    if show_attached and files:
        kind = media[0][1] if media else _("result")
        media = tuple((f"attachment://{name}", kind) for name in files)
    notes = card.notes if note is None else (*card.notes[:-1], note, card.notes[-1])
    return dataclasses.replace(parts, card=dataclasses.replace(card, media=media, notes=notes))


def completion_reply(job: JobView, *, locale: str | None = None) -> MessageParts:
    """Build the reply to the placeholder that tells the requester their job is done.

    "<@user> your video is ready." or "<@user> your video failed: reason." It is the only job
    message that pings, and only the requester: the reason comes from the service, so its
    mentions are defused and its length capped (300 characters, well inside Discord's 2000).

    Args:
        job: the finished job.
        locale: the server's locale (a public reply); None: the current answer's.

    Returns:
        The reply, allowed to ping ``job.user_id`` only.

    Raises:
        ValueError: when the job is still pending.
    """
    if job.status == "pending":
        raise ValueError("a pending job has no completion to announce")
    mention = f"<@{job.user_id}>"
    video = job.kind == "video"
    with using(locale):
        if job.status == "completed":
            if video:
                content = _("{mention} your video is ready.", mention=mention)
            else:
                content = _("{mention} your image is ready.", mention=mention)
        else:
            none = _(NO_REASON)
            reason = one_line(job.error or "") or none
            reason = discord.utils.escape_mentions(reason.rstrip(".")) or none.rstrip(".")
            reason = truncate(reason, _REPLY_REASON_CHARS)
            if video:
                content = _(
                    "{mention} your video failed: {reason}.", mention=mention, reason=reason
                )
            else:
                content = _(
                    "{mention} your image failed: {reason}.", mention=mention, reason=reason
                )
    return MessageParts(content=content, allowed_mentions=ping_only(job.user_id))


def _none_returned(job: JobView) -> str:
    if job.kind == "video":
        return _("The service returned no video.")
    return _("The service returned no image.")


def _media_name(job: JobView, number: int) -> str:
    if job.kind == "video":
        return _("video {number}", number=number)
    return _("image {number}", number=number)


def base_card(
    job: JobView, state: str, colour: discord.Colour, timing: str, *, sandbox: bool
) -> Card:
    """The card every job message shares (title, prompt, options, requester), to build on."""
    return _card(job, state, colour, timing, sandbox=sandbox)


def _card(job: JobView, state: str, colour: discord.Colour, timing: str, *, sandbox: bool) -> Card:
    """The card every job message shares; the last note is always the requester's line."""
    title = f"**{_('Video') if job.kind == 'video' else _('Image')}** · {state}"
    prompt = discord.utils.escape_mentions(truncate(job.prompt_summary, CARD_PROMPT))
    quoted = "\n".join(f"> {line}" for line in prompt.splitlines() if line.strip())
    shown = [v if inline else f"{n.lower()} {v}" for n, v, inline in _option_fields(job)]
    options = " · ".join([f"`{truncate(job.model, 200)}`", *shown])
    amount = money(_shown_cost(job))
    if job.status != "pending":
        spent = _("{amount} charged", amount=amount)
    else:
        spent = _("{amount} reserved", amount=amount)
    lines = [title, quoted or "> " + _("(no prompt)"), f"{options} · {spent}"]
    lines += sequence_lines(job)
    member = f"<@{job.user_id}>"
    footer = _("Requested by {member}", member=member)
    if timing:
        footer += f" · {timing}"
    if paid := _paid_by(job):
        footer += f" · {paid}"
    if sandbox:
        footer += " · " + _("sandbox")
    return Card(accent=colour.value, texts=("\n".join(lines),), notes=(f"-# {footer}",))


def _shown_cost(job: JobView) -> Decimal:
    """The cost a card shows: what the member's balance paid, else the service's price.

    What the credit balance paid (the markup included) is kept with the job when it was
    submitted (``details["paid_cents"]``, docs/credits.md).
    """
    paid = job.details.get("paid_cents")
    if isinstance(paid, str):
        try:
            return Decimal(paid)
        except ArithmeticError:
            pass
    return job.cost_cents


def _paid_by(job: JobView) -> str | None:
    """Whose money the job spent: ``paid by this server`` (``your key``, ``your allowance``).

    Recorded with the job when it was submitted (``details["paid_by"]``); None for older jobs.
    """
    paid = job.details.get("paid_by")
    if not isinstance(paid, str) or not paid:
        return None
    # Stored in English with the job (bot.services.personal marks its phrases), read here.
    return _("paid by {payer}", payer=_(paid))


def _job_embed(
    job: JobView, title: str, colour: discord.Colour, status: str, *, sandbox: bool
) -> discord.Embed:
    """The embed every job message shares: prompt, model, options, cost, requester, status."""
    embed = discord.Embed(
        title=title,
        description=truncate(job.prompt_summary, limits.EMBED_DESCRIPTION) or None,
        colour=colour,
    )
    embed.add_field(name=_("Model"), value=truncate(f"`{job.model}`", limits.FIELD_VALUE))
    for name, value, _inline in _option_fields(job):
        embed.add_field(name=name, value=truncate(value, limits.FIELD_VALUE))
    cost = _("{amount} charged", amount=money(_shown_cost(job)))
    embed.add_field(name=_("Cost"), value=cost)
    embed.add_field(name=_("Requested by"), value=f"<@{job.user_id}>")
    embed.add_field(name=_("Status"), value=status, inline=False)
    continued = sequence_lines(job)
    if continued:
        embed.add_field(name=_("Sequence"), value="\n".join(continued), inline=False)
    marks = (_paid_by(job), _("sandbox") if sandbox else None)
    footer = " · ".join(item for item in marks if item)
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
    named = _("video #{number}", number=previous)
    if isinstance(link, str) and link.startswith("https://discord.com/channels/"):
        named = f"[{named}]({link})"
    number = clip_number(job)
    lines = [
        _("Clip {number} · continues {previous}", number=number, previous=named)
        if number
        else _("Continues {previous}", previous=named)
    ]
    if number > SUGGEST_CUT_AFTER:
        lines.append(
            "-# "
            + _(
                "Continued clips drift in colour and contrast: consider a cut here (a fresh "
                "`/video`) and Join the parts."
            )
        )
    return lines


def _option_fields(job: JobView) -> list[tuple[str, str, bool]]:
    """The job's options for people: (name, value, whether the card shows the value alone)."""
    details = job.details
    fields: list[tuple[str, str, bool]] = []
    duration = details.get("duration")
    if job.kind == "video" and isinstance(duration, int | float):
        fields.append((_("Duration"), _("{seconds} s", seconds=number(duration)), True))
    if details.get("aspect_ratio"):
        fields.append((_("Aspect ratio"), str(details["aspect_ratio"]), True))
    # Shown only when the request set them; otherwise the service's default applied.
    for key, name in (("generate_audio", _("Audio")), ("lock_camera", _("Camera lock"))):
        if job.kind == "video" and isinstance(details.get(key), bool):
            fields.append((name, _("yes") if details[key] else _("no"), False))
    return fields
