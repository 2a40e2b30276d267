"""The showcase: results members share with their server, voted for, ranked, maybe public.

Only the member who asked for a result may share it (a private result stays theirs to show);
one vote per member and entry; an admin's removal takes an entry off every showcase page at
once (the public one included). The showcase channel and whether the page is public are
``/config`` settings (:class:`bot.services.guild_config.GuildConfigService`), audited there.

The public page lists only entries shared since it last became public
(``showcase_settings.public_since``): a member shared to their server, not to the web. Every
entry this service returns has its prompt as the showcase echoes it (:func:`echoed`: no
markdown links), for the channel post and the pages alike.

User-facing sentences are module constants, one place, so they can be translated later.
"""

from __future__ import annotations

import dataclasses
import re
from typing import Final

from bot.clock import Clock
from bot.domain import ShowcaseEntry
from bot.errors import ValidationFailed
from bot.i18n import N_
from bot.services.personal import is_personal
from bot.storage import Database

SHOWN: Final = 60
"""Entries one showcase page shows."""

PERIODS: Final = {"7": 7, "30": 30, "365": 365, "all": None}
"""The periods the Showcase page ranks over (days; None: since the beginning)."""

NOT_FINISHED: Final = N_("Only a finished image or video can be shared.")
NOT_YOURS: Final = N_("Only the member who asked for this result can share it.")
NO_SERVER: Final = N_("A result made with your own key belongs to no server's showcase.")
GONE: Final = N_("This result is no longer in the showcase.")
WITHHELD: Final = N_("That result is withheld by the server's safety policy; it cannot be used.")
"""Share of a held, withheld or rejected result (``bot.services.safety``'s refusal)."""

_LINK_TARGET: Final = re.compile(
    r"""\]\(\s*(?:<[^<>\n]*>|[^\s()<>]*(?:\([^\s()]*\)[^\s()<>]*)*)"""
    r"""(?:\s+(?:"[^"\n]*"|'[^'\n]*'))?\s*\)"""
)
"""The ``](target)`` end of a markdown link: a URL (``<...>`` or bare, balanced parentheses),
maybe a title."""


def without_links(text: str) -> str:
    """Return ``text`` with every markdown link ``[label](target)`` replaced by its label.

    A prompt is echoed on the showcase (its channel post, its pages): a masked link there
    would let a sharer show one address and open another, under the bot's name. Labels may
    hold brackets (``[a [b] c](u)`` gives ``a [b] c``) and links (replaced too); a target may
    be ``<...>`` or carry a title. Bare URLs stay as they are (Discord shows them as they are).
    """
    while True:
        out: list[str] = []
        last = 0
        for found in _LINK_TARGET.finditer(text):
            close = found.start()
            if close < last:
                continue
            depth, start = 0, -1
            for i in range(close - 1, last - 1, -1):
                if text[i] == "]":
                    depth += 1
                elif text[i] == "[":
                    if depth == 0:
                        start = i
                        break
                    depth -= 1
            if start < 0:
                continue
            out.append(text[last:start])
            out.append(text[start + 1 : close])
            last = found.end()
        if not out:
            return text
        out.append(text[last:])
        text = "".join(out)


def echoed(entry: ShowcaseEntry) -> ShowcaseEntry:
    """``entry`` as the showcase echoes it: its prompt without markdown links."""
    prompt = without_links(entry.result.prompt)
    if prompt == entry.result.prompt:
        return entry
    return dataclasses.replace(entry, result=dataclasses.replace(entry.result, prompt=prompt))


class ShowcaseService:
    """Shares, votes, removals and the ranked showcase of a server.

    Args:
        db: the database.
        clock: stamps shares and votes (UTC epoch seconds).
    """

    def __init__(self, db: Database, clock: Clock) -> None:
        self._store = db.showcase
        self._results = db.dashboard_views
        self._safety = db.safety
        self._clock = clock

    async def share(self, job_id: int, user_id: int) -> tuple[ShowcaseEntry, bool]:
        """Share a finished result to its server's showcase, as the member who asked for it.

        Returns:
            The entry, and whether it was added now (False: shared before, or removed by an
            admin, which sharing again does not undo).

        Raises:
            ValidationFailed: not a finished result, not the member's own, made with a
                member's own key (no server), or held, withheld or rejected by the server's
                safety policy (docs/safety.md).
        """
        item = await self._results.result(job_id)
        if item is None:
            raise ValidationFailed(NOT_FINISHED)
        if item.user_id != user_id:
            raise ValidationFailed(NOT_YOURS)
        if is_personal(item.guild_id):
            raise ValidationFailed(NO_SERVER)
        if await self._safety.hidden((f"j{job_id}",)):
            raise ValidationFailed(WITHHELD)
        entry_id, added = await self._store.share(
            item.guild_id, job_id, user_id, self._clock.time()
        )
        entry = await self._store.entry(entry_id)
        assert entry is not None
        return echoed(entry), added

    async def posted(self, entry_id: int, channel_id: int, message_id: int) -> None:
        """Remember the showcase channel's message of an entry."""
        await self._store.set_message(entry_id, channel_id, message_id)

    async def vote(self, entry_id: int, user_id: int) -> tuple[bool, int]:
        """Count a member's vote; return ``(counted now, votes)`` (a second vote counts once).

        Raises:
            ValidationFailed: the entry is gone, was removed, or its result is now withheld
                by the server's safety policy (members reported it).
        """
        entry = await self._store.entry(entry_id)
        if entry is None or entry.removed_at is not None:
            raise ValidationFailed(GONE)
        if await self._safety.hidden((f"j{entry.result.job_id}",)):
            raise ValidationFailed(GONE)
        counted = await self._store.vote(entry_id, user_id, self._clock.time())
        again = await self._store.entry(entry_id)
        return counted, 0 if again is None else again.votes

    async def posts_of(self, guild_id: int, job_id: int) -> list[tuple[int, int]]:
        """The showcase channel posts ``(channel id, message id)`` of the job's entries.

        A shown result withheld later (members reported it) loses them (``cogs/safety.py``).
        """
        return await self._store.posts_of(guild_id, job_id)

    async def entry(self, entry_id: int) -> ShowcaseEntry | None:
        """Return an entry (removed or not), or None."""
        entry = await self._store.entry(entry_id)
        return None if entry is None else echoed(entry)

    async def remove(self, guild_id: int, entry_id: int, by: int) -> bool:
        """Take an entry off the server's showcase (an admin's); False if it was not there."""
        return await self._store.remove(guild_id, entry_id, by, self._clock.time())

    async def ranked(self, guild_id: int, days: int | None) -> list[ShowcaseEntry]:
        """The server's entries shared in the last ``days`` (None: all), most votes first.

        Held, withheld and rejected results are left out (as on the public page).
        """
        since = None if days is None else self._clock.time() - days * 86_400
        return [echoed(e) for e in await self._store.ranked(guild_id, since, SHOWN)]

    async def public(self, guild_id: int, days: int | None) -> list[ShowcaseEntry] | None:
        """The ranked entries of the public page; None when the showcase is not public.

        Only entries shared since the page last became public: those shared before stay
        visible in the server only.
        """
        public_since = await self._store.public_since(guild_id)
        if public_since is None:
            return None
        since = public_since
        if days is not None:
            since = max(since, self._clock.time() - days * 86_400)
        return [echoed(e) for e in await self._store.ranked(guild_id, since, SHOWN)]

    async def public_entry(self, entry_id: int) -> ShowcaseEntry | None:
        """An entry anyone may see, else None.

        On a public showcase, shared since it became public, not removed (a removal hides it
        at once), and not held, withheld or rejected by the server's safety policy.
        """
        entry = await self._store.entry(entry_id)
        if entry is None or entry.removed_at is not None:
            return None
        if await self._safety.hidden((f"j{entry.result.job_id}",)):
            return None
        public_since = await self._store.public_since(entry.guild_id)
        if public_since is None or entry.shared_at < public_since:
            return None
        return echoed(entry)

    async def settings(self, guild_id: int) -> tuple[int | None, bool]:
        """The server's ``(showcase channel id, public)``."""
        return await self._store.settings(guild_id)
