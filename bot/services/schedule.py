"""When to poll an asynchronous job (spec part 3's polling rule, made thrifty).

The spec suggests polling every 3 to 5 s; with 30 requests a minute per key that serves fewer
than ten pending videos. So a job is first polled only when it could plausibly be done — the
20th percentile of how long the model's recent jobs took — and then at intervals proportional
to its age (15 %, between 3 s and 30 s): a 20 s old job is polled every 3 s, a two-minute-old
one every 18 s. The detection delay stays a small fraction of the job's own duration while the
polls per job grow only with the logarithm of it. When the key's budget is the bottleneck, the
per-key limiter serves the most overdue polls first.
"""

from __future__ import annotations

import statistics
from collections.abc import Awaitable, Callable

from bot.storage.models import Kind

DEFAULT_EARLIEST_SECONDS = {Kind.VIDEO: 10.0, Kind.IMAGE: 3.0, Kind.TEXT: 0.0}
"""When a job may be done, before any job of its model has finished: modest, so that a fast
model is not left waiting; the model's own history takes over after its first job."""

AGE_FRACTION = 0.15
"""The interval between two polls of a job, as a fraction of its age."""


class PollSchedule:
    """Learns how soon each model's jobs can finish and turns it into poll times.

    Args:
        history: ``async (model) -> durations`` of its recent completed jobs, seconds
            (``Store.completion_seconds``).
        min_interval: never poll one job more often than this, seconds (spec part 8: 3 s).
        max_interval: never leave a running job unpolled longer than this, seconds.
    """

    def __init__(
        self,
        history: Callable[[str], Awaitable[list[float]]],
        *,
        min_interval: float = 3.0,
        max_interval: float = 30.0,
    ) -> None:
        self._history = history
        self._min = min_interval
        self._max = max_interval
        self._earliest: dict[str, float] = {}

    def forget(self, model: str) -> None:
        """Drop what was learned of ``model`` (call when one of its jobs finishes)."""
        self._earliest.pop(model, None)

    async def earliest(self, model: str, kind: Kind) -> float:
        """Return how many seconds after submission a job of ``model`` may first be done.

        The 20th percentile of the model's recent durations (the shortest, with fewer than
        three), else :data:`DEFAULT_EARLIEST_SECONDS`.
        """
        if model not in self._earliest:
            durations = await self._history(model)
            if len(durations) >= 3:
                self._earliest[model] = statistics.quantiles(durations, n=5, method="inclusive")[0]
            elif durations:
                self._earliest[model] = min(durations)
            else:
                self._earliest[model] = DEFAULT_EARLIEST_SECONDS[kind]
        return self._earliest[model]

    async def first_poll_at(self, model: str, kind: Kind, created_at: float) -> float:
        """When to poll a job submitted at ``created_at`` first (UTC epoch seconds)."""
        return created_at + max(self._min, await self.earliest(model, kind))

    def next_poll_at(self, created_at: float, now: float) -> float:
        """When to poll a still-running job again (UTC epoch seconds)."""
        interval = AGE_FRACTION * (now - created_at)
        return now + min(self._max, max(self._min, interval))
