"""When to poll an asynchronous job (spec part 3's polling rule, made thrifty).

The spec suggests polling every 3 to 5 s; with 30 requests a minute per key that serves fewer
than ten pending videos. So a job is first polled only when it could plausibly be done — a low
quantile of how long the model's recent jobs took — and then at least every ``min_interval``
seconds, backing off the longer it runs past its expected time. The per-key limiter spreads
whatever is due within the key's budget.
"""

from __future__ import annotations

import statistics
from collections.abc import Awaitable, Callable

from bot.storage.models import Kind

DEFAULT_EXPECTATION = {Kind.VIDEO: (5.0, 30.0), Kind.IMAGE: (3.0, 10.0), Kind.TEXT: (0.0, 0.0)}
"""``(earliest, typical)`` completion seconds before any job of a model has finished: modest,
so that a fast model is not left waiting; its own history takes over after one job."""


class PollSchedule:
    """Learns each model's completion time and turns it into poll times.

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
        self._learned: dict[str, tuple[float, float]] = {}

    def forget(self, model: str) -> None:
        """Drop what was learned of ``model`` (call when one of its jobs finishes)."""
        self._learned.pop(model, None)

    async def expectation(self, model: str, kind: Kind) -> tuple[float, float]:
        """Return ``(earliest, typical)`` completion seconds for ``model``.

        ``earliest`` is the 20th percentile of recent durations, ``typical`` the median; both
        fall back to :data:`DEFAULT_EXPECTATION` with no history.
        """
        if model not in self._learned:
            durations = await self._history(model)
            if len(durations) >= 3:
                cuts = statistics.quantiles(durations, n=5, method="inclusive")
                self._learned[model] = (cuts[0], statistics.median(durations))
            elif durations:
                self._learned[model] = (min(durations), statistics.median(durations))
            else:
                self._learned[model] = DEFAULT_EXPECTATION[kind]
        return self._learned[model]

    async def first_poll_at(self, model: str, kind: Kind, created_at: float) -> float:
        """When to poll a job submitted at ``created_at`` first (UTC epoch seconds)."""
        earliest, _ = await self.expectation(model, kind)
        return created_at + max(self._min, earliest)

    async def next_poll_at(self, model: str, kind: Kind, created_at: float, now: float) -> float:
        """When to poll a still-running job again (UTC epoch seconds).

        Every ``min_interval`` until the typical time, then backing off in proportion to how far
        past it the job runs, up to ``max_interval``.
        """
        _, typical = await self.expectation(model, kind)
        overdue = max(0.0, now - created_at - typical)
        interval = self._min + overdue * 0.25
        return now + min(self._max, max(self._min, interval))
