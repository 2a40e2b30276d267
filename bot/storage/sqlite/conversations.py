"""SQLite conversations: :class:`bot.storage.repositories.ConversationRepository` (issue 21)."""

from __future__ import annotations

from decimal import Decimal

from bot.storage.models import Conversation, ConversationTurn, Persona
from bot.storage.money import from_micro
from bot.storage.rows import conversation_from_row, cost_micro, turn_from_row
from bot.storage.sqlite.engine import Executor


class SqliteConversations:
    """``conversations`` and ``conversation_turns``."""

    def __init__(self, sql: Executor) -> None:
        self._sql = sql

    async def start(self, conversation: Conversation) -> bool:
        """Store a new conversation; False when its thread already has one."""
        c = conversation
        changed = await self._sql.run(
            "INSERT INTO conversations (thread_id, guild_id, channel_id, user_id, model, system,"
            " created_at) VALUES (?, ?, ?, ?, ?, ?, ?) ON CONFLICT (thread_id) DO NOTHING",
            (c.thread_id, c.guild_id, c.channel_id, c.user_id, c.model, c.system, c.created_at),
        )
        return changed > 0

    async def get(self, thread_id: int) -> Conversation | None:
        """Return the conversation of ``thread_id``; None if it has none."""
        row = await self._sql.one("SELECT * FROM conversations WHERE thread_id = ?", (thread_id,))
        return None if row is None else conversation_from_row(row)

    async def add_turn(self, turn: ConversationTurn) -> int:
        """Store a turn; return how many turns the conversation has now."""
        t = turn
        async with self._sql.write() as tx:
            await tx.insert(
                "INSERT INTO conversation_turns (thread_id, user_id, author, text, answer, model,"
                " prompt_tokens, completion_tokens, cost_micro, carried, created_at)"
                " VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                (
                    t.thread_id,
                    t.user_id,
                    t.author,
                    t.text,
                    t.answer,
                    t.model,
                    t.prompt_tokens,
                    t.completion_tokens,
                    cost_micro(t),
                    t.carried,
                    t.at,
                ),
            )
            return await tx.integer(
                "SELECT COUNT(*) FROM conversation_turns WHERE thread_id = ?", (t.thread_id,)
            )

    async def turns(self, thread_id: int) -> list[ConversationTurn]:
        """Return the turns of ``thread_id``, oldest first."""
        rows = await self._sql.all(
            "SELECT * FROM conversation_turns WHERE thread_id = ? ORDER BY id", (thread_id,)
        )
        return [turn_from_row(r) for r in rows]

    async def turn_count(self, thread_id: int) -> int:
        """Return how many turns ``thread_id``'s conversation has."""
        return await self._sql.integer(
            "SELECT COUNT(*) FROM conversation_turns WHERE thread_id = ?", (thread_id,)
        )

    async def end(self, thread_id: int, reason: str, at: float) -> bool:
        """End the conversation; False if it has none or has ended already."""
        changed = await self._sql.run(
            "UPDATE conversations SET ended_at = ?, end_reason = ?"
            " WHERE thread_id = ? AND ended_at IS NULL",
            (at, reason, thread_id),
        )
        return changed > 0

    async def persona(self, channel_id: int) -> Persona | None:
        """Return the persona of a channel; None if it has none."""
        row = await self._sql.one("SELECT * FROM personas WHERE channel_id = ?", (channel_id,))
        return None if row is None else Persona(row[0], row[1], row[2], row[3])

    async def personas(self, guild_id: int) -> list[Persona]:
        """Return a guild's personas, by channel id."""
        rows = await self._sql.all(
            "SELECT * FROM personas WHERE guild_id = ? ORDER BY channel_id", (guild_id,)
        )
        return [Persona(r[0], r[1], r[2], r[3]) for r in rows]

    async def set_persona(self, persona: Persona, at: float) -> None:
        """Set (or replace) a channel's persona."""
        p = persona
        await self._sql.run(
            "INSERT INTO personas (guild_id, channel_id, system, model, updated_at)"
            " VALUES (?, ?, ?, ?, ?) ON CONFLICT (channel_id) DO UPDATE SET"
            " system = excluded.system, model = excluded.model, updated_at = excluded.updated_at",
            (p.guild_id, p.channel_id, p.system, p.model, at),
        )

    async def remove_persona(self, channel_id: int) -> bool:
        """Remove a channel's persona; False if it had none."""
        return await self._sql.run("DELETE FROM personas WHERE channel_id = ?", (channel_id,)) > 0

    async def spend_by_thread(
        self, guild_id: int, since: float, user_id: int | None = None
    ) -> list[tuple[int, int, Decimal]]:
        """Conversations' spend (their turns' charges): ``(thread_id, turns, cents)``."""
        sql = (
            "SELECT t.thread_id, COUNT(*), COALESCE(SUM(t.cost_micro), 0) AS micro"
            " FROM conversation_turns t JOIN conversations c ON c.thread_id = t.thread_id"
            " WHERE c.guild_id = ? AND t.created_at >= ?"
        )
        params: list[object] = [guild_id, since]
        if user_id is not None:
            sql += " AND t.user_id = ?"
            params.append(user_id)
        sql += " GROUP BY t.thread_id ORDER BY micro DESC, t.thread_id"
        rows = await self._sql.all(sql, params)
        return [(int(r[0]), int(r[1]), from_micro(int(r[2]))) for r in rows]

    async def set_summary(self, thread_id: int, summary: str, upto: int) -> bool:
        """Keep a summary of the first ``upto`` turns, unless one covers as many already."""
        changed = await self._sql.run(
            "UPDATE conversations SET summary = ?, summary_upto = ?"
            " WHERE thread_id = ? AND summary_upto < ?",
            (summary, upto, thread_id, upto),
        )
        return changed > 0
