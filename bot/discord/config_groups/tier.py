"""``/config tier``: limits and models for the members of a role (the most generous wins)."""

from __future__ import annotations

import discord
from discord import app_commands

from bot.discord.bot import GenBot
from bot.discord.config_groups.common import ConfigGroup, actor, services, unmatched_note
from bot.discord.interactions import requester
from bot.discord.render.policy import tier_line, tiers_embed
from bot.domain import UNSET, LimitUpdate
from bot.errors import ValidationFailed
from bot.i18n import N_, _
from bot.services.guild_config import DEFAULT_WORDS, ModelsUpdate, parse_allowance
from bot.services.policy import parse_models


class TierGroup(ConfigGroup):
    """``/config tier``: role tiers, each with its own allowances, video cap and models."""

    def __init__(self) -> None:
        super().__init__(name="tier", description="Limits and models for members of a role")

    @app_commands.command(name="set")
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
        found = services(interaction)
        tier = await found.guild_config.set_tier(
            who.guild_id,
            role.id,
            role.name,
            daily_per_user=daily,
            monthly_per_user=monthly,
            videos_at_once=UNSET if videos_at_once is None else videos_at_once,
            models=new_models,
            actor=actor(interaction),
        )
        note = await unmatched_note(found.generation, interaction, tier.models or ())
        await interaction.response.send_message(
            _("Tier saved. {tier}", tier=tier_line(tier)) + note, ephemeral=True
        )

    @app_commands.command(name="remove")
    async def tier_remove(
        self, interaction: discord.Interaction[GenBot], role: discord.Role
    ) -> None:
        """Remove a role's tier; its members get the server defaults (or their other tiers).

        Args:
            interaction: the interaction.
            role: the role whose tier to remove
        """
        who = requester(interaction)
        removed = await services(interaction).guild_config.remove_tier(
            who.guild_id, role.id, actor=actor(interaction)
        )
        text = (
            _("Tier of {role} removed.", role=role.mention)
            if removed
            else _("{role} has no tier.", role=role.mention)
        )
        await interaction.response.send_message(text, ephemeral=True)

    @app_commands.command(name="list")
    async def tier_list(self, interaction: discord.Interaction[GenBot]) -> None:
        """List the role tiers."""
        guild_id = requester(interaction).guild_id
        policy = await services(interaction).guild_config.policy(guild_id)
        await interaction.response.send_message(embed=tiers_embed(policy), ephemeral=True)
