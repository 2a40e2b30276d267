"""A guild's policy, both engines: :class:`PolicyStore`.

Tables ``policy_tiers``, ``policy_models``, ``blocked_terms``, ``cooldowns``,
``cooldown_uses``, ``config_audit``; ``ledger.tier_role_id`` for spend by tier. Text is listed
by code point on both engines (:func:`~bot.storage.repos.dialect.text_order`).
"""

from __future__ import annotations

from decimal import Decimal

from sqlalchemy import BigInteger, cast, delete, func, insert, select

from bot.domain import AuditEntry, Kind, ModelLists, Tier
from bot.storage.money import from_micro
from bot.storage.repos.dialect import text_order, upsert
from bot.storage.schema import (
    blocked_terms,
    config_audit,
    cooldown_uses,
    cooldowns,
    ledger,
    policy_models,
    policy_tiers,
)
from bot.storage.sql import Row, Sql


def models_text(models: tuple[str, ...] | None) -> str | None:
    """A tier's model patterns as stored (comma-separated; None = the server's list)."""
    return None if models is None else ",".join(models)


def tier_from_row(row: Row) -> Tier:
    """Build a :class:`Tier` from a row of ``policy_tiers`` (either engine)."""
    models = row["models"]
    return Tier(
        guild_id=row["guild_id"],
        role_id=row["role_id"],
        role_name=row["role_name"],
        daily_per_user_cents=row["daily_per_user_cents"],
        monthly_per_user_cents=row["monthly_per_user_cents"],
        videos_at_once=row["videos_at_once"],
        models=None if models is None else tuple(m for m in models.split(",") if m),
    )


class PolicyStore:
    """A guild's policy: role tiers, model list, blocked terms, cooldowns, audit.

    Allowances are whole cents, :data:`~bot.domain.UNLIMITED` or None (server default),
    as in :class:`~bot.domain.Tier`.

    Args:
        sql: the database's executor, or one transaction's.
    """

    def __init__(self, sql: Sql) -> None:
        self._sql = sql

    async def tiers(self, guild_id: int) -> list[Tier]:
        """Return the guild's tiers, ordered by role name then role id."""
        rows = await self._sql.all(
            select(policy_tiers)
            .where(policy_tiers.c.guild_id == guild_id)
            .order_by(text_order(self._sql, policy_tiers.c.role_name), policy_tiers.c.role_id)
        )
        return [tier_from_row(row) for row in rows]

    async def set_tier(self, tier: Tier) -> None:
        """Create or replace the tier of ``tier.role_id``.

        Raises:
            ConstraintError: an allowance below -1 or a cap below 1.
        """
        stmt = upsert(self._sql, policy_tiers).values(
            guild_id=tier.guild_id,
            role_id=tier.role_id,
            role_name=tier.role_name,
            daily_per_user_cents=tier.daily_per_user_cents,
            monthly_per_user_cents=tier.monthly_per_user_cents,
            videos_at_once=tier.videos_at_once,
            models=models_text(tier.models),
        )
        await self._sql.run(
            stmt.on_conflict_do_update(
                index_elements=[policy_tiers.c.guild_id, policy_tiers.c.role_id],
                set_={
                    name: stmt.excluded[name]
                    for name in (
                        "role_name",
                        "daily_per_user_cents",
                        "monthly_per_user_cents",
                        "videos_at_once",
                        "models",
                    )
                },
            )
        )

    async def delete_tier(self, guild_id: int, role_id: int) -> bool:
        """Delete a tier; False if the role had none."""
        changed = await self._sql.run(
            delete(policy_tiers).where(
                policy_tiers.c.guild_id == guild_id, policy_tiers.c.role_id == role_id
            )
        )
        return changed > 0

    async def model_lists(self, guild_id: int) -> ModelLists:
        """Return the guild's server-wide model list (both parts sorted)."""
        rows = await self._sql.all(
            select(policy_models.c.pattern, policy_models.c.allowed)
            .where(policy_models.c.guild_id == guild_id)
            .order_by(text_order(self._sql, policy_models.c.pattern))
        )
        return ModelLists(
            allowed=tuple(r["pattern"] for r in rows if r["allowed"]),
            blocked=tuple(r["pattern"] for r in rows if not r["allowed"]),
        )

    async def set_model_lists(self, guild_id: int, lists: ModelLists) -> None:
        """Replace the guild's server-wide model list (one transaction)."""
        rows = [{"guild_id": guild_id, "pattern": p, "allowed": 1} for p in lists.allowed]
        rows += [{"guild_id": guild_id, "pattern": p, "allowed": 0} for p in lists.blocked]
        async with self._sql.write() as tx:
            await tx.run(delete(policy_models).where(policy_models.c.guild_id == guild_id))
            if rows:  # no rows would run the INSERT once, without values
                await tx.run(insert(policy_models), rows)

    async def blocked_terms(self, guild_id: int) -> list[str]:
        """Return the guild's blocked terms (normalised), sorted."""
        rows = await self._sql.all(
            select(blocked_terms.c.term)
            .where(blocked_terms.c.guild_id == guild_id)
            .order_by(text_order(self._sql, blocked_terms.c.term))
        )
        return [r["term"] for r in rows]

    async def add_blocked_term(self, guild_id: int, term: str) -> bool:
        """Add a normalised term; False if it was there already."""
        changed = await self._sql.run(
            upsert(self._sql, blocked_terms)
            .values(guild_id=guild_id, term=term)
            .on_conflict_do_nothing()
        )
        return changed > 0

    async def remove_blocked_term(self, guild_id: int, term: str) -> bool:
        """Remove a normalised term; False if it was not there."""
        changed = await self._sql.run(
            delete(blocked_terms).where(
                blocked_terms.c.guild_id == guild_id, blocked_terms.c.term == term
            )
        )
        return changed > 0

    async def cooldowns(self, guild_id: int) -> dict[Kind, int]:
        """Return the guild's cooldowns, seconds per command; commands without one are absent."""
        rows = await self._sql.all(
            select(cooldowns.c.command, cooldowns.c.seconds)
            .where(cooldowns.c.guild_id == guild_id)
            .order_by(cooldowns.c.command)
        )
        return {Kind(r["command"]): r["seconds"] for r in rows}

    async def set_cooldown(self, guild_id: int, command: Kind, seconds: int) -> None:
        """Set a command's cooldown in seconds; 0 removes it.

        Raises:
            ConstraintError: negative seconds.
        """
        if seconds == 0:
            await self._sql.run(
                delete(cooldowns).where(
                    cooldowns.c.guild_id == guild_id, cooldowns.c.command == command.value
                )
            )
            return
        stmt = upsert(self._sql, cooldowns).values(
            guild_id=guild_id, command=command.value, seconds=seconds
        )
        await self._sql.run(
            stmt.on_conflict_do_update(
                index_elements=[cooldowns.c.guild_id, cooldowns.c.command],
                set_={"seconds": stmt.excluded.seconds},
            )
        )

    async def last_use(self, guild_id: int, user_id: int, command: Kind) -> float | None:
        """Return when the member last used the command (UTC epoch seconds), or None."""
        used_at = await self._sql.scalar(
            select(cooldown_uses.c.used_at).where(
                cooldown_uses.c.guild_id == guild_id,
                cooldown_uses.c.user_id == user_id,
                cooldown_uses.c.command == command.value,
            )
        )
        return None if used_at is None else float(used_at)

    async def record_use(self, guild_id: int, user_id: int, command: Kind, at: float) -> None:
        """Record that the member used the command at ``at`` (UTC epoch seconds)."""
        stmt = upsert(self._sql, cooldown_uses).values(
            guild_id=guild_id, user_id=user_id, command=command.value, used_at=at
        )
        await self._sql.run(
            stmt.on_conflict_do_update(
                index_elements=[
                    cooldown_uses.c.guild_id,
                    cooldown_uses.c.user_id,
                    cooldown_uses.c.command,
                ],
                set_={"used_at": stmt.excluded.used_at},
            )
        )

    async def add_audit(self, entry: AuditEntry) -> None:
        """Append a change made through ``/config`` to the audit log."""
        await self._sql.run(
            insert(config_audit).values(
                guild_id=entry.guild_id,
                user_id=entry.user_id,
                what=entry.what,
                old=entry.old,
                new=entry.new,
                at=entry.at,
                via=entry.via,
            )
        )

    async def audit(self, guild_id: int, limit: int = 20) -> list[AuditEntry]:
        """Return the guild's latest ``limit`` audit entries, newest first."""
        rows = await self._sql.all(
            select(config_audit)
            .where(config_audit.c.guild_id == guild_id)
            .order_by(config_audit.c.id.desc())
            .limit(limit)
        )
        return [
            AuditEntry(
                r["guild_id"], r["user_id"], r["what"], r["old"], r["new"], r["at"], r["via"]
            )
            for r in rows
        ]

    async def spent_by_tier(self, guild_id: int, since: float) -> list[tuple[int | None, Decimal]]:
        """Return the cents charged at or after ``since`` per tier role (None = no tier).

        Ordered by cents, largest first, then role id (None last).
        """
        # SUM of a bigint is numeric on PostgreSQL: cast back to an exact integer.
        micro = cast(func.sum(ledger.c.cost_micro), BigInteger).label("micro")
        rows = await self._sql.all(
            select(ledger.c.tier_role_id, micro)
            .where(ledger.c.guild_id == guild_id, ledger.c.at >= since)
            .group_by(ledger.c.tier_role_id)
            .order_by(micro.desc(), ledger.c.tier_role_id.nulls_last())
        )
        return [(r["tier_role_id"], from_micro(r["micro"])) for r in rows]
