"""``/chat``: conversations in threads, with history the bot keeps.

``/chat prompt`` answers, then starts a public thread from the answer; in that thread a member
message that mentions the bot or replies to one of its messages is the next turn (Discord sends
the content of such messages without the privileged Message Content intent: Gateway docs,
"Message Content Intent"), and so is ``/chat`` run there. Every turn is a ``/text`` for money
and policy (:class:`bot.services.conversations.ConversationService`). An archived or deleted
thread ends its conversation. Outside threads, a reply (ping on) to one of the bot's ``/text``
answers continues from it in a new thread started from that answer.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import re
from collections.abc import AsyncIterator, Sequence
from dataclasses import replace
from decimal import Decimal
from typing import Any, Final

import discord
from discord import app_commands
from discord.ext import commands

from bot.discord.bot import GenBot
from bot.discord.choices import ChoiceOption, choice_view
from bot.discord.command_access import Invoker, member_refusal
from bot.discord.conversation_turns import continue_conversation, display_name
from bot.discord.delivery import send_card
from bot.discord.interactions import (
    loaded_cog,
    model_autocomplete,
    requester,
    require_chat_permissions,
)
from bot.discord.render.buttons import CUSTOM_ID
from bot.discord.render.chat import (
    SUMMARISE_TEMPLATE,
    chat_answer,
    summarise_button,
    thread_name,
)
from bot.discord.render.parts import MessageParts
from bot.discord.render.text import one_line, truncate
from bot.discord.request_flows import (
    CONFIRM_SECONDS,
    InteractionDesk,
    answer_locale,
    charged,
    send_note,
    show_paid,
)
from bot.discord.tree import (
    PUBLIC_DEFER,
    RESTARTING,
    admit,
    send_ephemeral,
    sentence_for,
)
from bot.domain import Conversation
from bot.errors import ValidationFailed
from bot.genapi.ratelimit import QUEUE_SEAT, QueueSeat
from bot.i18n import N_, _, money, n_, using
from bot.services.conversations import ConversationService
from bot.services.generation import MAX_PROMPT_LENGTH, GenerationService, Requester

log = logging.getLogger(__name__)

AUTO_ARCHIVE_MINUTES: Final = 1440

"""A conversation's thread archives itself after a day without messages (Discord allows 60,
1440, 4320 or 10080 minutes), which ends the conversation."""

UNREADABLE_REPLY = N_(
    "I can read a reply only with its mention on (the @ in the reply bar); mention me or "
    "reply again with it on."
)

NOT_ALLOWED = N_(
    "This server does not let you use /chat here (Server Settings → Integrations), so I "
    "cannot answer you; nothing was charged."
)

NEED_THREADS = N_(
    "I need these permissions in this channel first: Create Public Threads, Send Messages in "
    "Threads."
)

NO_THREAD = N_(
    "I could not start a thread for this conversation (I need Create Public Threads and Send "
    "Messages in Threads in this channel); the answer above stays, and was charged."
)

ANSWER_BY_DM = N_(
    "I could not show the answer in this channel, so I sent it to your DMs (it was charged); "
    "a conversation needs the answer in the channel, so none was started."
)


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


class MessageDesk:
    """A mention's turn's side of the request (:class:`bot.services.submissions.Desk`).

    No response to show a place in: the turn still waits as its guild's (fair turns); a
    message has no error path to mark charged (a refusal is answered before any charge).
    """

    def __init__(self, who: Requester) -> None:
        self._who = who

    @contextlib.asynccontextmanager
    async def waiting(self) -> AsyncIterator[None]:
        """Wait in the key's queue as the guild's request."""
        seat = QUEUE_SEAT.set(QueueSeat(guild_id=self._who.guild_id))
        try:
            yield
        finally:
            QUEUE_SEAT.reset(seat)

    def charged(self) -> None:
        """Nothing to mark."""


class ChatCog(commands.Cog):
    """Talk with a language model in a thread that keeps the conversation."""

    def __init__(
        self,
        bot: GenBot,
        conversations: ConversationService,
        generation: GenerationService,
        *,
        sandbox: bool,
    ) -> None:
        self.bot = bot
        self.conversations = conversations
        self.generation = generation
        self.sandbox = sandbox
        # Replies to one answer, one at a time (one conversation per answer).
        self._answer_locks = KeyedLocks()

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
            await self._chat_in_thread(interaction, who, channel, prompt, model, system)
            return
        require_chat_permissions(interaction)
        interaction.extras[PUBLIC_DEFER] = True
        await interaction.response.defer(thinking=True)
        author = display_name(interaction.user)
        # One service call (the model: the member's, the persona's, else their default as
        # /text); paid once it returns: whatever fails below, the member is never told that
        # it failed.
        first = await self.conversations.first_turn(
            who,
            author,
            prompt,
            desk=InteractionDesk(interaction, who),
            model=model,
            system=system,
        )
        reply = first.reply
        # The answer starts a public thread: the server's language.
        locale = await answer_locale(interaction, who)
        answer = chat_answer(reply, sandbox=self.sandbox, locale=locale)
        message = await show_paid(interaction, who, answer)
        await send_note(interaction, first.note)
        if message is None:  # by DM (or lost): no message in the channel to start a thread from
            await send_ephemeral_followup(interaction, _(ANSWER_BY_DM))
            return
        # A thread started from a message has the message's id (Discord docs, "Start Thread
        # from Message"): the conversation is kept before the thread exists, so a member who
        # writes there at once already finds it. The message is the response, or the answer's
        # post in the channel when the response could not be edited.
        created = await self.conversations.start(
            message.id, who.channel_id, who, author, prompt, reply, system=system
        )
        try:
            await message.create_thread(
                name=thread_name(prompt), auto_archive_duration=AUTO_ARCHIVE_MINUTES
            )
        except (discord.HTTPException, ValueError) as exc:
            log.warning("could not start a conversation thread: %s", exc)
            if created:
                await self.conversations.abandon(message.id)
            await send_ephemeral_followup(interaction, _(NO_THREAD))

    async def _chat_in_thread(
        self,
        interaction: discord.Interaction[GenBot],
        who: Requester,
        thread: discord.Thread,
        prompt: str,
        model: str | None,
        system: str | None,
    ) -> None:
        """``/chat`` in a thread: the conversation's next turn, or a refusal if it is none.

        Raises:
            ValidationFailed: the thread is not a conversation's.
        """
        conversation = await self.conversations.get(thread.id)
        if conversation is None:
            raise ValidationFailed(
                N_("This thread is not a conversation; use /chat in a text channel to start one.")
            )
        interaction.extras[PUBLIC_DEFER] = True
        await interaction.response.defer(thinking=True)
        await continue_conversation(
            self.conversations,
            interaction,
            who,
            conversation,
            prompt,
            sandbox=self.sandbox,
            model=model,
            system=system,
        )

    @commands.Cog.listener()
    async def on_message(self, message: discord.Message) -> None:
        """A member's message in a conversation thread that mentions or replies to the bot.

        Answered in the server's language: a message carries no member locale, and the
        thread's replies are public.
        """
        me = self.bot.user
        if me is None or message.author.bot or not addressed_to(message, me.id):
            return
        guild_id = message.guild.id if message.guild is not None else None
        with using(await self.bot.locales.of(guild_id)):
            await self._addressed(message, me)

    async def _addressed(self, message: discord.Message, me: discord.ClientUser) -> None:
        channel = message.channel
        if isinstance(channel, discord.TextChannel):
            await self._reply_outside_thread(message, channel, me.id)
            return
        if not isinstance(channel, discord.Thread):
            return
        conversation = await self.conversations.get(channel.id)
        if conversation is None or not await self._admitted(message):
            return
        who = message_requester(message, channel)
        text = strip_mention(message.content, me.id)
        if not await self._may_chat(message, channel):
            return
        if not text and not any(user.id == me.id for user in message.mentions):
            # A reply with its ping off does not mention the bot, so Discord sends it without
            # its content (no Message Content intent): say how to be read, charge nothing.
            await self._reply(message, MessageParts(content=_(UNREADABLE_REPLY)))
            return
        # One "typing…" while the model answers; cosmetic, so a refusal is ignored (the reply
        # then says what is wrong).
        with contextlib.suppress(discord.HTTPException):
            await channel.typing()
        await self._take_turn(message, who, conversation, text)

    async def _take_turn(
        self,
        message: discord.Message,
        who: Requester,
        conversation: Conversation,
        text: str,
        *,
        header: str | None = None,
    ) -> None:
        """Answer a member's message as the next turn of ``conversation``, in its thread.

        A refusal (before any charge) is one sentence under the message. Once paid, the turn
        is kept and the answer shown (:func:`deliver_paid`): in the thread (under the message
        when it is there), else under the message, else by DM. ``header``: a line posted in
        the thread first (a turn asked from outside it says whose it is).
        """
        author = display_name(message.author)
        try:
            reply = await self.conversations.turn(
                who, author, text, conversation, desk=MessageDesk(who)
            )
        except Exception as exc:  # every refusal gets its one sentence
            await self._reply(message, MessageParts(content=sentence_for(exc)))
            return
        locale = await self.bot.locales.of(who.guild_id)  # the thread is public
        parts = chat_answer(
            reply, sandbox=self.sandbox, thread_id=conversation.thread_id, locale=locale
        )
        if message.channel.id == conversation.thread_id:
            await deliver_paid(message, parts)
            return
        thread = self.bot.get_partial_messageable(conversation.thread_id, guild_id=who.guild_id)
        await deliver_paid(message, parts, thread=thread, header=header)

    async def _reply_outside_thread(
        self, message: discord.Message, channel: discord.TextChannel, bot_id: int
    ) -> None:
        """A reply to one of the bot's answers continues from it, in the answer's thread.

        llmcord-style: the ``/text`` answer replied to (its prompt from the stored request,
        its text from the message) is the conversation's first turn; the thread starts from
        it. An answer has one conversation: replies to it are taken one at a time, and one
        that finds its conversation started (by ``/chat``, or by a reply a moment earlier)
        is that conversation's next turn, answered in its thread.
        """
        resolved = message.reference.resolved if message.reference is not None else None
        if not isinstance(resolved, discord.Message) or resolved.author.id != bot_id:
            return
        if not any(user.id == bot_id for user in message.mentions):
            await self._reply(message, MessageParts(content=_(UNREADABLE_REPLY)))
            return
        async with self._answer_locks.hold(resolved.id):
            conversation = await self.conversations.get(resolved.id)
            if conversation is not None:
                if not await self._admitted(message) or not await self._may_chat(message, channel):
                    return
                text = strip_mention(message.content, bot_id)
                who = replace(
                    message_requester(message, channel),
                    channel_id=conversation.thread_id,
                    parent_channel_id=channel.id,
                )
                await self._take_turn(
                    message, who, conversation, text, header=continuing(who.user_id, text)
                )
                return
            await self._start_from_reply(message, channel, resolved, bot_id)

    async def _start_from_reply(
        self,
        message: discord.Message,
        channel: discord.TextChannel,
        resolved: discord.Message,
        bot_id: int,
    ) -> None:
        """Start a conversation from the ``/text`` answer ``resolved`` that ``message`` replies to.

        Runs under the answer's lock (:meth:`_reply_outside_thread`).
        """
        ref = result_ref(resolved)
        request = None if ref is None else await self.generation.result_request(ref)
        if request is None or request.kind != "text":
            return  # not a /text answer: nothing to continue from
        if not await self._admitted(message):
            return
        if not await self._may_chat(message, channel):
            return
        granted = channel.permissions_for(channel.guild.me)
        if not (granted.create_public_threads and granted.send_messages_in_threads):
            await self._reply(message, MessageParts(content=_(NEED_THREADS)))
            return
        who = message_requester(message, channel)
        author = display_name(message.author)
        text = strip_mention(message.content, bot_id)
        metadata = resolved.interaction_metadata
        try:
            reply, seed = await self.conversations.ask_from_answer(
                who,
                author,
                text,
                request,
                answer=answer_text(resolved),
                answer_author=display_name(metadata.user) if metadata is not None else "member",
                answer_id=resolved.id,
                answered_at=resolved.created_at.timestamp(),
            )
        except Exception as exc:  # every refusal gets its one sentence
            await self._reply(message, MessageParts(content=sentence_for(exc)))
            return
        created = await self.conversations.start(
            resolved.id, channel.id, who, author, text, reply, seed=[seed]
        )
        locale = await self.bot.locales.of(who.guild_id)  # the thread is public
        parts = chat_answer(reply, sandbox=self.sandbox, locale=locale)
        try:
            thread = await resolved.create_thread(
                name=thread_name(seed.text or text), auto_archive_duration=AUTO_ARCHIVE_MINUTES
            )
        except discord.HTTPException as exc:
            # Paid: the answer still reaches the member, under their message. A conversation
            # this reply did not create (another process's) is not ended here.
            log.warning("could not start a conversation thread: %s", exc)
            if created:
                await self.conversations.abandon(resolved.id)
            await deliver_paid(message, parts)
            return
        await deliver_paid(message, parts, thread=thread, header=continuing(who.user_id, text))

    async def _admitted(self, message: discord.Message) -> bool:
        """Count this turn as a command in flight, so that the shutdown waits for it.

        While the bot shuts down, the member is told instead, and nothing is sent.
        """
        if self.bot.admit_command():
            return True
        await self._reply(message, MessageParts(content=_(RESTARTING)))
        return False

    async def _may_chat(
        self, message: discord.Message, channel: discord.Thread | discord.TextChannel
    ) -> bool:
        """Whether the author may use ``/chat`` there (Server Settings → Integrations).

        Discord applies a server's command permissions to commands only; a turn taken by a
        message spends as ``/chat`` does, so it is held to ``/chat``'s rule in the channel
        (a thread's parent), as the result buttons are.

        A member who may not (or whose permissions cannot be read now: it fails closed, money
        is at stake) is told so in a reply.
        """
        author = message.author
        parent = channel.parent if isinstance(channel, discord.Thread) else channel
        if not isinstance(author, discord.Member) or parent is None:
            return False
        permissions = parent.permissions_for(author).value
        # As Discord refuses /chat itself: a timeout, or no Use Application Commands there
        # (the parent's overwrites, which a thread's messages carry no bitfield of).
        barred = member_refusal(permissions, author.timed_out_until, discord.utils.utcnow())
        if barred is not None:
            await self._reply(message, MessageParts(content=barred))
            return False
        invoker = Invoker(
            guild_id=channel.guild.id,
            channel_id=parent.id,
            user_id=author.id,
            role_ids=frozenset(int(r) for r in author._roles),
            permissions=permissions,
        )
        try:
            allowed = await self.bot.command_access.allows("chat", invoker)
        except ValidationFailed as exc:  # not readable now: refused, nothing charged
            await self._reply(message, MessageParts(content=exc.user_sentence()))
            return False
        if not allowed:
            await self._reply(message, MessageParts(content=_(NOT_ALLOWED)))
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
        """A deleted thread's conversation ends and its turns are purged (THREAD_DELETE).

        Nothing is stored for the thread afterwards
        (:meth:`bot.services.conversations.ConversationService.purge`).
        """
        await self.conversations.purge(payload.thread_id)


class KeyedLocks:
    """One :class:`asyncio.Lock` per key, held by one task at a time and forgotten when free.

    In one process: a guild's gateway events reach one shard, and each shard one process, so
    the members' messages about one answer all arrive here.
    """

    def __init__(self) -> None:
        self._locks: dict[int, tuple[asyncio.Lock, int]] = {}

    @contextlib.asynccontextmanager
    async def hold(self, key: int) -> AsyncIterator[None]:
        """Hold ``key``'s lock for the ``async with`` block, waiting for the holder first."""
        lock, users = self._locks.get(key, (asyncio.Lock(), 0))
        self._locks[key] = (lock, users + 1)
        try:
            async with lock:
                yield
        finally:
            lock, users = self._locks[key]
            if users == 1:
                del self._locks[key]
            else:
                self._locks[key] = (lock, users - 1)

    def __len__(self) -> int:
        return len(self._locks)


def continuing(user_id: int, text: str) -> str:
    """The line before a turn asked from outside its thread: whose reply it answers."""
    return _(
        "-# Continuing from <@{user}>'s reply: {text}",
        user=user_id,
        text=truncate(one_line(text), 200),
    )


async def deliver_paid(
    message: discord.Message,
    parts: Sequence[MessageParts],
    *,
    thread: discord.abc.Messageable | None = None,
    header: str | None = None,
) -> None:
    """Show a paid turn's answer to ``message`` somewhere, whatever fails; never raises.

    Routes, each taking over the parts not shown yet, as ``/text``'s
    (:func:`bot.discord.request_flows.show_paid`): ``thread`` when given (after ``header``);
    then the message's channel, the first part as a reply to it; then the author's DM,
    without the Summarise button (it acts in the thread). Only when all fail is it lost,
    logged as an error (the charge is in the ledger). Nothing pings.

    Args:
        message: the member's message the answer is to.
        parts: the answer (:func:`bot.discord.render.chat.chat_answer`).
        thread: the conversation's thread, when ``message`` is outside it.
        header: a line posted in ``thread`` before the answer.
    """
    left = list(parts)
    if thread is not None:
        try:
            if header is not None:
                await thread.send(header, allowed_mentions=discord.AllowedMentions.none())
            while left:
                await send_card(thread, left[0])
                left.pop(0)
            return
        except Exception as exc:
            log.warning("a paid answer was not posted in its thread (%s); replying instead", exc)
    try:
        while left:
            if len(left) == len(parts):
                try:
                    await message.reply(**left[0].kwargs(), mention_author=False)
                except discord.HTTPException as exc:
                    log.warning("could not reply with a paid answer (%s); posting it", exc)
                    await send_card(message.channel, left[0])
            else:
                await send_card(message.channel, left[0])
            left.pop(0)
        return
    except Exception as exc:
        log.warning("a paid answer was not posted in its channel (%s); sending it by DM", exc)
    try:
        await message.author.send(
            _(
                "Your answer from <#{channel}>, which could not be shown there:",
                channel=message.channel.id,
            ),
            allowed_mentions=discord.AllowedMentions.none(),
        )
        while left:
            await send_card(message.author, replace(left[0], action_buttons=()))
            left.pop(0)
    except Exception as exc:
        log.error("a paid conversation turn could not be shown anywhere (%s)", exc)


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
        """Show the price first (ephemeral), with the buttons that confirm or cancel.

        Deferred before the command permissions are checked (a check may ask Discord, and the
        acknowledgement must come within 3 s).
        """
        await interaction.response.defer(ephemeral=True, thinking=True)
        try:
            await interaction.client.command_access.require(interaction, "chat")
            conversations = loaded_cog(interaction, ChatCog).conversations
            conversation = await conversations.get(self.thread_id)
            if conversation is None:
                raise ValidationFailed(N_("This conversation is no longer known."))
            plan = await conversations.summary_plan(conversation)
        except Exception as exc:
            await send_ephemeral(interaction, sentence_for(exc))
            return
        confirm = SummariseConfirm(conversations, self.thread_id, interaction.user.id)
        token = interaction.client.choices.open(confirm, CONFIRM_SECONDS)
        await interaction.edit_original_response(
            content=summary_question(plan.covered, plan.estimate_cents),
            view=confirm.view(token, plan.estimate_cents),
        )


class SummariseConfirm:
    """Summarise · about $x / Cancel, for the clicker only (a pending choice, a few minutes).

    A second press of Summarise (a double click) pays nothing: it is told the first is
    making the summary.
    """

    SUMMARISE = "summarise"
    CANCEL = "cancel"

    def __init__(self, conversations: ConversationService, thread_id: int, owner_id: int) -> None:
        self._conversations = conversations
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
        price = (
            ""
            if estimate_cents is None
            else " · " + _("about {amount}", amount=money(estimate_cents))
        )
        return choice_view(
            token,
            [
                ChoiceOption(self.SUMMARISE, f"Summarise{price}", discord.ButtonStyle.success),
                ChoiceOption(self.CANCEL, "Cancel"),
            ],
        )

    async def choose(self, interaction: discord.Interaction[GenBot], option: str) -> bool:
        """Make the summary (one billed call), or cancel; the choice closes either way."""
        if self._chosen:  # a double click: the first one pays, this one is told
            await send_ephemeral(interaction, _("This summary is already being made."))
            return False
        self._chosen = True
        if option == self.CANCEL:
            await interaction.response.edit_message(
                content=_("Cancelled; nothing was charged."), view=None
            )
            return False
        await interaction.response.defer()
        conversations = self._conversations
        try:
            conversation = await conversations.get(self.thread_id)
            if conversation is None:
                raise ValidationFailed(N_("This conversation is no longer known."))
            who = requester(interaction)
            made = await conversations.summarise(who, conversation)
        except Exception as exc:
            await interaction.edit_original_response(content=sentence_for(exc), view=None)
            return False
        # Paid: the summary is shown whatever fails (the response, else the thread, else DM).
        charged(interaction)
        cost = money(made.cost_cents)
        done = summary_done(made.covered, cost, made.summary, kept=made.kept)
        await show_paid(interaction, who, [MessageParts(content=done)])
        channel = interaction.channel
        if made.kept and isinstance(channel, discord.Thread):
            with contextlib.suppress(discord.HTTPException):
                with using(await interaction.client.locales.of(interaction.guild_id)):  # public
                    said = n_(
                        "-# <@{user}> summarised {count} earlier turn ({cost}); it is sent as "
                        "a summary from now on.",
                        "-# <@{user}> summarised {count} earlier turns ({cost}); they are sent "
                        "as a summary from now on.",
                        made.covered,
                        user=interaction.user.id,
                        cost=cost,
                    )
                await channel.send(
                    said,
                    allowed_mentions=discord.AllowedMentions.none(),
                )
        return False


def summary_question(covered: int, estimate_cents: Decimal | None) -> str:
    """The question before a summary: what it covers and its estimated price."""
    price = (
        _(
            "about {amount} (from this conversation's price per token)",
            amount=money(estimate_cents),
        )
        if estimate_cents is not None
        else _("a price not known yet (no earlier turn of this conversation was priced)")
    )
    return n_(
        "Summarising replaces the {count} earlier turn no longer sent with one summary, made by "
        "one call of the conversation's model: {price}. Summarise?",
        "Summarising replaces the {count} earlier turns no longer sent with one summary, made "
        "by one call of the conversation's model: {price}. Summarise?",
        covered,
        price=price,
    )


def summary_done(covered: int, cost: str, summary: str, *, kept: bool) -> str:
    """The answer after a summary was made and charged."""
    if not kept:
        return _(
            "Someone summarised these turns meanwhile; this summary ({cost}) was not kept.",
            cost=cost,
        )
    said = n_(
        "Summarised {count} earlier turn ({cost} charged):",
        "Summarised {count} earlier turns ({cost} charged):",
        covered,
        cost=cost,
    )
    return truncate(f"{said}\n> {one_line(summary)}", 2000)


async def setup(bot: GenBot) -> None:
    """Load the extension."""
    services = bot.services
    await bot.add_cog(
        ChatCog(
            bot,
            services.conversations,
            services.generation,
            sandbox=services.sandbox,
        )
    )
    bot.add_dynamic_items(SummariseButton)
