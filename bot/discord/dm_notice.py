"""The opt-in DM of finished results (``/settings notify dm``).

A member who turned it on gets a DM when one of their videos or asynchronous images is
finished, *besides* the usual delivery (the card edited in place, or its fallbacks): one short
message with a link to the card where there is one and the result's link. It is a courtesy:
where Discord refuses the DM (code 50007, "Cannot send messages to this user": the member
closed DMs from server members, or blocked the bot) or anything else fails, it is dropped
silently (logged at info), never retried and never in the way of the delivery.

:class:`DmNoticeAnnouncer` wraps the poller's :class:`bot.jobs.poller.JobAnnouncer` and adds the DM
after the announcer's own ``notify`` (the result is shown and recorded by then, so the DM
never announces a result that is not there; a crash in between costs at most the DM).
"""

from __future__ import annotations

import logging
from collections.abc import Collection
from typing import Protocol

import discord

from bot.discord.locales import GuildLocales
from bot.discord.render.job_list import message_link
from bot.discord.render.text import truncate
from bot.domain import DeliveryRoute, Job, JobStatus, Kind, MemberSettings, Visibility
from bot.i18n import _, using
from bot.jobs.announcer import Attempt, JobAnnouncer, Renew
from bot.services.private_cards import PrivateCards

log = logging.getLogger(__name__)

CANNOT_DM = 50007
"""Discord's JSON error code "Cannot send messages to this user" (Discord docs, "JSON Error
Codes")."""


def dm_notice_text(job: Job) -> str:
    """The DM for a finished ``job``: what it was, where its card is, and the result's link.

    A personal job (no server: ``guild_id`` < 0) has no jump link to a server message; the
    card is the command's own response there, and ``/jobs`` shows it. Written in the current
    locale (the caller sets the server's: a DM has no interaction to read the member's from).
    """
    prompt = truncate(job.prompt_summary, 100)
    if job.kind is Kind.VIDEO:
        lines = [_("Your video is ready: “{prompt}”.", prompt=prompt)]
    else:
        lines = [_("Your image is ready: “{prompt}”.", prompt=prompt)]
    if job.guild_id > 0 and job.message_id is not None:
        link = message_link(job.guild_id, job.channel_id, job.message_id)
        lines.append(_("Its message: {link}", link=link))
    else:
        lines.append(_("See it with `/jobs`."))
    if job.outputs:
        lines.append(_("Result: <{url}>", url=job.outputs[0]))
    return "\n".join(lines)


def held_notice_text(job: Job) -> str:
    """The DM for a finished ``job`` the server's safety policy holds for its moderators.

    No file and no link: only that it waits for them (issue 37, docs/safety.md).
    """
    prompt = truncate(job.prompt_summary, 100)
    if job.kind is Kind.VIDEO:
        return _("Your video “{prompt}” is waiting for the server's moderators.", prompt=prompt)
    return _("Your image “{prompt}” is waiting for the server's moderators.", prompt=prompt)


def late_result_text(job: Job, visibility: Visibility | None = None) -> str:
    """The DM announcing a personal result whose card's interaction token died.

    Names the result (what, its prompt, its job number) and how to see it: the Show result
    button under the message, or ``/jobs show:<number>`` anywhere; the result's link too.
    Written in the current locale; the service's failure reason stays as the service wrote it.

    Args:
        job: the finished job.
        visibility: its safety decision (``SafetyService.record``), None when it was shown
            or not checked. Held: the DM says it waits for the server's moderators; withheld
            or rejected: that it is withheld. Either way without its link (docs/safety.md).
    """
    video = job.kind is Kind.VIDEO
    prompt = truncate(job.prompt_summary, 100)
    hidden = job.status is JobStatus.COMPLETED and visibility is not None and visibility.hidden
    if hidden and visibility is Visibility.HELD:
        head = held_notice_text(job)
    elif hidden and video:
        head = _(
            "Your video “{prompt}” (job #{number}) is withheld by the server's safety policy.",
            prompt=prompt,
            number=job.id,
        )
    elif hidden:
        head = _(
            "Your image “{prompt}” (job #{number}) is withheld by the server's safety policy.",
            prompt=prompt,
            number=job.id,
        )
    elif job.status is JobStatus.COMPLETED:
        if video:
            head = _(
                "Your video “{prompt}” (job #{number}) is ready.", prompt=prompt, number=job.id
            )
        else:
            head = _(
                "Your image “{prompt}” (job #{number}) is ready.", prompt=prompt, number=job.id
            )
    else:
        reason = truncate(" ".join((job.error or _("no reason given")).split()), 200).rstrip(".")
        if video:
            head = _(
                "Your video “{prompt}” (job #{number}) failed: {reason}.",
                prompt=prompt,
                number=job.id,
                reason=reason,
            )
        else:
            head = _(
                "Your image “{prompt}” (job #{number}) failed: {reason}.",
                prompt=prompt,
                number=job.id,
                reason=reason,
            )
    lines = [
        head
        + " "
        + _("Its card could no longer be updated (Discord lets me edit it for 15 minutes)."),
        _("See it with **Show result** below, or `/jobs show:{number}` anywhere.", number=job.id),
    ]
    if job.status is JobStatus.COMPLETED and job.outputs and not hidden:
        lines.append(_("Result: <{url}>", url=job.outputs[0]))
    return "\n".join(lines)


class MemberSettingsReader(Protocol):
    """What the DM notice reads of members' settings (``MemberSettingsService.get``)."""

    async def get(self, user_id: int) -> MemberSettings:
        """Return the member's settings (the defaults when they set none)."""
        ...


class HiddenResults(Protocol):
    """What the DM notice reads of the safety policy (``SafetyService.record``)."""

    async def hidden(self, refs: Collection[str]) -> set[str]:
        """Those of ``refs`` members may not see (held, withheld or rejected)."""
        ...

    async def is_held(self, ref: str) -> bool:
        """Whether the result waits for a moderator's Approve or Reject."""
        ...


class DmNoticeAnnouncer:
    """A :class:`bot.jobs.poller.JobAnnouncer` that also DMs members who asked for it.

    Args:
        inner: the announcer that shows results (:class:`bot.discord.delivery.DiscordAnnouncer`).
        client: the logged-in bot (opens the DM channel).
        members: members' settings (who turned the DM on): the
            :class:`bot.services.member_settings.MemberSettingsService`.
        cards: where private results' cards are (no notice for a card in the DM already).
        locales: the language of each server (the DM is written in the job's server's, as its
            card is; a DM carries no member locale); None: English.
        safety: the safety policy (``SafetyService``): a held result's DM says it waits for
            the moderators (no link); a withheld or rejected one sends none. None: no check.
    """

    def __init__(
        self,
        inner: JobAnnouncer,
        client: discord.Client,
        members: MemberSettingsReader,
        cards: PrivateCards,
        locales: GuildLocales | None = None,
        safety: HiddenResults | None = None,
    ) -> None:
        self._inner = inner
        self._safety = safety
        self._client = client
        self._members = members
        self._cards = cards
        self._locales = locales

    @property
    def inner(self) -> JobAnnouncer:
        """The wrapped announcer, which shows the results."""
        return self._inner

    async def progress(self, job: Job, now: float) -> None:
        """As the inner announcer."""
        await self._inner.progress(job, now)

    async def stopped_watching(self, job: Job, now: float) -> None:
        """As the inner announcer."""
        await self._inner.stopped_watching(job, now)

    async def deliver(self, job: Job, route: DeliveryRoute, renew: Renew | None = None) -> Attempt:
        """As the inner announcer."""
        return await self._inner.deliver(job, route, renew)

    async def notify(self, job: Job, route: DeliveryRoute) -> None:
        """The inner announcer's notice, then the DM if the member turned it on; never raises.

        No DM when the result itself went to the member's DM (``route`` DM, or a private
        result's card, which lives there: :mod:`bot.services.private_cards`), or for a job that
        did not complete (nothing to show). A result the server's safety policy holds gets
        a DM saying it waits for the moderators, without its link; a withheld or rejected one
        gets none (its card says so).
        """
        await self._inner.notify(job, route)
        if route is DeliveryRoute.DM or job.status is not JobStatus.COMPLETED:
            return
        try:
            mine = await self._members.get(job.user_id)
            if not mine.notify_dm:
                return
            if route is DeliveryRoute.PLACEHOLDER and await self._cards.get(job.id) is not None:
                return  # a private card: in the DM already, or the member's DMs are closed
            locale = None
            if self._locales is not None and job.guild_id > 0:
                locale = await self._locales.of(job.guild_id)
            held = False
            if self._safety is not None and await self._safety.hidden((f"j{job.id}",)):
                held = await self._safety.is_held(f"j{job.id}")
                if not held:
                    return  # withheld or rejected: its card says so, and nothing to see
            with using(locale):
                text = held_notice_text(job) if held else dm_notice_text(job)
            dm = await self._client.create_dm(discord.Object(job.user_id))
            await dm.send(text, allowed_mentions=discord.AllowedMentions.none())
        except discord.HTTPException as exc:
            # 50007: the member's privacy settings refuse it; silently, as asked.
            log.info("job %s: no DM notice (%s %s)", job.id, exc.status, exc.code)
        except Exception as exc:
            log.info("job %s: no DM notice (%s)", job.id, type(exc).__name__)
