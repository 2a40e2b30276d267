"""PostgreSQL guilds: :class:`bot.storage.repositories.GuildRepository` over an :class:`Executor`.

Tables ``guild_settings``, ``allowed_channels``, ``retired_keys`` and ``default_keys``.
:meth:`PgGuilds.lock` is the guild's advisory lock (``pg_advisory_xact_lock(guild_id)``), held
until the transaction ends; the writes here take it too, so that a check-then-write of one guild
never interleaves.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping

from bot.storage.models import GuildSettings, RetiredKey
from bot.storage.postgres.engine import Executor
from bot.storage.repositories import UNSET, LimitUpdate, limit_changes

RELEASED_RETIRED_KEYS_SQL = (
    "DELETE FROM retired_keys WHERE fingerprint IS NOT NULL AND NOT EXISTS ("
    " SELECT 1 FROM jobs WHERE jobs.status = 'pending'"
    " AND jobs.guild_id = retired_keys.guild_id"
    " AND jobs.key_fingerprint = retired_keys.fingerprint)"
    " AND NOT EXISTS (SELECT 1 FROM reservations r WHERE r.guild_id = retired_keys.guild_id"
    " AND (r.key_fingerprint = retired_keys.fingerprint OR r.key_fingerprint IS NULL))"
)
"""Deletes the guilds' retired keys that no pending job and no reservation uses."""

RELEASED_DEFAULT_KEYS_SQL = (
    "DELETE FROM default_keys WHERE retired_at IS NOT NULL AND NOT EXISTS ("
    " SELECT 1 FROM jobs WHERE jobs.status = 'pending'"
    " AND jobs.key_fingerprint = default_keys.fingerprint)"
    " AND NOT EXISTS (SELECT 1 FROM reservations r"
    " WHERE r.key_fingerprint = default_keys.fingerprint OR r.key_fingerprint IS NULL)"
)
"""Deletes the retired default keys that no pending job (of any guild) nor reservation uses."""


class PgGuilds:
    """Guild settings, limits, channels, current and retired keys (see ``GuildRepository``)."""

    def __init__(self, sql: Executor) -> None:
        self._sql = sql

    async def lock(self, guild_id: int) -> None:
        """Hold the guild's advisory lock until the transaction ends (nothing outside one)."""
        await self._sql.lock_guild(guild_id)

    async def settings(self, guild_id: int) -> GuildSettings:
        """Return the guild's settings; defaults (all None, no channels) if it has none."""
        row = await self._sql.one("SELECT * FROM guild_settings WHERE guild_id = $1", guild_id)
        if row is None:
            return GuildSettings.default(guild_id)
        channels = await self._sql.all(
            "SELECT channel_id FROM allowed_channels WHERE guild_id = $1", guild_id
        )
        return GuildSettings(
            guild_id=guild_id,
            api_key_ciphertext=row["api_key_ciphertext"],
            api_key_last4=row["api_key_last4"],
            monthly_budget_cents=row["monthly_budget_cents"],
            user_daily_budget_cents=row["user_daily_budget_cents"],
            max_pending_videos_per_user=row["max_pending_videos_per_user"],
            max_pending_videos_per_guild=row["max_pending_videos_per_guild"],
            allowed_channel_ids=frozenset(r["channel_id"] for r in channels),
            admin_channel_id=row["admin_channel_id"],
            notified_problem=row["notified_problem"],
        )

    async def _ensure(self, tx: Executor, guild_id: int) -> None:
        # Under the guild's lock, so the check and the insert cannot interleave with another's.
        await tx.lock_guild(guild_id)
        await tx.run(
            "INSERT INTO guild_settings (guild_id) SELECT $1::bigint"
            " WHERE NOT EXISTS (SELECT 1 FROM guild_settings WHERE guild_id = $1)",
            guild_id,
        )

    async def _update(self, guild_id: int, assignments: Mapping[str, object]) -> None:
        """``UPDATE guild_settings`` for the guild, creating its row first.

        Column names come from this module (or :data:`LIMIT_NAMES`), never from user input.
        """
        sets = ", ".join(f"{name} = ${i}" for i, name in enumerate(assignments, start=2))
        async with self._sql.write() as tx:
            await self._ensure(tx, guild_id)
            await tx.run(
                f"UPDATE guild_settings SET {sets} WHERE guild_id = $1",
                guild_id,
                *assignments.values(),
            )

    async def update_limits(
        self,
        guild_id: int,
        *,
        monthly_budget_cents: LimitUpdate = UNSET,
        user_daily_budget_cents: LimitUpdate = UNSET,
        max_pending_videos_per_user: LimitUpdate = UNSET,
        max_pending_videos_per_guild: LimitUpdate = UNSET,
    ) -> None:
        """Change some of the guild's limits (a value, None = the default, UNSET = kept).

        Raises:
            ConstraintError: a negative budget or a cap below 1.
        """
        changes = limit_changes(
            monthly_budget_cents,
            user_daily_budget_cents,
            max_pending_videos_per_user,
            max_pending_videos_per_guild,
        )
        if changes:
            await self._update(guild_id, changes)

    async def set_allowed_channels(self, guild_id: int, channel_ids: Iterable[int]) -> None:
        """Replace the channels the commands may be used in (empty = everywhere)."""
        async with self._sql.write() as tx:
            await self._ensure(tx, guild_id)
            await tx.run("DELETE FROM allowed_channels WHERE guild_id = $1", guild_id)
            await tx.run(
                "INSERT INTO allowed_channels (guild_id, channel_id)"
                " SELECT $1, unnest($2::bigint[])",
                guild_id,
                sorted(set(channel_ids)),
            )

    async def set_admin_channel(self, guild_id: int, channel_id: int | None) -> None:
        """Set (or with None, clear) the channel for admin notices."""
        await self._update(guild_id, {"admin_channel_id": channel_id})

    async def set_notified_problem(self, guild_id: int, problem: str | None) -> bool:
        """Record the problem admins were last told about; True if it changed."""
        async with self._sql.write() as tx:
            await tx.lock_guild(guild_id)
            current = await tx.one(
                "SELECT notified_problem FROM guild_settings WHERE guild_id = $1", guild_id
            )
            if (None if current is None else current["notified_problem"]) == problem:
                return False
            await PgGuilds(tx)._update(guild_id, {"notified_problem": problem})
        return True

    # -- API keys -----------------------------------------------------------------------------

    async def set_api_key(self, guild_id: int, ciphertext: bytes, last4: str) -> None:
        """Store the guild's encrypted API key and its last four characters."""
        await self._update(guild_id, {"api_key_ciphertext": ciphertext, "api_key_last4": last4})

    async def clear_api_key(self, guild_id: int) -> None:
        """Forget the guild's API key (not retiring it)."""
        await self._sql.run(
            "UPDATE guild_settings SET api_key_ciphertext = NULL, api_key_last4 = NULL"
            " WHERE guild_id = $1",
            guild_id,
        )

    async def replace_api_key(
        self,
        guild_id: int,
        new: tuple[bytes, str] | None,
        *,
        retire: bool,
        old_fingerprint: str | None,
        at: float,
    ) -> None:
        """Store ``new`` (ciphertext, last4) as the guild's key, or remove it (None).

        With ``retire``, the current key first moves to ``retired_keys`` if a pending job uses
        it (or if ``old_fingerprint`` is None: its jobs cannot be counted), all in one
        transaction.
        """
        async with self._sql.write() as tx:
            await tx.lock_guild(guild_id)
            guilds = PgGuilds(tx)
            if retire:
                await guilds._retire(tx, guild_id, old_fingerprint, at)
            if new is not None:
                await guilds.set_api_key(guild_id, *new)
            else:
                await guilds.clear_api_key(guild_id)

    async def _retire(
        self, tx: Executor, guild_id: int, key_fingerprint: str | None, at: float
    ) -> None:
        row = await tx.one(
            "SELECT api_key_ciphertext, api_key_last4 FROM guild_settings WHERE guild_id = $1",
            guild_id,
        )
        if row is None or row["api_key_ciphertext"] is None:
            return
        # A reservation is a request in flight on the key: its job may be stored a moment
        # from now (issue 18, E1); both are written under the guild's lock, held here. One
        # with no fingerprint (older schema) may be on any key.
        in_use = (
            key_fingerprint is None
            or await tx.integer(
                "SELECT COUNT(*) FROM jobs WHERE status = 'pending'"
                " AND guild_id = $1 AND key_fingerprint = $2",
                guild_id,
                key_fingerprint,
            )
            or await tx.integer(
                "SELECT COUNT(*) FROM reservations WHERE guild_id = $1"
                " AND (key_fingerprint = $2 OR key_fingerprint IS NULL)",
                guild_id,
                key_fingerprint,
            )
        )
        if in_use:
            await tx.run(
                "INSERT INTO retired_keys (guild_id, fingerprint, ciphertext, last4, retired_at)"
                " VALUES ($1, $2, $3, $4, $5) ON CONFLICT (guild_id, fingerprint) DO UPDATE SET"
                " ciphertext = EXCLUDED.ciphertext, last4 = EXCLUDED.last4,"
                " retired_at = EXCLUDED.retired_at",
                guild_id,
                key_fingerprint,
                row["api_key_ciphertext"],
                row["api_key_last4"],
                at,
            )

    async def retired_keys(self, guild_id: int) -> list[RetiredKey]:
        """Return the guild's retired API keys, most recently retired first."""
        rows = await self._sql.all(
            "SELECT id, guild_id, fingerprint, ciphertext, last4, retired_at FROM retired_keys"
            " WHERE guild_id = $1 ORDER BY retired_at DESC, id DESC",
            guild_id,
        )
        return [RetiredKey(**dict(row)) for row in rows]

    async def set_retired_fingerprint(self, retired_id: int, key_fingerprint: str) -> None:
        """Record the fingerprint of a retired key first decrypted after it was retired.

        If the guild has another retired row with that fingerprint, this one is deleted instead.
        """
        async with self._sql.write() as tx:
            guild_id = await tx.value("SELECT guild_id FROM retired_keys WHERE id = $1", retired_id)
            if guild_id is None:
                return
            await tx.lock_guild(guild_id)
            await tx.run(
                "UPDATE retired_keys SET fingerprint = $1 WHERE id = $2 AND NOT EXISTS ("
                " SELECT 1 FROM retired_keys other WHERE other.guild_id = retired_keys.guild_id"
                " AND other.fingerprint = $1)",
                key_fingerprint,
                retired_id,
            )
            # Not updated: another row holds the same key already; this copy is not needed.
            await tx.run(
                "DELETE FROM retired_keys WHERE id = $1 AND fingerprint IS NULL", retired_id
            )

    async def delete_released_keys(self) -> int:
        """Delete the retired keys (guilds' and default) nothing live uses; return how many."""
        async with self._sql.write() as tx:
            return await tx.run(RELEASED_RETIRED_KEYS_SQL) + await tx.run(RELEASED_DEFAULT_KEYS_SQL)

    async def keep_default_key(
        self, key_fingerprint: str, ciphertext: bytes, at: float
    ) -> list[str]:
        """Store the current default key, retire the others, drop the released ones.

        Returns:
            The fingerprints of the retired default keys still kept, oldest retirement first.
        """
        async with self._sql.write() as tx:
            await tx.run(
                "INSERT INTO default_keys (fingerprint, ciphertext, stored_at) VALUES ($1, $2, $3)"
                " ON CONFLICT (fingerprint) DO UPDATE SET ciphertext = EXCLUDED.ciphertext,"
                " stored_at = EXCLUDED.stored_at, retired_at = NULL",
                key_fingerprint,
                ciphertext,
                at,
            )
            await tx.run(
                "UPDATE default_keys SET retired_at = $1 WHERE retired_at IS NULL"
                " AND fingerprint <> $2",
                at,
                key_fingerprint,
            )
            await tx.run(RELEASED_DEFAULT_KEYS_SQL)
            rows = await tx.all(
                "SELECT fingerprint FROM default_keys WHERE retired_at IS NOT NULL"
                " ORDER BY retired_at, fingerprint"
            )
        return [str(row["fingerprint"]) for row in rows]

    async def default_key(self, key_fingerprint: str) -> bytes | None:
        """Return the ciphertext of the stored default key with that fingerprint, or None."""
        row = await self._sql.one(
            "SELECT ciphertext FROM default_keys WHERE fingerprint = $1", key_fingerprint
        )
        return None if row is None else bytes(row["ciphertext"])

    async def reencrypt_keys(self, reencrypt: Callable[[bytes], bytes]) -> int:
        """Replace every stored ciphertext by ``reencrypt(it)`` in one transaction; how many."""
        count = 0
        async with self._sql.write() as tx:
            for row in await tx.all(
                "SELECT guild_id, api_key_ciphertext FROM guild_settings"
                " WHERE api_key_ciphertext IS NOT NULL FOR UPDATE"
            ):
                await tx.run(
                    "UPDATE guild_settings SET api_key_ciphertext = $1 WHERE guild_id = $2",
                    reencrypt(row["api_key_ciphertext"]),
                    row["guild_id"],
                )
                count += 1
            for row in await tx.all("SELECT id, ciphertext FROM retired_keys FOR UPDATE"):
                await tx.run(
                    "UPDATE retired_keys SET ciphertext = $1 WHERE id = $2",
                    reencrypt(row["ciphertext"]),
                    row["id"],
                )
                count += 1
            for row in await tx.all("SELECT fingerprint, ciphertext FROM default_keys FOR UPDATE"):
                await tx.run(
                    "UPDATE default_keys SET ciphertext = $1 WHERE fingerprint = $2",
                    reencrypt(row["ciphertext"]),
                    row["fingerprint"],
                )
                count += 1
        return count
