"""``/chat``: conversations in threads, with history the bot keeps (issue 21).

``/chat prompt`` answers, then starts a public thread from the answer; in that thread a member
message that mentions the bot or replies to one of its messages is the next turn (Discord sends
the content of such messages without the privileged Message Content intent: Gateway docs,
"Message Content Intent"), and so is ``/chat`` run there. Every turn is a ``/text`` for money
and policy (:class:`bot.services.conversations.ConversationService`). An archived or deleted
thread ends its conversation. Outside threads, a reply (ping on) to one of the bot's ``/text``
answers continues from it in a new thread started from that answer.
"""

from __future__ import annotations

import contextlib
import logging
import re
from collections.abc import Awaitable, Sequence
from decimal import Decimal
from typing import Any, Final

import discord
from discord import app_commands
from discord.ext import commands

from bot.discord.bot import GenBot
from bot.discord.choices import Option, choice_view
from bot.discord.command_access import Invoker
from bot.discord.interactions import model_autocomplete, requester, require_chat_permissions
from bot.discord.queue_status import queue_status
from bot.discord.render.buttons import CUSTOM_ID
from bot.discord.render.chat import (
    SUMMARISE_TEMPLATE,
    chat_answer,
    summarise_button,
    thread_name,
)
from bot.discord.render.parts import MessageParts
from bot.discord.render.text import one_line, truncate
from bot.discord.request_flows import CONFIRM_SECONDS, send_note
from bot.discord.tree import (
    PUBLIC_DEFER,
    RESTARTING,
    admit,
    send_ephemeral,
    sentence_for,
)
from bot.domain import Conversation, ConversationTurn, StorageError
from bot.errors import ValidationFailed, format_cents
from bot.genapi.ratelimit import QUEUE_SEAT, QueueSeat
from bot.services.conversations import ChatAnswer
from bot.services.generation import MAX_PROMPT_LENGTH, Requester, TextOptions

log = logging.getLogger(__name__)

AUTO_ARCHIVE_MINUTES: Final = 1440
"""A conversation's thread archives itself after a day without messages (Discord allows 60,
1440, 4320 or 10080 minutes), which ends the conversation."""

UNREADABLE_REPLY = (
    "I can read a reply only with its mention on (the @ in the reply bar); mention me or "
    "reply again with it on."
)

NOT_ALLOWED = (
    "This server does not let you use /chat here (Server Settings → Integrations), so I "
    "cannot answer you; nothing was charged."
)

NEED_THREADS = (
    "I need these permissions in this channel first: Create Public Threads, Send Messages in "
    "Threads."
)

NO_THREAD = (
    "I could not start a thread for this conversation (I need Create Public Threads and Send "
    "Messages in Threads in this channel); the answer above stays, and was charged."
)


def display_name(user: discord.abc.User) -> str:
    """The name a turn is labelled with: the member's display name in the server."""
    return user.display_name


def message_requester(
    message: discord.Message, channel: discord.Thread | discord.TextChannel
) -> Requester:
    """Who wrote a member message in a thread or channel, for the ``/text`` checks.

    The roles come from the message's member object (Discord sends it with guild messages);
    Manage Server is read from the member's permissions in the guild.
    """
    author = message.author
    roles: frozenset[int] = frozenset()
    manage = False
    if isinstance(author, discord.Member):
        roles = frozenset(int(role_id) for role_id in author._roles)
        manage = author.guild_permissions.manage_guild
    return Requester(
        channel.guild.id,
        channel.id,
        author.id,
        parent_channel_id=channel.parent_id if isinstance(channel, discord.Thread) else None,
        role_ids=roles,
        manage_guild=manage,
    )


class ChatCog(commands.Cog):
    """Talk with a language model in a thread that keeps the conversation."""

    def __init__(self, bot: GenBot) -> None:
        self.bot = bot
        self.conversations = bot.services.conversations

    @app_commands.command(name="chat")
    @app_commands.guild_only()
    @app_commands.autocomplete(model=model_autocomplete("text"))
    async def chat(
        self,
        interaction: discord.Interaction[GenBot],
        prompt: app_commands.Range[str, 1, MAX_PROMPT_LENGTH],
        model: str | None = None,
        system: app_commands.Range[str, 1, MAX_PROMPT_LENGTH] | None = None,
    ) -> None:
        """Talk with a language model in a thread that remembers the conversation.

        Args:
            interaction: the interaction.
            prompt: what to say; the answer starts a thread (in a conversation's thread: a turn)
            model: the text model (default: yours from /settings; in a thread, its model)
            system: a system prompt that sets the model's behaviour for the conversation
        """
        who = requester(interaction)
        channel = interaction.channel
        if isinstance(channel, discord.Thread):
            conversation = await self.conversations.get(channel.id)
            if conversation is None:
                raise ValidationFailed(
                    "This thread is not a conversation; use /chat in a text channel to start one."
                )
            interaction.extras[PUBLIC_DEFER] = True
            await interaction.response.defer(thinking=True)
            await continue_conversation(
                interaction, who, conversation, prompt, model=model, system=system
            )
            return
        require_chat_permissions(interaction)
        interaction.extras[PUBLIC_DEFER] = True
        await interaction.response.defer(thinking=True)
        note = None
        persona = await self.conversations.persona_for(who)
        if model is None and (persona is None or persona.model is None):
            # The member's default text model (issue 22), after the channel persona's, as /text.
            applied = await self.bot.services.members.apply_member_defaults(
                who, TextOptions(prompt)
            )
            model, note = applied.options.model, applied.note
        author = display_name(interaction.user)
        async with queue_status(interaction, who.user_id, who.guild_id):
            reply = await self.conversations.ask(who, author, prompt, model=model, system=system)
        await answer_interaction(interaction, reply)
        await send_note(interaction, note)
        try:
            message = await interaction.original_response()
        except discord.HTTPException as exc:
            log.warning("could not read the answer to start its thread: %s", exc)
            await send_ephemeral_followup(interaction, NO_THREAD)
            return
        # A thread started from a message has the message's id (Discord docs, "Start Thread
        # from Message"): the conversation is kept before the thread exists, so a member who
        # writes there at once already finds it.
        await keep(
            self.conversations.start(
                message.id, who.channel_id, who, author, prompt, reply, system=system
            )
        )
        try:
            await message.create_thread(
                name=thread_name(prompt), auto_archive_duration=AUTO_ARCHIVE_MINUTES
            )
        except discord.HTTPException as exc:
            log.warning("could not start a conversation thread: %s", exc)
            await self.conversations.end(message.id, "deleted")
            await send_ephemeral_followup(interaction, NO_THREAD)

    @commands.Cog.listener()
    async def on_message(self, message: discord.Message) -> None:
        """A member's message in a conversation thread that mentions or replies to the bot."""
        me = self.bot.user
        channel = message.channel
        if me is None or message.author.bot or not addressed_to(message, me.id):
            return
        if isinstance(channel, discord.TextChannel):
            await self._reply_outside_thread(message, channel, me.id)
            return
        if not isinstance(channel, discord.Thread):
            return
        conversation = await self.conversations.get(channel.id)
        if conversation is None or not await self._admitted(message):
            return
        who = message_requester(message, channel)
        author = display_name(message.author)
        text = strip_mention(message.content, me.id)
        if not await self._may_chat(message, channel):
            return
        if not text and not any(user.id == me.id for user in message.mentions):
            # A reply with its ping off does not mention the bot, so Discord sends it without
            # its content (no Message Content intent): say how to be read, charge nothing.
            await self._reply(message, MessageParts(content=UNREADABLE_REPLY))
            return
        # One "typing…" while the model answers; cosmetic, so a refusal is ignored (the reply
        # then says what is wrong).
        with contextlib.suppress(discord.HTTPException):
            await channel.typing()
        # No response to show a place in: the turn still waits as its guild's (fair turns).
        QUEUE_SEAT.set(QueueSeat(guild_id=who.guild_id))
        try:
            reply = await self.conversations.ask(who, author, text, conversation=conversation)
        except Exception as exc:  # every refusal gets its one sentence
            await self._reply(message, MessageParts(content=sentence_for(exc)))
            return
        await keep(self.conversations.record(conversation, who, author, text, reply))
        first, *rest = chat_answer(
            reply, sandbox=self.bot.services.sandbox, thread_id=conversation.thread_id
        )
        await self._reply(message, first)
        for part in rest:
            await channel.send(**part.kwargs())

    async def _reply_outside_thread(
        self, message: discord.Message, channel: discord.TextChannel, bot_id: int
    ) -> None:
        """A reply to one of the bot's ``/text`` answers continues from it, in a new thread.

        llmcord-style: the answer replied to (its prompt from the stored request, its text
        from the message) is the conversation's first turn; the thread starts from it.
        """
        resolved = message.reference.resolved if message.reference is not None else None
        if not isinstance(resolved, discord.Message) or resolved.author.id != bot_id:
            return
        if not any(user.id == bot_id for user in message.mentions):
            await self._reply(message, MessageParts(content=UNREADABLE_REPLY))
            return
        if await self.conversations.get(resolved.id) is not None:
            text = f"This conversation goes on in its thread, <#{resolved.id}>: mention me there."
            await self._reply(message, MessageParts(content=text))
            return
        ref = result_ref(resolved)
        request = None if ref is None else await self.bot.generation.result_request(ref)
        if request is None or request.kind != "text":
            return  # not a /text answer: nothing to continue from
        if not await self._admitted(message):
            return
        if not await self._may_chat(message, channel):
            return
        granted = channel.permissions_for(channel.guild.me)
        if not (granted.create_public_threads and granted.send_messages_in_threads):
            await self._reply(message, MessageParts(content=NEED_THREADS))
            return
        who = message_requester(message, channel)
        author = display_name(message.author)
        text = strip_mention(message.content, bot_id)
        metadata = resolved.interaction_metadata
        seed = ConversationTurn(
            thread_id=resolved.id,
            user_id=request.user_id,
            author=display_name(metadata.user) if metadata is not None else "member",
            text=str(request.options.get("prompt") or ""),
            answer=answer_text(resolved),
            model=str(request.options.get("model") or ""),
            prompt_tokens=0,
            completion_tokens=0,
            cost_cents=None,  # charged as the /text it was, not as a turn of this conversation
            carried=0,
            at=resolved.created_at.timestamp(),
        )
        model = request.options.get("model")
        try:
            reply = await self.conversations.ask(
                who, author, text, model=model if isinstance(model, str) else None, seed=[seed]
            )
        except Exception as exc:  # every refusal gets its one sentence
            await self._reply(message, MessageParts(content=sentence_for(exc)))
            return
        await keep(
            self.conversations.start(resolved.id, channel.id, who, author, text, reply, seed=[seed])
        )
        parts = chat_answer(reply, sandbox=self.bot.services.sandbox)
        try:
            thread = await resolved.create_thread(
                name=thread_name(seed.text or text), auto_archive_duration=AUTO_ARCHIVE_MINUTES
            )
        except discord.HTTPException as exc:
            # Paid: the answer still reaches the member, under their message.
            log.warning("could not start a conversation thread: %s", exc)
            await self.conversations.end(resolved.id, "deleted")
            for part in parts:
                await self._reply(message, part)
            return
        await thread.send(
            f"-# Continuing from <@{who.user_id}>'s reply: {truncate(one_line(text), 200)}",
            allowed_mentions=discord.AllowedMentions.none(),
        )
        for part in parts:
            await thread.send(**part.kwargs())

    async def _admitted(self, message: discord.Message) -> bool:
        """Count this turn as a command in flight, so that the shutdown waits for it.

        While the bot shuts down, the member is told instead, and nothing is sent.
        """
        if self.bot.admit_command():
            return True
        await self._reply(message, MessageParts(content=RESTARTING))
        return False

    async def _may_chat(
        self, message: discord.Message, channel: discord.Thread | discord.TextChannel
    ) -> bool:
        """Whether the author may use ``/chat`` there (Server Settings → Integrations).

        Discord applies a server's command permissions to commands only; a turn taken by a
        message spends as ``/chat`` does, so it is held to ``/chat``'s rule in the channel
        (a thread's parent), as the result buttons are (issue 20).

        A member who may not (or whose permissions cannot be read now: it fails closed, money
        is at stake) is told so in a reply.
        """
        author = message.author
        parent = channel.parent if isinstance(channel, discord.Thread) else channel
        if not isinstance(author, discord.Member) or parent is None:
            return False
        invoker = Invoker(
            guild_id=channel.guild.id,
            channel_id=parent.id,
            user_id=author.id,
            role_ids=frozenset(int(r) for r in author._roles),
            permissions=parent.permissions_for(author).value,
        )
        try:
            allowed = await self.bot.command_access.allows("chat", invoker)
        except ValidationFailed as exc:  # not readable now: refused, nothing charged
            await self._reply(message, MessageParts(content=exc.sentence))
            return False
        if not allowed:
            await self._reply(message, MessageParts(content=NOT_ALLOWED))
        return allowed

    async def _reply(self, message: discord.Message, parts: MessageParts) -> None:
        """Reply to ``message`` without pinging; if Discord refuses the reply, post it plainly."""
        try:
            await message.reply(**parts.kwargs(), mention_author=False)
        except discord.HTTPException as exc:
            log.warning("could not reply in a conversation thread: %s", exc)
            try:
                await message.channel.send(**parts.kwargs())
            except discord.HTTPException as again:
                log.warning("could not post in a conversation thread either: %s", again)

    @commands.Cog.listener()
    async def on_raw_thread_update(self, payload: discord.RawThreadUpdateEvent) -> None:
        """An archived thread ends its conversation (Gateway docs: THREAD_UPDATE)."""
        metadata = payload.data.get("thread_metadata") or {}
        if metadata.get("archived"):
            await self.conversations.end(payload.thread_id, "archived")

    @commands.Cog.listener()
    async def on_raw_thread_delete(self, payload: discord.RawThreadDeleteEvent) -> None:
        """A deleted thread ends its conversation (Gateway docs: THREAD_DELETE)."""
        await self.conversations.end(payload.thread_id, "deleted")


async def keep(stored: Awaitable[object]) -> None:
    """Await the storing of a paid turn; a failure is logged, never shown as a failure.

    The charge is in the ledger already; the member gets the answer they paid for even if its
    history could not be kept.
    """
    try:
        await stored
    except StorageError:
        log.exception("could not keep a conversation turn")


async def answer_interaction(
    interaction: discord.Interaction[GenBot], reply: ChatAnswer, thread_id: int | None = None
) -> None:
    """Edit the deferred response into the answer; its further parts as followups."""
    first, *rest = chat_answer(
        reply, sandbox=interaction.client.services.sandbox, thread_id=thread_id
    )
    await interaction.edit_original_response(**first.edit_kwargs())
    for part in rest:
        await interaction.followup.send(**part.kwargs())


async def conversation_of(interaction: discord.Interaction[GenBot]) -> Conversation | None:
    """The conversation of the thread ``interaction`` was used in; None elsewhere."""
    channel = interaction.channel
    if not isinstance(channel, discord.Thread):
        return None
    return await interaction.client.services.conversations.get(channel.id)


async def continue_conversation(
    interaction: discord.Interaction[GenBot],
    who: Requester,
    conversation: Conversation,
    prompt: str,
    *,
    model: str | None = None,
    system: str | None = None,
    max_tokens: int | None = None,
    temperature: float | None = None,
) -> None:
    """Answer ``/chat`` or ``/text`` used in a conversation's thread as its next turn.

    ``interaction`` must be deferred publicly (``PUBLIC_DEFER`` set); the turn is kept before
    the answer is shown.

    Raises:
        ConversationEnded, ValidationFailed, BudgetExceeded, GenAPIError...: as
            :meth:`ConversationService.ask`.
    """
    conversations = interaction.client.services.conversations
    author = display_name(interaction.user)
    async with queue_status(interaction, who.user_id, who.guild_id):
        reply = await conversations.ask(
            who,
            author,
            prompt,
            conversation=conversation,
            model=model,
            system=system,
            max_tokens=max_tokens,
            temperature=temperature,
        )
    await keep(conversations.record(conversation, who, author, prompt, reply))
    await answer_interaction(interaction, reply, conversation.thread_id)


def result_ref(message: discord.Message) -> str | None:
    """The result reference (``r<id>``, ``j<id>``) in a result's button custom ids, if any."""
    for component in walk_components(message.components):
        found = re.fullmatch(CUSTOM_ID, str(getattr(component, "custom_id", None) or ""))
        if found is not None:
            return found["ref"]
    return None


def answer_text(message: discord.Message) -> str:
    """A text answer as shown: its content or its card's texts, without subtext footers."""
    texts = [message.content] if message.content else []
    texts += [
        c.content for c in walk_components(message.components) if isinstance(c, discord.TextDisplay)
    ]
    lines = "\n".join(texts).splitlines()
    return "\n".join(line for line in lines if not line.startswith("-# ")).strip()


def walk_components(components: Sequence[Any]) -> list[Any]:
    """Every component of a message, nested ones (rows, containers, sections) included."""
    found: list[Any] = []
    for component in components:
        found.append(component)
        found += walk_components(getattr(component, "children", ()) or ())
    return found


def addressed_to(message: discord.Message, bot_id: int) -> bool:
    """Whether ``message`` mentions the bot or replies to one of its messages."""
    if any(user.id == bot_id for user in message.mentions):
        return True
    resolved = message.reference.resolved if message.reference is not None else None
    return isinstance(resolved, discord.Message) and resolved.author.id == bot_id


def strip_mention(content: str, bot_id: int) -> str:
    """``content`` without the bot's mentions (``<@id>``, ``<@!id>``)."""
    return re.sub(rf"<@!?{bot_id}>", "", content).strip()


async def send_ephemeral_followup(interaction: discord.Interaction[GenBot], text: str) -> None:
    """An ephemeral followup that never pings; failures are logged."""
    try:
        await interaction.followup.send(
            text, ephemeral=True, allowed_mentions=discord.AllowedMentions.none()
        )
    except discord.HTTPException as exc:
        log.warning("could not send a followup: %s", exc)


class SummariseButton(
    discord.ui.DynamicItem[discord.ui.Button[discord.ui.View]], template=SUMMARISE_TEMPLATE
):
    """Summarise earlier turns, under an answer whose call dropped some; restart-safe.

    A click shows, to the clicker only, what it would cover and its estimated price, with
    Summarise · about $x and Cancel; only then is the billed call made. Held to ``/chat``'s
    command permissions, as the result buttons are to their commands.
    """

    def __init__(self, thread_id: int) -> None:
        label, custom_id = summarise_button(thread_id)
        super().__init__(discord.ui.Button(custom_id=custom_id, label=label))
        self.thread_id = thread_id

    @classmethod
    async def from_custom_id(  # type: ignore[override]
        cls,
        interaction: discord.Interaction[GenBot],
        item: discord.ui.Button[discord.ui.View],
        match: re.Match[str],
    ) -> SummariseButton:
        """Rebuild the button from its custom id (discord.py calls this on every click)."""
        return cls(int(match["thread"]))

    async def interaction_check(self, interaction: discord.Interaction[GenBot], /) -> bool:  # type: ignore[override]
        """Admit the click as every entry point is (:func:`bot.discord.tree.admit`)."""
        return await admit(interaction)

    async def callback(self, interaction: discord.Interaction[GenBot]) -> None:  # type: ignore[override]
        """Show the price first (ephemeral), with the buttons that confirm or cancel."""
        try:
            await interaction.client.command_access.require(interaction, "chat")
            conversations = interaction.client.services.conversations
            conversation = await conversations.get(self.thread_id)
            if conversation is None:
                raise ValidationFailed("This conversation is no longer known.")
            plan = await conversations.summary_plan(conversation)
        except Exception as exc:
            await send_ephemeral(interaction, sentence_for(exc))
            return
        confirm = SummariseConfirm(self.thread_id, interaction.user.id)
        token = interaction.client.choices.open(confirm, CONFIRM_SECONDS)
        await interaction.response.send_message(
            summary_question(plan.covered, plan.estimate_cents),
            view=confirm.view(token, plan.estimate_cents),
            ephemeral=True,
        )


class SummariseConfirm:
    """Summarise · about $x / Cancel, for the clicker only (a :class:`Choice`, a few minutes).

    A second press of Summarise (a double click) pays nothing: it is told the first is
    making the summary.
    """

    SUMMARISE = "summarise"
    CANCEL = "cancel"

    def __init__(self, thread_id: int, owner_id: int) -> None:
        self.thread_id = thread_id
        self._owner_id = owner_id
        self._chosen = False

    @property
    def owner_id(self) -> int:
        """The member who clicked Summarise."""
        return self._owner_id

    def admits(self, option: str) -> bool:
        """Summarise makes a billed call: not during a shutdown; Cancel always."""
        return option == self.SUMMARISE

    def view(self, token: str, estimate_cents: Decimal | None) -> discord.ui.View:
        """The two buttons, Summarise showing the estimated price."""
        price = "" if estimate_cents is None else f" · about {format_cents(estimate_cents)}"
        return choice_view(
            token,
            [
                Option(self.SUMMARISE, f"Summarise{price}", discord.ButtonStyle.success),
                Option(self.CANCEL, "Cancel"),
            ],
        )

    async def choose(self, interaction: discord.Interaction[GenBot], option: str) -> bool:
        """Make the summary (one billed call), or cancel; the choice closes either way."""
        if self._chosen:  # a double click: the first one pays, this one is told
            await send_ephemeral(interaction, "This summary is already being made.")
            return False
        self._chosen = True
        if option == self.CANCEL:
            await interaction.response.edit_message(
                content="Cancelled; nothing was charged.", view=None
            )
            return False
        await interaction.response.defer()
        conversations = interaction.client.services.conversations
        try:
            conversation = await conversations.get(self.thread_id)
            if conversation is None:
                raise ValidationFailed("This conversation is no longer known.")
            made = await conversations.summarise(requester(interaction), conversation)
        except Exception as exc:
            await interaction.edit_original_response(content=sentence_for(exc), view=None)
            return False
        cost = format_cents(made.cost_cents)
        await interaction.edit_original_response(
            content=summary_done(made.covered, cost, made.summary, kept=made.kept), view=None
        )
        channel = interaction.channel
        if made.kept and isinstance(channel, discord.Thread):
            with contextlib.suppress(discord.HTTPException):
                await channel.send(
                    f"-# <@{interaction.user.id}> summarised {made.covered} earlier "
                    f"turn{'s' if made.covered != 1 else ''} ({cost}); they are sent as a "
                    "summary from now on.",
                    allowed_mentions=discord.AllowedMentions.none(),
                )
        return False


def summary_question(covered: int, estimate_cents: Decimal | None) -> str:
    """The question before a summary: what it covers and its estimated price."""
    turns = f"{covered} earlier turn{'s' if covered != 1 else ''}"
    price = (
        f"about {format_cents(estimate_cents)} (from this conversation's price per token)"
        if estimate_cents is not None
        else "a price not known yet (no earlier turn of this conversation was priced)"
    )
    return (
        f"Summarising replaces the {turns} no longer sent with one summary, made by one call "
        f"of the conversation's model: {price}. Summarise?"
    )


def summary_done(covered: int, cost: str, summary: str, *, kept: bool) -> str:
    """The answer after a summary was made and charged."""
    if not kept:
        return f"Someone summarised these turns meanwhile; this summary ({cost}) was not kept."
    turns = f"{covered} earlier turn{'s' if covered != 1 else ''}"
    return truncate(f"Summarised {turns} ({cost} charged):\n> {one_line(summary)}", 2000)


async def setup(bot: GenBot) -> None:
    """Load the extension."""
    await bot.add_cog(ChatCog(bot))
    bot.add_dynamic_items(SummariseButton)
