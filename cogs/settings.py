"""``/settings``: the member's own settings, wherever they are (issue 22, personal mode).

``/settings api-key set|remove`` manages the member's personal API key, which pays for their
requests where the member pays (:func:`bot.services.personal.who_pays`: a user install in any
server, the bot's DM, a group DM). It is the server key's flow with the member's wallet id
(:func:`bot.services.personal.wallet_id`): asked in a private form, checked with a free
``GET /models`` call (spec 4.1), stored encrypted with ``KEY_ENCRYPTION_KEY``, shown only as
"ending in XXXX", and retired, not forgotten, while jobs made with it run.
"""

from __future__ import annotations

import discord
from discord import app_commands
from discord.ext import commands

from bot.app import GenBot
from bot.errors import format_cents
from bot.render.admin import old_key_note
from bot.services.guild_config import GuildConfigService
from bot.services.personal import SET_KEY_SENTENCE, wallet_id
from bot.tree import AdmittedModal, send_ephemeral, sentence_for


class PersonalKeyModal(AdmittedModal, title="Set your Generation API key"):
    """Asks for the member's key in a modal, so it never shows as a visible command option."""

    key: discord.ui.TextInput[PersonalKeyModal] = discord.ui.TextInput(
        label="API key", placeholder="Paste the key from your account settings", max_length=256
    )

    def __init__(self, service: GuildConfigService) -> None:
        super().__init__()
        self.service = service

    async def on_submit(self, interaction: discord.Interaction[GenBot]) -> None:  # type: ignore[override]
        """Check the key with the service, then store it encrypted for the submitter; never echo it.

        The wallet is the submitter's (the modal's interaction user), whoever opened the form.
        """
        await interaction.response.defer(ephemeral=True, thinking=True)
        change = await self.service.set_api_key(wallet_id(interaction.user.id), self.key.value)
        await interaction.edit_original_response(
            content=f"Your API key is saved (ending in `{change.last4}`); it pays for your "
            "requests outside servers that added me (your own install, DMs)."
            f"{old_key_note(change)}"
        )

    async def on_error(  # type: ignore[override]
        self, interaction: discord.Interaction[GenBot], error: Exception
    ) -> None:
        """Answer with the one sentence for ``error``."""
        await send_ephemeral(interaction, sentence_for(error))


@app_commands.allowed_installs(guilds=True, users=True)
@app_commands.allowed_contexts(guilds=True, dms=True, private_channels=True)
class SettingsCog(commands.GroupCog, group_name="settings", group_description="Your own settings"):
    """The member's own settings (any member, any context)."""

    api_key = app_commands.Group(
        name="api-key", description="Your own Generation API key, for personal use"
    )

    def __init__(self, bot: GenBot) -> None:
        self.bot = bot
        self.service = bot.guild_config

    @api_key.command(name="set")
    async def api_key_set(self, interaction: discord.Interaction[GenBot]) -> None:
        """Set your API key (asked in a private form, checked before it is stored)."""
        await interaction.response.send_modal(PersonalKeyModal(self.service))

    @api_key.command(name="remove")
    async def api_key_remove(self, interaction: discord.Interaction[GenBot]) -> None:
        """Remove your API key (kept only until the jobs made with it finish)."""
        change = await self.service.remove_api_key(wallet_id(interaction.user.id))
        if not change.had_key:
            text = "You have no API key stored; nothing was removed."
        else:
            text = "Your API key was removed."
        await interaction.response.send_message(text + old_key_note(change), ephemeral=True)

    @app_commands.command(name="show")
    async def show(self, interaction: discord.Interaction[GenBot]) -> None:
        """Show your own settings: your API key (by its end) and what pays where."""
        wallet = await self.bot.services.db.guilds.settings(wallet_id(interaction.user.id))
        await interaction.response.send_message(
            personal_settings_text(
                wallet.api_key_last4,
                self.bot.services.settings.personal_daily_budget_cents,
                shared_key=self.bot.services.default_key is not None,
            ),
            ephemeral=True,
        )


def personal_settings_text(last4: str | None, allowance_cents: int, *, shared_key: bool) -> str:
    """Describe the member's personal wallet for ``/settings show`` (never the key itself).

    Args:
        last4: the last four characters of the member's key; None without a key.
        allowance_cents: ``PERSONAL_DAILY_BUDGET_CENTS``, per member per UTC day.
        shared_key: the bot has a default key (``GENAPI_API_KEY``) the allowance is spent on.
    """
    if last4 is not None:
        key = f"Your API key: ending in `{last4}`; it pays for your personal use."
    elif allowance_cents > 0 and shared_key:
        key = (
            "You have no API key of your own; the bot's owner grants you "
            f"{format_cents(allowance_cents)} a day (UTC) of personal use. "
            "Set your own with `/settings api-key set`."
        )
    else:
        key = f"You have no API key of your own. {SET_KEY_SENTENCE}"
    return (
        f"{key}\nPersonal use is where the server did not add me (your own install, DMs); "
        "in servers that added me, the server pays by its own rules."
    )


async def setup(bot: GenBot) -> None:
    """Load the extension."""
    await bot.add_cog(SettingsCog(bot))
