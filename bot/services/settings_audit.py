"""The audit of a server's settings: who changed what, from which surface, old → new.

:class:`SettingsAudit` is :class:`~bot.services.guild_config.GuildConfigService`'s: every change
to a server's settings, whichever surface made it (``/config``, the dashboard), goes through
its :meth:`SettingsAudit.changing`, which snapshots the settings before, writes one audit row
per setting that changed after, and posts them in the server's admin channel (if one is set)
through the outlet the Discord side set. A member's own wallet (``bot.services.personal``) is
no server: nothing of it is audited.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import AsyncIterator, Awaitable, Callable, Coroutine, Mapping
from contextvars import ContextVar
from dataclasses import dataclass, field
from typing import Any, TypeAlias

from bot.clock import Clock
from bot.domain import Actor, AuditEntry
from bot.services.personal import is_personal
from bot.storage import Database

log = logging.getLogger(__name__)

NO_VALUE = "—"
"""An audited setting that had (or has) no value."""

ChangeOutlet: TypeAlias = Callable[[int, int, list[AuditEntry]], Coroutine[Any, Any, None]]
"""Posts audited changes in a server's admin channel: ``(guild id, channel id, entries)``;
never raises (the Discord side's ``post_changes``)."""

SettingsCheck: TypeAlias = Callable[[Mapping[str, str]], None]
"""Looks at the settings before a change (a
:meth:`~bot.services.guild_config.GuildConfigService.snapshot`) and raises to
refuse it: the dashboard's optimistic check."""

Snapshot: TypeAlias = Callable[[int], Awaitable[dict[str, str]]]
"""Every setting of a server as ``{what: value for people}``, never a key itself."""

AdminChannel: TypeAlias = Callable[[int], Awaitable[int | None]]
"""A server's admin channel id, or None when it has none."""


@dataclass(slots=True)
class Changes:
    """One audited change under way (:meth:`SettingsAudit.changing`).

    Attributes:
        guild_id: the server.
        actor: who makes it.
        entries: the audit rows written, once the change ended; empty if nothing changed.
    """

    guild_id: int
    actor: Actor
    entries: list[AuditEntry] = field(default_factory=list)


_CHANGING: ContextVar[Changes | None] = ContextVar("guild_config_changing", default=None)
"""The change the running task is making: the calls inside it are audited with it, as one."""


class SettingsAudit:
    """Audits the changes to a server's settings, and posts them in its admin channel.

    Args:
        db: the database (the audit log: ``db.policy``).
        clock: stamps the audit log (UTC epoch seconds).
        snapshot: every setting of a server, diffed around a change.
        admin_channel: where a server's audited changes are posted.
    """

    def __init__(
        self, db: Database, clock: Clock, snapshot: Snapshot, admin_channel: AdminChannel
    ) -> None:
        self._db = db
        self._clock = clock
        self._snapshot = snapshot
        self._admin_channel = admin_channel
        self._outlet: ChangeOutlet | None = None
        # Admin-channel posts under way, referenced until they end (asyncio keeps only weak
        # references to tasks).
        self._posting: set[asyncio.Task[None]] = set()

    def set_outlet(self, outlet: ChangeOutlet | None) -> None:
        """Set where audited changes are posted (the process's Discord side); None: nowhere."""
        self._outlet = outlet

    @contextlib.asynccontextmanager
    async def changing(
        self, guild_id: int, actor: Actor, *, check: SettingsCheck | None = None
    ) -> AsyncIterator[Changes]:
        """Audit the changes made in the block as one, by ``actor``.

        Snapshots every setting before; ``check`` may refuse the change then (it raises,
        nothing is changed). After the block, one audit row per setting that changed (who,
        what, old, new, ``actor.via``), written before this returns; the rows are then posted
        in one message in the admin channel (as it is after the change), in the background.
        The calls of :class:`~bot.services.guild_config.GuildConfigService` made inside the
        block are audited with it, not apart. A block that raises audits nothing (what it wrote
        stays, as it did before this was here).

        Yields:
            The change: its ``entries`` are filled in once the block ended.
        """
        outer = _CHANGING.get()
        if outer is not None and outer.guild_id == guild_id:
            yield outer  # part of a larger change: audited with it
            return
        changes = Changes(guild_id, actor)
        if is_personal(guild_id):
            yield changes  # a member's own wallet: not a server's setting
            return
        before = await self._snapshot(guild_id)
        if check is not None:
            check(before)
        token = _CHANGING.set(changes)
        try:
            yield changes
        finally:
            _CHANGING.reset(token)
        changes.entries = await self._record_changes(guild_id, actor, before)
        await self._announce(guild_id, changes.entries)

    async def _record_changes(
        self, guild_id: int, actor: Actor, before: dict[str, str]
    ) -> list[AuditEntry]:
        """Compare the settings with ``before`` (a snapshot) and log each change.

        Returns:
            The entries written, in the snapshot's order; empty if nothing changed.
        """
        after = await self._snapshot(guild_id)
        now = self._clock.time()
        entries = [
            AuditEntry(
                guild_id,
                actor.user_id,
                what,
                before.get(what, NO_VALUE),
                after.get(what, NO_VALUE),
                now,
                actor.via,
            )
            for what in [*after, *(w for w in before if w not in after)]
            if before.get(what) != after.get(what)
        ]
        for entry in entries:
            await self._db.policy.add_audit(entry)
        return entries

    async def record(
        self, guild_id: int, actor: Actor, what: str, old: str, new: str, *, announce: bool = True
    ) -> AuditEntry:
        """Audit one change that is not a setting of the snapshot, made by another service.

        The dashboard's access roles (announced) and a showcase entry an admin removed (not
        announced, as before).

        Returns:
            The entry written.
        """
        entry = AuditEntry(guild_id, actor.user_id, what, old, new, self._clock.time(), actor.via)
        await self._db.policy.add_audit(entry)
        if announce:
            await self._announce(guild_id, [entry])
        return entry

    async def _announce(self, guild_id: int, entries: list[AuditEntry]) -> None:
        """Post ``entries`` in the admin channel, if set, without holding up the answer.

        Discord fails an interaction not answered within 3 s and a post can wait much longer
        (a channel's rate limit): the change is saved and audited by then, so the answer goes
        first and the post follows.
        """
        if not entries or self._outlet is None:
            return
        channel_id = await self._admin_channel(guild_id)
        if channel_id is None:
            return
        task = asyncio.get_running_loop().create_task(
            self._outlet(guild_id, channel_id, entries), name=f"audit-post-{guild_id}"
        )
        self._posting.add(task)
        task.add_done_callback(self._posted)

    def _posted(self, task: asyncio.Task[None]) -> None:
        self._posting.discard(task)
        if not task.cancelled() and (error := task.exception()) is not None:
            log.error("posting a change in the admin channel failed: %r", error)

    async def latest(self, guild_id: int, limit: int = 10) -> list[AuditEntry]:
        """Return the guild's latest audit entries, newest first."""
        return await self._db.policy.audit(guild_id, limit)
