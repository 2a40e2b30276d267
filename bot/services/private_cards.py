"""Where a private server job's card lives (private results).

A member with private results on (``/settings defaults private``) who asks for a video or an
asynchronous image in a server does not get its card in the channel: it lives in their DM
(the bot's DM channel with them), posted and edited with the bot's token like a channel card,
so it outlives the interaction's 15 minutes. Where Discord refuses the DM (50007: the member
closed DMs from server members, or blocked the bot) the card is the command's ephemeral
response instead, edited through the interaction webhook while its token lives
(:mod:`bot.services.response_tokens`); after that the poller falls back to the channel, saying why.

The job's row keeps the server and channel it was asked in (its charge, its buttons' checks,
the fallback); where its card is goes to ``db.meta`` under ``card:<job id>`` (``dm:<channel
id>`` or ``response``), so no migration is needed and every process (gateway or worker) finds
it. A job without such a row is an ordinary channel card.
"""

from __future__ import annotations

import logging
from collections import OrderedDict
from collections.abc import Sequence
from dataclasses import dataclass
from enum import StrEnum

from bot.storage import Database

log = logging.getLogger(__name__)

CACHE_SIZE = 4096
"""Jobs whose card place (or its absence) a process remembers: a progress edit asks once a
minute per pending job, so the database is read about once per job."""


class CardPlace(StrEnum):
    """Where a private job's card is: the requester's DM, or the command's ephemeral response."""

    DM = "dm"
    RESPONSE = "response"


@dataclass(frozen=True, slots=True)
class PrivateCard:
    """A private job's card.

    Attributes:
        place: the DM or the ephemeral response.
        channel_id: the DM channel's id (``place`` DM); None for a response.
    """

    place: CardPlace
    channel_id: int | None = None

    def link(self, message_id: int | None) -> str | None:
        """The jump link to the card ``message_id`` where it lives; None where there is none.

        A DM card: ``https://discord.com/channels/@me/<DM channel id>/<message id>``, Discord's
        message link in a DM (it opens only for the member). An ephemeral response has no
        link (Discord keeps it for its interaction only), nor a card whose message is unknown.
        """
        if self.place is not CardPlace.DM or self.channel_id is None or message_id is None:
            return None
        return f"https://discord.com/channels/@me/{self.channel_id}/{message_id}"


def _meta_key(job_id: int) -> str:
    return f"card:{job_id}"


def _encode(card: PrivateCard) -> str:
    if card.place is CardPlace.DM:
        return f"dm:{card.channel_id}"
    return card.place.value


def _decode(raw: str) -> PrivateCard | None:
    if raw.startswith("dm:") and raw[3:].isdigit():
        return PrivateCard(CardPlace.DM, int(raw[3:]))
    if raw == CardPlace.RESPONSE.value:
        return PrivateCard(CardPlace.RESPONSE)
    return None


class PrivateCards:
    """The cards of private server jobs, by job id (``db.meta``, with a small cache).

    Args:
        db: the database.
        cache_size: jobs remembered in memory (found or not), least recently used dropped.
    """

    def __init__(self, db: Database, cache_size: int = CACHE_SIZE) -> None:
        self._db = db
        self._size = cache_size
        self._cache: OrderedDict[int, PrivateCard | None] = OrderedDict()

    def _remember(self, job_id: int, card: PrivateCard | None) -> None:
        self._cache[job_id] = card
        self._cache.move_to_end(job_id)
        while len(self._cache) > self._size:
            self._cache.popitem(last=False)

    async def keep(self, job_id: int, card: PrivateCard) -> bool:
        """Record where ``job_id``'s card is, before the job is handed to the poller.

        Never raises (the job is paid for): False when it could not be stored; the caller
        then shows the card in the channel as for anyone else, so the poller finds it.
        """
        try:
            await self._db.meta.set(_meta_key(job_id), _encode(card))
        except Exception as exc:
            log.warning("job %s: its private card was not recorded (%s)", job_id, type(exc))
            return False
        self._remember(job_id, card)
        return True

    async def get(self, job_id: int) -> PrivateCard | None:
        """Where ``job_id``'s card is; None for an ordinary (channel) card.

        Raises:
            Exception: the database could not be read (the caller's attempt fails transiently).
        """
        if job_id in self._cache:
            self._cache.move_to_end(job_id)
            return self._cache[job_id]
        raw = await self._db.meta.get(_meta_key(job_id))
        card = _decode(raw) if raw else None
        self._remember(job_id, card)
        return card

    async def get_many(self, job_ids: Sequence[int]) -> dict[int, PrivateCard]:
        """Where the cards of ``job_ids`` are, with one query for those not in the cache.

        For listings (``/jobs``): one read however many jobs are listed.

        Returns:
            Job id -> its private card; ordinary (channel) cards are absent.

        Raises:
            Exception: the database could not be read.
        """
        found: dict[int, PrivateCard] = {}
        missing = []
        for job_id in job_ids:
            if job_id in self._cache:
                card = self._cache[job_id]
                if card is not None:
                    found[job_id] = card
            else:
                missing.append(job_id)
        if missing:
            raw = await self._db.meta.get_many([_meta_key(job_id) for job_id in missing])
            for job_id in missing:
                value = raw.get(_meta_key(job_id))
                card = _decode(value) if value else None
                self._remember(job_id, card)
                if card is not None:
                    found[job_id] = card
        return found
