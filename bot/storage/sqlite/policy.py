"""SQLite policy: :class:`bot.storage.repositories.PolicyRepository` over an :class:`Executor`.

Tables of migration 0007: ``policy_tiers``, ``policy_models``, ``blocked_terms``,
``cooldowns``, ``cooldown_uses``, ``config_audit``; ``ledger.tier_role_id`` for spend by tier.
"""

from __future__ import annotations

from decimal import Decimal

from bot.storage.models import AuditEntry, Kind, ModelLists, Tier
from bot.storage.money import from_micro
from bot.storage.rows import models_text, tier_from_row
from bot.storage.sqlite.engine import Executor


class SqlitePolicy:
    """Role tiers, model list, blocked terms, cooldowns, audit (contract: ``PolicyRepository``)."""

    def __init__(self, sql: Executor) -> None:
        self._sql = sql

    async def tiers(self, guild_id: int) -> list[Tier]:
        """Return the guild's tiers, ordered by role name then role id."""
        rows = await self._sql.all(
            "SELECT * FROM policy_tiers WHERE guild_id = ? ORDER BY role_name, role_id",
            (guild_id,),
        )
        return [tier_from_row(row) for row in rows]

    async def set_tier(self, tier: Tier) -> None:
        """Create or replace the tier of ``tier.role_id``.

        Raises:
            ConstraintError: an allowance below -1 or a cap below 1.
        """
        await self._sql.run(
            "INSERT INTO policy_tiers (guild_id, role_id, role_name, daily_per_user_cents,"
            " monthly_per_user_cents, videos_at_once, models) VALUES (?, ?, ?, ?, ?, ?, ?)"
            " ON CONFLICT (guild_id, role_id) DO UPDATE SET role_name = excluded.role_name,"
            " daily_per_user_cents = excluded.daily_per_user_cents,"
            " monthly_per_user_cents = excluded.monthly_per_user_cents,"
            " videos_at_once = excluded.videos_at_once, models = excluded.models",
            (
                tier.guild_id,
                tier.role_id,
                tier.role_name,
                tier.daily_per_user_cents,
                tier.monthly_per_user_cents,
                tier.videos_at_once,
                models_text(tier.models),
            ),
        )

    async def delete_tier(self, guild_id: int, role_id: int) -> bool:
        """Delete a tier; False if the role had none."""
        changed = await self._sql.run(
            "DELETE FROM policy_tiers WHERE guild_id = ? AND role_id = ?", (guild_id, role_id)
        )
        return changed > 0

    async def model_lists(self, guild_id: int) -> ModelLists:
        """Return the guild's server-wide model list (both parts sorted)."""
        rows = await self._sql.all(
            "SELECT pattern, allowed FROM policy_models WHERE guild_id = ? ORDER BY pattern",
            (guild_id,),
        )
        return ModelLists(
            allowed=tuple(r["pattern"] for r in rows if r["allowed"]),
            blocked=tuple(r["pattern"] for r in rows if not r["allowed"]),
        )

    async def set_model_lists(self, guild_id: int, lists: ModelLists) -> None:
        """Replace the guild's server-wide model list (one transaction)."""
        async with self._sql.write() as tx:
            await tx.run("DELETE FROM policy_models WHERE guild_id = ?", (guild_id,))
            rows = [(guild_id, p, 1) for p in lists.allowed]
            rows += [(guild_id, p, 0) for p in lists.blocked]
            await tx.run_many(
                "INSERT INTO policy_models (guild_id, pattern, allowed) VALUES (?, ?, ?)", rows
            )

    async def blocked_terms(self, guild_id: int) -> list[str]:
        """Return the guild's blocked terms (normalised), sorted."""
        rows = await self._sql.all(
            "SELECT term FROM blocked_terms WHERE guild_id = ? ORDER BY term", (guild_id,)
        )
        return [r["term"] for r in rows]

    async def add_blocked_term(self, guild_id: int, term: str) -> bool:
        """Add a normalised term; False if it was there already."""
        changed = await self._sql.run(
            "INSERT INTO blocked_terms (guild_id, term) VALUES (?, ?) ON CONFLICT DO NOTHING",
            (guild_id, term),
        )
        return changed > 0

    async def remove_blocked_term(self, guild_id: int, term: str) -> bool:
        """Remove a normalised term; False if it was not there."""
        changed = await self._sql.run(
            "DELETE FROM blocked_terms WHERE guild_id = ? AND term = ?", (guild_id, term)
        )
        return changed > 0

    async def cooldowns(self, guild_id: int) -> dict[Kind, int]:
        """Return the guild's cooldowns, seconds per command."""
        rows = await self._sql.all(
            "SELECT command, seconds FROM cooldowns WHERE guild_id = ? ORDER BY command",
            (guild_id,),
        )
        return {Kind(r["command"]): r["seconds"] for r in rows}

    async def set_cooldown(self, guild_id: int, command: Kind, seconds: int) -> None:
        """Set a command's cooldown in seconds; 0 removes it.

        Raises:
            ConstraintError: negative seconds.
        """
        if seconds == 0:
            await self._sql.run(
                "DELETE FROM cooldowns WHERE guild_id = ? AND command = ?",
                (guild_id, command.value),
            )
            return
        await self._sql.run(
            "INSERT INTO cooldowns (guild_id, command, seconds) VALUES (?, ?, ?)"
            " ON CONFLICT (guild_id, command) DO UPDATE SET seconds = excluded.seconds",
            (guild_id, command.value, seconds),
        )

    async def last_use(self, guild_id: int, user_id: int, command: Kind) -> float | None:
        """Return when the member last used the command (UTC epoch seconds), or None."""
        row = await self._sql.one(
            "SELECT used_at FROM cooldown_uses WHERE guild_id = ? AND user_id = ? AND command = ?",
            (guild_id, user_id, command.value),
        )
        return None if row is None else float(row["used_at"])

    async def record_use(self, guild_id: int, user_id: int, command: Kind, at: float) -> None:
        """Record that the member used the command at ``at`` (UTC epoch seconds)."""
        await self._sql.run(
            "INSERT INTO cooldown_uses (guild_id, user_id, command, used_at) VALUES (?, ?, ?, ?)"
            " ON CONFLICT (guild_id, user_id, command) DO UPDATE SET used_at = excluded.used_at",
            (guild_id, user_id, command.value, at),
        )

    async def add_audit(self, entry: AuditEntry) -> None:
        """Append a change made through ``/config`` to the audit log."""
        await self._sql.run(
            "INSERT INTO config_audit (guild_id, user_id, what, old, new, at)"
            " VALUES (?, ?, ?, ?, ?, ?)",
            (entry.guild_id, entry.user_id, entry.what, entry.old, entry.new, entry.at),
        )

    async def audit(self, guild_id: int, limit: int = 20) -> list[AuditEntry]:
        """Return the guild's latest ``limit`` audit entries, newest first."""
        rows = await self._sql.all(
            "SELECT * FROM config_audit WHERE guild_id = ? ORDER BY id DESC LIMIT ?",
            (guild_id, limit),
        )
        return [
            AuditEntry(r["guild_id"], r["user_id"], r["what"], r["old"], r["new"], r["at"])
            for r in rows
        ]

    async def spent_by_tier(self, guild_id: int, since: float) -> list[tuple[int | None, Decimal]]:
        """Return the cents charged at or after ``since`` per tier role (None = no tier)."""
        rows = await self._sql.all(
            "SELECT tier_role_id, SUM(cost_micro) AS micro FROM ledger"
            " WHERE guild_id = ? AND at >= ? GROUP BY tier_role_id"
            " ORDER BY micro DESC, tier_role_id IS NULL, tier_role_id",
            (guild_id, since),
        )
        return [(r["tier_role_id"], from_micro(r["micro"])) for r in rows]
