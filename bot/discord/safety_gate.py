"""Safety checking at delivery: a result's files are scored before anyone sees them.

Every delivery route hands a finished image or video's downloaded files to
:meth:`SafetyGate.screen` (one call, in :meth:`bot.discord.delivery.present.Presenter.prepare`,
whose :class:`~bot.discord.delivery.present.Shown` carries the decision) and renders the card
through :meth:`SafetyGate.card` (:meth:`~bot.discord.delivery.present.Presenter.finished`).
The decision is :class:`bot.services.safety.SafetyService`'s; this module only applies it to
Discord:

* shown: unchanged, with the Report select under it;
* spoiler: the files renamed ``SPOILER_…`` (Discord blurs them until clicked) and the card's
  gallery blurred, the service's links left out;
* held or withheld: no file, link or button on the member's card, which says why and that
  the charge stays; the requester is not pinged (Approve's delivery pings); the review
  channel gets a card with the files as spoilers, the score, prompt and member, and Approve /
  Reject (``cogs/safety.py``), posted once (the decision's first delivery).

Synchronous images are screened by :func:`screen_urls` before their answer is built
(``request_flows.start_image``).
"""

from __future__ import annotations

import dataclasses
import logging
from collections import OrderedDict
from collections.abc import Awaitable, Callable, Sequence

import discord

from bot.discord.locales import GuildLocales
from bot.discord.render.parts import MessageParts
from bot.discord.render.safety import hidden_card, report_select, review_card
from bot.domain import Job, Visibility
from bot.i18n import using
from bot.services.safety import SafetyService, Screening, spoiler_name

log = logging.getLogger(__name__)

REMEMBERED = 4096
"""Jobs whose decision the gate keeps in memory between scoring and the completion ping
(:meth:`SafetyGate.quiet`); the card itself is rendered from the decision :meth:`SafetyGate.screen`
returned."""

Files = tuple[tuple[str, bytes], ...]


async def channel_nsfw(client: discord.Client, channel_id: int) -> bool:
    """Whether a channel (or a thread's parent) is age-restricted; False when unknown.

    The gateway's cache first; a worker (no cache) asks Discord once per call.
    """
    channel = client.get_channel(channel_id)
    if channel is None:
        try:
            channel = await client.fetch_channel(channel_id)
        except (discord.HTTPException, discord.InvalidData, ValueError):
            return False
    is_nsfw = getattr(channel, "is_nsfw", None)
    return bool(is_nsfw()) if callable(is_nsfw) else False


class SafetyGate:
    """Applies safety decisions to deliveries (see the module's docstring).

    Args:
        client: the client that posts review cards and reads channels' ``nsfw`` flags.
        service: the safety policy (``Services.moderation``).
        locales: the servers' languages, for review cards; None: English.
    """

    def __init__(
        self,
        client: discord.Client,
        service: SafetyService,
        locales: GuildLocales | None = None,
    ) -> None:
        self._client = client
        self.service = service
        self._locales = locales
        self._decided: OrderedDict[int, Visibility] = OrderedDict()

    @property
    def active(self) -> bool:
        """Whether results are checked at all (a model is configured)."""
        return self.service.available

    async def screen(
        self, job: Job, files: Files, note: str | None
    ) -> tuple[Files, str | None, Visibility | None]:
        """Score a finished job's downloaded files and apply the decision to them.

        Returns:
            The files to attach (renamed for a spoiler; none when held or withheld), the note
            (None when hidden: the card says why) and the decision (None: not checked, the
            check being off or the job neither an image nor a video).
        """
        if not self.active or job.kind not in ("image", "video"):
            return files, note, None
        ref = f"j{job.id}"
        screening = await self.service.screen(
            ref,
            guild_id=job.guild_id,
            channel_id=job.channel_id,
            user_id=job.user_id,
            kind=job.kind,
            prompt=job.prompt_summary,
            files=[data for _name, data in files],
            nsfw_channel=await channel_nsfw(self._client, job.channel_id),
        )
        visibility = screening.visibility
        self._remember(job.id, visibility)
        if screening.spoiler:
            return tuple((spoiler_name(name), data) for name, data in files), note, visibility
        if not screening.hidden:
            return files, note, visibility
        if screening.new and screening.review_channel_id is not None:
            await self.post_review(
                job.guild_id,
                screening.review_channel_id,
                ref=ref,
                kind=job.kind,
                prompt=job.prompt_summary,
                user_id=job.user_id,
                screening=screening,
                reason="failed" if screening.score is None else "score",
                files=files,
            )
        return (), None, visibility

    def _remember(self, job_id: int, visibility: Visibility) -> None:
        self._decided[job_id] = visibility
        self._decided.move_to_end(job_id)
        while len(self._decided) > REMEMBERED:
            self._decided.popitem(last=False)

    def card(self, job: Job, parts: MessageParts, visibility: Visibility | None) -> MessageParts:
        """The finished card of ``job`` as ``visibility`` allows (see the module's docstring).

        ``visibility`` is the decision :meth:`screen` returned with the files the card carries
        (:attr:`bot.discord.delivery.present.Shown.visibility`); None: not checked, the card
        unchanged.
        """
        if visibility is None or job.status != "completed":
            return parts
        if visibility.hidden:
            return hidden_card(job, visibility)
        if visibility is Visibility.SPOILER:
            card = parts.card
            if card is not None:
                notes = card.notes[1:] if card.media else card.notes  # the links' text
                card = dataclasses.replace(card, spoiler=True, notes=notes)
            content = parts.content if job.kind != "video" else None
            embeds = tuple(e for e in parts.embeds if e.image.url is None)
            parts = dataclasses.replace(
                parts, card=card, link_buttons=(), content=content, embeds=embeds
            )
        return dataclasses.replace(parts, select=parts.select or report_select(f"j{job.id}"))

    def quiet(self, job: Job) -> bool:
        """Whether the requester's completion ping is left out (a held or withheld result)."""
        visibility = self._decided.get(job.id)
        return visibility is not None and visibility.hidden

    async def post_review(
        self,
        guild_id: int,
        channel_id: int,
        *,
        ref: str,
        kind: str,
        prompt: str,
        user_id: int,
        screening: Screening,
        reason: str,
        files: Files,
    ) -> None:
        """Post the review card in the review channel and remember it; failures logged.

        The hold stands either way: the dashboard's Review page lists it.
        """
        locale = None if self._locales is None else await self._locales.of(guild_id)
        with using(locale):
            parts = review_card(
                ref=ref,
                kind=kind,
                prompt=prompt,
                user_id=user_id,
                score=screening.score,
                visibility=screening.visibility,
                reason=reason,
                files=tuple((spoiler_name(name), data) for name, data in files),
            )
        channel = self._client.get_partial_messageable(channel_id, guild_id=guild_id)
        try:
            message = await _send(channel, parts)
        except discord.HTTPException as exc:
            if not parts.files:
                log.warning("review card of %s not posted (%s)", ref, exc)
                return
            try:  # too large for the channel: the card without its files
                message = await _send(channel, dataclasses.replace(parts, files=()))
            except discord.HTTPException as again:
                log.warning("review card of %s not posted (%s)", ref, again)
                return
        try:
            await self.service.set_review_message(ref, channel_id, message.id)
        except Exception as exc:  # the card stands; its buttons work without the record
            log.warning("review card of %s not remembered (%r)", ref, exc)


async def _send(channel: discord.abc.Messageable, parts: MessageParts) -> discord.Message:
    """Send ``parts`` as a card, else in the old form when Discord refuses the card."""
    try:
        return await channel.send(**parts.kwargs())
    except discord.HTTPException as exc:
        if parts.card is None or exc.status != 400:
            raise
    return await channel.send(**parts.legacy().kwargs())


async def hidden_takes(
    service: SafetyService | None, takes: Sequence[Job]
) -> dict[int, Visibility]:
    """The finished ones of ``takes`` members may not see: job id -> held, withheld or rejected.

    Read from the decisions recorded (only those other than "shown" are), for the takes'
    shared card (:mod:`bot.discord.render.takes`). Empty without a safety check.
    """
    done = [t for t in takes if t.status == "completed"]
    if service is None or not service.available or not done:
        return {}
    found: dict[int, Visibility] = {}
    for ref in await service.hidden([f"j{t.id}" for t in done]):
        record = await service.record(ref)
        found[int(ref[1:])] = Visibility.WITHHELD if record is None else record.state
    return found


async def screen_urls(
    gate: SafetyGate | None,
    *,
    ref: str,
    guild_id: int,
    channel_id: int,
    user_id: int,
    prompt: str,
    urls: Sequence[str],
    download: Callable[[str], Awaitable[bytes]],
) -> tuple[Screening, Files]:
    """Screen a synchronous image result by its URLs (downloaded first); never raises.

    Returns:
        The decision and the downloaded files (to attach as spoilers, or for review).
    """
    if gate is None or not gate.active:
        return Screening(Visibility.SHOWN), ()
    files: list[tuple[str, bytes]] = []
    for index, url in enumerate(urls[:10]):
        try:
            files.append((f"{ref}-{index + 1}.png", await download(url)))
        except Exception as exc:  # not scored: fail closed below (no file)
            log.info("result %s not downloaded for its safety check (%s)", ref, exc)
            files = []
            break
    try:
        screening = await gate.service.screen(
            ref,
            guild_id=guild_id,
            channel_id=channel_id,
            user_id=user_id,
            kind="image",
            prompt=prompt,
            files=[data for _name, data in files],
            nsfw_channel=await channel_nsfw(gate._client, channel_id),
        )
    except Exception as exc:
        log.error("result %s: its safety decision failed (%r); held", ref, exc)
        return Screening(Visibility.HELD), tuple(files)
    if screening.hidden and screening.new and screening.review_channel_id is not None:
        await gate.post_review(
            guild_id,
            screening.review_channel_id,
            ref=ref,
            kind="image",
            prompt=prompt,
            user_id=user_id,
            screening=screening,
            reason="failed" if screening.score is None else "score",
            files=tuple(files),
        )
    return screening, tuple(files)
