"""Which API key a request uses, and the guild keys' encryption at rest.

A guild's own key is stored only as Fernet ciphertext made with ``KEY_ENCRYPTION_KEY`` (plus
its last four characters, for display). A request uses the guild's key if it has one, else
``GENAPI_API_KEY``. Keys are handled as :class:`pydantic.SecretStr` so they never print; a
:func:`fingerprint` identifies a key in logs and in the ledger without revealing it.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field
from typing import Literal

from cryptography.fernet import Fernet, InvalidToken
from pydantic import SecretStr

from bot.errors import KeyEncryptionUnavailable, NoApiKeyConfigured
from bot.genapi.client import key_fingerprint as fingerprint
from bot.storage import Store

log = logging.getLogger(__name__)


class StoredKeyUnreadable(NoApiKeyConfigured):
    """The guild's stored key cannot be decrypted: ``KEY_ENCRYPTION_KEY`` changed since.

    A :class:`~bot.errors.NoApiKeyConfigured`, so the user is told that an admin must set the
    key again, which is the remedy.
    """


class KeyVault:
    """Encrypts and decrypts guild API keys with the ``KEY_ENCRYPTION_KEY`` Fernet key.

    Args:
        secret: the Fernet key (urlsafe base64 of 32 bytes); None when the owner has not set it.
    """

    def __init__(self, secret: SecretStr | None) -> None:
        self._fernet = None if secret is None else Fernet(secret.get_secret_value())

    @property
    def available(self) -> bool:
        """Whether keys can be encrypted and decrypted (``KEY_ENCRYPTION_KEY`` is set)."""
        return self._fernet is not None

    def encrypt(self, api_key: str) -> bytes:
        """Return the ciphertext of ``api_key``.

        Raises:
            KeyEncryptionUnavailable: ``KEY_ENCRYPTION_KEY`` is not set; the key must not be
                stored (and never in clear).
        """
        if self._fernet is None:
            raise KeyEncryptionUnavailable
        return self._fernet.encrypt(api_key.encode("utf-8"))

    def decrypt(self, ciphertext: bytes) -> str:
        """Return the API key of ``ciphertext``.

        Raises:
            KeyEncryptionUnavailable: ``KEY_ENCRYPTION_KEY`` is not set.
            StoredKeyUnreadable: the ciphertext was made with another key, or is damaged.
        """
        if self._fernet is None:
            raise KeyEncryptionUnavailable
        try:
            return self._fernet.decrypt(ciphertext).decode("utf-8")
        except InvalidToken:
            raise StoredKeyUnreadable from None


@dataclass(frozen=True, slots=True)
class ResolvedKey:
    """The key a request uses.

    Attributes:
        key: the API key (kept out of ``repr``).
        fingerprint: :func:`fingerprint` of the key.
        source: ``"guild"`` for the guild's own key, ``"default"`` for ``GENAPI_API_KEY``.
    """

    key: SecretStr = field(repr=False)
    fingerprint: str
    source: Literal["guild", "default"]


class KeyResolver:
    """Chooses the key of each request and stores guilds' keys encrypted.

    Args:
        store: the database.
        vault: encrypts and decrypts the guilds' keys.
        default_key: ``GENAPI_API_KEY``, or None.
    """

    def __init__(self, store: Store, vault: KeyVault, default_key: SecretStr | None) -> None:
        self._store = store
        self._vault = vault
        self._default = default_key

    async def resolve(self, guild_id: int) -> ResolvedKey:
        """Return the guild's own key if it has one, else the default key.

        A guild key that cannot be decrypted is an error, not a reason to fall back: falling
        back would silently bill the owner's default key for a guild that chose its own.

        Raises:
            NoApiKeyConfigured: neither key is set.
            StoredKeyUnreadable: the guild's key was encrypted with another ``KEY_ENCRYPTION_KEY``.
            KeyEncryptionUnavailable: the guild has a key but ``KEY_ENCRYPTION_KEY`` is unset.
        """
        settings = await self._store.guild_settings(guild_id)
        if settings.api_key_ciphertext is not None:
            try:
                key = self._vault.decrypt(settings.api_key_ciphertext)
            except (StoredKeyUnreadable, KeyEncryptionUnavailable):
                log.warning("guild %d: its stored API key cannot be decrypted", guild_id)
                raise
            return ResolvedKey(SecretStr(key), fingerprint(key), "guild")
        if self._default is not None and self._default.get_secret_value():
            key = self._default.get_secret_value()
            return ResolvedKey(self._default, fingerprint(key), "default")
        raise NoApiKeyConfigured

    async def resolve_fingerprint(self, guild_id: int, key_fingerprint: str) -> ResolvedKey | None:
        """Return the key with ``key_fingerprint`` among those the guild may use, or None.

        A job is polled with the key it was submitted with: a task belongs to the account that
        made it, so after an admin changes the guild's key the old tasks are polled with the old
        key while it is still configured (as the default), and otherwise cannot be.
        """
        candidates: list[ResolvedKey] = []
        try:
            candidates.append(await self.resolve(guild_id))
        except NoApiKeyConfigured:
            pass
        except KeyEncryptionUnavailable:
            return None
        if self._default is not None and self._default.get_secret_value():
            default = self._default.get_secret_value()
            candidates.append(ResolvedKey(self._default, fingerprint(default), "default"))
        return next((key for key in candidates if key.fingerprint == key_fingerprint), None)

    async def store_key(self, guild_id: int, api_key: str) -> str:
        """Encrypt and store the guild's own key.

        Returns:
            The key's last four characters, as stored for display.

        Raises:
            KeyEncryptionUnavailable: ``KEY_ENCRYPTION_KEY`` is not set; nothing is stored.
            ValueError: ``api_key`` is empty or only whitespace.
        """
        api_key = api_key.strip()
        if not api_key:
            raise ValueError("empty API key")
        ciphertext = self._vault.encrypt(api_key)
        last4 = api_key[-4:]
        await self._store.set_api_key(guild_id, ciphertext, last4)
        log.info("guild %d: API key %s stored", guild_id, fingerprint(api_key))
        return last4

    async def clear_key(self, guild_id: int) -> None:
        """Forget the guild's own key; its requests then use the default key."""
        await self._store.clear_api_key(guild_id)
