"""``/credits``: a member's credit balance, the packs on Discord's buy buttons, their purchases.

Also where Discord's purchase events arrive: ``ENTITLEMENT_CREATE`` / ``ENTITLEMENT_UPDATE``
(and any unconsumed pack on an interaction) settle the purchase, ``ENTITLEMENT_DELETE`` (a
refund) takes it back. The rules are :mod:`bot.services.credits`'; docs/credits.md.
"""

from __future__ import annotations

import asyncio
import logging

import discord
from discord import app_commands
from discord.ext import commands

from bot.discord.bot import GenBot
from bot.discord.credits import note_offer, premium_buttons, settle_reported
from bot.discord.interactions import requester
from bot.domain import CreditEntryKind
from bot.i18n import _, money, relative_time
from bot.services.billing import month_start
from bot.services.credits import CreditService

log = logging.getLogger(__name__)


class CreditsCog(commands.Cog):
    """Credit packs: the member's view, and Discord's purchase events.

    Args:
        credits: the credit service.
    """

    def __init__(self, credits: CreditService) -> None:
        self.credits = credits
        # Settlements started from interactions, referenced until they end.
        self._settling: set[asyncio.Task[None]] = set()

    @app_commands.command(name="credits")
    @app_commands.allowed_installs(guilds=True, users=True)
    @app_commands.allowed_contexts(guilds=True, dms=True, private_channels=True)
    async def credits_command(self, interaction: discord.Interaction[GenBot]) -> None:
        """Show your credit balance, buy credit packs, and see your purchases.

        Args:
            interaction: the interaction.
        """
        who = requester(interaction)
        if not self.credits.packs:
            await interaction.response.send_message(
                _("Credit packs are not offered on this bot."), ephemeral=True
            )
            return
        view_of = await self.credits.view(
            who.user_id, month_start(interaction.created_at.timestamp())
        )
        lines = [_("Your credit balance: {balance}", balance=money(view_of.balance.balance_cents))]
        if view_of.balance.held_cents:
            lines.append(
                _(
                    "Held by requests in progress: {held}",
                    held=money(view_of.balance.held_cents),
                )
            )
        if view_of.month_paid_cents:
            lines.append(
                _("Spent from it this month: {paid}", paid=money(view_of.month_paid_cents))
            )
        for sku_id, cents in view_of.packs:
            lines.append(_("Pack: {amount} of credits", amount=money(cents)) + f" (`{sku_id}`)")
        if view_of.history:
            lines.append(_("Your latest purchases and refunds:"))
            for entry in view_of.history:
                what = (
                    _("bought {amount}", amount=money(entry.amount_cents))
                    if entry.kind is CreditEntryKind.PURCHASE
                    else _("refunded {amount}", amount=money(-entry.amount_cents))
                )
                lines.append(f"- {what}, {relative_time(entry.at)}")
        view = premium_buttons(view_of.packs) or discord.utils.MISSING
        await interaction.response.send_message("\n".join(lines), ephemeral=True, view=view)
        await note_offer(interaction)  # a purchase from here shows in this server's Ledger

    @commands.Cog.listener()
    async def on_entitlement_create(self, entitlement: discord.Entitlement) -> None:
        """A purchase: credit it once, then consume it."""
        await settle_reported(self.credits, [entitlement])

    @commands.Cog.listener()
    async def on_entitlement_update(self, entitlement: discord.Entitlement) -> None:
        """An entitlement changed: settle it if it is an unconsumed pack (else nothing)."""
        await settle_reported(self.credits, [entitlement])

    @commands.Cog.listener()
    async def on_entitlement_delete(self, entitlement: discord.Entitlement) -> None:
        """A purchase refunded (or removed): take its credits back, once."""
        try:
            await self.credits.refund(entitlement.id)
        except Exception:
            log.exception("refund of entitlement %s not recorded", entitlement.id)

    @commands.Cog.listener()
    async def on_interaction(self, interaction: discord.Interaction[GenBot]) -> None:
        """Settle any unconsumed pack an interaction carries (a purchase the event missed)."""
        if not self.credits.packs or not interaction.entitlements:
            return
        task = asyncio.create_task(
            settle_reported(self.credits, interaction.entitlements, interaction.guild_id)
        )
        self._settling.add(task)
        task.add_done_callback(self._settling.discard)


async def setup(bot: GenBot) -> None:
    """Load the extension."""
    await bot.add_cog(CreditsCog(bot.services.credits))
