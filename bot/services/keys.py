"""Which API key a request uses, and the guild keys' encryption at rest.

A guild's own key is stored only as Fernet ciphertext made with ``KEY_ENCRYPTION_KEY`` (plus
its last four characters, for display). A request uses the guild's key if it has one, else
``GENAPI_API_KEY``. Keys are handled as :class:`pydantic.SecretStr` so they never print; a
:func:`fingerprint` identifies a key in logs and in the ledger without revealing it.

A task belongs to the key that submitted it (its status can only be read with that key), so a
key stays while anything made with it is live:

- A key an admin replaces or removes is *retired*, not forgotten: it stays encrypted in
  ``retired_keys`` while a pending job of the guild uses it *or a reservation does* (a request
  in flight, whose job is stored a moment after its POST returns; the reservation carries the
  key's fingerprint). A trigger deletes it when its last job ends,
  :meth:`KeyResolver.sweep_retired` when its last reservation went without a job. A request
  checks, once its reservation is stored, that its key is still held
  (:meth:`KeyResolver.still_held`): a change between choosing the key and reserving is caught
  before anything is sent.
- The bot's default key (``GENAPI_API_KEY``) is stored encrypted at every start
  (:meth:`KeyResolver.keep_default`); after the owner changes it (after a leak, usually) the
  previous one stays in ``default_keys`` until its last job or reservation ends. Without
  ``KEY_ENCRYPTION_KEY`` no copy is kept (a key is never stored in clear): the old default
  key's jobs then wait, never fail.

A key that cannot be decrypted right now (``KEY_ENCRYPTION_KEY`` missing or changed), or that is
known nowhere, makes the poller try again later (:class:`KeyUnavailable`) with a warning, never
fail the job: the owner can still bring the key back.

``KEY_ENCRYPTION_KEY`` may hold several comma-separated Fernet keys (``MultiFernet``): the
first encrypts, all decrypt, and :meth:`KeyResolver.rotate` re-encrypts every stored key with
the first (``python -m bot rotate-keys``).
"""

from __future__ import annotations

import logging
from collections import OrderedDict
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Literal

from cryptography.fernet import Fernet, InvalidToken, MultiFernet
from pydantic import SecretStr

from bot.clock import Clock, SystemClock
from bot.config import fernet_keys
from bot.domain import Kind
from bot.errors import BotError, KeyEncryptionUnavailable, NoApiKeyConfigured
from bot.genapi.client import key_fingerprint as fingerprint
from bot.services.personal import PersonalKeyNeeded, PersonalKeyUnreadable, is_personal
from bot.storage import Database

log = logging.getLogger(__name__)

KEY_RETRY_SECONDS = 300.0
"""When a job's key cannot be used right now, seconds until its next poll (no upstream call)."""

MissingKeyNotice = Callable[[int, str], Awaitable[None]]
"""``async (guild_id, key_fingerprint)``: tell a guild's admins that a job of theirs waits for a
key known nowhere (:meth:`KeyResolver.set_missing_key_notice`)."""

NOTICES_REMEMBERED = 4096
"""(guild, key) pairs whose admins were told of a missing key, per process (then forgotten)."""

RESOLVED_KEYS_CACHED = 4096
"""Keys found by :meth:`KeyResolver.resolve_fingerprint` kept decrypted in memory (LRU).

One entry per (guild, key) with pending jobs: 1,000 at the scale benchmark's 1,000 guilds.
"""


class StoredKeyUnreadable(NoApiKeyConfigured):
    """The guild's stored key cannot be decrypted: ``KEY_ENCRYPTION_KEY`` changed since.

    A :class:`~bot.errors.NoApiKeyConfigured`, so the user is told that an admin must set the
    key again, which is the remedy.
    """


class KeyUnavailable(BotError):
    """A job's key is stored but cannot be decrypted right now: poll the job again later.

    ``KEY_ENCRYPTION_KEY`` is unset, or holds no key that made the ciphertext; the owner may
    fix the setting and restart, so the job must not be failed for it.
    """


class KeyUnknown(KeyUnavailable):
    """A job's key is known nowhere: not the default key, nor a stored one, current or kept.

    Still a reason to wait, not to fail: the task is paid for and the owner may bring the key
    back (docs/architecture.md, "Keys").
    """


class KeyVault:
    """Encrypts and decrypts guild API keys with the ``KEY_ENCRYPTION_KEY`` Fernet keys.

    Args:
        secret: one Fernet key (urlsafe base64 of 32 bytes) or several, comma-separated: the
            first encrypts, every one decrypts (``cryptography.fernet.MultiFernet``). None when
            the owner has not set it.
        on_key: called with every API key encrypted or decrypted here (the log redaction
            filter learns it: ``bot.ops.logs.RedactionFilter.add``).

    Raises:
        ValueError: an entry is not a Fernet key (settings validation checks this first).
    """

    def __init__(
        self, secret: SecretStr | None, *, on_key: Callable[[str], None] | None = None
    ) -> None:
        self._on_key = on_key
        keys = [] if secret is None else fernet_keys(secret.get_secret_value())
        self._fernet = MultiFernet([Fernet(key) for key in keys]) if keys else None

    @property
    def available(self) -> bool:
        """Whether keys can be encrypted and decrypted (``KEY_ENCRYPTION_KEY`` is set)."""
        return self._fernet is not None

    def encrypt(self, api_key: str, *, learn: bool = True) -> bytes:
        """Return the ciphertext of ``api_key``.

        Args:
            api_key: the key (or another secret) to encrypt.
            learn: tell ``on_key`` about it; False for a secret the log filter recognises by
                its shape (an interaction token), which would only fill its bounded set.

        Raises:
            KeyEncryptionUnavailable: ``KEY_ENCRYPTION_KEY`` is not set; the key must not be
                stored (and never in clear).
        """
        if self._fernet is None:
            raise KeyEncryptionUnavailable
        if learn and self._on_key is not None:
            self._on_key(api_key)
        return self._fernet.encrypt(api_key.encode("utf-8"))

    def decrypt(self, ciphertext: bytes, *, learn: bool = True) -> str:
        """Return the API key of ``ciphertext``.

        Args:
            ciphertext: what :meth:`encrypt` returned.
            learn: tell ``on_key`` about the result (see :meth:`encrypt`).

        Raises:
            KeyEncryptionUnavailable: ``KEY_ENCRYPTION_KEY`` is not set.
            StoredKeyUnreadable: the ciphertext was made with another key, or is damaged.
        """
        if self._fernet is None:
            raise KeyEncryptionUnavailable
        try:
            api_key = self._fernet.decrypt(ciphertext).decode("utf-8")
        except InvalidToken:
            raise StoredKeyUnreadable from None
        if learn and self._on_key is not None:
            self._on_key(api_key)
        return api_key

    def rotate(self, ciphertext: bytes) -> bytes:
        """Return ``ciphertext`` re-encrypted with the first ``KEY_ENCRYPTION_KEY``.

        Raises:
            KeyEncryptionUnavailable: ``KEY_ENCRYPTION_KEY`` is not set.
            StoredKeyUnreadable: no configured key made the ciphertext.
        """
        if self._fernet is None:
            raise KeyEncryptionUnavailable
        try:
            return self._fernet.rotate(ciphertext)
        except InvalidToken:
            raise StoredKeyUnreadable from None


@dataclass(frozen=True, slots=True)
class ResolvedKey:
    """The key a request uses.

    Attributes:
        key: the API key (kept out of ``repr``).
        fingerprint: :func:`fingerprint` of the key.
        source: ``"guild"`` for the guild's own key, ``"default"`` for ``GENAPI_API_KEY``.
        ciphertext: the stored ciphertext :meth:`KeyResolver.resolve` read it from (a guild's
            current key), to tell later whether it is still the guild's key
            (:meth:`KeyResolver.still_held`); None otherwise.
    """

    key: SecretStr = field(repr=False)
    fingerprint: str
    source: Literal["guild", "default"]
    ciphertext: bytes | None = field(default=None, repr=False, compare=False)


@dataclass(frozen=True, slots=True)
class KeyChange:
    """What replacing or removing a guild's key did, for the admin's answer.

    Attributes:
        last4: the new key's last four characters; None when the key was removed.
        had_key: whether the guild had a key of its own before.
        old_fingerprint: the previous key's fingerprint; None without one, or when it cannot be
            decrypted now.
        jobs_on_old_key: pending jobs submitted with the previous key, by kind; the key is kept
            until they end. None when they cannot be counted (the key cannot be decrypted now;
            it is kept anyway).
        old_key_kept: whether the previous key is kept (retired, encrypted) after the change:
            for its pending jobs, or for a request in flight on it (a reservation)
            even when no job uses it yet.
    """

    last4: str | None
    had_key: bool
    old_fingerprint: str | None
    jobs_on_old_key: dict[Kind, int] | None
    old_key_kept: bool = False


class KeyResolver:
    """Chooses the key of each request and stores guilds' keys encrypted.

    The keys :meth:`resolve_fingerprint` finds are kept decrypted in memory (at most
    ``cache_size``, least recently used dropped first), so polling a job whose key was found
    before reads nothing and decrypts nothing: at 80 polls a second the two reads and the
    Fernet decryption per poll were a measurable share of the poller's CPU (docs/benchmarks.md).
    A fingerprint is a hash of its key, so a cached entry can never point to another key; a
    key replaced or removed since still polls the jobs it submitted, as its retired copy would.

    Args:
        db: the database.
        vault: encrypts and decrypts the guilds' keys.
        default_key: ``GENAPI_API_KEY``, or None.
        clock: wall time, for when a key was retired (UTC epoch seconds).
        cache_size: decrypted keys kept for :meth:`resolve_fingerprint` (>= 0; 0 keeps none).
        personal_allowance: the owner grants members a personal allowance on the default key
            (``PERSONAL_DAILY_BUDGET_CENTS`` > 0); without it a member's wallet
            (:mod:`bot.services.personal`) has no key but the member's own.
    """

    def __init__(
        self,
        db: Database,
        vault: KeyVault,
        default_key: SecretStr | None,
        *,
        clock: Clock | None = None,
        cache_size: int = RESOLVED_KEYS_CACHED,
        personal_allowance: bool = False,
    ) -> None:
        self._db = db
        self._personal_allowance = personal_allowance
        self._vault = vault
        self._default = default_key if default_key and default_key.get_secret_value() else None
        self._default_key = (
            None
            if self._default is None
            else ResolvedKey(self._default, fingerprint(self._default), "default")
        )
        self._clock = clock or SystemClock()
        self._cache_size = cache_size
        # (guild id, fingerprint) -> key; ResolvedKey keeps the secret out of its repr.
        self._found: OrderedDict[tuple[int, str], ResolvedKey] = OrderedDict()
        self._missing_notice: MissingKeyNotice | None = None
        self._noticed: set[tuple[int, str]] = set()

    def __repr__(self) -> str:
        return f"KeyResolver(default_key={self._default is not None}, cached={len(self._found)})"

    @property
    def default_key(self) -> SecretStr | None:
        """The bot's default key (``GENAPI_API_KEY``), or None when unset."""
        return self._default

    async def resolve(self, guild_id: int) -> ResolvedKey:
        """Return the guild's own key if it has one, else the default key.

        A guild key that cannot be decrypted is an error, not a reason to fall back: falling
        back would silently bill the owner's default key for a guild that chose its own.

        A member's personal wallet (``guild_id < 0``) falls back to the default key
        only when the owner grants a personal allowance on it: the owner's money is never spent
        by a user install by accident.

        Raises:
            NoApiKeyConfigured: neither key is set.
            PersonalKeyNeeded: a personal wallet without its own key, and no personal allowance
                (or no default key to spend it on).
            StoredKeyUnreadable: the guild's key was encrypted with another ``KEY_ENCRYPTION_KEY``.
            PersonalKeyUnreadable: the same, for a member's own key.
            KeyEncryptionUnavailable: the guild has a key but ``KEY_ENCRYPTION_KEY`` is unset.
        """
        settings = await self._db.guilds.settings(guild_id)
        if settings.api_key_ciphertext is not None:
            try:
                key = self._vault.decrypt(settings.api_key_ciphertext)
            except (StoredKeyUnreadable, KeyEncryptionUnavailable) as exc:
                log.warning("guild %d: its stored API key cannot be decrypted", guild_id)
                if is_personal(guild_id) and isinstance(exc, StoredKeyUnreadable):
                    # The member's to fix, not a server admin's (/config is not theirs).
                    raise PersonalKeyUnreadable() from None
                raise
            return ResolvedKey(
                SecretStr(key), fingerprint(key), "guild", settings.api_key_ciphertext
            )
        default = self._default_key
        if is_personal(guild_id) and (not self._personal_allowance or default is None):
            raise PersonalKeyNeeded  # an allowance on no key is none: the member's own key
        if default is None:
            raise NoApiKeyConfigured
        return default

    async def resolve_fingerprint(self, guild_id: int, key_fingerprint: str) -> ResolvedKey:
        """Return the key a job was submitted with, to poll it: a task belongs to its key.

        Looked for among the bot's default key, the guild's current key, its retired keys and
        the previous default keys kept (:meth:`keep_default`); a key found once is kept in
        memory (class doc), so later polls of the guild's jobs on it read and decrypt nothing.

        Raises:
            KeyUnavailable: the key may be one that cannot be decrypted right now, or the job
                may be on the default key while ``GENAPI_API_KEY`` is unset: poll it later.
            KeyUnknown: (a :class:`KeyUnavailable`) the key is known nowhere, e.g.
                ``GENAPI_API_KEY`` was changed while ``KEY_ENCRYPTION_KEY`` was unset: poll it
                later too, never fail it.
        """
        default = self._default_key
        if default is not None and default.fingerprint == key_fingerprint:
            return default
        cached = self._found.get((guild_id, key_fingerprint))
        if cached is not None:
            self._found.move_to_end((guild_id, key_fingerprint))
            return cached
        settings = await self._db.guilds.settings(guild_id)
        # (ciphertext, id of a retired row whose fingerprint is not known yet, source)
        candidates: list[tuple[bytes, int | None, Literal["guild", "default"]]] = []
        if settings.api_key_ciphertext is not None:
            candidates.append((settings.api_key_ciphertext, None, "guild"))
        for retired in await self._db.guilds.retired_keys(guild_id):
            if retired.fingerprint is None:
                candidates.append((retired.ciphertext, retired.id, "guild"))
            elif retired.fingerprint == key_fingerprint:
                candidates.append((retired.ciphertext, None, "guild"))
        previous_default = await self._db.guilds.default_key(key_fingerprint)
        if previous_default is not None:
            candidates.append((previous_default, None, "default"))
        unreadable = False
        for ciphertext, unknown_id, source in candidates:
            try:
                key = self._vault.decrypt(ciphertext)
            except (StoredKeyUnreadable, KeyEncryptionUnavailable):
                unreadable = True
                continue
            found = fingerprint(key)
            if unknown_id is not None:
                await self._db.guilds.set_retired_fingerprint(unknown_id, found)
                await self.sweep_retired()  # now known: deleted if no pending job uses it
            if found == key_fingerprint:
                return self._remember(guild_id, ResolvedKey(SecretStr(key), found, source))
        if unreadable:
            raise KeyUnavailable(
                f"guild {guild_id}: key {key_fingerprint} may be a stored key that "
                "KEY_ENCRYPTION_KEY cannot decrypt now (unset, or missing the key that made it)"
            )
        if default is None:
            raise KeyUnavailable(
                f"guild {guild_id}: key {key_fingerprint} is not stored; it may be "
                "GENAPI_API_KEY, which is unset now"
            )
        await self._notice_missing(guild_id, key_fingerprint)
        raise KeyUnknown(
            f"guild {guild_id}: key {key_fingerprint} is known nowhere (not GENAPI_API_KEY, "
            "not the server's key, not a key kept for its jobs). If GENAPI_API_KEY was changed "
            "while KEY_ENCRYPTION_KEY was unset, the previous one was not kept: set "
            "KEY_ENCRYPTION_KEY, start once with the previous GENAPI_API_KEY, then with the new "
            "one (docs/architecture.md, Keys)"
        )

    def set_missing_key_notice(self, notice: MissingKeyNotice | None) -> None:
        """Set who tells a guild's admins that a job waits for a key known nowhere.

        Called once per guild and key per process (the poller logs a warning at every retry
        anyway); the bot posts it in the guild's admin channel, if it has one. The remedy may be
        the admins' (set the previous server key again) or the owner's (the previous
        ``GENAPI_API_KEY``), so the notice names both.
        """
        self._missing_notice = notice

    async def _notice_missing(self, guild_id: int, key_fingerprint: str) -> None:
        if self._missing_notice is None or (guild_id, key_fingerprint) in self._noticed:
            return
        if len(self._noticed) >= NOTICES_REMEMBERED:
            self._noticed.clear()
        self._noticed.add((guild_id, key_fingerprint))
        try:
            await self._missing_notice(guild_id, key_fingerprint)
        except Exception:  # a notice must never turn a wait into a failure
            log.warning("guild %d: the missing-key notice failed", guild_id, exc_info=True)

    async def still_held(self, guild_id: int, key: ResolvedKey) -> bool:
        """Whether ``key``, chosen by :meth:`resolve`, is still kept for ``guild_id``'s jobs.

        Call it once the reservation carrying ``key.fingerprint`` is stored: from then on the
        key is kept (replacing it retires it). Between :meth:`resolve` and that reservation an
        admin may have replaced the key, and a key replaced with nothing in flight is dropped:
        a job submitted with it could never be polled.

        Returns:
            True for the default key (this process holds it), and for the guild's key while it
            is still its current one (same ciphertext) or among its retired keys. False: release
            the reservation and choose the key again, before sending anything.
        """
        if key.source == "default":
            return True
        settings = await self._db.guilds.settings(guild_id)
        if key.ciphertext is not None and settings.api_key_ciphertext == key.ciphertext:
            return True
        retired = await self._db.guilds.retired_keys(guild_id)
        return any(r.fingerprint == key.fingerprint for r in retired)

    async def keep_default(self) -> list[str]:
        """Store the default key encrypted, so that its jobs outlive a change of it (at start).

        The previous default keys stay stored while a pending job or a reservation uses them
        (``GuildStore.keep_default_key``), where :meth:`resolve_fingerprint` finds them.
        Without ``KEY_ENCRYPTION_KEY`` nothing is stored (never a key in clear), and a log line
        says that a change of ``GENAPI_API_KEY`` would leave the old key's jobs waiting
        (:class:`KeyUnknown`, with a warning per poll) until it is back.

        Returns:
            The fingerprints of previous default keys still kept (empty without a default key or
            without ``KEY_ENCRYPTION_KEY``).
        """
        default = self._default_key
        if default is None:
            return []
        if not self._vault.available:
            log.info(
                "GENAPI_API_KEY (%s) is not kept across a change of it, as KEY_ENCRYPTION_KEY "
                "is unset: should it change, the jobs pending on the old key wait (never fail) "
                "until it is back",
                default.fingerprint,
            )
            return []
        ciphertext = self._vault.encrypt(default.key.get_secret_value())
        kept = await self._db.guilds.keep_default_key(
            default.fingerprint, ciphertext, self._clock.time()
        )
        for previous in kept:
            log.info("previous GENAPI_API_KEY %s kept (encrypted) until its jobs end", previous)
        return kept

    def _remember(self, guild_id: int, resolved: ResolvedKey) -> ResolvedKey:
        if self._cache_size > 0:
            self._found[(guild_id, resolved.fingerprint)] = resolved
            if len(self._found) > self._cache_size:
                self._found.popitem(last=False)
        return resolved

    async def replace_key(self, guild_id: int, api_key: str | None) -> KeyChange:
        """Store a new key for the guild (``api_key``) or remove its key (None).

        The previous key is retired, not forgotten, while a pending job uses it (module doc).

        Raises:
            KeyEncryptionUnavailable: a new key was given and ``KEY_ENCRYPTION_KEY`` is not set;
                nothing changed.
            ValueError: ``api_key`` is empty or only whitespace; nothing changed.
        """
        new: tuple[bytes, str] | None = None
        new_fingerprint = None
        if api_key is not None:
            api_key = api_key.strip()
            if not api_key:
                raise ValueError("empty API key")
            new = (self._vault.encrypt(api_key), api_key[-4:])
            new_fingerprint = fingerprint(api_key)
        settings = await self._db.guilds.settings(guild_id)
        had_key = settings.api_key_ciphertext is not None
        old_fingerprint: str | None = None
        jobs: dict[Kind, int] | None = {}
        if settings.api_key_ciphertext is not None:
            try:
                old_fingerprint = fingerprint(self._vault.decrypt(settings.api_key_ciphertext))
            except (StoredKeyUnreadable, KeyEncryptionUnavailable):
                jobs = None  # kept whatever happens, as its jobs cannot be counted
        retire = had_key and (old_fingerprint is None or old_fingerprint != new_fingerprint)
        if retire and old_fingerprint is not None:
            jobs = await self._db.jobs.pending_on_key(guild_id, old_fingerprint)
        await self._db.guilds.replace_api_key(
            guild_id, new, retire=retire, old_fingerprint=old_fingerprint, at=self._clock.time()
        )
        if new_fingerprint is not None:
            log.info("guild %d: API key %s stored", guild_id, new_fingerprint)
        if retire:
            pending = "uncounted" if jobs is None else str(sum(jobs.values()))
            log.info(
                "guild %d: API key %s retired (%s pending jobs on it)",
                guild_id,
                old_fingerprint or "(unreadable now)",
                pending,
            )
        kept = retire and (
            old_fingerprint is None
            or any(
                r.fingerprint == old_fingerprint
                for r in await self._db.guilds.retired_keys(guild_id)
            )
        )
        return KeyChange(
            new[1] if new else None,
            had_key,
            old_fingerprint if retire else None,
            jobs if retire else {},
            old_key_kept=kept,
        )

    async def store_key(self, guild_id: int, api_key: str) -> str:
        """Encrypt and store the guild's own key, retiring the previous one.

        Returns:
            The key's last four characters, as stored for display.

        Raises:
            KeyEncryptionUnavailable: ``KEY_ENCRYPTION_KEY`` is not set; nothing is stored.
            ValueError: ``api_key`` is empty or only whitespace.
        """
        change = await self.replace_key(guild_id, api_key)
        assert change.last4 is not None  # a key was given
        return change.last4

    async def clear_key(self, guild_id: int) -> KeyChange:
        """Remove the guild's own key (retired while jobs use it); requests use the default."""
        return await self.replace_key(guild_id, None)

    async def sweep_retired(self) -> int:
        """Delete retired keys (guilds' and default) nothing live uses any more; how many.

        A trigger does this as each job ends, and retiring a key nothing uses keeps nothing;
        this catches keys whose last reservation went without a job (a refused request), and
        keys whose fingerprint was learned after their last job ended (they were retired while
        they could not be decrypted). Run periodically (the reservation sweep).
        """
        return await self._db.guilds.delete_released_keys()

    async def rotate(self) -> int:
        """Re-encrypt every stored key (current and retired) with the first encryption key.

        All or nothing, in one transaction (``MultiFernet.rotate``).

        Returns:
            How many keys were re-encrypted.

        Raises:
            KeyEncryptionUnavailable: ``KEY_ENCRYPTION_KEY`` is not set.
            StoredKeyUnreadable: a stored key was made with none of the configured keys; nothing
                was changed.
        """
        if not self._vault.available:
            raise KeyEncryptionUnavailable
        return await self._db.guilds.reencrypt_keys(self._vault.rotate)
