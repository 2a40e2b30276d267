"""Retention: rows that grow with use are deleted after configurable periods.

What is kept, and for how long (settings, in days; 0 keeps for ever):

* ``RETENTION_RESULT_REQUESTS_DAYS`` (90): the request behind each result's buttons (Again,
  Animate, Edit, a reply that starts a conversation). A click on an older result is answered
  that its request is no longer kept, as for any unknown one.
* ``RETENTION_AUDIT_DAYS`` (365): ``/config audit``'s rows (who changed which setting).
* ``RETENTION_RATE_ROWS_DAYS`` (1): the shared rate window's requests (a window is 60 s; the
  limiter keeps ten windows per key itself, but a key that stops being used keeps its rows)
  and blocks after a 429 that ended. Those rows are stamped by the database's clock and the
  cutoff comes from the bot's: at a period of hours or days, the two clocks' difference is
  nothing.
* ``RETENTION_METADATA_DAYS`` (1): personal jobs' interaction tokens, dead 15 minutes after
  their interaction, counted from when they expired; forgotten (blank) ones at once.
* ``RETENTION_THUMBNAILS_DAYS`` (0): the dashboard's thumbnails of results
  (``thumbnails``, ``bot.services.thumbnails``). Whatever the period, a result's thumbnails
  go with its job; 0 keeps them as long as the job.

A sweep runs at start-up and every ``RETENTION_SWEEP_SECONDS`` (3600) as a supervised
background task of the gateway process (``bot/discord/bot.py``); several processes sweeping
at once only share the work. Each sweep deletes at most :data:`SWEEP_LIMIT` rows per table
(a first sweep of a large old database goes on at the next one) and counts what it deleted in
``genbot_retention_swept_rows_total{table}``. Conversations are not swept here: their turns
go when their thread does.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import Final

from bot.clock import Clock
from bot.config import Settings
from bot.ops.metrics import Metrics
from bot.storage import Database

log = logging.getLogger(__name__)

DAY: Final = 86_400.0
"""Seconds in a day."""

SWEEP_LIMIT: Final = 50_000
"""Rows one sweep deletes from one table at most: a sweep never holds the database for long."""


@dataclass(frozen=True, slots=True)
class RetentionPeriods:
    """How long rows are kept, days; 0 keeps them for ever.

    Attributes:
        result_requests_days: requests behind result buttons (``result_requests``).
        audit_days: the configuration audit (``config_audit``).
        rate_rows_days: rate-window requests and ended blocks (``rate_requests``,
            ``rate_blocks``).
        metadata_days: expired interaction tokens of personal jobs (``meta``).
        thumbnails_days: results' thumbnails (``thumbnails``); 0: as long as their job.
    """

    result_requests_days: float = 90.0
    audit_days: float = 365.0
    rate_rows_days: float = 1.0
    metadata_days: float = 1.0
    thumbnails_days: float = 0.0

    @classmethod
    def from_settings(cls, settings: Settings) -> RetentionPeriods:
        """The ``RETENTION_*_DAYS`` settings."""
        return cls(
            result_requests_days=settings.retention_result_requests_days,
            audit_days=settings.retention_audit_days,
            rate_rows_days=settings.retention_rate_rows_days,
            metadata_days=settings.retention_metadata_days,
            thumbnails_days=settings.retention_thumbnails_days,
        )


class Retention:
    """Sweeps rows past their retention period, once (:meth:`sweep`) or for ever (:meth:`run`).

    Args:
        db: the database.
        clock: wall time (the cutoffs) and the sleeps between sweeps.
        periods: how long each kind of row is kept.
        interval: seconds between two sweeps (``RETENTION_SWEEP_SECONDS``).
        metrics: where sweeps are counted; none when None.
    """

    def __init__(
        self,
        db: Database,
        clock: Clock,
        periods: RetentionPeriods,
        *,
        interval: float = 3600.0,
        metrics: Metrics | None = None,
    ) -> None:
        self._db = db
        self._clock = clock
        self._periods = periods
        self._interval = interval
        self._metrics = metrics

    async def sweep(self) -> dict[str, int]:
        """Delete what is past its period now.

        Returns:
            Rows deleted per table swept (tables kept for ever are absent).

        Raises:
            Exception: the database failed (the supervisor logs it and starts again).
        """
        now = self._clock.time()
        retention = self._db.retention
        periods = self._periods
        swept: dict[str, int] = {}
        for table, days in (
            ("result_requests", periods.result_requests_days),
            ("config_audit", periods.audit_days),
            ("rate_requests", periods.rate_rows_days),
        ):
            if days > 0:
                swept[table] = await retention.sweep_older(
                    table, now - days * DAY, limit=SWEEP_LIMIT
                )
        if periods.rate_rows_days > 0:
            swept["rate_blocks"] = await retention.sweep_ended_blocks(
                now - periods.rate_rows_days * DAY
            )
        if periods.metadata_days > 0:
            swept["meta"] = await retention.sweep_response_tokens(now - periods.metadata_days * DAY)
        made_before = now - periods.thumbnails_days * DAY if periods.thumbnails_days > 0 else None
        swept["thumbnails"] = await self._db.thumbnails.sweep(made_before, limit=SWEEP_LIMIT)
        if self._metrics is not None:
            self._metrics.swept(swept, self._clock.time())
        if any(swept.values()):
            log.info(
                "retention sweep deleted %s",
                ", ".join(f"{rows} {table}" for table, rows in swept.items() if rows),
            )
        return swept

    async def run(self) -> None:
        """Sweep now, then every ``interval`` seconds, until cancelled.

        Raises:
            Exception: a sweep failed (run under ``bot.jobs.supervisor.supervise``).
        """
        while True:
            await self.sweep()
            await self._clock.sleep(self._interval)
