"""How one key's request slots are shared between users and polls (docs/genapi.md §8.1).

The service allows ``limit`` (30) requests per rolling ``window`` (60 s, plus our 1 s margin)
per key, every endpoint counted. Interactive requests (a user waits on a command) and
background ones (polls, catalogue refreshes) share it by these rules, written once here for
the in-process limiter (:mod:`bot.genapi.ratelimit`) and the one shared by every process on a
database (:mod:`bot.genapi.shared_ratelimit`):

- **Interactive** requests go whenever fewer than ``limit`` requests were sent in the window.
- **Background** requests keep room for users, looking ahead rather than at a fixed pacing: one
  may go at ``t`` only if, counting the requests already sent and the users' recent pace, users
  will still find ``user_slots`` slots free within ``user_wait`` seconds at every moment of the
  next window. ``user_slots`` is 2 while a user request came in the last ``recent`` seconds,
  else 1 (the second slot kept for users is lent to polls while nobody is using the bot). The
  users' pace is the number of distinct ``pace_bucket``-second intervals with a user request in
  the last window, over the time they span (at least 20 s): a burst of submissions counts once,
  a steady trickle of commands counts fully from its first few requests.
- **Answers' slots**: interactive submissions (``/video``: the member waits for
  a task anyway) go only while ``answer_slots`` slots stay free for answers (``/text``: the
  member waits for the reply itself), at most ``answer_patience`` seconds
  (:mod:`bot.genapi.ratelimit` orders the queue accordingly).
- **Floor**: when users take half the window or more, background requests are owed
  ``window / floor`` slots of it (6 of 30: one per 10 s); while they take fewer, the next free
  slot is theirs and the in-process queue lets them pass interactive ones, so polls are never
  starved however busy the users. The floor is a share, not a priority at every instant: a
  poll owed it lets answers (``/text``, images) waiting at the head of the queue take the free
  slots first for at most ``floor_yield`` seconds, then goes first.

No timer is kept: a caller asks :func:`interactive_delay` or :func:`background_delay` when it
wants to send, and again after the returned delay or when the window changes.
"""

from __future__ import annotations

from bisect import bisect_left
from collections.abc import Sequence
from dataclasses import dataclass

RATE_WINDOW_MARGIN = 1.0
"""Seconds added to the spec's window: the window is counted from when we release a request,
the service counts from when it arrives (docs/benchmarks.md: without it, one 429 in 30 videos).
"""


@dataclass(frozen=True, slots=True)
class SlotRules:
    """The sharing rules of one key's request slots (module docstring). Times are seconds.

    Attributes:
        limit: requests per window (docs/genapi.md §8.1: 30).
        window: the rolling window, our margin included (docs/genapi.md §8.1: 60 s, plus 1 s).
        user_slots: slots kept for users while they are active.
        idle_user_slots: slots kept for users when none came in the last ``recent`` seconds.
        user_wait: how long a user request may wait behind polls, at most.
        recent: a user request this recent makes the users active.
        pace_bucket: user requests within one such interval count once in the users' pace.
        floor: background requests get one slot per this many seconds of the window at
            least, whatever the users do.
        min_pace: user requests per window assumed to come whatever the recent past says.
        burst: background requests that may go at once; beyond it they are spaced by
            ``window / limit`` (a leaky bucket), so that the window's requests leave it one
            by one and a user who finds it full waits about that long, not a minute.
        answer_slots: slots interactive submissions leave free for answers: the
            share polls are owed against users (``window / floor``, 6 of 30), so that a
            member's ``/text`` every 5-10 s and a burst of two find room for as long as
            queued ``/video``s wait (``answer_patience``) and nothing leaves the window
            (``bench batch``: ten ``/video`` at once after a minute of polls left 30 s
            without a departure; 3 such slots left the fourth ``/text`` 10 s waiting).
        answer_patience: seconds a submission is kept back for the answers' slots at most;
            then it takes its turn like an answer, leaving only ``user_slots`` slots.
        floor_yield: seconds a background request owed the floor lets answers waiting at the
            head of the users' queue take the free slots before it, at most: the
            floor is a share of the window, not a priority at every instant, so it may yield
            an instant to a member waiting for a ``/text``; bounded, so the polls' share, and
            the detection delay, move by at most this much. Two floor periods: in ``bench
            batch``'s full window a poll passing a ``/text`` made the next ``/text``s wait
            3.6-6 s, and the first free slot no answer waited for came 17 s after the first
            the poll yielded (docs/benchmarks.md, section 9).
    """

    limit: int = 30
    window: float = 61.0
    user_slots: int = 2
    idle_user_slots: int = 1
    user_wait: float = 2.0
    recent: float = 30.0
    pace_bucket: float = 2.0
    floor: float = 10.0
    min_pace: float = 6.0
    burst: int = 6
    answer_slots: int = 6
    answer_patience: float = 30.0
    floor_yield: float = 20.0

    @property
    def background_cap(self) -> int:
        """Requests of one window background ones may bring it to while users are active."""
        return max(1, self.limit - self.user_slots)

    def interactive_delay(self, now: float, sent: Sequence[tuple[float, bool]]) -> float:
        """Seconds until an interactive request may go (<= 0: now).

        Args:
            now: the current time (any epoch, the same as ``sent``'s).
            sent: ``(at, background)`` of the requests sent in the window, oldest first.
        """
        live = [at for at, _ in sent if at > now - self.window]
        if len(live) < self.limit:
            return 0.0
        return live[len(live) - self.limit] + self.window - now

    def submission_delay(
        self, now: float, sent: Sequence[tuple[float, bool]], *, patient: bool = True
    ) -> float:
        """Seconds until an interactive submission may go, leaving the answers' slots free.

        Args:
            now: the current time (any epoch, the same as ``sent``'s).
            sent: ``(at, background)`` of the requests sent in the window, oldest first.
            patient: the submission is still within ``answer_patience``: it leaves
                ``answer_slots`` slots; past it, only ``user_slots`` (a burst of answers still
                finds room when waiting submissions all come due at once).

        Returns:
            <= 0 when it may go now: fewer than ``limit`` minus the slots left in the window;
            else when enough of them will have left it.
        """
        live = [at for at, _ in sent if at > now - self.window]
        cap = max(1, self.limit - (self.answer_slots if patient else self.user_slots))
        if len(live) < cap:
            return 0.0
        return live[len(live) - cap] + self.window - now

    def floor_due(self, now: float, sent: Sequence[tuple[float, bool]]) -> bool:
        """Whether background requests are owed a slot now, whatever the users' slots.

        True when users take at least half the window (they, not polls, are what fills it) and
        background requests take fewer than ``window / floor`` of its slots (6 of 30): a
        share, not a timer, because slots come free only as older requests leave the window.
        """
        live = [background for at, background in sent if at > now - self.window]
        users = live.count(False)
        return 2 * users >= self.limit and len(live) - users < self.window / self.floor

    def background_delay(self, now: float, sent: Sequence[tuple[float, bool]]) -> float:
        """Seconds until a background request may go (<= 0: now), by the module's rules.

        Args:
            now: the current time (any epoch, the same as ``sent``'s).
            sent: ``(at, background)`` of the requests sent in the window, oldest first.

        Returns:
            0 when it may go now; else when to ask again (the next change of the window:
            a request leaving it), which may still answer "not yet".
        """
        live = [(at, background) for at, background in sent if at > now - self.window]
        hard = self.interactive_delay(now, live)
        if hard > 0:
            return hard
        bunched = self._bunched(now, live)
        if bunched > 0:
            return bunched
        if self.floor_due(now, live) or self._leaves_room(now, live):
            return 0.0
        # The room grows as requests leave the window and as time covers the users' expected
        # pace: ask again at the next departure, or within a second.
        next_change = min(live[0][0] + self.window, now + 1.0)
        return next_change - now

    def _bunched(self, now: float, live: Sequence[tuple[float, bool]]) -> float:
        """Seconds until the leaky bucket of ``burst`` background requests has room."""
        spacing = self.window / self.limit
        level, previous = 0.0, None
        for at, background in live:
            if background:
                if previous is not None:
                    level = max(0.0, level - (at - previous) / spacing)
                level, previous = level + 1.0, at
        if previous is not None:
            level = max(0.0, level - (now - previous) / spacing)
        return (level + 1.0 - self.burst) * spacing

    def _leaves_room(self, now: float, live: Sequence[tuple[float, bool]]) -> bool:
        users = [at for at, background in live if not background]
        active = bool(users) and users[-1] > now - self.recent
        kept = self.user_slots if active else self.idle_user_slots
        # Users' requests per second: distinct pace buckets over the time they span (at least
        # 20 s, so that one request is not taken for a flood; at most the window).
        span = min(self.window, max(20.0, now - users[0])) if users else self.window
        pace = max(
            self.min_pace / self.window,
            len({int(at // self.pace_bucket) for at in users}) / span,
        )
        times = [at for at, _ in live]
        # The count users would face is highest just before each request leaves the window
        # (a request sent at ``at`` still takes its slot until ``at + window``): check now and
        # every such moment ``u`` (requests still in the window at ``u + user_wait``, this one,
        # the users expected by then at their pace, and the slots kept for users must fit the
        # limit).
        checks = [(now, sum(1 for at in times if at > now + self.user_wait - self.window))]
        checks += [
            (u, len(times) - bisect_left(times, at))  # ``times`` is oldest first
            for at in times
            if (u := at + self.window - self.user_wait) > now
        ]
        return all(taken + 1 + pace * (u - now) + kept <= self.limit for u, taken in checks)
