"""``/jobs``: a member's recent videos and asynchronous images, wherever they stand."""

from __future__ import annotations

import asyncio
from typing import Final

import discord
from discord import app_commands
from discord.ext import commands

from bot.clock import Clock
from bot.discord.bot import GenBot
from bot.discord.choices import Pager
from bot.discord.interactions import requester
from bot.discord.render import NO_PINGS, job_list_pages
from bot.discord.request_flows import show_job, shown_once
from bot.discord.tree import PUBLIC_DEFER
from bot.domain import Job
from bot.errors import ValidationFailed
from bot.i18n import N_
from bot.jobs.poller import Poller
from bot.services.generation import GenerationService
from bot.services.member_settings import MemberSettingsService
from bot.services.personal import is_personal
from bot.services.private_cards import PrivateCards
from bot.services.safety import SafetyService
from bot.services.schedule import PollSchedule

JOBS_LISTED: Final = 50

"""The most recent jobs one ``/jobs`` lists (five pages); older ones stay in the database."""

RECHECKED_PER_LISTING: Final = 3
"""Jobs no longer watched that one ``/jobs`` polls again (each poll is one of the key's 30
requests a minute)."""

RECHECK_SECONDS: Final = 8.0
"""How long one such poll may take, waiting for a slot of the key's request window included."""


class JobsCog(commands.Cog):
    """Find one's jobs and their results."""

    def __init__(
        self,
        bot: GenBot,
        generation: GenerationService,
        members: MemberSettingsService,
        private_cards: PrivateCards,
        schedule: PollSchedule,
        poller: Poller,
        *,
        clock: Clock,
        recheck_seconds: float,
        moderation: SafetyService | None = None,
    ) -> None:
        self.bot = bot
        self.moderation = moderation
        self.generation = generation
        self.members = members
        self.private_cards = private_cards
        self.schedule = schedule
        self.poller = poller
        self.clock = clock
        self.recheck_seconds = recheck_seconds

    @app_commands.command(name="jobs")
    @app_commands.allowed_installs(guilds=True, users=True)
    @app_commands.allowed_contexts(guilds=True, dms=True, private_channels=True)
    async def jobs(
        self,
        interaction: discord.Interaction[GenBot],
        member: discord.Member | None = None,
        everyone: bool = False,
        show: app_commands.Range[int, 1] | None = None,
    ) -> None:
        """Show your recent videos and images: pending, finished with links, or failed.

        Args:
            interaction: the interaction.
            member: whose jobs (Manage Server needed for anyone but yourself)
            everyone: the whole server's jobs (Manage Server only)
            show: a job's number (#): post its card here again, with its buttons
        """
        who = requester(interaction)
        if show is not None:
            await self._show(interaction, show)
            return
        is_admin = interaction.permissions.manage_guild
        if everyone and not is_admin:
            raise ValidationFailed(N_("Seeing the whole server's jobs needs Manage Server."))
        if member is not None and member.id != who.user_id and not is_admin:
            raise ValidationFailed(N_("Seeing other members' jobs needs Manage Server."))
        await interaction.response.defer(ephemeral=True, thinking=True)
        user_id = None if everyone else (member.id if member is not None else who.user_id)
        jobs = await self.generation.recent_jobs(who.guild_id, user_id=user_id, limit=JOBS_LISTED)
        jobs = await self._check_again(jobs)
        now = self.clock.time()
        estimates = {
            job.id: await self.schedule.estimated_finish(job, now=now)
            for job in jobs
            if job.status == "pending"
        }
        if user_id is None:
            whose = "this server's"
        elif user_id == who.user_id:
            whose = "your"
        else:
            whose = f"<@{user_id}>'s"
        pages = job_list_pages(
            jobs,
            now=now,
            estimates=estimates,
            whose=whose,
            show_requester=user_id is None,
            message_links=await self._private_links(jobs, who.user_id),
            withheld=await self._withheld(jobs),
        )
        if len(pages) == 1:
            await interaction.edit_original_response(embed=pages[0], allowed_mentions=NO_PINGS)
        else:
            pager = Pager(pages, who.user_id, self.bot.choices)
            await interaction.edit_original_response(
                embed=pages[0], view=pager.view(), allowed_mentions=NO_PINGS
            )

    async def _withheld(self, jobs: list[Job]) -> set[int]:
        """The listed finished jobs the server's safety policy holds, withholds or rejected.

        Listed without their files' links (docs/safety.md); one read for the listing.
        """
        refs = {f"j{job.id}": job.id for job in jobs if job.status == "completed"}
        if self.moderation is None:
            return set()
        hidden = await self.moderation.hidden(refs)
        return {refs[ref] for ref in hidden}

    async def _private_links(self, jobs: list[Job], viewer_id: int) -> dict[int, str | None]:
        """The links to the listed private results' cards, which are not channel messages.

        Private results: a server job's card may live in its requester's DM, its
        message id that DM's, not the channel's; or it is an ephemeral response, with no link.
        One read for the whole listing
        (:meth:`bot.services.private_cards.PrivateCards.get_many`). A DM link opens only for the
        member whose DM it is, so others' listings get none.
        """
        ids = [job.id for job in jobs if not is_personal(job.guild_id)]
        if not ids:
            return {}
        cards = await self.private_cards.get_many(ids)
        return {
            job.id: card.link(job.message_id) if job.user_id == viewer_id else None
            for job in jobs
            if (card := cards.get(job.id)) is not None
        }

    async def _show(self, interaction: discord.Interaction[GenBot], job_id: int) -> None:
        """``/jobs show:<id>``: post the job's card again here, like Midjourney's ``/show``.

        Works in every context: a personal job's card may have outlived its
        interaction token, and this answer brings a fresh one. Only the requester's own jobs,
        or, with Manage Server, the server's; someone else's job whose owner has private
        results on is shown to the admin alone (ephemeral), whatever the admin's own setting.

        Raises:
            ValidationFailed: no such job of the member's (nothing is shown or changed).
        """
        who = requester(interaction)
        job = await self.generation.job(job_id)
        own = job is not None and job.user_id == who.user_id
        admin = job is not None and who.manage_guild and job.guild_id == who.guild_id
        if job is None or not (own or admin):
            raise ValidationFailed(
                N_("You have no job #{job_id}; `/jobs` lists yours."), job_id=job_id
            )
        async with shown_once(interaction, job_id, "jobs show"):
            # Private results: the card again, only to the member; and someone else's
            # job (an admin's look) only to the admin when its owner keeps their results private.
            members = self.members
            private = (await members.get(interaction.user.id)).private
            if not own and not private:
                private = (await members.get(job.user_id)).private
            interaction.extras[PUBLIC_DEFER] = not private
            await interaction.response.defer(thinking=True, ephemeral=private)
            await show_job(interaction, job, update=False)

    async def _check_again(self, jobs: list[Job]) -> list[Job]:
        """Poll again the listed jobs the poller stopped watching, so the list is current.

        A job still processing past ``JOB_TIMEOUT_SECONDS`` is no longer polled on a schedule
        (bot/jobs/poller.py); its placeholder sends its requester here. At most
        :data:`RECHECKED_PER_LISTING` of them, newest first, each within
        :data:`RECHECK_SECONDS`: the answer is deferred, but a key's request window is shared.
        A job found finished is delivered by the poller's next pass, by the usual routes.

        A job is polled at most once per ``JOBS_RECHECK_SECONDS`` (5 minutes), however often
        ``/jobs`` runs: each poll takes a slot of the key's request window, which on the shared
        key belongs to every server. The last check of an unwatched job is its
        ``next_poll_at`` (it is never due, so the field is free; the poller writes it).
        """
        now, interval = self.clock.time(), self.recheck_seconds
        stale = [
            job
            for job in jobs
            if job.status == "pending"
            and job.unwatched_at is not None
            and now - job.next_poll_at >= interval
        ]
        fresh: dict[int, Job] = {}
        for job in stale[:RECHECKED_PER_LISTING]:
            try:
                async with asyncio.timeout(RECHECK_SECONDS):
                    again = await self.poller.recheck(job.id)
            except TimeoutError:
                continue
            if again is not None:
                fresh[job.id] = again
        return [fresh.get(job.id, job) for job in jobs]


async def setup(bot: GenBot) -> None:
    """Load the extension."""
    services = bot.services
    await bot.add_cog(
        JobsCog(
            bot,
            services.generation,
            services.members,
            services.private_cards,
            services.schedule,
            bot.poller,
            clock=services.clock,
            recheck_seconds=services.settings.jobs_recheck_seconds,
            moderation=services.moderation,
        )
    )
