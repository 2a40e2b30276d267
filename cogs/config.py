"""``/config``: a server's API key, budgets, caps, channels and policy (Manage Server only).

Every change made here is audited by :class:`~bot.services.guild_config.GuildConfigService`
(each call names its :func:`~bot.discord.config_groups.common.actor`): kept in the database and
posted in the admin channel, if one is set, as who, what, old → new (never a key). The nested
groups (``/config api-key``, ``channels``, ``tier``, …) are modules of
``bot/discord/config_groups/``; ``/config style`` is ``bot/discord/creative_commands.py``'s.
"""

from __future__ import annotations

import logging
from decimal import Decimal

import discord
from discord import app_commands
from discord.ext import commands

from bot.discord.bot import GenBot
from bot.discord.config_groups.api_key import ApiKeyGroup
from bot.discord.config_groups.blocked_terms import BlockedTermsGroup
from bot.discord.config_groups.channels import ChannelsGroup
from bot.discord.config_groups.common import actor, require_manage_guild, show_settings
from bot.discord.config_groups.guard import GuardGroup
from bot.discord.config_groups.models import ModelsGroup
from bot.discord.config_groups.persona import PersonaGroup
from bot.discord.config_groups.tier import TierGroup
from bot.discord.creative_commands import StyleGroup
from bot.discord.draft_flow import draft_text
from bot.discord.interactions import model_autocomplete, requester
from bot.domain import UNSET, BillingMode, Kind, LimitUpdate
from bot.errors import ValidationFailed
from bot.i18n import LANGUAGE_NAMES, N_, _, number
from bot.services.creative import MAX_SYSTEM_LENGTH, CreativeService
from bot.services.drafts import DraftService
from bot.services.guild_config import GuildConfigService, parse_budget
from bot.services.safety import UNAVAILABLE as SAFETY_UNAVAILABLE
from bot.services.safety import SafetyService
from bot.services.sequences import MAX_MAX_CLIPS, SequenceService

log = logging.getLogger(__name__)

COMMANDS = [
    app_commands.Choice(name="text", value="text"),
    app_commands.Choice(name="image", value="image"),
    app_commands.Choice(name="video", value="video"),
]
SERVER_DEFAULT = "default"
"""``/config language``'s value for Discord's preferred locale of the server."""

LANGUAGES = [
    # Each language by its own name, as Discord's language menu shows it: never translated.
    *(
        app_commands.Choice(name=app_commands.locale_str(name, keep=True), value=code)
        for code, name in LANGUAGE_NAMES.items()
    ),
    app_commands.Choice(name="Server default (Discord's preferred locale)", value=SERVER_DEFAULT),
]


BILLING_MODES = [
    app_commands.Choice(name="server (the server's key and budgets)", value="server"),
    app_commands.Choice(name="members (each member's credit balance)", value="members"),
    app_commands.Choice(
        name="server, then members (past the server's budgets)", value="server-then-members"
    ),
]
"""``/config billing``'s choices (docs/credits.md)."""


SAFETY_MODES = [
    app_commands.Choice(name="off", value="off"),
    app_commands.Choice(name="review (hold for the moderators)", value="review"),
    app_commands.Choice(name="block (withhold)", value="block"),
]
"""``/config safety mode``'s choices."""

SAFETY_MODE_NAMES = {
    "off": N_("off"),
    "review": N_("review (held for the moderators)"),
    "block": N_("block (withheld)"),
}

NSFW_CHOICES = [
    app_commands.Choice(name="spoilers", value="spoiler"),
    app_commands.Choice(name="the policy applies", value="policy"),
]
"""``/config safety nsfw-channels``'s choices."""

SHOWCASE_SET = N_("Showcase channel updated: shared results are posted there.")
SHOWCASE_CLEARED = N_("Showcase channel cleared: shared results stay on the dashboard only.")


@app_commands.guild_only()
@app_commands.guild_install()
@app_commands.default_permissions(manage_guild=True)
class ConfigCog(
    commands.GroupCog, group_name="config", group_description="Set up genbot for this server"
):
    """Server settings, for members with Manage Server."""

    api_key = ApiKeyGroup()
    channels = ChannelsGroup()
    tier = TierGroup()
    models = ModelsGroup()
    persona = PersonaGroup()
    blocked_terms = BlockedTermsGroup()
    guard = GuardGroup()
    style = StyleGroup()

    def __init__(
        self,
        service: GuildConfigService,
        sequences: SequenceService,
        moderation: SafetyService,
        *,
        creative: CreativeService | None = None,
        drafts: DraftService | None = None,
    ) -> None:
        self.service = service
        self.sequences = sequences
        self.moderation = moderation
        self._creative = creative
        self._drafts = drafts

    @property
    def creative(self) -> CreativeService:
        """Enhance's settings (given in setup)."""
        if self._creative is None:
            raise RuntimeError("ConfigCog was built without the creative service")
        return self._creative

    @property
    def drafts(self) -> DraftService:
        """Draft → Final's settings (given in setup)."""
        if self._drafts is None:
            raise RuntimeError("ConfigCog was built without the draft service")
        return self._drafts

    async def interaction_check(self, interaction: discord.Interaction[GenBot]) -> bool:  # type: ignore[override]
        """Every subcommand needs Manage Server, whatever the server's overrides say."""
        require_manage_guild(interaction)
        return True

    @app_commands.command(name="budget")
    async def budget(
        self,
        interaction: discord.Interaction[GenBot],
        monthly: str | None = None,
        daily_per_user: str | None = None,
    ) -> None:
        """Set spending budgets in dollars (e.g. 25 or 12.50; "unlimited" removes one).

        Args:
            interaction: the interaction.
            monthly: the server's budget per calendar month (UTC)
            daily_per_user: each member's budget per day (UTC)
        """
        who = requester(interaction)
        if monthly is None and daily_per_user is None:
            raise ValidationFailed(N_("Give `monthly`, `daily_per_user`, or both."))
        new_monthly: LimitUpdate = UNSET if monthly is None else parse_budget(monthly)
        new_daily: LimitUpdate = UNSET if daily_per_user is None else parse_budget(daily_per_user)
        await self.service.set_budgets(
            who.guild_id, monthly=new_monthly, daily_per_user=new_daily, actor=actor(interaction)
        )
        await show_settings(interaction, _("Budgets updated."))

    @app_commands.command(name="limits")
    async def limits(
        self,
        interaction: discord.Interaction[GenBot],
        videos_per_user: app_commands.Range[int, 1, 100] | None = None,
        videos_per_server: app_commands.Range[int, 1, 1000] | None = None,
    ) -> None:
        """Cap how many videos may be in progress at once.

        Args:
            interaction: the interaction.
            videos_per_user: videos one member may have in progress
            videos_per_server: videos the whole server may have in progress
        """
        who = requester(interaction)
        await self.service.set_caps(
            who.guild_id,
            per_user=UNSET if videos_per_user is None else videos_per_user,
            per_guild=UNSET if videos_per_server is None else videos_per_server,
            actor=actor(interaction),
        )
        await show_settings(interaction, _("Limits updated."))

    @app_commands.command(name="admin-channel")
    async def admin_channel(
        self, interaction: discord.Interaction[GenBot], channel: discord.TextChannel | None = None
    ) -> None:
        """Set where key problems are announced (leave empty to stop).

        Args:
            interaction: the interaction.
            channel: the channel for notices to admins
        """
        who = requester(interaction)
        await self.service.set_admin_channel(
            who.guild_id, channel.id if channel else None, actor=actor(interaction)
        )
        await show_settings(interaction, _("Admin channel updated."))

    @app_commands.command(name="language")
    @app_commands.choices(language=LANGUAGES)
    async def language(
        self, interaction: discord.Interaction[GenBot], language: app_commands.Choice[str]
    ) -> None:
        """Choose the language of this server's public cards and admin notices.

        Args:
            interaction: the interaction.
            language: a language, or the server's default in Discord
        """
        who = requester(interaction)
        chosen = None if language.value == SERVER_DEFAULT else language.value
        await self.service.set_locale(who.guild_id, chosen, actor=actor(interaction))
        await show_settings(interaction, _("Language of public messages updated."))

    @app_commands.command(name="billing")
    @app_commands.choices(mode=BILLING_MODES)
    async def billing(
        self, interaction: discord.Interaction[GenBot], mode: app_commands.Choice[str]
    ) -> None:
        """Choose who pays for paid commands here: the server, or members from their credits.

        Args:
            interaction: the interaction.
            mode: who pays (members buy credit packs with /credits)
        """
        who = requester(interaction)
        await self.service.set_billing_mode(
            who.guild_id, BillingMode(mode.value), actor=actor(interaction)
        )
        await show_settings(interaction, _("Who pays for commands updated."))

    @app_commands.command(name="showcase")
    async def showcase(
        self, interaction: discord.Interaction[GenBot], channel: discord.TextChannel | None = None
    ) -> None:
        """Set where results members share are posted (leave empty to stop posting them).

        Args:
            interaction: the interaction.
            channel: the showcase channel; shared results are posted there with a Vote button
        """
        who = requester(interaction)
        await self.service.set_showcase_channel(
            who.guild_id, channel.id if channel else None, actor=actor(interaction)
        )
        await show_settings(interaction, _(SHOWCASE_SET) if channel else _(SHOWCASE_CLEARED))

    @app_commands.command(name="confirm-above")
    async def confirm_above(self, interaction: discord.Interaction[GenBot], dollars: str) -> None:
        """Ask members to confirm requests costing more than this (e.g. 1.50; "off" never asks).

        Args:
            interaction: the interaction.
            dollars: the price above which a request asks first, or off
        """
        who = requester(interaction)
        cents = parse_budget(dollars)
        await self.service.set_confirm_above(
            who.guild_id, None if cents is None else Decimal(cents), actor=actor(interaction)
        )
        await show_settings(interaction, _("Confirmation threshold updated."))

    @app_commands.command(name="enhance")
    @app_commands.autocomplete(model=model_autocomplete("text"))
    @app_commands.rename(image_system="image-system", video_system="video-system")
    async def enhance(
        self,
        interaction: discord.Interaction[GenBot],
        model: str | None = None,
        image_system: app_commands.Range[str, 1, MAX_SYSTEM_LENGTH] | None = None,
        video_system: app_commands.Range[str, 1, MAX_SYSTEM_LENGTH] | None = None,
        reset: bool | None = None,
    ) -> None:
        """Set how ✨ Enhance rewrites prompts: the text model and a system prompt per kind.

        Args:
            interaction: the interaction.
            model: the text model that rewrites (default: the cheapest in /models)
            image_system: the instructions for rewriting image prompts (default: genbot's)
            video_system: the instructions for rewriting video prompts (default: genbot's)
            reset: back to the cheapest model and genbot's instructions first
        """
        who = requester(interaction)
        await interaction.response.defer(ephemeral=True, thinking=True)
        chosen = await self.creative.set_enhance(
            who.guild_id,
            actor=actor(interaction),
            model=model,
            image_system=image_system,
            video_system=video_system,
            reset=bool(reset),
        )
        named = chosen.enhance_model
        await interaction.edit_original_response(
            content=_(
                "✨ Enhance rewrites with {model}; image instructions: {image}; video "
                "instructions: {video}.",
                model=f"`{named}`" if named else _("the cheapest text model"),
                image=_("this server's") if chosen.image_system else _("genbot's"),
                video=_("this server's") if chosen.video_system else _("genbot's"),
            )
        )

    @app_commands.command(name="draft")
    @app_commands.autocomplete(
        image_model=model_autocomplete("image"), video_model=model_autocomplete("video")
    )
    @app_commands.rename(image_model="image-model", video_model="video-model")
    async def draft(
        self,
        interaction: discord.Interaction[GenBot],
        image_model: str | None = None,
        video_model: str | None = None,
        reset: bool | None = None,
    ) -> None:
        """Set the models draft:true uses: cheap takes to choose from before the Final.

        Args:
            interaction: the interaction.
            image_model: the image model of drafts (default: the cheapest in /models)
            video_model: the text-to-video model of drafts (default: the cheapest in /models)
            reset: back to the cheapest models first
        """
        who = requester(interaction)
        await interaction.response.defer(ephemeral=True, thinking=True)
        settings = await self.drafts.set_models(
            who.guild_id,
            actor=actor(interaction),
            image_model=image_model,
            video_model=video_model,
            reset=bool(reset),
        )
        models = await self.drafts.models(who.guild_id)
        await interaction.edit_original_response(content=draft_text(settings, models))

    @app_commands.command(name="sequence-length")
    async def sequence_length(
        self,
        interaction: discord.Interaction[GenBot],
        clips: app_commands.Range[int, 2, MAX_MAX_CLIPS] | None = None,
    ) -> None:
        """Set how many clips Continue may chain into one sequence (empty: the default, 6).

        Args:
            interaction: the interaction.
            clips: the most clips in one sequence (2 to 50); leave empty for the default
        """
        who = requester(interaction)
        async with self.service.changing(who.guild_id, actor(interaction)):
            await self.sequences.set_max_clips(who.guild_id, clips)
        await show_settings(interaction, _("Sequence length updated."))

    # -- safety checking of results (docs/safety.md) ------------------------------------

    @app_commands.command(name="safety")
    @app_commands.rename(
        review_above="review-above",
        block_above="block-above",
        review_channel="review-channel",
        reports_to_hide="reports-to-hide",
        nsfw_channels="nsfw-channels",
    )
    @app_commands.choices(mode=SAFETY_MODES, nsfw_channels=NSFW_CHOICES)
    async def safety(
        self,
        interaction: discord.Interaction[GenBot],
        mode: str | None = None,
        review_above: app_commands.Range[float, 0, 1] | None = None,
        block_above: app_commands.Range[float, 0, 1] | None = None,
        review_channel: discord.TextChannel | None = None,
        reports_to_hide: app_commands.Range[int, 1, 100] | None = None,
        nsfw_channels: str | None = None,
    ) -> None:
        """Check results before they are shown: hold or withhold those scored unsafe.

        Args:
            interaction: the interaction.
            mode: off, review (hold for moderators) or block (withhold)
            review_above: scores at or above this (0-1) are held or withheld; default 0.5
            block_above: scores at or above this (0-1) are always withheld; default 0.85
            review_channel: where held results are reviewed (default: the admin channel)
            reports_to_hide: members' reports that withhold a shown result; default 3
            nsfw_channels: in age-restricted channels: spoilers (default) or the policy
        """
        who = requester(interaction)
        if not self.moderation.available:
            raise ValidationFailed(SAFETY_UNAVAILABLE)
        changed = (mode, review_above, block_above, review_channel, reports_to_hide, nsfw_channels)
        note = None
        if any(value is not None for value in changed):
            async with self.service.changing(who.guild_id, actor(interaction)):
                await self.moderation.update(
                    who.guild_id,
                    mode=mode,
                    review_above=review_above,
                    block_above=block_above,
                    review_channel_id=None if review_channel is None else review_channel.id,
                    reports_to_hide=reports_to_hide,
                    nsfw_channels=nsfw_channels,
                )
            note = _("Safety checking updated.")
        policy = await self.moderation.policy(who.guild_id)
        channel = policy.review_channel_id
        lines = [
            _("Mode: {mode}", mode=_(SAFETY_MODE_NAMES[policy.mode.value])),
            _(
                "Held from {low}, withheld from {high}",
                low=f"{policy.review_above:g}",
                high=f"{policy.block_above:g}",
            ),
            _(
                "Review channel: {channel}",
                channel=f"<#{channel}>" if channel else _("the admin channel"),
            ),
            _("Reports that withhold a result: {count}", count=number(policy.reports_to_hide)),
            _("Age-restricted channels: spoilers")
            if policy.nsfw_spoiler
            else _("Age-restricted channels: the policy applies"),
        ]
        text = "\n".join(([note] if note else []) + lines)
        await interaction.response.send_message(
            text, ephemeral=True, allowed_mentions=discord.AllowedMentions.none()
        )

    @app_commands.command(name="cooldown")
    @app_commands.choices(command=COMMANDS)
    async def cooldown(
        self,
        interaction: discord.Interaction[GenBot],
        command: str,
        seconds: app_commands.Range[int, 0, 86400],
    ) -> None:
        """Make each member wait between two uses of a command (Manage Server is exempt).

        Args:
            interaction: the interaction.
            command: the command: text, image or video
            seconds: seconds between two uses by one member; 0 removes the cooldown
        """
        who = requester(interaction)
        try:
            kind = Kind(command)
        except ValueError:
            raise ValidationFailed(N_("The command must be text, image or video.")) from None
        await self.service.set_cooldown(who.guild_id, kind, seconds, actor=actor(interaction))
        text = (
            _("/{command} has no cooldown now.", command=kind.value)
            if seconds == 0
            else _(
                "Members now wait {seconds} s between two uses of /{command}.",
                seconds=number(seconds),
                command=kind.value,
            )
        )
        await interaction.response.send_message(text, ephemeral=True)

    @app_commands.command(name="show")
    async def show(self, interaction: discord.Interaction[GenBot]) -> None:
        """Show this server's settings and policy."""
        await show_settings(interaction, None)


async def setup(bot: GenBot) -> None:
    """Load the extension."""
    services = bot.services
    await bot.add_cog(
        ConfigCog(
            services.guild_config,
            services.sequences,
            services.moderation,
            creative=services.creative,
            drafts=services.drafts,
        )
    )
