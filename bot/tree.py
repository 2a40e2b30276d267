"""The command tree: the one place an app-command error becomes the user's sentence."""

from __future__ import annotations

import logging
import secrets
import time
from typing import TYPE_CHECKING

import discord
from discord import app_commands

from bot.errors import BotError, user_message
from bot.genapi.errors import GenAPIError

if TYPE_CHECKING:
    from bot.app import GenBot

log = logging.getLogger(__name__)

PUBLIC_DEFER = "public_defer"
"""``interaction.extras`` flag: the command deferred publicly, so an error replaces the public
"thinking…" message with an ephemeral one rather than showing it to everyone."""


def sentence_for(error: Exception) -> str:
    """Return the ephemeral sentence for ``error``; log what the user cannot act on.

    Takes app-command errors and the raw exceptions of views and modals alike.
    """
    original = error.original if isinstance(error, app_commands.CommandInvokeError) else error
    if isinstance(original, BotError | GenAPIError):
        if isinstance(original, GenAPIError):
            log.info("upstream refused a command: %s", original)
        return user_message(original, now=time.time())
    if isinstance(error, app_commands.MissingPermissions):
        return "You need the Manage Server permission for this."
    if isinstance(error, app_commands.NoPrivateMessage):
        return "This command works in servers only."
    if isinstance(error, app_commands.TransformerError | app_commands.CheckFailure):
        return str(error) or "That option is not valid."
    error_id = secrets.token_hex(4)
    log.error("command failed (error id %s)", error_id, exc_info=original)
    return f"Something went wrong on our side (error id `{error_id}`); it has been logged."


RESTARTING = "The bot is restarting; try again in a minute."
"""The answer to a command that arrives during a shutdown (it is not run)."""


class GenTree(app_commands.CommandTree["GenBot"]):
    """Command tree whose :meth:`on_error` answers every failure with one ephemeral sentence."""

    async def interaction_check(self, interaction: discord.Interaction[GenBot], /) -> bool:
        """Run a command only while the bot is not shutting down (then say so, ephemerally)."""
        if self.client.admit_command():
            return True
        if interaction.type is discord.InteractionType.application_command:
            await send_ephemeral(interaction, RESTARTING)
        return False

    async def on_error(
        self, interaction: discord.Interaction[GenBot], error: app_commands.AppCommandError
    ) -> None:
        """Tell the user what went wrong, ephemerally, whatever state the interaction is in."""
        await send_ephemeral(interaction, sentence_for(error))


async def send_ephemeral(interaction: discord.Interaction[GenBot], text: str) -> None:
    """Answer ``interaction`` with ``text`` visible only to the user, whether or not it deferred.

    After a public deferral the "thinking…" message is deleted first, so that the error is not
    left for everyone to see (Discord cannot make a deferred response ephemeral afterwards).
    """
    try:
        if not interaction.response.is_done():
            await interaction.response.send_message(
                text, ephemeral=True, allowed_mentions=discord.AllowedMentions.none()
            )
            return
        if interaction.extras.get(PUBLIC_DEFER):
            await interaction.delete_original_response()
        await interaction.followup.send(
            text, ephemeral=True, allowed_mentions=discord.AllowedMentions.none()
        )
    except discord.HTTPException as exc:
        log.warning("could not deliver an error message: %s", exc)
