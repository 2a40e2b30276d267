"""The emulator's bookkeeping: records of requests and tasks, accounts, the rate limiter.

All times here are seconds of the emulator's ``clock`` (monotonic, not scaled).
"""

from __future__ import annotations

import math
from bisect import bisect_right
from collections import deque
from dataclasses import dataclass, field
from decimal import Decimal
from typing import Any, Literal

TaskStatus = Literal["processing", "completed", "failed"]
FaultKind = Literal[
    "500", "html_502", "malformed_json", "slow", "drop", "429", "404", "gateway_502"
]


class ApiError(Exception):
    """An error answered as ``{"error": {"message", "code"}}`` with an HTTP status.

    Args:
        status: HTTP status code.
        code: the spec's error code, e.g. ``"INVALID_PARAMS"``.
        message: a sentence for the developer; never contains the API key unless
            ``echo_keys_in_errors`` is on.
    """

    def __init__(self, status: int, code: str, message: str) -> None:
        super().__init__(message)
        self.status = status
        self.code = code
        self.message = message


def invalid(message: str) -> ApiError:
    """Return a 400 ``INVALID_PARAMS`` error."""
    return ApiError(400, "INVALID_PARAMS", message)


@dataclass(slots=True)
class RecordedRequest:
    """One request the emulator received.

    Attributes:
        time: clock seconds at arrival.
        key: the bearer string sent, or None without a ``Bearer`` header.
        method: HTTP method.
        path: path from the host root, with the query string.
        status: HTTP status answered; 0 when the connection was dropped without a response.
        json: the parsed JSON body, or None (no body, or not JSON).
        counted: whether the rate limiter counted it (``/files`` and faulted requests are not).
    """

    time: float
    key: str | None
    method: str
    path: str
    status: int = 0
    json: Any = None
    counted: bool = False


@dataclass(slots=True)
class EmulatedTask:
    """A generation task (async video or image, or a sync image answered at once).

    Attributes:
        task_id: the id the service returned.
        kind: ``"video"`` or ``"image"``; it selects the poll endpoint.
        model: catalogue id.
        provider: the provider the poll must name.
        status: current status; flips lazily when observed after ``completes_at``.
        created_at: clock seconds at submission.
        completes_at: clock seconds at which generation finishes.
        completed_at: clock seconds it became completed or failed (equals ``completes_at``),
            None while processing.
        outputs: file URLs once completed.
        error: ``{"code": "GENERATION_FAILED", "message": ...}`` once failed.
        cost_cents: what the submission charged, in cents.
        key: the API key that submitted it.
        fail_message: set when the task is due to fail at ``completes_at``.
        request: the request body as submitted.
    """

    task_id: str
    kind: Literal["video", "image"]
    model: str
    provider: str
    status: TaskStatus
    created_at: float
    completes_at: float
    cost_cents: Decimal | int | float | str
    key: str
    completed_at: float | None = None
    outputs: list[str] = field(default_factory=list)
    error: dict[str, str] | None = None
    fail_message: str | None = None
    request: dict[str, Any] = field(default_factory=dict)


@dataclass(slots=True)
class Account:
    """An API key's balance in cents and whether it has been revoked."""

    balance_cents: Decimal
    revoked: bool = False


@dataclass(slots=True)
class Fault:
    """One queued fault; ``delay`` (seconds) is the hold-back of ``slow``, or ``429``'s wait."""

    kind: FaultKind
    delay: float


class EmulatedRateWindow:
    """A rolling-window limit per bucket: at most ``limit`` accepted requests per ``window``.

    Rejected requests are not recorded, so a client hammering a full window is not punished
    beyond the window. Each bucket keeps a deque of accepted times (O(1) amortised per request)
    plus the full list of accepted times for :meth:`max_in_window`.

    Args:
        limit: requests allowed per window.
        window: window length in clock seconds.
    """

    def __init__(self, limit: int, window: float) -> None:
        if limit < 1 or window <= 0:
            raise ValueError("rate limit and window must be positive")
        self.limit = limit
        self.window = window
        self._recent: dict[str, deque[float]] = {}
        self._history: dict[str, list[float]] = {}
        self._rejected: dict[str, int] = {}

    def acquire(self, bucket: str, now: float) -> int | None:
        """Count a request at ``now``; return None if allowed, else the Retry-After seconds.

        The delay is the ceiling of the time until the oldest request in the window leaves it,
        so a client waiting exactly that long is admitted.
        """
        recent = self._recent.setdefault(bucket, deque())
        # The window is the half-open interval (now - window, now].
        while recent and recent[0] <= now - self.window:
            recent.popleft()
        if len(recent) >= self.limit:
            self._rejected[bucket] = self._rejected.get(bucket, 0) + 1
            return max(1, math.ceil(recent[0] + self.window - now))
        recent.append(now)
        self._history.setdefault(bucket, []).append(now)
        return None

    def rejected(self, bucket: str) -> int:
        """Return how many requests of ``bucket`` were refused with 429."""
        return self._rejected.get(bucket, 0)

    def max_in_window(self, bucket: str, window: float) -> int:
        """Return the most accepted requests of ``bucket`` within any window of ``window`` s."""
        times = self._history.get(bucket, [])
        best = 0
        for i, start in enumerate(times):
            # Requests in [start, start + window): same half-open width as the limiter.
            end = bisect_right(times, start + window - 1e-9, lo=i)
            best = max(best, end - i)
        return best
