"""Jobs: what a generation produces, an asynchronous task's life, where its result is shown.

Times are UTC epoch seconds (``float``); money is :class:`~decimal.Decimal` cents, exact.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from decimal import Decimal
from enum import StrEnum
from typing import Any


class Kind(StrEnum):
    """What a generation produces; also the ledger's ``kind`` column."""

    TEXT = "text"
    IMAGE = "image"
    VIDEO = "video"


class JobStatus(StrEnum):
    """Life of an asynchronous job; only ``PENDING`` jobs are polled."""

    PENDING = "pending"
    COMPLETED = "completed"
    FAILED = "failed"


class DeliveryRoute(StrEnum):
    """Where a finished job's result is shown, in fallback order (docs/architecture.md).

    ``PLACEHOLDER``: the placeholder is edited into the result; ``CHANNEL``: a new message in
    the job's channel; ``DM``: a direct message to the requester; ``JOBS``: nowhere else took
    it, and ``/jobs`` lists it for the requester.
    """

    PLACEHOLDER = "placeholder"
    CHANNEL = "channel"
    DM = "dm"
    JOBS = "jobs"


@dataclass(frozen=True, slots=True)
class NewJob:
    """An asynchronous task to poll until it finishes, as first stored.

    Attributes:
        message_id: the placeholder message to edit; None until it has been sent.
        prompt_summary: a short, display-safe summary of the prompt.
        details: JSON-serialisable display parameters (duration, aspect_ratio...).
        cost_cents: what the service charged for the task, cents (0 when the report was an
            anomaly, see :class:`ChargeAnomaly`).
        created_at: UTC epoch seconds.
        next_poll_at: when to poll first, UTC epoch seconds.
    """

    task_id: str
    provider: str
    poll_url: str
    kind: Kind
    model: str
    guild_id: int
    channel_id: int
    message_id: int | None
    user_id: int
    prompt_summary: str
    details: Mapping[str, Any]
    cost_cents: Decimal
    key_fingerprint: str
    created_at: float
    next_poll_at: float


@dataclass(frozen=True, slots=True)
class Job(NewJob):
    """A stored job: the :class:`NewJob` fields plus its progress.

    Attributes:
        id: the store's id of the job.
        status: PENDING until :meth:`bot.storage.repos.jobs.JobStore.finish`.
        finished_at: UTC epoch seconds; None while pending.
        outputs: result URLs (completed jobs).
        error: failure text (failed jobs).
        poll_count: how many polls were made.
        announced_at: when the result was posted to Discord, UTC epoch seconds; None = not yet.
        last_progress_at: when the placeholder was last updated, UTC epoch seconds.
        unwatched_at: when the poller stopped watching it, still processing past the job
            timeout, UTC epoch seconds; None while watched. It stays PENDING.
        delivery_route: the route the next delivery attempt takes; once delivered, the route
            that showed it.
        delivery_attempts: delivery attempts that failed transiently so far.
        next_delivery_at: when to attempt delivery next, UTC epoch seconds; None while pending
            or once delivered.
        delivery_error: the last delivery failure, for people; None if none.
        poll_token: the fencing token of the latest poll lease (incremented by every
            ``claim_due``); a write carrying an older one is ignored.
        delivery_token: the same for delivery leases (``claim_deliveries``).
    """

    id: int
    status: JobStatus
    finished_at: float | None
    outputs: tuple[str, ...]
    error: str | None
    poll_count: int
    announced_at: float | None
    last_progress_at: float | None
    unwatched_at: float | None = None
    delivery_route: DeliveryRoute = DeliveryRoute.PLACEHOLDER
    delivery_attempts: int = 0
    next_delivery_at: float | None = None
    delivery_error: str | None = None
    poll_token: int = 0
    delivery_token: int = 0


@dataclass(frozen=True, slots=True)
class PollUpdate:
    """One poll's outcome for :meth:`bot.storage.repos.jobs.JobStore.schedule_polls`.

    Attributes:
        job_id: the job.
        next_poll_at: when to poll it next, UTC epoch seconds.
        poll_count: polls made so far.
        token: the poll lease's fencing token (``Job.poll_token`` as claimed); None: no lease
            checked.
        progress_at: when its placeholder was last refreshed (UTC epoch seconds), recorded with
            the rest; None leaves ``last_progress_at`` as it is.
    """

    job_id: int
    next_poll_at: float
    poll_count: int
    token: int | None = None
    progress_at: float | None = None


@dataclass(frozen=True, slots=True)
class ResultRequest:
    """The stored request behind a result, for the buttons under it.

    Attributes:
        id: the row id (buttons of a synchronous result carry ``r<id>``).
        kind: ``"text"``, ``"image"`` or ``"video"``.
        guild_id: where it was asked.
        user_id: the requester (who may delete the result).
        job_id: the job of an asynchronous result (its buttons carry ``j<job_id>``), else None.
        options: the command's options as stored (a JSON object).
        outputs: result URLs of a synchronous answer (a job keeps its own).
    """

    id: int
    kind: str
    guild_id: int
    user_id: int
    job_id: int | None
    options: dict[str, Any]
    outputs: tuple[str, ...]
