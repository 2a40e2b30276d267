"""Conversations (``/chat`` in threads): history the bot keeps and folds into each call.

The API takes no messages array (docs/genapi.md §4.5: ``prompt`` and ``system``), so each turn folds
the stored history into ``prompt`` as labelled turns ending with the assistant's label, and puts one
line explaining that transcript into ``system``. The labels are written with brackets (``⟦`` ``⟧``)
that are removed from every member's text, name and model answer before folding, so no one can forge
a turn. The folded prompt is bounded (``CHAT_MAX_PROMPT_CHARS``): the oldest turns are dropped
first, and the answer says how many.

Every turn is a ``/text`` for money and policy: it goes through
:meth:`bot.services.generation.GenerationService.text`, the same reservation, budgets, tiers,
model access, cooldown and one ledger row per call; blocked terms are checked on the new turn.
No Discord here: the cog (``cogs/chat.py``) turns interactions and messages into calls.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from dataclasses import dataclass, replace
from decimal import Decimal

from bot.clock import Clock
from bot.domain import Conversation, ConversationTurn, Persona, ResultRequest, StorageError
from bot.errors import ValidationFailed
from bot.genapi.catalogue import CatalogueCache
from bot.genapi.wire import Catalogue
from bot.i18n import N_
from bot.services.billing import month_start
from bot.services.generation import (
    MAX_PROMPT_LENGTH,
    GenerationService,
    Requester,
    TextOptions,
)
from bot.services.member_settings import MemberSettingsService
from bot.services.submissions import Desk
from bot.storage import Database

log = logging.getLogger(__name__)

OPEN, CLOSE = "⟦", "⟧"

"""The brackets of the turn labels; never left in text that is folded (see :func:`unforgeable`)."""

ASSISTANT_LABEL = f"{OPEN}assistant{CLOSE}"

MAX_AUTHOR_CHARS = 64
"""A label's name is cut to this: a display name is at most 32 characters on Discord."""

TRANSCRIPT_LINE = (
    f"The prompt is the transcript of a conversation in a Discord thread: each turn begins with "
    f"a line {OPEN}user: name{CLOSE} (a member, several may take part) or {ASSISTANT_LABEL} "
    f"(you). Write only your next turn, without its label."
)
"""The line of ``system`` that explains the transcript to the model."""

SYSTEM_LIMIT = 2 * MAX_PROMPT_LENGTH
"""Characters of the folded ``system``: the member's system (at most 4,000) and the line above;
the spec shows no maximum (the emulator's is 8,000, docs/genapi-choices.md)."""

CHARS_PER_TOKEN = 3
"""Characters assumed per token when a model's context window (tokens) bounds a prompt
(characters): fewer than English's usual 4, so that the bound holds for denser text too."""

DEFAULT_MAX_TOKENS = 1000
"""docs/genapi.md §8.2: ``max_tokens`` defaults to 1000; the answer's room in the context window."""


def prompt_bound(
    max_prompt_chars: int, context_window: int | None, max_tokens: int | None = None
) -> int:
    """The most characters a folded prompt may have: the setting, and the model's window.

    Args:
        max_prompt_chars: ``CHAT_MAX_PROMPT_CHARS``.
        context_window: the model's context window, tokens, where the catalogue gives one
            (a field the service does not show, docs/genapi.md §2.1); None: not known.
        max_tokens: the answer's ``max_tokens``; None: the spec's default.

    Returns:
        ``max_prompt_chars``, lowered to what the window leaves after the answer's tokens
        (at :data:`CHARS_PER_TOKEN` characters per token).
    """
    if context_window is None:
        return max_prompt_chars
    room = context_window - (max_tokens or DEFAULT_MAX_TOKENS)
    return max(0, min(max_prompt_chars, room * CHARS_PER_TOKEN))


def context_window(catalogue: Catalogue | None, model: str | None) -> int | None:
    """The context window (tokens) the catalogue gives for a text model, if any.

    Read from the entry's extra field ``context_window`` (the spec shows no such field; a
    catalogue that has one is used, anything but a positive integer is ignored).
    """
    if catalogue is None or model is None:
        return None
    entry = catalogue.text_model(model)
    value = (entry.model_extra or {}).get("context_window") if entry is not None else None
    return value if isinstance(value, int) and not isinstance(value, bool) and value > 0 else None


END_REASONS = {
    "archived": "its thread was archived",
    "deleted": "its thread was deleted",
    "turn cap": "it reached its turn limit",
}


def unforgeable(text: str) -> str:
    """``text`` without the label brackets, so that it cannot start a turn of its own.

    ``⟦`` and ``⟧`` become ``[`` and ``]``: what a member meant stays readable.
    """
    return text.replace(OPEN, "[").replace(CLOSE, "]")


def user_label(author: str) -> str:
    """The label of a member's turn: ``⟦user: name⟧`` (name on one line, at most 64 chars)."""
    name = " ".join(unforgeable(author).split())[:MAX_AUTHOR_CHARS] or "member"
    return f"{OPEN}user: {name}{CLOSE}"


SUMMARY_LABEL = f"{OPEN}summary of earlier turns{CLOSE}"

SUMMARY_MAX_TOKENS = 400
"""``max_tokens`` of a summary call: a paragraph or two."""

SUMMARY_SYSTEM = (
    "Summarise the conversation transcript you are given in at most two short paragraphs: "
    "who asked what, what was answered and decided, names and numbers that matter later. "
    "Write only the summary."
)


def summary_block(summary: str) -> str:
    """A summary as folded, before the turns it stands for would have been."""
    return f"{SUMMARY_LABEL}\n{unforgeable(summary)}\n"


def turn_block(turn: ConversationTurn) -> str:
    """One stored turn as folded: the member's label and text, the assistant's and its answer."""
    return (
        f"{user_label(turn.author)}\n{unforgeable(turn.text)}\n"
        f"{ASSISTANT_LABEL}\n{unforgeable(turn.answer)}\n"
    )


@dataclass(frozen=True, slots=True)
class Folded:
    """What one call sends (docs/genapi.md §4.5) and how much history it carries.

    Attributes:
        prompt: the transcript: the carried turns, the new turn, the assistant's label.
        system: the persona, the member's system, :data:`TRANSCRIPT_LINE`, blank-line apart.
        carried: earlier turns in ``prompt``.
        dropped: earlier turns left out to keep ``prompt`` within its bound (oldest first).
    """

    prompt: str
    system: str
    carried: int
    dropped: int


def fold(
    history: Sequence[ConversationTurn],
    author: str,
    text: str,
    *,
    limit: int,
    system: str | None = None,
    persona: str | None = None,
    summary: str | None = None,
) -> Folded:
    """Fold the history and a new turn into a prompt of at most ``limit`` characters.

    Args:
        history: the conversation's turns, oldest first.
        author: the new turn's author (display name).
        text: the new turn.
        limit: the bound on the prompt, characters (``CHAT_MAX_PROMPT_CHARS``).
        system: the member's system prompt, if any.
        persona: the channel's persona, which comes before the member's system.
        summary: the summary standing for the turns before ``history`` (Summarise), sent
            first and dropped before any turn when the bound is reached.

    Returns:
        The prompt and system; the oldest turns are dropped first until the prompt fits.

    Raises:
        ValidationFailed: the new turn alone does not fit in ``limit``.
    """
    new = f"{user_label(author)}\n{unforgeable(text.strip())}\n{ASSISTANT_LABEL}"
    room = limit - len(new)
    if room < 0:
        raise ValidationFailed(
            N_("That message is too long (at most {limit} characters in all)."), limit=limit
        )
    blocks = [turn_block(turn) for turn in history]
    carried = 0
    for block in reversed(blocks):
        if len(block) > room:
            break
        room -= len(block)
        carried += 1
    kept = blocks[len(blocks) - carried :]
    if summary and carried == len(blocks):
        block = summary_block(summary)
        if len(block) <= room:
            kept.insert(0, block)
    parts = [p.strip() for p in (persona, system) if p and p.strip()]
    return Folded(
        prompt="".join(kept) + new,
        system="\n\n".join([*parts, TRANSCRIPT_LINE]),
        carried=carried,
        dropped=len(blocks) - carried,
    )


def cut_answer(content: str) -> str:
    """The model's answer up to where it starts writing another turn by itself.

    A leading assistant label is removed; the answer ends before the next label bracket
    (``⟦user: …⟧`` or another ``⟦assistant⟧``), and no bracket is left in what is kept.
    """
    text = content.lstrip()
    if text.startswith(ASSISTANT_LABEL):
        text = text[len(ASSISTANT_LABEL) :]
    cut = text.find(OPEN)
    if cut >= 0:
        text = text[:cut]
    return unforgeable(text).strip()


@dataclass(frozen=True, slots=True)
class ChatAnswer:
    """A turn answered and charged (the charge is in the ledger).

    Attributes:
        answer: the model's answer, cut (:func:`cut_answer`); may be empty.
        model: the model that answered.
        cost_cents: the charge the service reported, cents.
        carried: earlier turns the call carried.
        dropped: earlier turns no longer sent (the bound).
        prompt_chars: the length of the prompt sent, characters.
        prompt_tokens: ``usage.prompt_tokens`` (docs/genapi.md §2.5).
        completion_tokens: ``usage.completion_tokens``.
        by_credits: the member's credit balance paid it (``members``, or
            ``server-then-members`` past the server's budgets; docs/credits.md); then
            ``cost_cents`` is what the balance paid, the markup included.
    """

    answer: str
    model: str
    cost_cents: Decimal
    carried: int
    dropped: int
    prompt_chars: int
    prompt_tokens: int
    completion_tokens: int
    by_credits: bool = False

    @property
    def history(self) -> int:
        """Earlier turns the conversation had: carried and dropped."""
        return self.carried + self.dropped


SUMMARY_INSTRUCTION = f"Summarise the transcript above; {ASSISTANT_LABEL} marks the model's turns."


@dataclass(frozen=True, slots=True)
class SummaryPlan:
    """What the Summarise button would send.

    Attributes:
        prompt: the transcript to summarise (the previous summary, the covered turns).
        upto: the conversation's first turns the new summary stands for.
        covered: turns newly covered.
        estimate_cents: the estimated price, cents; None before any priced turn.
    """

    prompt: str
    upto: int
    covered: int
    estimate_cents: Decimal | None


@dataclass(frozen=True, slots=True)
class SummaryResult:
    """A summary made and charged (the charge is in the ledger).

    Attributes:
        summary: the text kept.
        covered: turns it newly covers.
        cost_cents: what the call was charged, cents.
        kept: False when a summary as long was made meanwhile (this one was paid, not kept).
    """

    summary: str
    covered: int
    cost_cents: Decimal
    kept: bool


PERSONA_LOCKED = N_(
    "This channel's persona is locked by the server's admins: the `system` option cannot be "
    "used here."
)


@dataclass(frozen=True, slots=True)
class FirstTurn:
    """A new conversation's first turn, answered and paid; the conversation not kept yet.

    Attributes:
        reply: the answer (its charge is in the ledger).
        note: which of the member's defaults was left out (said after the answer); None.
    """

    reply: ChatAnswer
    note: str | None = None


class ConversationEnded(ValidationFailed):
    """A turn in a conversation that has ended; the sentence says why and what to do."""


class ConversationService:
    """Turns of ``/chat`` conversations: fold, call as ``/text`` does, keep the turn.

    Args:
        db: the database (``conversations``, ``conversation_turns``).
        generation: the ``/text`` path every turn goes through.
        catalogue: the cached catalogue, for models' context windows; None: none known.
        clock: UTC wall time for the stored turns.
        max_prompt_chars: the bound on a folded prompt, characters (``CHAT_MAX_PROMPT_CHARS``).
        max_turns: turns per conversation (``CHAT_MAX_TURNS``); past it, it ends.
        members: members' own defaults (a first turn's text model, as ``/text``).
    """

    def __init__(
        self,
        *,
        db: Database,
        generation: GenerationService,
        clock: Clock,
        max_prompt_chars: int,
        max_turns: int,
        members: MemberSettingsService,
        catalogue: CatalogueCache | None = None,
    ) -> None:
        self._catalogue = catalogue
        self._db = db
        self._generation = generation
        self._members = members
        self._clock = clock
        self.max_prompt_chars = max_prompt_chars
        self.max_turns = max_turns

    async def get(self, thread_id: int) -> Conversation | None:
        """The conversation of a thread (ended or not); None if the thread has none."""
        return await self._db.conversations.get(thread_id)

    async def ask(
        self,
        who: Requester,
        author: str,
        text: str,
        *,
        conversation: Conversation | None = None,
        model: str | None = None,
        system: str | None = None,
        max_tokens: int | None = None,
        temperature: float | None = None,
        seed: Sequence[ConversationTurn] = (),
    ) -> ChatAnswer:
        """Answer a turn: the first of a new conversation, or the next of ``conversation``.

        Args:
            who: who wrote it, and where (a conversation's thread).
            author: their display name, the label the model sees.
            text: the turn (the bot's mention removed).
            conversation: the conversation it continues; None for a new one.
            model: the model; default the conversation's.
            system: the member's system prompt; default the conversation's.
            max_tokens: the longest answer, tokens (``/text`` in the thread); None: the
                service's default (docs/genapi.md §8.2: 1000).
            temperature: 0 to 2 (``/text`` in the thread); None: the service's default.
            seed: a new conversation's history: the ``/text`` answer a member replied to
                (kept by :meth:`start` with ``seed``).

        Returns:
            The answer; its charge is in the ledger. Store it with :meth:`start` or
            :meth:`record`.

        Raises:
            ConversationEnded: the conversation has ended, or reaches its turn cap now.
            ValidationFailed: ``system`` given where the channel's persona is locked
                (:data:`PERSONA_LOCKED`); or, as the following, before any call as ``/text``.
            NoApiKeyConfigured, BudgetExceeded, PromptBlocked: before any call, as ``/text``.
            GenAPIError: the call failed.
        """
        text = _checked_turn(text)
        history: list[ConversationTurn] = list(seed)
        persona = await self.persona_for(who)
        locked = persona is not None and persona.locked
        if locked and system:
            raise ValidationFailed(PERSONA_LOCKED)
        if conversation is not None:
            self._check_open(conversation)
            history = await self._db.conversations.turns(conversation.thread_id)
            turns = len(history)
            history = history[conversation.summary_upto :]
            if turns >= self.max_turns:
                await self._db.conversations.end(
                    conversation.thread_id, "turn cap", self._clock.time()
                )
                raise self._ended("turn cap")
            model = model or conversation.model
            # A locked persona: the system the conversation was started with is not sent.
            system = None if locked else system or conversation.system
        if persona is not None:
            model = model or persona.model
        current = None if self._catalogue is None else self._catalogue.current
        limit = prompt_bound(self.max_prompt_chars, context_window(current, model), max_tokens)
        folded = fold(
            history,
            author,
            text,
            limit=limit,
            system=system,
            persona=None if persona is None else persona.system,
            summary=None if conversation is None else conversation.summary,
        )
        paid = await self._generation.paid_text(
            who,
            TextOptions(
                prompt=folded.prompt,
                model=model,
                system=folded.system,
                max_tokens=max_tokens,
                temperature=temperature,
            ),
            screened=(text, system),
            prompt_limit=self.max_prompt_chars,
            system_limit=SYSTEM_LIMIT,
            summary=text,
        )
        result = paid.result
        return ChatAnswer(
            answer=cut_answer(result.content),
            model=result.model,
            cost_cents=result.cost_cents,
            carried=folded.carried,
            dropped=folded.dropped,
            prompt_chars=len(folded.prompt),
            prompt_tokens=result.usage.prompt_tokens,
            completion_tokens=result.usage.completion_tokens,
            by_credits=paid.by_credits,
        )

    async def first_turn(
        self,
        who: Requester,
        author: str,
        text: str,
        *,
        desk: Desk,
        model: str | None = None,
        system: str | None = None,
    ) -> FirstTurn:
        """Answer ``/chat``'s first turn, outside a thread: a new conversation's first answer.

        The model is the member's choice, else the channel persona's, else the member's default
        text model (as ``/text``: ``apply_member_defaults``, with its note), else the
        service's. Then :meth:`ask` while the desk shows the request's place, and the desk is
        told once it is charged. The conversation is kept with :meth:`start` once the adapter
        knows its thread (the answer's message).

        Args:
            who: who asked, and where.
            author: their display name, the label the model sees.
            text: the turn.
            desk: the adapter's side of the request.
            model: the model the member chose; None: as above.
            system: the member's system prompt.

        Raises:
            ValidationFailed, BudgetExceeded, GenAPIError...: as :meth:`ask`, before any charge.
        """
        note = None
        if model is None:
            persona = await self.persona_for(who)
            if persona is None or persona.model is None:
                applied = await self._members.apply_member_defaults(who, TextOptions(text))
                model, note = applied.options.model, applied.note
        async with desk.waiting():
            reply = await self.ask(who, author, text, model=model, system=system)
        desk.charged()
        return FirstTurn(reply, note)

    async def turn(
        self,
        who: Requester,
        author: str,
        text: str,
        conversation: Conversation,
        *,
        desk: Desk,
        model: str | None = None,
        system: str | None = None,
        max_tokens: int | None = None,
        temperature: float | None = None,
    ) -> ChatAnswer:
        """Answer ``conversation``'s next turn (``/chat`` or ``/text`` in its thread) and keep it.

        :meth:`ask`, then :meth:`record` after the charge: a turn that could not be kept is
        logged, never raised (the member gets the answer they paid for), the rule of every
        bookkeeping after a charge (:mod:`bot.services.submissions`).

        Args:
            who: who wrote it, and where (the conversation's thread).
            author: their display name, the label the model sees.
            text: the turn.
            conversation: the conversation it continues.
            desk: the adapter's side of the request (the queue's place, the charged mark).
            model: the model; default the conversation's.
            system: the member's system prompt; default the conversation's.
            max_tokens: the longest answer, tokens; None: the service's default.
            temperature: 0 to 2; None: the service's default.

        Raises:
            ConversationEnded, ValidationFailed, BudgetExceeded, GenAPIError...: as
                :meth:`ask`, before any charge.
        """
        async with desk.waiting():
            reply = await self.ask(
                who,
                author,
                text,
                conversation=conversation,
                model=model,
                system=system,
                max_tokens=max_tokens,
                temperature=temperature,
            )
        desk.charged()
        try:
            await self.record(conversation, who, author, text, reply)
        except Exception:
            log.exception("could not keep a conversation turn")
        return reply

    async def ask_from_answer(
        self,
        who: Requester,
        author: str,
        text: str,
        answered: ResultRequest,
        *,
        answer: str,
        answer_author: str,
        answer_id: int,
        answered_at: float,
    ) -> tuple[ChatAnswer, ConversationTurn]:
        """Answer a reply to a ``/text`` answer: a new conversation seeded with that answer.

        The answer is the conversation's first turn: its prompt and model from the stored
        request, its text as shown. It was charged as the ``/text`` it was, so the seed carries
        no cost and counts in no conversation's spend; the reply is asked with the answer's
        model (:meth:`ask`, ``seed``).

        Args:
            who: who replied, and where.
            author: their display name, the label the model sees.
            text: the reply (the bot's mention removed).
            answered: the stored request behind the answer (a ``/text``'s).
            answer: the answer's text as shown (its subtext footers removed).
            answer_author: the display name of who asked the ``/text``.
            answer_id: the answer's message id (the thread started from it has its id).
            answered_at: when the answer was posted, UTC epoch seconds.

        Returns:
            The reply's answer (charged) and the seed turn, for :meth:`start` with ``seed``.

        Raises:
            As :meth:`ask`, before any charge.
        """
        seed = ConversationTurn(
            thread_id=answer_id,
            user_id=answered.user_id,
            author=answer_author,
            text=str(answered.options.get("prompt") or ""),
            answer=answer,
            model=str(answered.options.get("model") or ""),
            prompt_tokens=0,
            completion_tokens=0,
            cost_cents=None,  # charged as the /text it was, not as a turn of this conversation
            carried=0,
            at=answered_at,
        )
        model = answered.options.get("model")
        reply = await self.ask(
            who, author, text, model=model if isinstance(model, str) else None, seed=[seed]
        )
        return reply, seed

    async def spend_by_thread(
        self, guild_id: int, user_id: int | None = None
    ) -> list[tuple[int, int, Decimal]]:
        """This UTC month's conversation spend: ``(thread_id, calls, cents)``, largest first.

        Args:
            guild_id: the guild.
            user_id: one member's turns only; None for everyone's.
        """
        return await self._db.conversations.spend_by_thread(
            guild_id, month_start(self._clock.time()), user_id
        )

    async def persona_for(self, who: Requester) -> Persona | None:
        """The persona of the channel ``who`` is in: its own, or its thread's parent's."""
        return await self._db.conversations.persona(who.parent_channel_id or who.channel_id)

    async def with_persona(self, who: Requester, options: TextOptions) -> TextOptions:
        """``/text``'s options with the channel's persona, if it has one.

        The persona's system prompt comes before the member's; its model applies when the
        member chose none.

        Raises:
            ValidationFailed: the member gave a ``system`` where the persona is locked
                (:data:`PERSONA_LOCKED`); nothing is called or charged.
        """
        persona = await self.persona_for(who)
        if persona is None:
            return options
        if persona.locked and options.system:
            raise ValidationFailed(PERSONA_LOCKED)
        system = "\n\n".join(p for p in (persona.system, options.system) if p)
        return replace(options, system=system, model=options.model or persona.model)

    async def start(
        self,
        thread_id: int,
        channel_id: int,
        who: Requester,
        author: str,
        text: str,
        reply: ChatAnswer,
        *,
        system: str | None = None,
        seed: Sequence[ConversationTurn] = (),
    ) -> bool:
        """Keep a new conversation in ``thread_id`` (started from ``channel_id``) and its turn.

        Its model is the one that answered, so later turns keep it. ``seed``: the history the
        first turn was asked with (a replied-to ``/text`` answer), kept before it.

        The turn is paid already: a failure to store it is logged, never raised (the rule of
        every bookkeeping after a charge, :mod:`bot.services.submissions`); the answer is
        shown, and the thread has no conversation to continue.

        Returns:
            True when this call created the conversation; False when the thread had one
            already (a reply to the same answer a moment earlier): the turn is then kept as
            that conversation's next, without ``seed`` (kept by its creator); False too when
            it could not be stored (logged).
        """
        try:
            return await self._start(thread_id, channel_id, who, author, text, reply, system, seed)
        except StorageError:
            log.exception("could not keep a conversation turn")
            return False

    async def _start(
        self,
        thread_id: int,
        channel_id: int,
        who: Requester,
        author: str,
        text: str,
        reply: ChatAnswer,
        system: str | None,
        seed: Sequence[ConversationTurn],
    ) -> bool:
        created = await self._db.conversations.start(
            Conversation(
                thread_id=thread_id,
                guild_id=who.guild_id,
                channel_id=channel_id,
                user_id=who.user_id,
                model=reply.model,
                system=system,
                created_at=self._clock.time(),
            )
        )
        if created:
            for turn in seed:
                await self._db.conversations.add_turn(replace(turn, thread_id=thread_id))
        await self._keep(thread_id, who, author, text, reply)
        return created

    async def record(
        self, conversation: Conversation, who: Requester, author: str, text: str, reply: ChatAnswer
    ) -> int:
        """Keep an answered turn of ``conversation``; return how many turns it has now."""
        return await self._keep(conversation.thread_id, who, author, text, reply)

    async def summary_plan(self, conversation: Conversation) -> SummaryPlan:
        """What Summarise would do now: which dropped turns it covers and its estimated price.

        The turns are those the next turn would no longer send (oldest first, as many as fit
        in one call's bound); the price is estimated from this conversation's own charges per
        token (``usage``, docs/genapi.md §2.5), for the transcript and :data:`SUMMARY_MAX_TOKENS`.

        Raises:
            ConversationEnded: the conversation has ended.
            ValidationFailed: no turn is dropped, so there is nothing to summarise.
        """
        self._check_open(conversation)
        turns = await self._db.conversations.turns(conversation.thread_id)
        history = turns[conversation.summary_upto :]
        probe = fold(
            history,
            "member",
            "x",
            limit=self.max_prompt_chars,
            summary=conversation.summary,
        )
        if probe.dropped == 0:
            raise ValidationFailed(
                N_("Every earlier turn is still sent: there is nothing to summarise.")
            )
        room = self.max_prompt_chars - len(SUMMARY_INSTRUCTION) - 2
        prompt = summary_block(conversation.summary) if conversation.summary else ""
        covered = 0
        for turn in history[: probe.dropped]:
            block = turn_block(turn)
            if len(prompt) + len(block) > room:
                break
            prompt += block
            covered += 1
        if covered == 0:
            raise ValidationFailed(N_("The oldest turn is too long to summarise."))
        prompt += "\n" + SUMMARY_INSTRUCTION
        tokens = [(t.prompt_tokens + t.completion_tokens, t.cost_cents) for t in turns]
        priced = [(n, c) for n, c in tokens if n > 0 and c is not None and c.is_finite()]
        estimate = None
        if priced:
            per_token = sum((c for _, c in priced), Decimal(0)) / sum(n for n, _ in priced)
            expected = (len(prompt) + len(SUMMARY_SYSTEM)) / CHARS_PER_TOKEN + SUMMARY_MAX_TOKENS
            estimate = (per_token * Decimal(round(expected))).quantize(Decimal("0.01"))
        return SummaryPlan(
            prompt=prompt,
            upto=conversation.summary_upto + covered,
            covered=covered,
            estimate_cents=estimate,
        )

    async def summarise(self, who: Requester, conversation: Conversation) -> SummaryResult:
        """Replace the dropped turns by one summary, made by a billed call (a ``/text`` call).

        Raises:
            ConversationEnded, ValidationFailed: as :meth:`summary_plan`; or refused before
                any call as ``/text`` (budgets, tiers, cooldown...).
            GenAPIError: the call failed.
        """
        plan = await self.summary_plan(conversation)
        result = await self._generation.text(
            who,
            TextOptions(
                prompt=plan.prompt,
                model=conversation.model,
                system=SUMMARY_SYSTEM,
                max_tokens=SUMMARY_MAX_TOKENS,
            ),
            screened=(),
            prompt_limit=self.max_prompt_chars,
            system_limit=SYSTEM_LIMIT,
        )
        summary = cut_answer(result.content) or "(no summary)"
        kept = await self._db.conversations.set_summary(conversation.thread_id, summary, plan.upto)
        return SummaryResult(
            summary=summary, covered=plan.covered, cost_cents=result.cost_cents, kept=kept
        )

    async def end(self, thread_id: int, reason: str) -> bool:
        """End a thread's conversation (``"archived"``, ``"deleted"``); False if none or ended."""
        return await self._db.conversations.end(thread_id, reason, self._clock.time())

    async def abandon(self, thread_id: int) -> None:
        """End the conversation just kept for a thread that could not be started.

        After a paid first turn (:meth:`start`): a failure is logged, never raised.
        """
        try:
            await self.end(thread_id, "deleted")
        except StorageError:
            log.exception("could not end a conversation whose thread was not started")

    async def purge(self, thread_id: int) -> bool:
        """Forget a deleted thread's conversation: its turns, system prompt and summary.

        The thread is gone, so what was said there is not kept; the charges stay in the
        ledger. The conversation stays known as ended (``"deleted"``), so a turn answered
        meanwhile is shown but not stored.

        Returns:
            False when the thread had no conversation (nothing is stored for it).
        """
        return await self._db.conversations.purge(thread_id, self._clock.time())

    def _check_open(self, conversation: Conversation) -> None:
        if conversation.end_reason is not None:
            raise self._ended(conversation.end_reason)

    def _ended(self, reason: str) -> ConversationEnded:
        # One sentence per reason (a reason glued in would not read in every language).
        if reason == "turn cap":
            return ConversationEnded(
                N_(
                    "This conversation has ended (it reached its limit of {turns} turns); "
                    "start a new one with /chat."
                ),
                turns=self.max_turns,
            )
        if reason == "archived":
            return ConversationEnded(
                N_(
                    "This conversation has ended (its thread was archived); start a new one "
                    "with /chat."
                )
            )
        if reason == "deleted":
            return ConversationEnded(
                N_(
                    "This conversation has ended (its thread was deleted); start a new one "
                    "with /chat."
                )
            )
        return ConversationEnded(
            N_("This conversation has ended (it has ended); start a new one with /chat.")
        )

    async def _keep(
        self, thread_id: int, who: Requester, author: str, text: str, reply: ChatAnswer
    ) -> int:
        return await self._db.conversations.add_turn(
            ConversationTurn(
                thread_id=thread_id,
                user_id=who.user_id,
                author=author,
                text=text.strip(),
                answer=reply.answer,
                model=reply.model,
                prompt_tokens=reply.prompt_tokens,
                completion_tokens=reply.completion_tokens,
                cost_cents=reply.cost_cents,
                carried=reply.carried,
                at=self._clock.time(),
            )
        )


def _checked_turn(text: str) -> str:
    """A member's turn without its outer blanks.

    Raises:
        ValidationFailed: it is empty, or longer than :data:`MAX_PROMPT_LENGTH` characters.
    """
    text = text.strip()
    if not text:
        raise ValidationFailed(
            N_("There was nothing to answer: write your message after the mention.")
        )
    if len(text) > MAX_PROMPT_LENGTH:
        raise ValidationFailed(
            N_("That message is too long (at most {max_prompt_length} characters)."),
            max_prompt_length=MAX_PROMPT_LENGTH,
        )
    return text
