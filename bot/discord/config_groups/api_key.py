"""``/config api-key``: set (in a private form, checked first) or remove the server's key."""

from __future__ import annotations

import discord
from discord import app_commands

from bot.discord.bot import GenBot
from bot.discord.config_groups.common import ConfigGroup, actor, require_manage_guild, services
from bot.discord.interactions import requester
from bot.discord.render.admin import old_key_note
from bot.discord.tree import AdmittedModal, send_ephemeral, sentence_for
from bot.i18n import N_, _
from bot.services.guild_config import GuildConfigService


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
        require_manage_guild(interaction)
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


class ApiKeyGroup(ConfigGroup):
    """``/config api-key``: this server's Generation API key."""

    def __init__(self) -> None:
        super().__init__(name="api-key", description="This server's Generation API key")

    @app_commands.command(name="set")
    async def api_key_set(self, interaction: discord.Interaction[GenBot]) -> None:
        """Set this server's API key (asked in a private form, checked before it is stored)."""
        who = requester(interaction)
        await ApiKeyModal(services(interaction).guild_config, who.guild_id).show(interaction)

    @app_commands.command(name="remove")
    async def api_key_remove(self, interaction: discord.Interaction[GenBot]) -> None:
        """Remove this server's API key (kept only until the jobs made with it finish)."""
        who = requester(interaction)
        found = services(interaction)
        change = await found.guild_config.remove_api_key(who.guild_id, actor=actor(interaction))
        if not change.had_key:
            text = _("This server has no API key of its own; nothing was removed.")
        elif found.default_key is not None:
            text = _("This server's API key was removed; requests now use the bot's shared key.")
        else:
            text = _("This server's API key was removed; commands need a key again to work.")
        await interaction.response.send_message(text + old_key_note(change), ephemeral=True)
