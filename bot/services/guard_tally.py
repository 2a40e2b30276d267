"""The spend guard's sums kept in memory per server, so that a charge costs it no statement.

A :class:`GuildTally` holds, for one server, estimates of what the guard's rules compare with
their limits: the month's spend (from ``ledger_daily``), each tier's and member's month and
day, the current UTC hour (from ``guard_hourly``) and each member's last 10 minutes. Each is
read from the database once (seeded), then grows by this process's charges.

Other processes (a gateway and its workers) charge the same server; what they spend is learnt
when the month's total is read again (every :data:`REFRESH_SECONDS`): the difference between
the database's total and this process's estimate is their spend, counted in
:attr:`GuildTally.others` and bounded in time by :meth:`GuildTally.others_since`. An estimate
plus what others spent since it was seeded is an **upper bound** of the truth (up to the
charges of the last refresh interval), so a rule reads the database again only when that bound
reaches its limit, and decides on what it read: an alert is never fired on an estimate, and
its ``INSERT`` still decides which process posts it (:mod:`bot.services.guard`).
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass, field

REFRESH_SECONDS = 60.0
"""How often a server's month total is read again (another process's spend counts within it)."""

BURST_SECONDS = 600.0
"""The window of ``member-10min``: one member's spend in the last 10 minutes."""

_HISTORY_SECONDS = 2 * 3600.0 + BURST_SECONDS
"""How far back :meth:`GuildTally.others_since` answers (an hour and ten minutes, and more)."""


@dataclass(slots=True)
class MemberTally:
    """One member's spend this month and day, micro-cents, and ``others`` when it was read."""

    month: str
    day: str
    month_micro: int
    day_micro: int
    others: int


@dataclass(slots=True)
class BurstTally:
    """One member's last minutes: the sum read at ``seed_at`` and this process's charges since.

    Attributes:
        seed_at: when ``seed_micro`` was read (UTC epoch seconds).
        seed_micro: the member's spend in the 10 minutes before ``seed_at``.
        others: the server's :attr:`GuildTally.others` at ``seed_at``.
        charges: ``(at, micro)`` of this process's charges of the member since ``seed_at``.
    """

    seed_at: float
    seed_micro: int
    others: int
    charges: deque[tuple[float, int]] = field(default_factory=deque)


class GuildTally:
    """One server's estimates (micro-cents) for the guard's rules; see the module's docstring.

    Args:
        month: the UTC month the total belongs to (``"2026-01"``).
        total: the month's spend read from the database.
        now: when it was read, UTC epoch seconds.
    """

    def __init__(self, month: str, total: int, now: float) -> None:
        self.month = month
        self.total = total
        self.read_at = now
        self.others = 0
        # (when a refresh learnt of others' spend, ``others`` then), oldest first.
        self._history: deque[tuple[float, int]] = deque([(now, 0)])
        self.tiers: dict[str, tuple[int, int]] = {}
        self.members: dict[int, MemberTally] = {}
        self.hour = -1
        self.hour_micro = 0
        self.hour_others = 0
        self.bursts: dict[int, BurstTally] = {}

    def stale(self, month: str, now: float) -> bool:
        """Whether the total must be read again: a new month, or older than the refresh."""
        return month != self.month or now - self.read_at >= REFRESH_SECONDS

    def refreshed(self, month: str, total: int, now: float) -> None:
        """Take the month's total just read: what it holds beyond the estimate others spent.

        A new month forgets the tiers' and members' sums (read again on their next charge).
        """
        if month == self.month:
            unseen = total - self.total
            if unseen > 0:
                self.others += unseen
                self._history.append((now, self.others))
        else:
            self.month = month
            self.tiers.clear()
            self.members.clear()
        self.total = total
        self.read_at = now
        while len(self._history) > 1 and self._history[1][0] <= now - _HISTORY_SECONDS:
            self._history.popleft()
        if len(self.bursts) > 1000:
            self.bursts = {
                user: burst
                for user, burst in self.bursts.items()
                if burst.charges and burst.charges[-1][0] > now - BURST_SECONDS
            }

    def others_since(self, at: float) -> int:
        """An upper bound of what other processes spent in the server since ``at``."""
        base = self._history[0][1]
        for when, others in self._history:
            if when > at:
                break
            base = others
        return self.others - base

    def add(self, micro: int) -> None:
        """Count one of this process's charges in the month's total."""
        self.total += micro


__all__ = [
    "BURST_SECONDS",
    "REFRESH_SECONDS",
    "BurstTally",
    "GuildTally",
    "MemberTally",
]
