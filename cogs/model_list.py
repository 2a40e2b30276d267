"""``/models``: the catalogue, paged with buttons (docs/genapi.md §4.1)."""

from __future__ import annotations

import discord
from discord import app_commands
from discord.ext import commands

from bot.discord.bot import GenBot
from bot.discord.choices import Pager
from bot.discord.interactions import requester
from bot.discord.render import catalogue_pages
from bot.services.billing import Billing
from bot.services.generation import GenerationService

KINDS = [
    app_commands.Choice(name="Text", value="text"),
    app_commands.Choice(name="Image", value="image"),
    app_commands.Choice(name="Video", value="video"),
]


class ModelsCog(commands.Cog):
    """Browse the models."""

    def __init__(self, bot: GenBot, generation: GenerationService, billing: Billing) -> None:
        self.bot = bot
        self.generation = generation
        self.billing = billing

    @app_commands.command(name="models")
    @app_commands.allowed_installs(guilds=True, users=True)
    @app_commands.allowed_contexts(guilds=True, dms=True, private_channels=True)
    @app_commands.choices(type=KINDS)
    async def models(
        self, interaction: discord.Interaction[GenBot], type: str | None = None
    ) -> None:
        """List the models, with their prices; those your roles may not use are marked.

        Args:
            interaction: the interaction.
            type: only the text, image or video models
        """
        who = requester(interaction)
        await interaction.response.defer(ephemeral=True, thinking=True)
        catalogue = await self.generation.catalogue(who.guild_id)
        policy = await self.billing.member_policy(who.guild_id, who.role_ids)
        pages = catalogue_pages(catalogue, type, policy.allows)
        if len(pages) == 1:
            await interaction.edit_original_response(embed=pages[0])
        else:
            pager = Pager(pages, who.user_id, self.bot.choices)
            await interaction.edit_original_response(embed=pages[0], view=pager.view())


async def setup(bot: GenBot) -> None:
    """Load the extension."""
    await bot.add_cog(ModelsCog(bot, bot.services.generation, bot.services.billing))
