"""The emulator's state and rules apart from HTTP: keys, credits, tasks, time, knobs.

:class:`Ledger` is the base of :class:`bot.sandbox.server.GenApiEmulator`; its public methods
are the emulator's test knobs. Times are seconds of the injected ``clock`` (monotonic, not
scaled); money is integer cents.
"""

from __future__ import annotations

import secrets
import time
import uuid
from collections import deque
from collections.abc import Callable
from typing import Any, Literal

from bot.sandbox import catalogue as cat
from bot.sandbox.state import (
    Account,
    ApiError,
    EmulatedTask,
    Fault,
    FaultKind,
    RateLimiter,
    RecordedRequest,
)

KEY_PREFIX = "sk-gen-"
FAIL_MARKER = "[fail]"
"""A prompt containing this fails its task (or a sync call with 500 GENERATION_FAILED)."""

TaskDuration = Callable[[str, dict[str, Any]], float]


class Ledger:
    """Accounts, tasks, time and queued misbehaviour of the emulator.

    Args:
        time_scale: how many service seconds pass per clock second (> 0).
        rate_limit: requests allowed per key within ``rate_window``.
        rate_window: the rolling rate window in clock seconds (not scaled).
        clock: monotonic time source in seconds; tests pass a fake one.
        default_balance_cents: balance of keys created without one, in cents.
    """

    def __init__(
        self,
        *,
        time_scale: float = 1.0,
        rate_limit: int = 30,
        rate_window: float = 60.0,
        clock: Callable[[], float] = time.monotonic,
        default_balance_cents: int = 100_000,
    ) -> None:
        if time_scale <= 0:
            raise ValueError("time_scale must be positive")
        self.time_scale = time_scale
        self._clock = clock
        self._limiter = RateLimiter(rate_limit, rate_window)
        self._default_balance = default_balance_cents
        self._accounts: dict[str, Account] = {}
        self._faults: deque[Fault] = deque()
        self._fail_next: deque[str] = deque()
        self._task_duration: TaskDuration | None = None
        self._next_text: str | None = None
        self._origin: str | None = None
        self.file_size: int | None = None
        """Bytes each output file is padded to (None: the tiny real file); see
        :meth:`set_file_size`."""
        self.requests: list[RecordedRequest] = []
        """Every request received, in arrival order."""
        self.tasks: dict[str, EmulatedTask] = {}
        """Every task by id, sync image tasks included."""

    # -- addresses -------------------------------------------------------------------------

    @property
    def origin(self) -> str:
        """Scheme, host and port, e.g. ``http://127.0.0.1:8765``; output URLs start with it."""
        if self._origin is None:
            raise RuntimeError("emulator not started")
        return self._origin

    # -- accounts --------------------------------------------------------------------------

    def create_key(self, balance_cents: int | None = None, *, key: str | None = None) -> str:
        """Create an API key with ``balance_cents`` (default: the emulator's default balance).

        Args:
            balance_cents: starting balance in cents.
            key: the key to create; it must start with ``sk-gen-``. Default: a random one.

        Returns:
            The key, ``sk-gen-`` followed by 32 hex digits unless ``key`` was given.

        Raises:
            ValueError: ``key`` lacks the prefix or exists already.
        """
        key = key if key is not None else KEY_PREFIX + secrets.token_hex(16)
        if not key.startswith(KEY_PREFIX) or key in self._accounts:
            raise ValueError(f"key must start with {KEY_PREFIX!r} and be new")
        balance = self._default_balance if balance_cents is None else balance_cents
        self._accounts[key] = Account(balance_cents=balance)
        return key

    def revoke_key(self, key: str) -> None:
        """Revoke ``key``: its requests get 401 from now on. Raises KeyError if unknown."""
        self._accounts[key].revoked = True

    def set_balance(self, key: str, cents: int) -> None:
        """Set the balance of ``key`` in cents. Raises KeyError if unknown."""
        self._accounts[key].balance_cents = cents

    def balance(self, key: str) -> int:
        """Return the balance of ``key`` in cents. Raises KeyError if unknown."""
        return self._accounts[key].balance_cents

    # -- behaviour knobs -------------------------------------------------------------------

    def fail_next_tasks(self, count: int = 1, message: str = "Sandbox: forced failure") -> None:
        """Make the next ``count`` async tasks (video or async image) fail at completion."""
        self._fail_next.extend([message] * count)

    def fail_task(self, task_id: str, message: str = "Sandbox: forced failure") -> None:
        """Make a processing task fail at its completion time.

        Raises:
            KeyError: unknown task.
            ValueError: the task has already completed or failed.
        """
        task = self.tasks[task_id]
        self._settle(task)
        if task.status != "processing":
            raise ValueError(f"task {task_id} is already {task.status}")
        task.fail_message = message

    def complete_task_now(self, task_id: str) -> None:
        """Finish a processing task now (completed, or failed if it was due to fail).

        Raises:
            KeyError: unknown task.
        """
        task = self.tasks[task_id]
        now = self._clock()
        if task.status == "processing" and task.completes_at > now:
            task.completes_at = now
        self._settle(task)

    def refresh_tasks(self) -> None:
        """Settle every task whose completion time has passed (O(tasks); for tests/benches)."""
        for task in self.tasks.values():
            self._settle(task)

    def set_task_duration(self, fn: TaskDuration | None) -> None:
        """Set how many service seconds a task takes, from (model id, request body).

        None restores the per-model defaults of the catalogue.
        """
        self._task_duration = fn

    def set_file_size(self, size: int | None) -> None:
        """Serve every output file padded to ``size`` bytes (a large result); None: as is."""
        self.file_size = size

    def set_next_text(self, content: str) -> None:
        """Make the next successful ``/text/generate`` answer ``content``."""
        self._next_text = content

    def inject_fault(
        self,
        kind: FaultKind,
        count: int = 1,
        *,
        delay: float = 5.0,
    ) -> None:
        """Make the next ``count`` requests under ``/api/v1`` misbehave (``/files`` is spared).

        Kinds: ``"500"`` answers 500 with error code ``INTERNAL``; ``"html_502"`` a 502 HTML
        page; ``"malformed_json"`` a 200 whose body is not JSON; ``"drop"`` closes the
        connection without a response; ``"429"`` answers ``RATE_LIMITED`` with ``Retry-After:
        ceil(delay)``, as when another client shares the key. These requests are neither
        processed, charged nor rate-counted. ``"slow"`` processes and charges normally and
        holds the response back ``delay`` real seconds, so a client that times out has still
        been charged.
        """
        self._faults.extend(Fault(kind, delay) for _ in range(count))

    # -- statistics ------------------------------------------------------------------------

    def max_requests_in_window(self, key: str, window: float | None = None) -> int:
        """Return the most rate-counted requests of ``key`` within any rolling window.

        Args:
            key: the bearer string (``""`` for requests without one).
            window: window length in clock seconds; default the rate window.
        """
        return self._limiter.max_in_window(key, self._limiter.window if window is None else window)

    def rate_limited_count(self, key: str) -> int:
        """Return how many 429 responses ``key`` received."""
        return self._limiter.rejected(key)

    # -- rules used by the endpoints -------------------------------------------------------

    def _authenticate(self, key: str | None) -> str:
        if key is None:
            raise ApiError(401, "UNAUTHORIZED", "Missing header 'Authorization: Bearer <key>'")
        if not key.startswith(KEY_PREFIX):
            raise ApiError(401, "UNAUTHORIZED", f"API keys begin with {KEY_PREFIX}")
        account = self._accounts.get(key)
        if account is None:
            raise ApiError(401, "UNAUTHORIZED", "Invalid API key")
        if account.revoked:
            raise ApiError(401, "UNAUTHORIZED", "This API key has been revoked")
        return key

    def _charge(self, key: str, cents: int) -> int:
        account = self._accounts[key]
        if account.balance_cents < cents:
            raise ApiError(
                402,
                "INSUFFICIENT_CREDITS",
                f"This call costs {cents} cents; the balance is {account.balance_cents} cents",
            )
        account.balance_cents -= cents
        return account.balance_cents

    def seed_video_task(self, key: str, model_id: str, seconds: float) -> EmulatedTask:
        """Create a running video task as ``POST /video/generate`` would, without HTTP.

        For benchmarks that need thousands of pending tasks at once: submitting them over HTTP
        would run into the rate limit the benchmark then measures. Nothing is charged.

        Args:
            key: the key the task belongs to (its polls must use it).
            model_id: a video model of the catalogue.
            seconds: service seconds until it completes.

        Raises:
            KeyError: an unknown model.
        """
        model = cat.VIDEO_BY_ID[model_id]
        task = self._new_task(key, "video", model.id, model.provider, 0, {})
        task.completes_at = task.created_at + seconds / self.time_scale
        return task

    def _new_task(
        self,
        key: str,
        kind: Literal["video", "image"],
        model: str,
        provider: str,
        cost: int,
        body: dict[str, Any],
    ) -> EmulatedTask:
        now = self._clock()
        task = EmulatedTask(
            task_id=str(uuid.uuid4()),
            kind=kind,
            model=model,
            provider=provider,
            status="processing",
            created_at=now,
            completes_at=now,
            cost_cents=cost,
            key=key,
            request=body,
        )
        self.tasks[task.task_id] = task
        return task

    def _schedule(self, task: EmulatedTask, prompt: str, default_seconds: float) -> None:
        """Set when an async task finishes and whether it will fail."""
        if FAIL_MARKER in prompt:
            task.fail_message = "Sandbox: the prompt asked to fail"
        elif self._fail_next:
            task.fail_message = self._fail_next.popleft()
        fn = self._task_duration
        seconds = default_seconds if fn is None else fn(task.model, task.request)
        # Service seconds become clock seconds through the time scale.
        task.completes_at = task.created_at + max(0.0, seconds) / self.time_scale

    def _settle(self, task: EmulatedTask) -> None:
        """Flip a processing task whose completion time has passed (lazy, on observation)."""
        if task.status != "processing" or self._clock() < task.completes_at:
            return
        task.completed_at = task.completes_at
        if task.fail_message is not None:
            task.status = "failed"
            task.error = {"code": "GENERATION_FAILED", "message": task.fail_message}
        elif task.kind == "video":
            task.status = "completed"
            task.outputs = [f"{self.origin}/files/{task.task_id}.mp4"]
        else:
            task.status = "completed"
            images = cat.IMAGE_BY_ID[task.model].images
            task.outputs = [f"{self.origin}/files/{task.task_id}-{n}.png" for n in range(images)]
