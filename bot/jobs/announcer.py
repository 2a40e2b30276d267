"""The port through which the poller shows a job's progress and result (the Discord side).

The job runner imports no ``discord``: whoever shows results (``bot.discord.delivery``'s
``DiscordAnnouncer``, wrapped by ``bot.discord.dm_notice``) implements :class:`JobAnnouncer`
and is handed to :class:`bot.jobs.poller.Poller`; each delivery attempt answers an
:class:`Attempt`, from which the poller decides to record, retry or fall back.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Final, Protocol

from bot.domain import DeliveryRoute, Job


@dataclass(frozen=True, slots=True)
class Attempt:
    """The outcome of one delivery attempt by one route.

    Attributes:
        shown: the result is shown (or the requester told where it is); the job is delivered.
        permanent: this route can never show it (unknown message or channel, missing access
            or permissions, archived thread, DMs closed): fall back to the next route now.
        error: what went wrong, for the logs and ``/jobs``; None when shown.
        retry_after: seconds the other side asked us to wait (a 429), if any.
        code: what failed, for the metrics: Discord's JSON error code (``"50013"``), else
            ``"429"``, ``"http_<status>"``, ``"network"``, ``"unreachable"`` (skipped without a
            request: the bot left the server, or cannot see the channel) or ``"unknown"``.
    """

    shown: bool
    permanent: bool = False
    error: str | None = None
    retry_after: float | None = None
    code: str = "unknown"


SHOWN: Final = Attempt(shown=True)

Renew = Callable[[], Awaitable[None]]
"""Extends the delivery lease of the job being delivered by another ``delivery_lease``
seconds (fenced by its token: a holder that lost the lease changes nothing)."""


class JobAnnouncer(Protocol):
    """Shows a job's progress and result where its requester asked (the Discord side)."""

    async def progress(self, job: Job, now: float) -> None:
        """Refresh the placeholder of a running job (elapsed time). Must not raise."""

    async def stopped_watching(self, job: Job, now: float) -> None:
        """Say on the placeholder that the bot stopped watching the job. Must not raise."""

    async def deliver(self, job: Job, route: DeliveryRoute, renew: Renew | None = None) -> Attempt:
        """Show a finished job's result by ``route`` (never JOBS); report how it went.

        Must be safe to repeat: an edit replaces the whole message; a new message or DM
        carries its own notice to the requester. Work that may outlast the delivery lease
        (downloads, waiting for memory) awaits ``renew`` between its steps.
        """

    async def notify(self, job: Job, route: DeliveryRoute) -> None:
        """Tell the requester, once, after a delivery by ``route`` was recorded. Must not raise."""
