"""Guild settings, allowed channels, current, retired and default API keys: :class:`GuildStore`.

Tables ``guild_settings``, ``allowed_channels``, ``retired_keys`` and ``default_keys``, both
engines. The writes of one guild take the guild's lock first (``Sql.lock_guild``: PostgreSQL's
transaction-scoped advisory lock; SQLite's writer lock already serialises every write), so
that a check-then-write of one guild never interleaves with another's (``GuildStore.lock``).

Keys are stored Fernet-encrypted only (``ciphertext``); no statement here sees a plaintext key.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from typing import Any, Final

from sqlalchemy import (
    ColumnElement,
    Delete,
    Exists,
    bindparam,
    delete,
    exists,
    insert,
    literal,
    or_,
    select,
    update,
)

from bot.domain import UNSET, GuildSettings, JobStatus, LimitUpdate, RetiredKey, Unset
from bot.storage import schema
from bot.storage.repos.dialect import upsert
from bot.storage.sql import Sql

_settings = schema.guild_settings
_channels = schema.allowed_channels
_retired = schema.retired_keys
_defaults = schema.default_keys
_jobs = schema.jobs
_reservations = schema.reservations

# Inline, not a bound parameter, as in the SQL this replaces: a generic plan of a prepared
# statement (PostgreSQL's, after a few runs) cannot prove a parameter equal to the predicate of
# the partial indexes on pending jobs (``WHERE status = 'pending'``), a literal it can.
_PENDING = literal(JobStatus.PENDING.value, literal_execute=True)


LIMIT_NAMES: Final = (
    "monthly_budget_cents",
    "user_daily_budget_cents",
    "max_pending_videos_per_user",
    "max_pending_videos_per_guild",
)
"""The limits of :class:`~bot.domain.GuildSettings` that admins change."""


def limit_changes(*updates: LimitUpdate) -> dict[str, int | None]:
    """Pair ``update_limits``' arguments (in :data:`LIMIT_NAMES` order) with their names.

    Returns:
        ``{column: value}`` for the limits given, :data:`UNSET` ones left out; the names
        come from :data:`LIMIT_NAMES`, never from user input, so engines may put them in SQL.
    """
    pairs = zip(LIMIT_NAMES, updates, strict=True)
    return {name: value for name, value in pairs if not isinstance(value, Unset)}


def _key_in_flight(
    guild: ColumnElement[Any] | int | None, fingerprint: ColumnElement[Any] | str
) -> tuple[Exists, Exists]:
    """Conditions: a pending job or a reservation (of the guild, if given) may use the key.

    A reservation is a request in flight on the key: its job may be stored a moment from now.
    One with no fingerprint (made before the reservations had one) may be on
    any key of its guild.
    """
    job = exists().where(_jobs.c.status == _PENDING, _jobs.c.key_fingerprint == fingerprint)
    held = exists().where(
        or_(
            _reservations.c.key_fingerprint == fingerprint,
            _reservations.c.key_fingerprint.is_(None),
        )
    )
    if guild is None:  # the default keys: any guild's jobs and reservations
        return job, held
    return job.where(_jobs.c.guild_id == guild), held.where(_reservations.c.guild_id == guild)


def _released_retired_keys() -> Delete:
    job, held = _key_in_flight(_retired.c.guild_id, _retired.c.fingerprint)
    return delete(_retired).where(_retired.c.fingerprint.is_not(None), ~job, ~held)


def _released_default_keys() -> Delete:
    job, held = _key_in_flight(None, _defaults.c.fingerprint)
    return delete(_defaults).where(_defaults.c.retired_at.is_not(None), ~job, ~held)


RELEASED_RETIRED_KEYS = _released_retired_keys()
"""Deletes the guilds' retired keys that no pending job and no reservation of theirs uses."""

RELEASED_DEFAULT_KEYS = _released_default_keys()
"""Deletes the retired default keys that no pending job (of any guild) nor reservation uses."""


async def _ensure(tx: Sql, guild_id: int) -> None:
    """Lock the guild and create its settings row if it has none (defaults: all NULL)."""
    # Under the guild's lock, so the check and the insert cannot interleave with another's.
    await tx.lock_guild(guild_id)
    await tx.run(
        upsert(tx, _settings)
        .values(guild_id=guild_id)
        .on_conflict_do_nothing(index_elements=[_settings.c.guild_id])
    )


async def _retire(tx: Sql, guild_id: int, key_fingerprint: str | None, at: float) -> None:
    """Move the guild's current key to ``retired_keys`` if something live may use it.

    Runs on ``tx``, the caller's transaction, under the guild's lock it holds: the check of
    the key's jobs and reservations and the copy are one atomic step with the key's
    replacement, so a live job's key is never missing (``GuildStore.replace_api_key``).
    """
    row = await tx.one(
        select(_settings.c.api_key_ciphertext, _settings.c.api_key_last4).where(
            _settings.c.guild_id == guild_id
        )
    )
    if row is None or row["api_key_ciphertext"] is None:
        return
    # Unknown fingerprint: its jobs cannot be counted, so it is kept whatever they are.
    if key_fingerprint is not None:
        job, held = _key_in_flight(guild_id, key_fingerprint)
        if not await tx.scalar(select(job)) and not await tx.scalar(select(held)):
            return
    stmt = upsert(tx, _retired).values(
        guild_id=guild_id,
        fingerprint=key_fingerprint,
        ciphertext=row["api_key_ciphertext"],
        last4=row["api_key_last4"],
        retired_at=at,
    )
    await tx.run(
        stmt.on_conflict_do_update(
            index_elements=[_retired.c.guild_id, _retired.c.fingerprint],
            set_={
                "ciphertext": stmt.excluded.ciphertext,
                "last4": stmt.excluded.last4,
                "retired_at": stmt.excluded.retired_at,
            },
        )
    )


class GuildStore:
    """Per-guild settings: limits, channels, the notified problem, current and retired API keys.

    Keys are stored Fernet-encrypted only (``ciphertext``) with their last four characters for
    display; a plaintext key never reaches storage. The bot's default keys (``GENAPI_API_KEY``,
    current and previous) are kept here too, encrypted the same way.

    Args:
        sql: the database's executor, or one transaction's.
    """

    def __init__(self, sql: Sql) -> None:
        self._sql = sql

    async def lock(self, guild_id: int) -> None:
        """Serialise this transaction against every other one that locks ``guild_id``.

        Only meaningful inside :meth:`Database.transaction`; held until it ends. A budget check
        and the writes that change what it sums call it first.
        """
        await self._sql.lock_guild(guild_id)

    async def settings(self, guild_id: int) -> GuildSettings:
        """Return the guild's settings; :meth:`GuildSettings.default` if it never changed any."""
        row = await self._sql.one(select(_settings).where(_settings.c.guild_id == guild_id))
        if row is None:
            return GuildSettings.default(guild_id)
        channels = await self._sql.all(
            select(_channels.c.channel_id).where(_channels.c.guild_id == guild_id)
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
            locale=row["locale"],
        )

    async def _update(self, guild_id: int, values: Mapping[str, object]) -> None:
        """``UPDATE guild_settings`` for the guild, creating its row first.

        Column names come from this module (or :data:`LIMIT_NAMES`), never from user input;
        Core refuses a name that is not a column.
        """
        async with self._sql.write() as tx:
            await _ensure(tx, guild_id)
            await tx.run(update(_settings).where(_settings.c.guild_id == guild_id).values(values))

    async def update_limits(
        self,
        guild_id: int,
        *,
        monthly_budget_cents: LimitUpdate = UNSET,
        user_daily_budget_cents: LimitUpdate = UNSET,
        max_pending_videos_per_user: LimitUpdate = UNSET,
        max_pending_videos_per_guild: LimitUpdate = UNSET,
    ) -> None:
        """Change some of the guild's limits.

        Args:
            guild_id: the guild.
            monthly_budget_cents: whole cents per UTC calendar month.
            user_daily_budget_cents: whole cents per member per UTC day.
            max_pending_videos_per_user: cap on a member's pending videos.
            max_pending_videos_per_guild: cap on the guild's pending videos.

        Each limit is a value, None (back to the Settings default) or :data:`UNSET` (kept).

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
        rows = [{"guild_id": guild_id, "channel_id": c} for c in sorted(set(channel_ids))]
        async with self._sql.write() as tx:
            await _ensure(tx, guild_id)  # allowed_channels references guild_settings
            await tx.run(delete(_channels).where(_channels.c.guild_id == guild_id))
            if rows:  # an executemany of no rows would run the statement once, bare
                await tx.run(insert(_channels), rows)

    async def set_admin_channel(self, guild_id: int, channel_id: int | None) -> None:
        """Set (or with None, clear) the channel for admin notices."""
        await self._update(guild_id, {"admin_channel_id": channel_id})

    async def set_locale(self, guild_id: int, locale: str | None) -> None:
        """Set (or with None, clear) the language of the server's public messages."""
        await self._update(guild_id, {"locale": locale})

    async def set_notified_problem(self, guild_id: int, problem: str | None) -> bool:
        """Record the problem admins were last told about (None = resolved).

        Returns:
            True if it changed, i.e. admins should be notified (once per problem).
        """
        async with self._sql.write() as tx:
            await tx.lock_guild(guild_id)
            current = await tx.scalar(
                select(_settings.c.notified_problem).where(_settings.c.guild_id == guild_id)
            )
            if current == problem:  # None also when the guild has no row: nothing notified
                return False
            await GuildStore(tx)._update(guild_id, {"notified_problem": problem})
        return True

    # -- API keys -----------------------------------------------------------------------------

    async def set_api_key(self, guild_id: int, ciphertext: bytes, last4: str) -> None:
        """Store the guild's encrypted API key and its last four characters."""
        await self._update(guild_id, {"api_key_ciphertext": ciphertext, "api_key_last4": last4})

    async def clear_api_key(self, guild_id: int) -> None:
        """Forget the guild's API key (not retiring it)."""
        await self._sql.run(
            update(_settings)
            .where(_settings.c.guild_id == guild_id)
            .values(api_key_ciphertext=None, api_key_last4=None)
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
        """Store ``new`` (ciphertext, last4) as the guild's key, or remove its key (None).

        Args:
            guild_id: the guild.
            new: the new key's ciphertext and last four characters; None to remove the key.
            retire: first move the current key to the retired keys if a pending job or a
                reservation (a request in flight) of the guild uses it, all in one transaction
                under the guild's lock: a live job's key is never missing.
            old_fingerprint: the current key's fingerprint; None when it cannot be decrypted
                now (then it is retired whatever its jobs, as they cannot be counted).
            at: UTC epoch seconds, the retirement time.
        """
        async with self._sql.write() as tx:
            await tx.lock_guild(guild_id)
            if retire:
                await _retire(tx, guild_id, old_fingerprint, at)
            guilds = GuildStore(tx)
            if new is not None:
                await guilds.set_api_key(guild_id, *new)
            else:
                await guilds.clear_api_key(guild_id)

    async def retired_keys(self, guild_id: int) -> list[RetiredKey]:
        """Return the guild's retired API keys, most recently retired first."""
        rows = await self._sql.all(
            select(
                _retired.c.id,
                _retired.c.guild_id,
                _retired.c.fingerprint,
                _retired.c.ciphertext,
                _retired.c.last4,
                _retired.c.retired_at,
            )
            .where(_retired.c.guild_id == guild_id)
            .order_by(_retired.c.retired_at.desc(), _retired.c.id.desc())
        )
        return [RetiredKey(**dict(row)) for row in rows]

    async def set_retired_fingerprint(self, retired_id: int, key_fingerprint: str) -> None:
        """Record the fingerprint of a retired key first decrypted after it was retired.

        If the guild has another retired row with that fingerprint, this one is deleted instead.
        """
        other = _retired.alias("other")
        async with self._sql.write() as tx:
            guild_id = await tx.scalar(
                select(_retired.c.guild_id).where(_retired.c.id == retired_id)
            )
            if guild_id is None:
                return
            await tx.lock_guild(guild_id)
            await tx.run(
                update(_retired)
                .where(
                    _retired.c.id == retired_id,
                    ~exists().where(
                        other.c.guild_id == _retired.c.guild_id,
                        other.c.fingerprint == key_fingerprint,
                    ),
                )
                .values(fingerprint=key_fingerprint)
            )
            # Not updated: another row holds the same key already; this copy is not needed.
            await tx.run(
                delete(_retired).where(
                    _retired.c.id == retired_id, _retired.c.fingerprint.is_(None)
                )
            )

    async def delete_released_keys(self) -> int:
        """Delete the retired keys no pending job nor reservation uses; return how many.

        Guilds' retired keys (fingerprint known) and retired default keys (:meth:`keep_default_key`)
        alike.
        """
        async with self._sql.write() as tx:
            return await tx.run(RELEASED_RETIRED_KEYS) + await tx.run(RELEASED_DEFAULT_KEYS)

    async def keep_default_key(
        self, key_fingerprint: str, ciphertext: bytes, at: float
    ) -> list[str]:
        """Store the bot's default key (``GENAPI_API_KEY``) encrypted; retire the previous ones.

        In one transaction: the key is stored (or its ciphertext replaced) as current; any other
        current default key is retired at ``at``; retired default keys that no pending job and
        no reservation use are deleted.

        Args:
            key_fingerprint: :func:`bot.services.keys.fingerprint` of the key.
            ciphertext: the key, Fernet-encrypted with ``KEY_ENCRYPTION_KEY``.
            at: UTC epoch seconds.

        Returns:
            The fingerprints of the retired default keys still kept (something uses them).
        """
        stored = upsert(self._sql, _defaults).values(
            fingerprint=key_fingerprint, ciphertext=ciphertext, stored_at=at
        )
        async with self._sql.write() as tx:
            await tx.run(
                stored.on_conflict_do_update(
                    index_elements=[_defaults.c.fingerprint],
                    set_={
                        "ciphertext": stored.excluded.ciphertext,
                        "stored_at": stored.excluded.stored_at,
                        "retired_at": None,
                    },
                )
            )
            await tx.run(
                update(_defaults)
                .where(_defaults.c.retired_at.is_(None), _defaults.c.fingerprint != key_fingerprint)
                .values(retired_at=at)
            )
            await tx.run(RELEASED_DEFAULT_KEYS)
            rows = await tx.all(
                select(_defaults.c.fingerprint)
                .where(_defaults.c.retired_at.is_not(None))
                .order_by(_defaults.c.retired_at, _defaults.c.fingerprint)
            )
        return [str(row["fingerprint"]) for row in rows]

    async def default_key(self, key_fingerprint: str) -> bytes | None:
        """Return the ciphertext of the stored default key with that fingerprint, or None."""
        ciphertext = await self._sql.scalar(
            select(_defaults.c.ciphertext).where(_defaults.c.fingerprint == key_fingerprint)
        )
        return None if ciphertext is None else bytes(ciphertext)

    async def reencrypt_keys(self, reencrypt: Callable[[bytes], bytes]) -> int:
        """Replace every stored ciphertext by ``reencrypt(it)`` in one transaction; how many.

        The rows are read ``FOR UPDATE`` (PostgreSQL: no other transaction changes a key between
        its read and its rewrite; SQLite's compiler leaves the clause out, its writer lock
        already excludes every other write).
        """
        count = 0
        async with self._sql.write() as tx:
            for table, key, column in (
                (_settings, _settings.c.guild_id, _settings.c.api_key_ciphertext),
                (_retired, _retired.c.id, _retired.c.ciphertext),
                (_defaults, _defaults.c.fingerprint, _defaults.c.ciphertext),
            ):
                rows = await tx.all(
                    select(key, column).where(column.is_not(None)).with_for_update()
                )
                if not rows:
                    continue
                # Bind names differ from the columns': Core reserves those for SET values.
                await tx.run(
                    update(table)
                    .where(key == bindparam("row_key"))
                    .values({column.name: bindparam("row_ciphertext")}),
                    [
                        {"row_key": row[key.name], "row_ciphertext": reencrypt(row[column.name])}
                        for row in rows
                    ],
                )
                count += len(rows)
        return count
