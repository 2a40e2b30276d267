"""Draft → Final: the **Final** button under a draft's results (docs/creative.md).

``draft:true`` is an option of ``/image`` and ``/video`` (their cogs), ``/config draft`` a
``/config`` subcommand; this extension registers the restart-safe Final button
(:class:`bot.discord.draft_flow.FinalButton`).
"""

from __future__ import annotations

from discord.ext import commands

from bot.discord.bot import GenBot
from bot.discord.draft_flow import FinalButton


class DraftCog(commands.Cog):
    """Registers the Final button."""

    def __init__(self, bot: GenBot) -> None:
        self.bot = bot

    async def cog_load(self) -> None:
        """Add the dynamic button."""
        self.bot.add_dynamic_items(FinalButton)

    async def cog_unload(self) -> None:
        """Remove it again."""
        self.bot.remove_dynamic_items(FinalButton)


async def setup(bot: GenBot) -> None:
    """Load the extension."""
    await bot.add_cog(DraftCog(bot))
