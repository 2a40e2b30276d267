"""Safety reviews and reports: Approve / Reject under a review card, Report under a result.

Both are ``discord.ui.DynamicItem`` instances whose custom ids carry the result
(:mod:`bot.discord.render.safety`), so they work after any restart. Approve and Reject need
Manage Server or Manage Messages; Approve shows the result on its own card as an ordinary
completion (an asynchronous job is delivered again by the poller: files, buttons, the
requester's ping; a synchronous image is posted as a reply to its card, pinging the member);
Reject keeps it withheld and tells the member. A report is one per member and result; at the
server's ``reports-to-hide`` the card loses its files and the review channel gets the card.
docs/safety.md.
"""

from __future__ import annotations

import logging

import discord
from discord.ext import commands

from bot.discord.bot import GenBot
from bot.discord.interactions import loaded_cog
from bot.discord.render.safety import (
    REPORT_CUSTOM_ID,
    REVIEW_CUSTOM_ID,
    hidden_card,
    review_decided,
)
from bot.discord.request_flows import fetch_result
from bot.discord.safety_review import ReviewSettler
from bot.discord.tree import ActionButton, ActionSelect, answer_error, send_ephemeral
from bot.domain import Job, SafetyRecord, Visibility
from bot.errors import ValidationFailed
from bot.i18n import N_, _, using
from bot.services.generation import GenerationService
from bot.services.safety import SafetyService, Screening
from bot.services.showcase import ShowcaseService

log = logging.getLogger(__name__)

Interaction = discord.Interaction[GenBot]

REVIEWERS_ONLY = N_("Only members with Manage Server or Manage Messages review results.")
REPORTED = N_("Thank you: your report reached the server's moderators.")
REPORTED_BEFORE = N_("You reported this result already.")


def _require_reviewer(interaction: Interaction) -> None:
    permissions = interaction.permissions
    if interaction.guild_id is None or not (
        permissions.manage_guild or permissions.manage_messages
    ):
        raise ValidationFailed(REVIEWERS_ONLY)


class ReviewAction(ActionButton, template=REVIEW_CUSTOM_ID):
    """Approve or Reject under a review card (``gb:approve:j12``); restart-safe."""

    async def callback(self, interaction: Interaction) -> None:  # type: ignore[override]
        """Decide the result; any refusal is one ephemeral sentence."""
        try:
            _require_reviewer(interaction)
            await interaction.response.defer()
            cog = loaded_cog(interaction, SafetyCog)
            assert interaction.guild_id is not None
            decide = cog.safety.approve if self.action == "approve" else cog.safety.reject
            record = await decide(
                self.ref, guild_id=interaction.guild_id, user_id=interaction.user.id, via="discord"
            )
            await _decided(interaction, cog, record)
        except Exception as exc:
            await answer_error(interaction, exc)


async def _decided(interaction: Interaction, cog: SafetyCog, record: SafetyRecord) -> None:
    """Tell the review card, then show the result (Approve) or tell the member (Reject).

    The member's side is :class:`bot.discord.safety_review.ReviewSettler`'s, as the
    dashboard's Review page does it.
    """
    member = interaction.user.mention
    if record.state is Visibility.APPROVED:
        line = _("Approved by {member}: shown on its card.", member=member)
    else:
        line = _("Rejected by {member}: it stays withheld.", member=member)
    decided = review_decided(record.ref, record.kind, record.prompt, line)
    try:
        await interaction.edit_original_response(**decided.edit_kwargs())
    except discord.HTTPException as exc:
        log.info("review card of %s not updated (%s)", record.ref, exc)
    await cog.settler.settle(record)


class ReportSelect(ActionSelect, template=REPORT_CUSTOM_ID):
    """The Report select under a shown result (``gb:report:j12``); restart-safe.

    Args:
        ref: the result.
    """

    action = "report"

    async def callback(self, interaction: Interaction) -> None:  # type: ignore[override]
        """Record the report; enough of them withhold the result pending review."""
        try:
            await _report(interaction, self.ref, self.chosen(interaction))
        except Exception as exc:
            await answer_error(interaction, exc)


async def _report(interaction: Interaction, ref: str, reason: str) -> None:
    cog = loaded_cog(interaction, SafetyCog)
    job, about = await _reported(interaction, cog.generation, ref)
    message = interaction.message
    card = None if message is None else (message.channel.id, message.id)
    outcome = await cog.safety.report(
        ref,
        reporter_id=interaction.user.id,
        reason=reason,
        guild_id=about[0],
        channel_id=about[1],
        user_id=about[2],
        kind=about[3],
        prompt=about[4],
        card=card,
    )
    await send_ephemeral(interaction, _(REPORTED) if outcome.counted else _(REPORTED_BEFORE))
    if not outcome.hidden_now or message is None:
        return
    files = []
    for attachment in message.attachments[:10]:
        try:
            files.append((attachment.filename, await attachment.read()))
        except Exception as exc:  # the review card goes without it
            log.info("result %s: a reported file was not read (%s)", ref, exc)
    with using(await interaction.client.locales.of(about[0])):
        if job is not None:
            parts = hidden_card(job, Visibility.WITHHELD)
            kwargs = parts.edit_kwargs()
        else:
            kwargs = {
                "content": _("This result is withheld by the server's safety policy."),
                "embeds": [],
                "attachments": [],
                "view": None,
            }
        try:
            await message.edit(**kwargs)
        except discord.HTTPException as exc:
            log.warning("result %s: its card kept its files (%s)", ref, exc)
        if job is not None:  # shared before: its showcase post leaves the channel too
            await _unpost_showcase(interaction.client, cog.showcase, job)
        gate = interaction.client.announcer.safety
        if gate is not None and outcome.review_channel_id is not None:
            await gate.post_review(
                about[0],
                outcome.review_channel_id,
                ref=ref,
                kind=about[3],
                prompt=about[4],
                user_id=about[2],
                screening=Screening(Visibility.WITHHELD),
                reason="reports",
                files=tuple(files),
            )


async def _reported(
    interaction: Interaction, generation: GenerationService, ref: str
) -> tuple[Job | None, tuple[int, int, int, str, str]]:
    """The result ``ref`` names: its job, and what the report records of it.

    Returns:
        The job (None for a request's answer) and ``(guild id, channel id, author id, kind,
        prompt)``.

    Raises:
        ValidationFailed: no result is known by ``ref``.
    """
    if ref.startswith("j"):
        job = await generation.job(int(ref[1:]))
        if job is None:
            raise ValidationFailed(N_("That result is not known here."))
        return job, (job.guild_id, job.channel_id, job.user_id, str(job.kind), job.prompt_summary)
    request = await generation.result_request(ref)
    if request is None:
        raise ValidationFailed(N_("That result is not known here."))
    prompt = str(request.options.get("prompt") or "")
    channel_id = interaction.channel_id or 0
    return None, (request.guild_id, channel_id, request.user_id, request.kind, prompt)


async def _unpost_showcase(bot: GenBot, showcase: ShowcaseService | None, job: Job) -> None:
    """Delete the showcase channel's post of a result withheld now; failures logged."""
    if showcase is None:
        return
    for channel_id, message_id in await showcase.posts_of(job.guild_id, job.id):
        channel = bot.get_partial_messageable(channel_id, guild_id=job.guild_id)
        try:
            await channel.get_partial_message(message_id).delete()
        except discord.HTTPException as exc:
            log.info("job %s: its showcase post stays (%s)", job.id, exc)


class SafetyCog(commands.Cog):
    """Registers Approve, Reject and the Report select."""

    def __init__(
        self,
        bot: GenBot,
        safety: SafetyService,
        generation: GenerationService,
        showcase: ShowcaseService | None = None,
    ) -> None:
        self.bot = bot
        self.safety = safety
        self.generation = generation
        self.showcase = showcase
        self.settler = ReviewSettler(
            bot, generation, bot.locales, lambda url: fetch_result(bot, url)
        )

    async def cog_load(self) -> None:
        """Add the dynamic items."""
        self.bot.add_dynamic_items(ReviewAction, ReportSelect)

    async def cog_unload(self) -> None:
        """Remove them again."""
        self.bot.remove_dynamic_items(ReviewAction, ReportSelect)


async def setup(bot: GenBot) -> None:
    """Load the extension."""
    services = bot.services
    await bot.add_cog(SafetyCog(bot, services.moderation, services.generation, services.showcases))
