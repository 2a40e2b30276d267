"""A discrete-event model of one key's request window: the references `batch` and `rate` print.

For the arrivals, durations and user requests a run actually had, it computes:

- the **clairvoyant floor**: each job polled once, exactly when it completes, within the plain
  window (30 requests per rolling 60 s, users first): no policy can detect sooner;
- **the policy simulated**: genbot's own rules (:class:`~bot.genapi.slots.SlotRules`, the
  hazard schedule of :mod:`bot.services.schedule`, one poll of the key at a time, earliest due
  first), with no network or Discord latency: what the policy itself costs, apart from the
  plumbing the measured figures add.

Time advances in steps of ``STEP`` seconds; everything is in seconds from the first request.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

from bot.domain import Kind
from bot.genapi.slots import SlotRules
from bot.services.schedule import MAX_INTERVAL, MIN_INTERVAL, PRIORS, CompletionTimes

STEP = 0.05
PLAIN = SlotRules(window=60.0)
"""The service's own rule, for the clairvoyant floor: 30 per rolling 60 s, nothing more."""


@dataclass
class _Job:
    submit_at: float
    duration: float
    created: float = math.nan
    due: float = math.inf
    last: float = -math.inf
    polls: int = 0
    detected: float | None = None

    @property
    def completes(self) -> float:
        return self.created + self.duration


@dataclass
class SimResult:
    """Detection delays (s), user waits (s), requests sent and the most in any 60 s."""

    delays: list[float] = field(default_factory=list)
    user_waits: list[float] = field(default_factory=list)
    requests: int = 0
    most_in_window: int = 0


def simulate(
    submits: list[float],
    durations: list[float],
    users: list[float],
    *,
    clairvoyant: bool,
    history: list[float] | None = None,
    horizon: float = 900.0,
) -> SimResult:
    """Run the model; ``submits`` and ``users`` are request times, ``durations`` seconds."""
    rules = PLAIN if clairvoyant else SlotRules()
    jobs = [_Job(a, d) for a, d in zip(submits, durations, strict=True)]
    queue = sorted([(a, i) for i, a in enumerate(submits)] + [(u, -1) for u in users])
    sent: list[tuple[float, bool]] = []
    result = SimResult()
    learned = list(history or [])
    t = 0.0
    while t < horizon and (queue or any(j.detected is None for j in jobs)):
        live = [(at, bg) for at, bg in sent if at > t - rules.window]
        floor_first = not clairvoyant and rules.floor_due(t, live)
        if not floor_first or not _poll(jobs, rules, t, live, sent, learned, clairvoyant):
            floor_first = False
        while queue and queue[0][0] <= t and rules.interactive_delay(t, live) <= 0:
            arrival, index = queue.pop(0)
            sent.append((t, False))
            live.append((t, False))
            if index < 0:
                result.user_waits.append(t - arrival)
            else:
                job = jobs[index]
                job.created = t
                times = CompletionTimes(learned, PRIORS[Kind.VIDEO])
                first = min(MAX_INTERVAL, max(MIN_INTERVAL, times.due_age(0.0)))
                job.due = job.completes if clairvoyant else t + first
        if not floor_first:
            _poll(jobs, rules, t, live, sent, learned, clairvoyant)
        t = round(t + STEP, 6)
    result.delays = [j.detected - j.completes for j in jobs if j.detected is not None]
    result.requests = len(sent)
    moments = sorted(at for at, _ in sent)
    result.most_in_window = max(
        (sum(1 for other in moments if start <= other < start + 60.0) for start in moments),
        default=0,
    )
    return result


def _poll(
    jobs: list[_Job],
    rules: SlotRules,
    t: float,
    live: list[tuple[float, bool]],
    sent: list[tuple[float, bool]],
    learned: list[float],
    clairvoyant: bool,
) -> bool:
    due = [j for j in jobs if j.detected is None and j.due <= t and t - j.last >= MIN_INTERVAL]
    if not due:
        return False
    delay = rules.interactive_delay(t, live) if clairvoyant else rules.background_delay(t, live)
    if delay > 0:
        return False
    job = min(due, key=lambda j: j.due)
    sent.append((t, True))
    live.append((t, True))
    job.polls += 1
    job.last = t
    if t >= job.completes:
        job.detected = t
        learned.append(job.duration)
    else:
        times = CompletionTimes(learned, PRIORS[Kind.VIDEO])
        age = t - job.created
        interval = min(MAX_INTERVAL, max(MIN_INTERVAL, times.due_age(age) - age))
        job.due = job.completes if clairvoyant else t + interval
    return True
