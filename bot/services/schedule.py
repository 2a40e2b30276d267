"""When to poll an asynchronous job, and when it will likely be ready.

The service allows 30 requests per rolling minute per key (docs/genapi.md §8.1), so a poll should go
where it is most likely to find a finished job. Each model's completion times are described by
a survival function ``S(age)``, the chance that a job of that age is still running: its recent
history (``db.jobs.completion_seconds``) blended with a broad log-normal prior, which
alone answers before any job of the model finished and keeps the tail honest past the history.

A job last polled at age ``b`` (0 when never polled) has, at age ``a``, finished since its last
poll with the chance ``1 - S(a) / S(b)``: its *hazard*. Its next poll is due when that chance
reaches :data:`TARGET_CHANCE`; the poller takes due jobs earliest due first, which is highest
hazard first (docs/architecture.md, "The poll policy"), and the rate limiter decides how many
go out. Two polls of one job are never closer than 3 s (docs/genapi.md §3.2, "every 3 to 5 s").

The estimate shown to people (``ready <t:...:R>``) is the conditional median: the age by which
half the jobs as old as this one have finished, from the same ``S``.

What a process learned is read again from the jobs table every :data:`LEARNED_TTL` seconds:
the jobs table is the one store every process shares, and in a deployment with
workers the process that shows estimates (a gateway with ``POLLER_ENABLED=false``) never
finishes a job itself, nor does one worker see the jobs the others finished.
"""

from __future__ import annotations

import bisect
import math
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Protocol, TypeVar

from bot.clock import Clock
from bot.domain import Job, Kind


@dataclass(frozen=True, slots=True)
class LogNormal:
    """A log-normal distribution of completion times: its median (seconds) and log-sd."""

    median: float
    sigma: float

    def survival(self, age: float) -> float:
        """Return the chance that a job is still running at ``age`` seconds."""
        if age <= 0:
            return 1.0
        z = (math.log(age) - math.log(self.median)) / (self.sigma * math.sqrt(2.0))
        return 0.5 * math.erfc(z)


PRIORS = {
    Kind.VIDEO: LogNormal(median=60.0, sigma=0.9),
    Kind.IMAGE: LogNormal(median=15.0, sigma=0.9),
    Kind.TEXT: LogNormal(median=5.0, sigma=0.9),
}
"""What a model's completion times look like before it has a history (the spec shows none):
broad on purpose (video: 5 % of jobs done by 14 s, 95 % by 4 min 20 s), so that the first
polls come early enough for a fast model and the history corrects the rest."""


def scaled_priors(scale: float) -> dict[Kind, LogNormal]:
    """Return :data:`PRIORS` with every median divided by ``scale`` (``WAIT_SCALE``, >= 1).

    The end-to-end tests' emulated videos take 4 s, not a minute: at scale 10 a new video is
    polled after 3 s (the spec's least interval) instead of 24 s.
    """
    return {kind: LogNormal(prior.median / scale, prior.sigma) for kind, prior in PRIORS.items()}


PRIOR_WEIGHT = 2.0
"""How many completed jobs the prior counts as once the model has a history."""

TARGET_CHANCE = 0.15
"""A job falls due once it has this chance of having finished since its last poll."""

MIN_INTERVAL = 3.0
"""Seconds between two polls of one job at least (docs/genapi.md §3.2: every 3 to 5 seconds)."""

MAX_INTERVAL = 30.0
"""Seconds a running job is left unpolled at most, whatever its history says."""

LEARNED_TTL = 60.0
"""Seconds a model's learned completion times are kept before the jobs table is read again:
one query per model a minute per process, and another process's finished jobs reach this one's
polls and estimates within a minute."""


class CompletionTimes:
    """One model's completion-time distribution: history blended with a prior.

    ``S(age) = (n * S_history(age) + w * S_prior(age)) / (n + w)`` with ``n`` completed jobs
    and ``w`` = :data:`PRIOR_WEIGHT`; the history's empirical survival is a step function, and
    the prior keeps the chance of finishing above zero beyond the longest job seen.

    Args:
        durations: completion times of recent jobs of the model, seconds, in any order.
        prior: the kind's prior (:data:`PRIORS`).
    """

    def __init__(self, durations: Sequence[float], prior: LogNormal) -> None:
        self._durations = sorted(durations)
        self._prior = prior
        self._weight = PRIOR_WEIGHT if self._durations else 0.0

    def survival(self, age: float) -> float:
        """Return the chance (0..1) that a job of this model is still running at ``age`` s."""
        prior = self._prior.survival(age)
        n = len(self._durations)
        if n == 0:
            return prior
        running = n - bisect.bisect_right(self._durations, age)
        return (running + self._weight * prior) / (n + self._weight)

    def age_at(self, chance: float) -> float:
        """Return the first age (seconds) at which ``survival`` is at most ``chance`` (0..1)."""
        low, high = 0.0, max(self._prior.median, self._durations[-1] if self._durations else 0.0)
        while self.survival(high) > chance and high < 1e7:
            low, high = high, high * 2.0
        for _ in range(40):
            middle = (low + high) / 2.0
            if self.survival(middle) > chance:
                low = middle
            else:
                high = middle
        return high

    def hazard(self, last_age: float, age: float) -> float:
        """Return the chance that a job running at ``last_age`` finished by ``age`` (seconds)."""
        before = self.survival(last_age)
        return 0.0 if before <= 0.0 else 1.0 - self.survival(age) / before

    def due_age(self, last_age: float) -> float:
        """Return the age at which a job last seen running at ``last_age`` falls due."""
        return self.age_at((1.0 - TARGET_CHANCE) * self.survival(last_age))

    def median_finish_age(self, age: float) -> float:
        """Return the age by which half the jobs still running at ``age`` have finished."""
        return self.age_at(0.5 * self.survival(age))


class PollSchedule:
    """Learns each model's completion times and turns them into poll times and estimates.

    Args:
        history: ``async (model) -> durations`` of its recent completed jobs, seconds
            (``db.jobs.completion_seconds``).
        clock: its monotonic time dates what was learned; None keeps it until :meth:`forget`
            (one process alone, which finishes every job itself).
        min_interval: never poll one job more often than this, seconds (docs/genapi.md §3.2: 3 s).
        max_interval: never leave a running job unpolled longer than this, seconds (at least
            ``min_interval``).
        priors: each kind's prior (:data:`PRIORS`; ``python -m bot`` divides their medians by
            ``WAIT_SCALE``, see :func:`scaled_priors`).
        ttl: seconds what was learned of a model is kept before the history is read again
            (:data:`LEARNED_TTL`), so that jobs other processes finished are learned too.
    """

    def __init__(
        self,
        history: Callable[[str], Awaitable[list[float]]],
        *,
        clock: Clock | None = None,
        min_interval: float = MIN_INTERVAL,
        max_interval: float = MAX_INTERVAL,
        priors: Mapping[Kind, LogNormal] = PRIORS,
        ttl: float = LEARNED_TTL,
    ) -> None:
        self._history = history
        self._clock = clock
        self._min = min_interval
        self._max = max(min_interval, max_interval)
        self._priors = priors
        self._ttl = ttl
        # (model, kind) -> (what was learned, monotonic time after which it is read again)
        self._learned: dict[tuple[str, Kind], tuple[CompletionTimes, float]] = {}

    def forget(self, model: str) -> None:
        """Drop what was learned of ``model`` (call when one of its jobs finishes)."""
        for kind in Kind:
            self._learned.pop((model, kind), None)

    async def times(self, model: str, kind: Kind) -> CompletionTimes:
        """Return the completion-time distribution of ``model``.

        Cached until :meth:`forget`, and for at most ``ttl`` seconds when there is a clock.
        """
        now = self._clock.monotonic() if self._clock is not None else 0.0
        cached = self._learned.get((model, kind))
        if cached is not None and (self._clock is None or now < cached[1]):
            return cached[0]
        times = CompletionTimes(await self._history(model), self._priors[kind])
        self._learned[(model, kind)] = (times, now + self._ttl)
        return times

    async def first_poll_at(self, model: str, kind: Kind, created_at: float) -> float:
        """When to poll a job submitted at ``created_at`` first (UTC epoch seconds)."""
        times = await self.times(model, kind)
        return created_at + min(self._max, max(self._min, times.due_age(0.0)))

    async def next_poll_at(self, job: Job, now: float) -> float:
        """When to poll again ``job``, seen running at ``now`` (UTC epoch seconds)."""
        times = await self.times(job.model, job.kind)
        age = now - job.created_at
        interval = times.due_age(age) - age
        return now + min(self._max, max(self._min, interval))

    async def estimated_finish(self, job: Job, *, now: float) -> float:
        """Estimate when a pending job will finish, for people; changes no schedule.

        The conditional median: the moment by which half the jobs of the model that ran as
        long as this one have finished (UTC epoch seconds, never before ``now``). Its error is
        measured by ``python -m bench batch`` and ``rate``.
        """
        times = await self.times(job.model, job.kind)
        return max(now, job.created_at + times.median_finish_age(now - job.created_at))


class Owned(Protocol):
    """Anything that belongs to a guild and is polled with a key (a job, a claim candidate)."""

    @property
    def key_fingerprint(self) -> str:
        """The key's fingerprint."""
        ...

    @property
    def guild_id(self) -> int:
        """The guild's id."""
        ...


OwnedT = TypeVar("OwnedT", bound=Owned)


class FairShare:
    """Shares each key's polls fairly between the guilds that use it.

    On a key several guilds share (the bot's default key), due jobs are claimed guild by guild:
    first the guild whose last poll on that key is the oldest, and within a guild its earliest
    due job. A guild with many pending videos thus gets no more polls than one with a single
    video while both have jobs due, and cannot stall the others' videos.

    The record of whose turn it is lives in this process (a turn counter per key and guild);
    with several workers each shares its own claims fairly, which shares the sum fairly too.

    Args:
        remember: (key, guild) pairs kept at most; the oldest half is forgotten beyond it.
    """

    def __init__(self, *, remember: int = 50_000) -> None:
        self._last: dict[tuple[str, int], int] = {}
        self._turn = 0
        self._remember = remember

    def rank(self, due: Sequence[OwnedT]) -> list[OwnedT]:
        """Order ``due`` (earliest due first) for claiming: each key's guilds take turns.

        A :data:`bot.storage.repos.jobs.PollRanking`. Round after round, every guild with
        jobs left gives its next one, guilds polled longest ago (or never) first.
        """
        queues: dict[str, dict[int, list[OwnedT]]] = {}
        for job in due:
            queues.setdefault(job.key_fingerprint, {}).setdefault(job.guild_id, []).append(job)
        ranked: list[OwnedT] = []
        for key, guilds in queues.items():
            # Never polled (-1) first; dicts keep first appearance, earliest due, for ties.
            order = sorted(guilds, key=lambda g: self._last.get((key, g), -1))
            for depth in range(max(len(jobs) for jobs in guilds.values())):
                ranked += [guilds[g][depth] for g in order if depth < len(guilds[g])]
        return ranked

    def polled(self, jobs: Sequence[Owned]) -> None:
        """Record that ``jobs`` were claimed for polling: their guilds' turns are used."""
        for job in jobs:
            self._turn += 1
            self._last[(job.key_fingerprint, job.guild_id)] = self._turn
        if len(self._last) > self._remember:
            for pair in sorted(self._last, key=self._last.__getitem__)[: self._remember // 2]:
                del self._last[pair]
