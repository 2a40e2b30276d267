"""``/config blocked-terms``: words or phrases that refuse a prompt (``BLOCKED_TERMS_RULE``)."""

from __future__ import annotations

import discord
from discord import app_commands

from bot.discord.bot import GenBot
from bot.discord.config_groups.common import ConfigGroup, actor, services
from bot.discord.interactions import requester
from bot.discord.render.text import truncate
from bot.i18n import _
from bot.services.policy import BLOCKED_TERMS_RULE


class BlockedTermsGroup(ConfigGroup):
    """``/config blocked-terms``: the server's blocked words and phrases."""

    def __init__(self) -> None:
        super().__init__(name="blocked-terms", description="Words or phrases that refuse a prompt")

    @app_commands.command(name="add", description=BLOCKED_TERMS_RULE)
    async def blocked_terms_add(
        self, interaction: discord.Interaction[GenBot], term: app_commands.Range[str, 1, 100]
    ) -> None:
        """Refuse prompts containing a word or phrase (``BLOCKED_TERMS_RULE`` says how).

        Args:
            interaction: the interaction.
            term: the word or phrase
        """
        who = requester(interaction)
        stored = await services(interaction).guild_config.add_blocked_term(
            who.guild_id, term, actor=actor(interaction)
        )
        await interaction.response.send_message(
            _("Prompts containing `{term}` are now refused.", term=stored), ephemeral=True
        )

    @app_commands.command(name="remove")
    async def blocked_terms_remove(
        self, interaction: discord.Interaction[GenBot], term: app_commands.Range[str, 1, 100]
    ) -> None:
        """Stop refusing a word or phrase.

        Args:
            interaction: the interaction.
            term: the word or phrase
        """
        who = requester(interaction)
        removed = await services(interaction).guild_config.remove_blocked_term(
            who.guild_id, term, actor=actor(interaction)
        )
        text = _("Term removed.") if removed else _("That term was not blocked.")
        await interaction.response.send_message(text, ephemeral=True)

    @app_commands.command(name="list")
    async def blocked_terms_list(self, interaction: discord.Interaction[GenBot]) -> None:
        """List the blocked words and phrases."""
        guild_id = requester(interaction).guild_id
        policy = await services(interaction).guild_config.policy(guild_id)
        terms = ", ".join(f"`{t}`" for t in policy.blocked_terms) or _("No blocked terms.")
        await interaction.response.send_message(truncate(terms, 2000), ephemeral=True)
