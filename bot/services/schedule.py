"""When to poll an asynchronous job (spec part 3's polling rule, made thrifty).

The spec suggests polling every 3 to 5 s; with 30 requests a minute per key that serves fewer
than ten pending videos, so polls must go where they are likely to find a finished job. Once a
model has a history of completion times, a job is polled next when the chance that it finished
since its last poll reaches :data:`FINISH_CHANCE` (15 %), read off that history: rarely while
it is young, often near and past the model's usual time. Without a history (or past it), polls
are spaced by 15 % of the job's age, so that their number grows only with the logarithm of its
duration. Intervals stay between 3 s (spec part 8) and 30 s; when the key's budget is the
bottleneck, the limiter serves the most overdue polls first.
"""

from __future__ import annotations

import bisect
from collections.abc import Awaitable, Callable, Sequence

from bot.storage.models import Kind

DEFAULT_EARLIEST_SECONDS = {Kind.VIDEO: 10.0, Kind.IMAGE: 3.0, Kind.TEXT: 0.0}
"""When a job may be done, before any job of its model has finished: modest, so that a fast
model is not left waiting; the model's own history takes over after its first jobs."""

FINISH_CHANCE = 0.15
"""Poll again once a job has this chance of having finished since its last poll."""

AGE_FRACTION = 0.15
"""Without a usable history: the interval between two polls, as a fraction of the job's age."""

MIN_HISTORY = 3
"""Completed jobs of a model needed before its history is trusted."""


def quantile(durations: Sequence[float], q: float) -> float:
    """Return the ``q`` quantile (0..1) of sorted ``durations``, interpolated linearly."""
    position = q * (len(durations) - 1)
    low = int(position)
    high = min(low + 1, len(durations) - 1)
    return durations[low] + (durations[high] - durations[low]) * (position - low)


def fraction_done(durations: Sequence[float], age: float) -> float:
    """Return the share of sorted ``durations`` not longer than ``age`` (the empirical CDF)."""
    return bisect.bisect_right(durations, age) / len(durations)


class PollSchedule:
    """Learns each model's completion times and turns them into poll times.

    Args:
        history: ``async (model) -> durations`` of its recent completed jobs, seconds
            (``db.jobs.completion_seconds``).
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
        self._durations: dict[str, list[float]] = {}

    def forget(self, model: str) -> None:
        """Drop what was learned of ``model`` (call when one of its jobs finishes)."""
        self._durations.pop(model, None)

    async def _learned(self, model: str) -> list[float]:
        if model not in self._durations:
            self._durations[model] = sorted(await self._history(model))
        return self._durations[model]

    async def first_poll_at(self, model: str, kind: Kind, created_at: float) -> float:
        """When to poll a job submitted at ``created_at`` first (UTC epoch seconds).

        When it could first plausibly be done: the 20th percentile of the model's recent
        durations (the shortest, with fewer than three), else
        :data:`DEFAULT_EARLIEST_SECONDS`.
        """
        durations = await self._learned(model)
        if len(durations) >= MIN_HISTORY:
            earliest = quantile(durations, 0.2)
        elif durations:
            earliest = durations[0]
        else:
            earliest = DEFAULT_EARLIEST_SECONDS[kind]
        return created_at + max(self._min, earliest)

    async def next_poll_at(self, model: str, created_at: float, now: float) -> float:
        """When to poll a still-running job again (UTC epoch seconds)."""
        age = now - created_at
        durations = await self._learned(model)
        done = fraction_done(durations, age) if len(durations) >= MIN_HISTORY else 1.0
        if done < 1.0:
            interval = quantile(durations, done + FINISH_CHANCE * (1 - done)) - age
        else:
            longest = durations[-1] if durations else 0.0
            interval = AGE_FRACTION * (age - longest if longest else age)
        return now + min(self._max, max(self._min, interval))

    async def estimated_finish(self, model: str, created_at: float, *, now: float) -> float | None:
        """Estimate when a pending job will finish, for people (``/jobs``); changes no schedule.

        The median of the model's recent durations that are longer than the job's age: what
        the jobs that took at least this long usually took.

        Args:
            model: the job's model.
            created_at: when the job started, UTC epoch seconds.
            now: the current time, UTC epoch seconds.

        Returns:
            UTC epoch seconds; None with fewer than :data:`MIN_HISTORY` completed jobs, or when
            the job is older than every one of them.
        """
        durations = await self._learned(model)
        if len(durations) < MIN_HISTORY:
            return None
        longer = durations[bisect.bisect_right(durations, now - created_at) :]
        if not longer:
            return None
        return created_at + quantile(longer, 0.5)
