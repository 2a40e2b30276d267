"""What the command tree looked like when it was last synced with Discord.

Syncing on every start burns Discord's daily command-create limit (200 a day per guild), so the
bot syncs only when the definitions' hash changed (``GenBot.sync_commands``); the hash of each
scope (an application and a guild, or ``global``) is kept in ``db.meta``.
"""

from __future__ import annotations

from bot.storage import Database


class CommandSync:
    """The stored hash of the command definitions last synced, per scope.

    Args:
        db: the database (``db.meta``, key ``command_hash:<scope>``).
    """

    def __init__(self, db: Database) -> None:
        self._db = db

    async def unchanged(self, scope: str, digest: str) -> bool:
        """True when ``digest`` (a sha256 hex of the definitions) is what ``scope`` last synced.

        Args:
            scope: ``<application id>:<guild id or "global">``.
            digest: the hash of the definitions about to be synced.
        """
        return await self._db.meta.get(f"command_hash:{scope}") == digest

    async def record(self, scope: str, digest: str) -> None:
        """Remember that ``scope`` was synced with the definitions hashed ``digest``."""
        await self._db.meta.set(f"command_hash:{scope}", digest)
