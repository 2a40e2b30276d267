"""``/config models``: the models members without a tier role may use (allowed, blocked)."""

from __future__ import annotations

import discord
from discord import app_commands

from bot.discord.bot import GenBot
from bot.discord.config_groups.common import ConfigGroup, actor, services, unmatched_note
from bot.discord.interactions import requester
from bot.discord.render.policy import models_line
from bot.i18n import _
from bot.services.policy import parse_models

NONE_WORDS = frozenset({"none", "nothing", "off"})
"""What an admin types for an empty block list."""


class ModelsGroup(ConfigGroup):
    """``/config models``: the server's model lists for members without a tier."""

    def __init__(self) -> None:
        super().__init__(
            name="models", description="The models members without a tier role may use"
        )

    @app_commands.command(name="allow")
    async def models_allow(self, interaction: discord.Interaction[GenBot], models: str) -> None:
        """Set the models members without a tier may use ("all" allows every model).

        Args:
            interaction: the interaction.
            models: model ids or prefixes, comma-separated (motion-pro/, acme/image-), or "all"
        """
        who = requester(interaction)
        patterns = parse_models(models)
        found = services(interaction)
        lists = await found.guild_config.set_models(
            who.guild_id, allowed=patterns, actor=actor(interaction)
        )
        note = await unmatched_note(found.generation, interaction, patterns)
        await interaction.response.send_message(
            _("Models for members without a tier: {models}.", models=models_line(lists)) + note,
            ephemeral=True,
        )

    @app_commands.command(name="block")
    async def models_block(self, interaction: discord.Interaction[GenBot], models: str) -> None:
        """Set the models members without a tier may not use ("none" blocks nothing).

        Args:
            interaction: the interaction.
            models: model ids or prefixes, comma-separated, or "none"
        """
        who = requester(interaction)
        patterns = () if models.strip().casefold() in NONE_WORDS else parse_models(models)
        found = services(interaction)
        lists = await found.guild_config.set_models(
            who.guild_id, blocked=patterns, actor=actor(interaction)
        )
        note = await unmatched_note(found.generation, interaction, patterns)
        await interaction.response.send_message(
            _("Models for members without a tier: {models}.", models=models_line(lists)) + note,
            ephemeral=True,
        )

    @app_commands.command(name="show")
    async def models_show(self, interaction: discord.Interaction[GenBot]) -> None:
        """Show the models members without a tier may use."""
        guild_id = requester(interaction).guild_id
        policy = await services(interaction).guild_config.policy(guild_id)
        await interaction.response.send_message(
            _("Models for members without a tier: {models}.", models=models_line(policy.models)),
            ephemeral=True,
        )
