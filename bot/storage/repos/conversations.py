"""Conversations of ``/chat``, both engines: :class:`ConversationStore`.

Tables ``conversations``, ``conversation_turns`` (each turn's ``cost_micro`` in micro-cents,
:mod:`bot.storage.money`) and ``personas``.
"""

from __future__ import annotations

from decimal import Decimal

from sqlalchemy import delete, func, insert, select, update

from bot.domain import Conversation, ConversationTurn, Persona
from bot.storage.money import from_micro, to_micro
from bot.storage.repos.dialect import upsert
from bot.storage.schema import conversation_turns, conversations, personas
from bot.storage.sql import Row, Sql

DELETED = "deleted"
"""The end reason of a conversation whose thread was deleted: its turns are purged."""

_TURNS = select(func.count().label("turns")).select_from(conversation_turns)
"""How many turns a conversation has (add the ``thread_id`` condition)."""


def conversation_from_row(row: Row) -> Conversation:
    """Build a :class:`Conversation` from a ``conversations`` row (either engine)."""
    return Conversation(
        thread_id=int(row["thread_id"]),
        guild_id=int(row["guild_id"]),
        channel_id=int(row["channel_id"]),
        user_id=int(row["user_id"]),
        model=row["model"],
        system=row["system"],
        created_at=float(row["created_at"]),
        ended_at=None if row["ended_at"] is None else float(row["ended_at"]),
        end_reason=row["end_reason"],
        summary=row["summary"],
        summary_upto=int(row["summary_upto"]),
    )


def turn_from_row(row: Row) -> ConversationTurn:
    """Build a :class:`ConversationTurn` from a ``conversation_turns`` row (either engine)."""
    micro = row["cost_micro"]
    return ConversationTurn(
        thread_id=int(row["thread_id"]),
        user_id=int(row["user_id"]),
        author=str(row["author"]),
        text=str(row["text"]),
        answer=str(row["answer"]),
        model=str(row["model"]),
        prompt_tokens=int(row["prompt_tokens"]),
        completion_tokens=int(row["completion_tokens"]),
        cost_cents=None if micro is None else from_micro(int(micro)),
        carried=int(row["carried"]),
        at=float(row["created_at"]),
    )


def cost_micro(turn: ConversationTurn) -> int | None:
    """The turn's cost as micro-cents; None when it is not a usable number."""
    cents = turn.cost_cents
    if cents is None or not cents.is_finite() or cents < 0:
        return None
    return to_micro(cents)


class ConversationStore:
    """Conversations of ``/chat`` and their turns, keyed by thread.

    A restart keeps every conversation: the history each call folds into its prompt is read
    from here.

    Args:
        sql: the database's executor, or one transaction's.
    """

    def __init__(self, sql: Sql) -> None:
        self._sql = sql

    async def start(self, conversation: Conversation) -> bool:
        """Store a new conversation; False when its thread already has one (kept as it was)."""
        c = conversation
        changed = await self._sql.run(
            upsert(self._sql, conversations)
            .values(
                thread_id=c.thread_id,
                guild_id=c.guild_id,
                channel_id=c.channel_id,
                user_id=c.user_id,
                model=c.model,
                system=c.system,
                created_at=c.created_at,
            )
            .on_conflict_do_nothing(index_elements=[conversations.c.thread_id])
        )
        return changed > 0

    async def get(self, thread_id: int) -> Conversation | None:
        """Return the conversation of ``thread_id``; None if it has none."""
        row = await self._sql.one(
            select(conversations).where(conversations.c.thread_id == thread_id)
        )
        return None if row is None else conversation_from_row(row)

    async def add_turn(self, turn: ConversationTurn) -> int:
        """Store a turn (after its charge is in the ledger); return the conversation's turns.

        Nothing is stored for a conversation whose thread was deleted (:meth:`purge`): 0 is
        returned.

        Raises:
            ConstraintError: the thread has no conversation.
        """
        t = turn
        async with self._sql.write() as tx:
            # The conversation's row, locked (PostgreSQL) so that a purge waits or goes first.
            reason = await tx.one(
                select(conversations.c.end_reason)
                .where(conversations.c.thread_id == t.thread_id)
                .with_for_update()
            )
            if reason is not None and reason["end_reason"] == DELETED:
                return 0
            await tx.run(
                insert(conversation_turns).values(
                    thread_id=t.thread_id,
                    user_id=t.user_id,
                    author=t.author,
                    text=t.text,
                    answer=t.answer,
                    model=t.model,
                    prompt_tokens=t.prompt_tokens,
                    completion_tokens=t.completion_tokens,
                    cost_micro=cost_micro(t),
                    carried=t.carried,
                    created_at=t.at,
                )
            )
            # The same transaction: the count includes the turn just written.
            return int(await tx.scalar(_TURNS.where(conversation_turns.c.thread_id == t.thread_id)))

    async def turns(self, thread_id: int) -> list[ConversationTurn]:
        """Return the turns of ``thread_id``, oldest first."""
        rows = await self._sql.all(
            select(conversation_turns)
            .where(conversation_turns.c.thread_id == thread_id)
            .order_by(conversation_turns.c.id)
        )
        return [turn_from_row(r) for r in rows]

    async def turn_count(self, thread_id: int) -> int:
        """Return how many turns ``thread_id``'s conversation has."""
        return int(
            await self._sql.scalar(_TURNS.where(conversation_turns.c.thread_id == thread_id))
        )

    async def end(self, thread_id: int, reason: str, at: float) -> bool:
        """End the conversation (archived, deleted, turn cap); False if none or already ended.

        Args:
            thread_id: the thread.
            reason: ``"archived"``, ``"deleted"`` or ``"turn cap"``.
            at: UTC epoch seconds.
        """
        changed = await self._sql.run(
            update(conversations)
            .where(conversations.c.thread_id == thread_id, conversations.c.ended_at.is_(None))
            .values(ended_at=at, end_reason=reason)
        )
        return changed > 0

    async def purge(self, thread_id: int, at: float) -> bool:
        """Forget a deleted thread's conversation: its turns, system prompt and summary.

        The conversation's row stays, ended (``"deleted"`` at ``at``, UTC epoch seconds), so
        that a turn answered meanwhile is not stored (:meth:`add_turn`).

        Returns:
            False when the thread had no conversation.
        """
        async with self._sql.write() as tx:
            changed = await tx.run(
                update(conversations)
                .where(conversations.c.thread_id == thread_id)
                .values(
                    ended_at=func.coalesce(conversations.c.ended_at, at),
                    end_reason=DELETED,
                    system=None,
                    summary=None,
                    summary_upto=0,
                )
            )
            await tx.run(
                delete(conversation_turns).where(conversation_turns.c.thread_id == thread_id)
            )
        return changed > 0

    async def persona(self, channel_id: int) -> Persona | None:
        """Return the persona of a channel; None if it has none."""
        row = await self._sql.one(select(personas).where(personas.c.channel_id == channel_id))
        return None if row is None else _persona(row)

    async def personas(self, guild_id: int) -> list[Persona]:
        """Return a guild's personas, by channel id."""
        rows = await self._sql.all(
            select(personas).where(personas.c.guild_id == guild_id).order_by(personas.c.channel_id)
        )
        return [_persona(r) for r in rows]

    async def set_persona(self, persona: Persona, at: float) -> None:
        """Set (or replace) a channel's persona; ``at`` UTC epoch seconds."""
        p = persona
        stmt = upsert(self._sql, personas).values(
            guild_id=p.guild_id,
            channel_id=p.channel_id,
            system=p.system,
            model=p.model,
            updated_at=at,
            locked=int(p.locked),
        )
        await self._sql.run(
            stmt.on_conflict_do_update(
                index_elements=[personas.c.channel_id],
                set_={
                    "system": stmt.excluded.system,
                    "model": stmt.excluded.model,
                    "updated_at": stmt.excluded.updated_at,
                    "locked": stmt.excluded.locked,
                },
            )
        )

    async def remove_persona(self, channel_id: int) -> bool:
        """Remove a channel's persona; False if it had none."""
        changed = await self._sql.run(delete(personas).where(personas.c.channel_id == channel_id))
        return changed > 0

    async def spend_by_thread(
        self, guild_id: int, since: float, user_id: int | None = None
    ) -> list[tuple[int, int, Decimal]]:
        """Conversations' spend: ``(thread_id, turns, cents)``, largest first.

        From the turns' charges (each is its call's ledger row; the first turn's row carries
        the parent channel, as the thread did not exist yet), at or after ``since`` (UTC
        epoch seconds), optionally one member's turns only.
        """
        t, c = conversation_turns, conversations
        micro = func.coalesce(func.sum(t.c.cost_micro), 0).label("micro")
        stmt = (
            select(t.c.thread_id, func.count().label("turns"), micro)
            .select_from(t.join(c, c.c.thread_id == t.c.thread_id))
            .where(c.c.guild_id == guild_id, t.c.created_at >= since)
        )
        if user_id is not None:
            stmt = stmt.where(t.c.user_id == user_id)
        rows = await self._sql.all(
            stmt.group_by(t.c.thread_id).order_by(micro.desc(), t.c.thread_id)
        )
        # SUM of a bigint is numeric (Decimal) on PostgreSQL: exact, made an int here.
        return [(int(r["thread_id"]), int(r["turns"]), from_micro(int(r["micro"]))) for r in rows]

    async def set_summary(self, thread_id: int, summary: str, upto: int) -> bool:
        """Keep a summary of the first ``upto`` turns.

        Returns:
            False when a summary covers as many turns already (a second click made it).
        """
        changed = await self._sql.run(
            update(conversations)
            .where(conversations.c.thread_id == thread_id, conversations.c.summary_upto < upto)
            .values(summary=summary, summary_upto=upto)
        )
        return changed > 0


def _persona(row: Row) -> Persona:
    return Persona(
        row["guild_id"], row["channel_id"], row["system"], row["model"], bool(row["locked"])
    )
