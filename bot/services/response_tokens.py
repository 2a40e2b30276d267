"""Interaction tokens kept with personal jobs, to edit their card where the bot is not a member.

Where the bot is not a member (a user install in a server, the bot's DM, a group DM)
its own token cannot post to or read the channel (Discord: 403, 50001 Missing Access). A
personal job's card is therefore the interaction's original response, edited through the
interaction webhook (``PATCH /webhooks/{application_id}/{token}/messages/{message_id}``),
which works only while the token lives: 15 minutes after the interaction (Discord,
"Receiving and Responding": "Interaction tokens are valid for 15 minutes"), then 401, code
50027 "Invalid Webhook Token". The same holds for a private server job whose member's DMs are
closed (:mod:`bot.services.private_cards`): its card is the command's ephemeral response.

A token is a secret (anyone holding it can edit the card and post as the bot there): it is
stored encrypted with ``KEY_ENCRYPTION_KEY`` like API keys, under ``db.meta`` key
``response:<job id>``, never logged and never in a ``repr``. Without ``KEY_ENCRYPTION_KEY`` it
is kept in memory only (a restart then leaves the card to its Show result button). It is
forgotten (the stored row blanked) once it expired or Discord refused it: a dead token is never
sent again, so a failing job cannot make the invalid requests Discord bans clients for.

Memory is bounded: a live token is dropped from memory once expired (at the next
:meth:`ResponseTokens.keep`), and at most :data:`LIVE_KEPT` are held; the jobs known dead are a
least-recently-used set of :data:`DEAD_REMEMBERED` (one forgotten is read from the database
again, found blank, and remembered again: never sent).
"""

from __future__ import annotations

import json
import logging
from collections import OrderedDict
from dataclasses import dataclass, field

from bot.clock import Clock
from bot.services.keys import KeyVault
from bot.storage import Database

log = logging.getLogger(__name__)

TOKEN_LIFETIME_SECONDS = 900.0
"""How long an interaction token works after the interaction (Discord: 15 minutes)."""

TOKEN_MARGIN_SECONDS = 30.0
"""Seconds before its end a token is no longer used: a request sent at 14:59 may arrive late."""

DEFAULT_FILESIZE_LIMIT = 10 * 1024 * 1024
"""Bytes an interaction response may attach when its limit is unknown (Discord: 10 MiB)."""

LIVE_KEPT = 10_000
"""Live tokens held in memory at most (the oldest dropped first; it stays in the database)."""

DEAD_REMEMBERED = 10_000
"""Jobs remembered as having no usable token, at most (least recently asked dropped first)."""

WEBHOOK_TOKEN_DEAD = frozenset({50027, 10015})
"""Discord's codes for a token that will never work again: 50027 Invalid Webhook Token (it
expired), 10015 Unknown Webhook."""


@dataclass(frozen=True, slots=True)
class ResponseToken:
    """What editing a personal job's original response needs.

    Attributes:
        token: the interaction token (a secret: kept out of ``repr``).
        expires_at: when the bot stops using it, UTC epoch seconds (the interaction's time
            plus 15 minutes, less :data:`TOKEN_MARGIN_SECONDS`).
        filesize_limit: bytes a file attached to this response may have
            (``Interaction.filesize_limit``).
        private: the response is ephemeral (private results): its followups must
            be ephemeral too, or everyone in the channel would see them.
    """

    token: str = field(repr=False)
    expires_at: float
    filesize_limit: int = DEFAULT_FILESIZE_LIMIT
    private: bool = False


def _meta_key(job_id: int) -> str:
    return f"response:{job_id}"


class ResponseTokens:
    """The live interaction tokens of personal jobs, by job id.

    Args:
        db: where tokens are kept across restarts (``db.meta``).
        vault: encrypts them (``KEY_ENCRYPTION_KEY``); without it they stay in memory.
        clock: wall time, UTC epoch seconds.
    """

    def __init__(self, db: Database, vault: KeyVault, clock: Clock) -> None:
        self._db = db
        self._vault = vault
        self._clock = clock
        self._live: OrderedDict[int, ResponseToken] = OrderedDict()  # oldest kept first
        self._dead: OrderedDict[int, None] = OrderedDict()  # least recently asked first

    async def keep(self, job_id: int, token: ResponseToken) -> None:
        """Keep ``token`` for ``job_id``: in memory, and encrypted in the database when possible.

        Never raises: a token that could not be stored only means the card is shown by its
        Show result button after a restart.
        """
        self._hold(job_id, token)
        self._dead.pop(job_id, None)
        if not self._vault.available:
            return
        try:
            # Not learnt by the log filter: interaction tokens are redacted by their shape.
            sealed = self._vault.encrypt(token.token, learn=False).decode("ascii")
            value = {
                "t": sealed,
                "e": token.expires_at,
                "l": token.filesize_limit,
                "p": token.private,
            }
            await self._db.meta.set(_meta_key(job_id), json.dumps(value))
        except Exception as exc:
            log.warning("job %s: its response token was not stored (%s)", job_id, type(exc))

    async def get(self, job_id: int) -> ResponseToken | None:
        """The job's token while it may still be used; None once expired, refused or unknown."""
        if job_id in self._dead:
            self._dead.move_to_end(job_id)
            return None
        found = self._live.get(job_id)
        if found is None:
            found = await self._load(job_id)
        if found is None:
            self._mark_dead(job_id)
            return None
        if found.expires_at <= self._clock.time():
            await self.forget(job_id)
            return None
        if job_id not in self._live:
            self._hold(job_id, found)
        return found

    @property
    def held(self) -> tuple[int, int]:
        """(live tokens, jobs known dead) held in memory now: both bounded."""
        return len(self._live), len(self._dead)

    def _hold(self, job_id: int, token: ResponseToken) -> None:
        now = self._clock.time()
        live = self._live
        live.pop(job_id, None)
        while live and (next(iter(live.values())).expires_at <= now or len(live) >= LIVE_KEPT):
            live.popitem(last=False)  # expired (kept in order, each 15 minutes), or the oldest
        live[job_id] = token

    def _mark_dead(self, job_id: int) -> None:
        self._dead[job_id] = None
        self._dead.move_to_end(job_id)
        while len(self._dead) > DEAD_REMEMBERED:
            self._dead.popitem(last=False)

    async def forget(self, job_id: int) -> None:
        """Never use the job's token again (it expired, or Discord refused it: 401 50027)."""
        self._live.pop(job_id, None)
        self._mark_dead(job_id)
        if not self._vault.available:
            return
        try:
            await self._db.meta.set(_meta_key(job_id), "")
        except Exception as exc:
            log.warning("job %s: its dead response token was not cleared (%s)", job_id, type(exc))

    async def _load(self, job_id: int) -> ResponseToken | None:
        if not self._vault.available:
            return None
        try:
            raw = await self._db.meta.get(_meta_key(job_id))
            if not raw:
                return None
            value = json.loads(raw)
            token = self._vault.decrypt(str(value["t"]).encode("ascii"), learn=False)
            private = bool(value.get("p", False))  # absent: kept before private results
            return ResponseToken(token, float(value["e"]), int(value["l"]), private)
        except Exception as exc:  # unreadable, or the database failed: the card waits
            log.warning("job %s: its response token is unreadable (%s)", job_id, type(exc))
            return None
