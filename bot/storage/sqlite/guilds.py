"""SQLite guilds: :class:`bot.storage.repositories.GuildRepository` over an :class:`Executor`.

Tables ``guild_settings``, ``allowed_channels``, ``retired_keys`` (migration 0004) and
``default_keys`` (0011).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable

from bot.storage.models import GuildSettings, RetiredKey
from bot.storage.repositories import UNSET, LimitUpdate, limit_changes
from bot.storage.sqlite.engine import Executor

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


class SqliteGuilds:
    """Guild settings, limits, channels, current and retired keys (see ``GuildRepository``)."""

    def __init__(self, sql: Executor) -> None:
        self._sql = sql

    async def lock(self, guild_id: int) -> None:
        """Nothing to do: SQLite's ``BEGIN IMMEDIATE`` serialises every write transaction."""

    async def settings(self, guild_id: int) -> GuildSettings:
        """Return the guild's settings; defaults (all None, no channels) if it has none."""
        row = await self._sql.one("SELECT * FROM guild_settings WHERE guild_id = ?", (guild_id,))
        if row is None:
            return GuildSettings.default(guild_id)
        channels = await self._sql.all(
            "SELECT channel_id FROM allowed_channels WHERE guild_id = ?", (guild_id,)
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

    async def _update(self, guild_id: int, assignments: str, values: Iterable[object]) -> None:
        """``UPDATE guild_settings SET <assignments>`` for the guild, creating its row first."""
        async with self._sql.write() as tx:
            await tx.run("INSERT OR IGNORE INTO guild_settings (guild_id) VALUES (?)", (guild_id,))
            await tx.run(
                f"UPDATE guild_settings SET {assignments} WHERE guild_id = ?",
                [*values, guild_id],
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
        """Change some of the guild's limits (a value, None = Settings default, UNSET = keep).

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
            # Column names come from LIMIT_NAMES, never from user input.
            assignments = ", ".join(f"{name} = ?" for name in changes)
            await self._update(guild_id, assignments, changes.values())

    async def set_allowed_channels(self, guild_id: int, channel_ids: Iterable[int]) -> None:
        """Replace the guild's allowed channels (empty = commands allowed everywhere)."""
        async with self._sql.write() as tx:
            await tx.run("INSERT OR IGNORE INTO guild_settings (guild_id) VALUES (?)", (guild_id,))
            await tx.run("DELETE FROM allowed_channels WHERE guild_id = ?", (guild_id,))
            await tx.run_many(
                "INSERT OR IGNORE INTO allowed_channels (guild_id, channel_id) VALUES (?, ?)",
                [(guild_id, channel_id) for channel_id in channel_ids],
            )

    async def set_admin_channel(self, guild_id: int, channel_id: int | None) -> None:
        """Set (or with None, clear) the channel for admin notices."""
        await self._update(guild_id, "admin_channel_id = ?", (channel_id,))

    async def set_notified_problem(self, guild_id: int, problem: str | None) -> bool:
        """Record the problem admins were told about; return True if it differs from before."""
        async with self._sql.write() as tx:
            if (await SqliteGuilds(tx).settings(guild_id)).notified_problem == problem:
                return False
            await SqliteGuilds(tx)._update(guild_id, "notified_problem = ?", (problem,))
            return True

    # -- API keys -----------------------------------------------------------------------------

    async def set_api_key(self, guild_id: int, ciphertext: bytes, last4: str) -> None:
        """Store the guild's encrypted API key and its last four characters."""
        await self._update(
            guild_id, "api_key_ciphertext = ?, api_key_last4 = ?", (ciphertext, last4)
        )

    async def clear_api_key(self, guild_id: int) -> None:
        """Forget the guild's API key."""
        await self._sql.run(
            "UPDATE guild_settings SET api_key_ciphertext = NULL, api_key_last4 = NULL"
            " WHERE guild_id = ?",
            (guild_id,),
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
            guilds = SqliteGuilds(tx)
            if retire:
                await guilds._retire(guild_id, old_fingerprint, at)
            if new is not None:
                await guilds.set_api_key(guild_id, *new)
            else:
                await guilds.clear_api_key(guild_id)

    async def _retire(self, guild_id: int, key_fingerprint: str | None, at: float) -> None:
        row = await self._sql.one(
            "SELECT api_key_ciphertext, api_key_last4 FROM guild_settings WHERE guild_id = ?",
            (guild_id,),
        )
        if row is None or row["api_key_ciphertext"] is None:
            return
        # A reservation is a request in flight on the key: its job may be stored a moment
        # from now (issue 18, E1). One with no fingerprint (older schema) may be on any key.
        in_use = (
            key_fingerprint is None
            or await self._sql.integer(
                "SELECT COUNT(*) FROM jobs WHERE status = 'pending'"
                " AND guild_id = ? AND key_fingerprint = ?",
                (guild_id, key_fingerprint),
            )
            or await self._sql.integer(
                "SELECT COUNT(*) FROM reservations WHERE guild_id = ?"
                " AND (key_fingerprint = ? OR key_fingerprint IS NULL)",
                (guild_id, key_fingerprint),
            )
        )
        if in_use:
            await self._sql.run(
                "INSERT OR REPLACE INTO retired_keys"
                " (guild_id, fingerprint, ciphertext, last4, retired_at) VALUES (?, ?, ?, ?, ?)",
                (guild_id, key_fingerprint, row["api_key_ciphertext"], row["api_key_last4"], at),
            )

    async def retired_keys(self, guild_id: int) -> list[RetiredKey]:
        """Return the guild's retired API keys, most recently retired first."""
        rows = await self._sql.all(
            "SELECT id, guild_id, fingerprint, ciphertext, last4, retired_at FROM retired_keys"
            " WHERE guild_id = ? ORDER BY retired_at DESC, id DESC",
            (guild_id,),
        )
        return [RetiredKey(**dict(row)) for row in rows]

    async def set_retired_fingerprint(self, retired_id: int, key_fingerprint: str) -> None:
        """Record the fingerprint of a retired key first decrypted after it was retired."""
        async with self._sql.write() as tx:
            await tx.run(
                "UPDATE OR IGNORE retired_keys SET fingerprint = ? WHERE id = ?",
                (key_fingerprint, retired_id),
            )
            # Ignored: another row holds the same key already; this copy is not needed.
            await tx.run(
                "DELETE FROM retired_keys WHERE id = ? AND fingerprint IS NULL", (retired_id,)
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
                "INSERT INTO default_keys (fingerprint, ciphertext, stored_at) VALUES (?, ?, ?)"
                " ON CONFLICT (fingerprint) DO UPDATE SET ciphertext = excluded.ciphertext,"
                " stored_at = excluded.stored_at, retired_at = NULL",
                (key_fingerprint, ciphertext, at),
            )
            await tx.run(
                "UPDATE default_keys SET retired_at = ? WHERE retired_at IS NULL"
                " AND fingerprint <> ?",
                (at, key_fingerprint),
            )
            await tx.run(RELEASED_DEFAULT_KEYS_SQL)
            rows = await tx.all(
                "SELECT fingerprint FROM default_keys WHERE retired_at IS NOT NULL"
                " ORDER BY retired_at, fingerprint"
            )
        return [row["fingerprint"] for row in rows]

    async def default_key(self, key_fingerprint: str) -> bytes | None:
        """Return the ciphertext of the stored default key with that fingerprint, or None."""
        row = await self._sql.one(
            "SELECT ciphertext FROM default_keys WHERE fingerprint = ?", (key_fingerprint,)
        )
        return None if row is None else bytes(row["ciphertext"])

    async def reencrypt_keys(self, reencrypt: Callable[[bytes], bytes]) -> int:
        """Replace every stored ciphertext by ``reencrypt(it)`` in one transaction; how many."""
        count = 0
        async with self._sql.write() as tx:
            for row in await tx.all(
                "SELECT guild_id, api_key_ciphertext FROM guild_settings"
                " WHERE api_key_ciphertext IS NOT NULL"
            ):
                await tx.run(
                    "UPDATE guild_settings SET api_key_ciphertext = ? WHERE guild_id = ?",
                    (reencrypt(row["api_key_ciphertext"]), row["guild_id"]),
                )
                count += 1
            for row in await tx.all("SELECT id, ciphertext FROM retired_keys"):
                await tx.run(
                    "UPDATE retired_keys SET ciphertext = ? WHERE id = ?",
                    (reencrypt(row["ciphertext"]), row["id"]),
                )
                count += 1
            for row in await tx.all("SELECT fingerprint, ciphertext FROM default_keys"):
                await tx.run(
                    "UPDATE default_keys SET ciphertext = ? WHERE fingerprint = ?",
                    (reencrypt(row["ciphertext"]), row["fingerprint"]),
                )
                count += 1
        return count
