"""``/usage``: what the server and its members spent (the ledger)."""

from __future__ import annotations

import contextlib

import discord
from discord import app_commands
from discord.ext import commands

from bot.discord.bot import GenBot
from bot.discord.interactions import requester
from bot.discord.render.admin import usage_embed
from bot.discord.render.chat import thread_lines
from bot.errors import BotError, ValidationFailed
from bot.i18n import N_, _, money, number
from bot.services.billing import Billing, month_start
from bot.services.conversations import ConversationService
from bot.services.credits import CreditService
from bot.services.generation import Requester
from bot.services.guard import SpendGuard
from bot.services.keys import KeyResolver
from bot.services.personal import is_personal


class UsageCog(commands.Cog):
    """Spending reports."""

    def __init__(
        self,
        keys: KeyResolver,
        billing: Billing,
        conversations: ConversationService,
        spend_guard: SpendGuard,
        credits: CreditService,
    ) -> None:
        self.credits = credits
        self.keys = keys
        self.billing = billing
        self.conversations = conversations
        self.spend_guard = spend_guard

    @app_commands.command(name="usage")
    @app_commands.allowed_installs(guilds=True, users=True)
    @app_commands.allowed_contexts(guilds=True, dms=True, private_channels=True)
    async def usage(
        self, interaction: discord.Interaction[GenBot], user: discord.Member | None = None
    ) -> None:
        """Show spending this month and today; admins see the whole server or anyone.

        Args:
            interaction: the interaction.
            user: whose spending (admins only, for anyone but yourself)
        """
        who = requester(interaction)
        if is_personal(who.guild_id):
            await self._personal(interaction, who)
            return
        is_admin = interaction.permissions.manage_guild
        if user is not None and user.id != who.user_id and not is_admin:
            raise ValidationFailed(N_("Seeing other members' usage needs Manage Server."))
        if user is None and not is_admin:
            user_id: int | None = who.user_id
        else:
            user_id = None if user is None else user.id
        fingerprint = None
        with contextlib.suppress(BotError):
            key = await self.keys.resolve(who.guild_id)
            # The balance of the bot's shared key is its owner's business, not the server's.
            fingerprint = key.fingerprint if key.source == "guild" else None
        report = await self.billing.report(
            who.guild_id, user_id, key_fingerprint=fingerprint if is_admin else None
        )
        embed = usage_embed(report, user_id=user_id)
        if is_admin and fingerprint is not None:
            runway = await self.spend_guard.runway(fingerprint)
            if runway is not None and runway.days_left is not None:
                embed.add_field(
                    name=_("The key's runway"),
                    value=_(
                        "about {days} days at this week's pace",
                        days=number(round(runway.days_left, 1)),
                    ),
                    inline=False,
                )
        await self._balance_spend(embed, user_id, interaction)
        threads = await self.conversations.spend_by_thread(who.guild_id, user_id)
        if threads:  # conversations' spend this month, by thread
            embed.add_field(name=_("Conversations this month"), value=thread_lines(threads))
        await interaction.response.send_message(embed=embed, ephemeral=True)

    async def _balance_spend(
        self, embed: discord.Embed, user_id: int | None, interaction: discord.Interaction[GenBot]
    ) -> None:
        """Add what the member's credit balance paid this month (the markup included)."""
        if user_id is None or not self.credits.packs:
            return
        since = month_start(interaction.created_at.timestamp())
        paid, _cost = await self.credits.spent_since(user_id, since)
        if paid:
            embed.add_field(
                name=_("Paid from the credit balance this month"),
                value=money(paid),
                inline=False,
            )

    async def _personal(self, interaction: discord.Interaction[GenBot], who: Requester) -> None:
        """Show the member's own spending from their wallet, never a server's.

        On their own key, the balance the service last reported for it (``remaining_credits_cents``
        of their last charge; no endpoint reports a balance, docs/genapi.md §6.2). The bot's
        default key's balance is the owner's business.
        """
        fingerprint = None
        with contextlib.suppress(BotError):
            key = await self.keys.resolve(who.guild_id)
            fingerprint = key.fingerprint if key.source == "guild" else None
        report = await self.billing.report(who.guild_id, who.user_id, key_fingerprint=fingerprint)
        await interaction.response.send_message(
            embed=usage_embed(report, user_id=who.user_id), ephemeral=True
        )


async def setup(bot: GenBot) -> None:
    """Load the extension."""
    services = bot.services
    await bot.add_cog(
        UsageCog(
            services.keys,
            services.billing,
            services.conversations,
            services.guard,
            services.credits,
        )
    )
