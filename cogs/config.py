"""``/config``: a server's API key, budgets, caps, channels and policy (Manage Server only).

Every change made here is audited by :class:`~bot.services.guild_config.GuildConfigService`
(each call names its :func:`actor`): kept in the database and posted in the admin channel, if
one is set, as who, what, old → new (never a key).
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Sequence
from decimal import Decimal

import discord
from discord import app_commands
from discord.ext import commands

from bot.discord.bot import GenBot
from bot.discord.creative_commands import StyleGroup
from bot.discord.draft_flow import draft_text
from bot.discord.interactions import model_autocomplete, requester
from bot.discord.render.admin import config_embed, dashboard_link, old_key_note
from bot.discord.render.buttons import confirm_above_text
from bot.discord.render.policy import (
    add_policy_fields,
    models_line,
    tier_line,
    tiers_embed,
)
from bot.discord.render.text import truncate
from bot.discord.tree import AdmittedModal, send_ephemeral, sentence_for
from bot.domain import UNSET, Actor, BillingMode, Kind, LimitUpdate
from bot.domain.guard import GuardAlert, GuardSettings
from bot.errors import ValidationFailed
from bot.i18n import LANGUAGE_NAMES, N_, _, money, number, relative_time
from bot.services.creative import MAX_SYSTEM_LENGTH, CreativeService
from bot.services.drafts import DraftService
from bot.services.generation import GenerationService
from bot.services.guard import (
    SpendGuard,
    describe_alert,
    describe_thresholds,
    parse_thresholds,
)
from bot.services.guild_config import (
    DEFAULT_WORDS,
    MAX_PERSONA_CHARS,
    GuildConfigService,
    ModelsUpdate,
    parse_allowance,
    parse_budget,
)
from bot.services.policy import BLOCKED_TERMS_RULE, model_matches, parse_models
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

GUARD_DESTINATIONS = [
    app_commands.Choice(name="admin channel", value="admin-channel"),
    app_commands.Choice(name="DM to the server's owner", value="owner-dm"),
]
"""``/config guard set destination``'s choices."""

BILLING_MODES = [
    app_commands.Choice(name="server (the server's key and budgets)", value="server"),
    app_commands.Choice(name="members (each member's credit balance)", value="members"),
    app_commands.Choice(
        name="server, then members (past the server's budgets)", value="server-then-members"
    ),
]
"""``/config billing``'s choices (docs/credits.md)."""

BILLING_MODE_NAMES = {
    "server": N_("the server (its key and budgets)"),
    "members": N_("each member, from their credit balance (`/credits`)"),
    "server-then-members": N_(
        "the server within its budgets, then each member from their credit balance"
    ),
}

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
NONE_WORDS = frozenset({"none", "nothing", "off"})
"""What an admin types for an empty block list."""


async def _unmatched_note(
    generation: GenerationService,
    interaction: discord.Interaction[GenBot],
    patterns: Iterable[str],
) -> str:
    """A warning naming the patterns that match no model of the cached catalogue, or "".

    Kept anyway: a model may join the catalogue later, and a prefix is meant for those.
    """
    catalogue = await generation.cached_catalogue(interaction.guild_id)
    if catalogue is None:
        return ""
    ids = [m.id for m in catalogue.text]
    ids += [m.id for m in catalogue.image] + [m.id for m in catalogue.video]
    unmatched = [p for p in patterns if not any(model_matches(p, i) for i in ids)]
    if not unmatched:
        return ""
    names = ", ".join(f"`{p}`" for p in unmatched[:10])
    return "\n" + _("Note: {names} matches no model in the catalogue right now.", names=names)


def actor(interaction: discord.Interaction[GenBot]) -> Actor:
    """The admin who runs the command, as the audit log names them (via ``/config``)."""
    return Actor(interaction.user.id, "discord")


def guard_lines(config: GuardSettings, alerts: Sequence[GuardAlert]) -> list[str]:
    """``/config guard show``'s lines: the guard's settings, the pause, the latest ``alerts``."""
    on, off = _("on"), _("off")
    owner, channel = _("the owner's DMs"), _("the admin channel")
    lines = [
        _("Thresholds: {thresholds}", thresholds=describe_thresholds(config.thresholds)),
        _("Member notes: {state}", state=on if config.member_notes else off),
        _(
            "Alerts go to: {destination}",
            destination=owner if config.destination == "owner-dm" else channel,
        ),
        _("Runway alert below {days} days", days=number(config.runway_days)),
        _(
            "Credits floor: {amount}",
            amount=off if config.credits_floor_cents is None else money(config.credits_floor_cents),
        ),
        _(
            "Anomaly: the last hour above {factor}× a usual hour and above {amount}",
            factor=number(config.anomaly_factor),
            amount=money(config.anomaly_floor_cents),
        ),
        _(
            "One member in 10 minutes: {amount}",
            amount=off if config.member_10min_cents is None else money(config.member_10min_cents),
        ),
        _("Pause on anomaly: {state}", state=on if config.pause_on_anomaly else off),
    ]
    if config.paused_at is not None:
        lines.append(
            _(
                "Paid requests are paused since {when}; resume with `/config guard resume`.",
                when=relative_time(config.paused_at),
            )
        )
    if alerts:
        lines.append(_("Latest alerts:"))
        lines += [
            f"<t:{int(a.at)}:R> {truncate(describe_alert(a).translated(), 150)}" for a in alerts
        ]
    return lines


async def config_show_embed(
    service: GuildConfigService,
    sequences: SequenceService,
    guild_id: int,
    dashboard_url: str | None,
) -> discord.Embed:
    """``/config show``'s embed: the server's settings and policy, and its dashboard link."""
    config = await service.show(guild_id)
    embed = add_policy_fields(config_embed(config), config.policy)
    threshold = await service.confirm_above(guild_id)
    embed.add_field(name=_("Confirm above"), value=confirm_above_text(threshold), inline=False)
    embed.add_field(
        name=_("Who pays"),
        value=_(BILLING_MODE_NAMES[(await service.billing_mode(guild_id)).value]),
        inline=False,
    )
    clips = await sequences.max_clips(guild_id)
    embed.add_field(
        name=_("Sequence length"),
        value=_("{count} clips at most", count=number(clips)),
        inline=False,
    )
    if dashboard_url is not None:
        embed.add_field(
            name=_("Dashboard"), value=dashboard_link(dashboard_url, guild_id), inline=False
        )
    return embed


def _require_manage_guild(interaction: discord.Interaction[GenBot]) -> None:
    # default_permissions only hides the command; a server can override it, so check here too.
    if not interaction.permissions.manage_guild:
        raise app_commands.MissingPermissions(["manage_guild"])


class ApiKeyModal(AdmittedModal, title=N_("Set the Generation API key")):
    """Asks for the key in a modal, so that it never shows as a visible command option."""

    key: discord.ui.TextInput[ApiKeyModal] = discord.ui.TextInput(
        label=N_("API key"),
        placeholder=N_("Paste the key from your account settings"),
        max_length=256,
    )

    def __init__(self, service: GuildConfigService, guild_id: int) -> None:
        super().__init__()
        self.service = service
        self.guild_id = guild_id

    async def on_submit(self, interaction: discord.Interaction[GenBot]) -> None:  # type: ignore[override]
        """Check the key with the service, then store it encrypted; never echo it."""
        _require_manage_guild(interaction)
        await interaction.response.defer(ephemeral=True, thinking=True)
        change = await self.service.set_api_key(
            self.guild_id, self.key.value, actor=actor(interaction)
        )
        await interaction.edit_original_response(
            content=_(
                "API key saved (ending in `{last4}`); this server's requests now use it.",
                last4=change.last4,
            )
            + old_key_note(change)
        )

    async def on_error(  # type: ignore[override]
        self, interaction: discord.Interaction[GenBot], error: Exception
    ) -> None:
        """Answer with the one sentence for ``error``."""
        await send_ephemeral(interaction, sentence_for(error))


@app_commands.guild_only()
@app_commands.guild_install()
@app_commands.default_permissions(manage_guild=True)
class ConfigCog(
    commands.GroupCog, group_name="config", group_description="Set up genbot for this server"
):
    """Server settings, for members with Manage Server."""

    api_key = app_commands.Group(name="api-key", description="This server's Generation API key")
    channels = app_commands.Group(name="channels", description="Where the commands may be used")
    tier = app_commands.Group(name="tier", description="Limits and models for members of a role")
    models = app_commands.Group(
        name="models", description="The models members without a tier role may use"
    )
    persona = app_commands.Group(
        name="persona", description="A system prompt and model for /chat and /text in a channel"
    )
    blocked_terms = app_commands.Group(
        name="blocked-terms", description="Words or phrases that refuse a prompt"
    )
    guard = app_commands.Group(
        name="guard", description="Spend alerts, the key's runway and the automatic pause"
    )
    style = StyleGroup()

    def __init__(
        self,
        service: GuildConfigService,
        generation: GenerationService,
        sequences: SequenceService,
        spend_guard: SpendGuard,
        moderation: SafetyService,
        *,
        shared_key: bool,
        dashboard_url: str | None = None,
        creative: CreativeService | None = None,
        drafts: DraftService | None = None,
    ) -> None:
        self.service = service
        self.generation = generation
        self.sequences = sequences
        self.spend_guard = spend_guard
        self.moderation = moderation
        self.shared_key = shared_key
        self.dashboard_url = dashboard_url
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
        _require_manage_guild(interaction)
        return True

    @api_key.command(name="set")
    async def api_key_set(self, interaction: discord.Interaction[GenBot]) -> None:
        """Set this server's API key (asked in a private form, checked before it is stored)."""
        who = requester(interaction)
        await ApiKeyModal(self.service, who.guild_id).show(interaction)

    @api_key.command(name="remove")
    async def api_key_remove(self, interaction: discord.Interaction[GenBot]) -> None:
        """Remove this server's API key (kept only until the jobs made with it finish)."""
        who = requester(interaction)
        change = await self.service.remove_api_key(who.guild_id, actor=actor(interaction))
        if not change.had_key:
            text = _("This server has no API key of its own; nothing was removed.")
        elif self.shared_key:
            text = _("This server's API key was removed; requests now use the bot's shared key.")
        else:
            text = _("This server's API key was removed; commands need a key again to work.")
        await interaction.response.send_message(text + old_key_note(change), ephemeral=True)

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
        await self._show(interaction, _("Budgets updated."))

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
        await self._show(interaction, _("Limits updated."))

    @channels.command(name="allow")
    async def channels_allow(
        self,
        interaction: discord.Interaction[GenBot],
        channel: discord.TextChannel | discord.ForumChannel,
    ) -> None:
        """Allow the commands in a channel (once any is allowed, only those are).

        Args:
            interaction: the interaction.
            channel: the channel to allow
        """
        who = requester(interaction)
        await self.service.allow_channel(
            who.guild_id, channel.id, allowed=True, actor=actor(interaction)
        )
        await self._show(interaction, _("Commands allowed in {channel}.", channel=channel.mention))

    @channels.command(name="disallow")
    async def channels_disallow(
        self,
        interaction: discord.Interaction[GenBot],
        channel: discord.TextChannel | discord.ForumChannel,
    ) -> None:
        """Stop allowing the commands in a channel.

        Args:
            interaction: the interaction.
            channel: the channel to remove
        """
        who = requester(interaction)
        await self.service.allow_channel(
            who.guild_id, channel.id, allowed=False, actor=actor(interaction)
        )
        await self._show(interaction, _("{channel} removed.", channel=channel.mention))

    @channels.command(name="everywhere")
    async def channels_everywhere(self, interaction: discord.Interaction[GenBot]) -> None:
        """Allow the commands in every channel again."""
        who = requester(interaction)
        await self.service.allow_everywhere(who.guild_id, actor=actor(interaction))
        await self._show(interaction, _("Commands allowed in every channel."))

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
        await self._show(interaction, _("Admin channel updated."))

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
        await self._show(interaction, _("Language of public messages updated."))

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
        await self._show(interaction, _("Who pays for commands updated."))

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
        await self._show(interaction, _(SHOWCASE_SET) if channel else _(SHOWCASE_CLEARED))

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
        await self._show(interaction, _("Confirmation threshold updated."))

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
        await self._show(interaction, _("Sequence length updated."))

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

    # -- the spend guard (docs/guard.md) ------------------------------------------------

    @guard.command(name="set")
    @app_commands.rename(
        member_notes="member-notes",
        runway_days="runway-days",
        credits_floor="credits-floor",
        anomaly_factor="anomaly-factor",
        anomaly_floor="anomaly-floor",
        member_10min="member-10min",
        pause_on_anomaly="pause-on-anomaly",
    )
    @app_commands.choices(destination=GUARD_DESTINATIONS)
    async def guard_set(
        self,
        interaction: discord.Interaction[GenBot],
        thresholds: str | None = None,
        member_notes: bool | None = None,
        destination: str | None = None,
        runway_days: app_commands.Range[int, 1, 365] | None = None,
        credits_floor: str | None = None,
        anomaly_factor: app_commands.Range[float, 1, 100] | None = None,
        anomaly_floor: str | None = None,
        member_10min: str | None = None,
        pause_on_anomaly: bool | None = None,
    ) -> None:
        """Set the spend guard: alert thresholds, where alerts go, the runway and anomalies.

        Args:
            interaction: the interaction.
            thresholds: percentages of the monthly budget that alert, e.g. 50,80,100
            member_notes: tell members when they reach 80 % and 100 % of their allowance
            destination: where alerts go: the admin channel or a DM to the server's owner
            runway_days: alert when the key's credits last fewer days than this
            credits_floor: alert when the key's credits fall below this, in dollars ("off")
            anomaly_factor: the last hour above this many times a usual hour is an anomaly
            anomaly_floor: ...and above this amount in dollars
            member_10min: one member spending more than this in 10 minutes is an anomaly
            pause_on_anomaly: pause new paid requests on an anomaly until an admin resumes
        """
        who = requester(interaction)
        changes: dict[str, object] = {}
        if thresholds is not None:
            changes["thresholds"] = parse_thresholds(thresholds)
        if member_notes is not None:
            changes["member_notes"] = member_notes
        if destination is not None:
            changes["destination"] = destination
        if runway_days is not None:
            changes["runway_days"] = runway_days
        if credits_floor is not None:
            changes["credits_floor_cents"] = parse_budget(credits_floor)
        if anomaly_factor is not None:
            changes["anomaly_factor"] = anomaly_factor
        if anomaly_floor is not None:
            changes["anomaly_floor_cents"] = parse_budget(anomaly_floor)
        if member_10min is not None:
            changes["member_10min_cents"] = parse_budget(member_10min)
        if pause_on_anomaly is not None:
            changes["pause_on_anomaly"] = pause_on_anomaly
        if not changes:
            raise ValidationFailed(N_("Give at least one setting of the guard."))
        async with self.service.changing(who.guild_id, actor(interaction)):
            await self.spend_guard.update(who.guild_id, **changes)
        await self._show_guard(interaction, _("Spend guard updated."))

    @guard.command(name="resume")
    async def guard_resume(self, interaction: discord.Interaction[GenBot]) -> None:
        """Resume paid requests the spend guard paused."""
        who = requester(interaction)
        async with self.service.changing(who.guild_id, actor(interaction)):
            resumed = await self.spend_guard.resume(who.guild_id)
        if resumed:
            text = _("Paid requests are allowed again.")
        else:
            text = _("Paid requests were not paused; nothing changed.")
        await interaction.response.send_message(text, ephemeral=True)

    @guard.command(name="show")
    async def guard_show(self, interaction: discord.Interaction[GenBot]) -> None:
        """Show the spend guard's settings, the key's runway and its latest alerts."""
        await self._show_guard(interaction, None)

    async def _show_guard(self, interaction: discord.Interaction[GenBot], note: str | None) -> None:
        guild_id = requester(interaction).guild_id
        config = await self.spend_guard.settings(guild_id)
        lines = guard_lines(config, await self.spend_guard.alerts(guild_id, 5))
        text = "\n".join(([note] if note else []) + lines)
        await interaction.response.send_message(
            truncate(text, 2000), ephemeral=True, allowed_mentions=discord.AllowedMentions.none()
        )

    # -- policy --------------------------------------------------------------------

    @tier.command(name="set")
    async def tier_set(
        self,
        interaction: discord.Interaction[GenBot],
        role: discord.Role,
        daily_per_user: str | None = None,
        monthly_per_user: str | None = None,
        videos_at_once: app_commands.Range[int, 1, 100] | None = None,
        models: str | None = None,
    ) -> None:
        """Give members of a role their own limits and models (the most generous tier wins).

        Args:
            interaction: the interaction.
            role: the role whose members get this tier
            daily_per_user: dollars per member per day (UTC), "unlimited" or "default"
            monthly_per_user: dollars per member per month (UTC), "unlimited" or "default"
            videos_at_once: videos one member may have in progress
            models: ids or prefixes, comma-separated (motion-pro/, acme/image-); "all"; "default"
        """
        who = requester(interaction)
        if role.is_default():
            # Discord never lists @everyone among a member's roles: such a tier would never apply.
            raise ValidationFailed(
                N_("For everyone, use `/config budget`, `/config limits` and `/config models`.")
            )
        daily: LimitUpdate = UNSET if daily_per_user is None else parse_allowance(daily_per_user)
        monthly: LimitUpdate = (
            UNSET if monthly_per_user is None else parse_allowance(monthly_per_user)
        )
        new_models: ModelsUpdate = UNSET
        if models is not None:
            default = models.strip().casefold() in DEFAULT_WORDS
            new_models = None if default else parse_models(models)
        tier = await self.service.set_tier(
            who.guild_id,
            role.id,
            role.name,
            daily_per_user=daily,
            monthly_per_user=monthly,
            videos_at_once=UNSET if videos_at_once is None else videos_at_once,
            models=new_models,
            actor=actor(interaction),
        )
        note = await _unmatched_note(self.generation, interaction, tier.models or ())
        await interaction.response.send_message(
            _("Tier saved. {tier}", tier=tier_line(tier)) + note, ephemeral=True
        )

    @tier.command(name="remove")
    async def tier_remove(
        self, interaction: discord.Interaction[GenBot], role: discord.Role
    ) -> None:
        """Remove a role's tier; its members get the server defaults (or their other tiers).

        Args:
            interaction: the interaction.
            role: the role whose tier to remove
        """
        who = requester(interaction)
        removed = await self.service.remove_tier(who.guild_id, role.id, actor=actor(interaction))
        text = (
            _("Tier of {role} removed.", role=role.mention)
            if removed
            else _("{role} has no tier.", role=role.mention)
        )
        await interaction.response.send_message(text, ephemeral=True)

    @tier.command(name="list")
    async def tier_list(self, interaction: discord.Interaction[GenBot]) -> None:
        """List the role tiers."""
        policy = await self.service.policy(requester(interaction).guild_id)
        await interaction.response.send_message(embed=tiers_embed(policy), ephemeral=True)

    @models.command(name="allow")
    async def models_allow(self, interaction: discord.Interaction[GenBot], models: str) -> None:
        """Set the models members without a tier may use ("all" allows every model).

        Args:
            interaction: the interaction.
            models: model ids or prefixes, comma-separated (motion-pro/, acme/image-), or "all"
        """
        who = requester(interaction)
        patterns = parse_models(models)
        lists = await self.service.set_models(
            who.guild_id, allowed=patterns, actor=actor(interaction)
        )
        note = await _unmatched_note(self.generation, interaction, patterns)
        await interaction.response.send_message(
            _("Models for members without a tier: {models}.", models=models_line(lists)) + note,
            ephemeral=True,
        )

    @models.command(name="block")
    async def models_block(self, interaction: discord.Interaction[GenBot], models: str) -> None:
        """Set the models members without a tier may not use ("none" blocks nothing).

        Args:
            interaction: the interaction.
            models: model ids or prefixes, comma-separated, or "none"
        """
        who = requester(interaction)
        patterns = () if models.strip().casefold() in NONE_WORDS else parse_models(models)
        lists = await self.service.set_models(
            who.guild_id, blocked=patterns, actor=actor(interaction)
        )
        note = await _unmatched_note(self.generation, interaction, patterns)
        await interaction.response.send_message(
            _("Models for members without a tier: {models}.", models=models_line(lists)) + note,
            ephemeral=True,
        )

    @models.command(name="show")
    async def models_show(self, interaction: discord.Interaction[GenBot]) -> None:
        """Show the models members without a tier may use."""
        policy = await self.service.policy(requester(interaction).guild_id)
        await interaction.response.send_message(
            _("Models for members without a tier: {models}.", models=models_line(policy.models)),
            ephemeral=True,
        )

    @persona.command(name="set")
    @app_commands.autocomplete(model=model_autocomplete("text"))
    async def persona_set(
        self,
        interaction: discord.Interaction[GenBot],
        channel: discord.TextChannel,
        system: app_commands.Range[str, 1, MAX_PERSONA_CHARS],
        model: str | None = None,
        locked: bool = False,
    ) -> None:
        """Give a channel a persona for /chat and /text there and in its threads.

        Args:
            interaction: the interaction.
            channel: the channel (its threads get it too)
            system: the system prompt, sent before each member's own
            model: the default text model there (members may still pick another)
            locked: members may not give their own system prompt there (default: they may)
        """
        who = requester(interaction)
        await self.service.set_persona(
            who.guild_id, channel.id, system, model, locked=locked, actor=actor(interaction)
        )
        text = _("{channel} now has a persona for /chat and /text.", channel=channel.mention)
        if locked:
            text += " " + _("It is locked: members cannot give their own `system` there.")
        await interaction.response.send_message(text, ephemeral=True)

    @persona.command(name="remove")
    async def persona_remove(
        self, interaction: discord.Interaction[GenBot], channel: discord.TextChannel
    ) -> None:
        """Remove a channel's persona.

        Args:
            interaction: the interaction.
            channel: the channel
        """
        removed = await self.service.remove_persona(
            requester(interaction).guild_id, channel.id, actor=actor(interaction)
        )
        text = (
            _("Persona removed.")
            if removed
            else _("{channel} has no persona.", channel=channel.mention)
        )
        await interaction.response.send_message(text, ephemeral=True)

    @persona.command(name="show")
    async def persona_show(self, interaction: discord.Interaction[GenBot]) -> None:
        """List the channels' personas."""
        personas = await self.service.personas(requester(interaction).guild_id)
        lines = [
            f"<#{p.channel_id}> · {p.model or _('default model')}"
            f"{' · ' + _('locked') if p.locked else ''}: {truncate(p.system, 300)}"
            for p in personas
        ]
        await interaction.response.send_message(
            truncate("\n".join(lines) or _("No channel has a persona."), 2000),
            ephemeral=True,
            allowed_mentions=discord.AllowedMentions.none(),
        )

    @blocked_terms.command(name="add", description=BLOCKED_TERMS_RULE)
    async def blocked_terms_add(
        self, interaction: discord.Interaction[GenBot], term: app_commands.Range[str, 1, 100]
    ) -> None:
        """Refuse prompts containing a word or phrase (``BLOCKED_TERMS_RULE`` says how).

        Args:
            interaction: the interaction.
            term: the word or phrase
        """
        who = requester(interaction)
        stored = await self.service.add_blocked_term(who.guild_id, term, actor=actor(interaction))
        await interaction.response.send_message(
            _("Prompts containing `{term}` are now refused.", term=stored), ephemeral=True
        )

    @blocked_terms.command(name="remove")
    async def blocked_terms_remove(
        self, interaction: discord.Interaction[GenBot], term: app_commands.Range[str, 1, 100]
    ) -> None:
        """Stop refusing a word or phrase.

        Args:
            interaction: the interaction.
            term: the word or phrase
        """
        who = requester(interaction)
        removed = await self.service.remove_blocked_term(
            who.guild_id, term, actor=actor(interaction)
        )
        text = _("Term removed.") if removed else _("That term was not blocked.")
        await interaction.response.send_message(text, ephemeral=True)

    @blocked_terms.command(name="list")
    async def blocked_terms_list(self, interaction: discord.Interaction[GenBot]) -> None:
        """List the blocked words and phrases."""
        policy = await self.service.policy(requester(interaction).guild_id)
        terms = ", ".join(f"`{t}`" for t in policy.blocked_terms) or _("No blocked terms.")
        await interaction.response.send_message(truncate(terms, 2000), ephemeral=True)

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
        await self._show(interaction, None)

    async def _show(self, interaction: discord.Interaction[GenBot], note: str | None) -> None:
        guild_id = requester(interaction).guild_id
        embed = await config_show_embed(self.service, self.sequences, guild_id, self.dashboard_url)
        await interaction.response.send_message(content=note, embed=embed, ephemeral=True)


async def setup(bot: GenBot) -> None:
    """Load the extension."""
    services = bot.services
    await bot.add_cog(
        ConfigCog(
            services.guild_config,
            services.generation,
            services.sequences,
            services.guard,
            services.moderation,
            shared_key=services.default_key is not None,
            creative=services.creative,
            drafts=services.drafts,
            dashboard_url=(
                services.settings.dashboard_public_url
                if services.settings.dashboard_enabled
                else None
            ),
        )
    )
