"""``/text``: synchronous text generation (docs/genapi.md §4.5)."""

from __future__ import annotations

import discord
from discord import app_commands
from discord.ext import commands

from bot.discord.bot import GenBot
from bot.discord.conversation_turns import continue_conversation, conversation_of
from bot.discord.interactions import model_autocomplete, requester
from bot.discord.request_flows import send_note, start_text
from bot.discord.tree import PUBLIC_DEFER
from bot.services.conversations import ConversationService
from bot.services.generation import MAX_PROMPT_LENGTH, TextOptions
from bot.services.member_settings import MemberSettingsService


class TextCog(commands.Cog):
    """Ask a language model."""

    def __init__(
        self,
        conversations: ConversationService,
        members: MemberSettingsService,
        *,
        sandbox: bool,
    ) -> None:
        self.conversations = conversations
        self.members = members
        self.sandbox = sandbox

    @app_commands.command(name="text")
    @app_commands.allowed_installs(guilds=True, users=True)
    @app_commands.allowed_contexts(guilds=True, dms=True, private_channels=True)
    @app_commands.autocomplete(model=model_autocomplete("text"))
    async def text(
        self,
        interaction: discord.Interaction[GenBot],
        prompt: app_commands.Range[str, 1, MAX_PROMPT_LENGTH],
        model: str | None = None,
        system: app_commands.Range[str, 1, MAX_PROMPT_LENGTH] | None = None,
        max_tokens: app_commands.Range[int, 1, 8192] | None = None,
        temperature: app_commands.Range[float, 0.0, 2.0] | None = None,
    ) -> None:
        """Generate text with a language model.

        Args:
            interaction: the interaction.
            prompt: what to ask or write about
            model: the text model (default: yours from /settings, else the first your roles may use)
            system: a system prompt that sets the model's behaviour
            max_tokens: the longest answer, in tokens (default 1000)
            temperature: randomness, from 0 to 2 (default 0.7)
        """
        who = requester(interaction)
        conversation = await conversation_of(self.conversations, interaction)
        mine = await self.members.get(interaction.user.id)
        # Private results: the answer only the member sees; a conversation's turn
        # stays in its thread, for everyone in it.
        private = mine.private and conversation is None
        interaction.extras[PUBLIC_DEFER] = not private
        await interaction.response.defer(thinking=True, ephemeral=private)
        if conversation is not None:  # in a conversation's thread: its next turn
            await continue_conversation(
                self.conversations,
                interaction,
                who,
                conversation,
                prompt,
                model=model,
                system=system,
                max_tokens=max_tokens,
                temperature=temperature,
                sandbox=self.sandbox,
            )
            return
        options = TextOptions(prompt, model, system, max_tokens, temperature)
        options = await self.conversations.with_persona(who, options)
        applied = await self.members.apply_member_defaults(who, options, mine)
        await start_text(interaction, who, applied.options)
        await send_note(interaction, applied.note)


async def setup(bot: GenBot) -> None:
    """Load the extension."""
    services = bot.services
    await bot.add_cog(TextCog(services.conversations, services.members, sandbox=services.sandbox))
