"""The emulator's state and rules apart from HTTP: keys, credits, tasks, time, knobs.

:class:`EmulatedService` is the base of :class:`bot.sandbox.server.GenApiEmulator`; its public
methods are the emulator's test knobs. Times are seconds of the injected ``clock`` (monotonic, not
scaled); money is cents, :class:`~decimal.Decimal` (whole by default; fractional when a test
asks with :meth:`EmulatedService.report_next_costs`).
"""

from __future__ import annotations

import json
import logging
import os
import secrets
import time
import uuid
from collections import deque
from collections.abc import Callable
from decimal import Decimal
from pathlib import Path
from typing import Any, Literal

from bot.sandbox import catalogue as cat
from bot.sandbox.state import (
    Account,
    ApiError,
    EmulatedRateWindow,
    EmulatedTask,
    Fault,
    FaultKind,
    RecordedRequest,
)

log = logging.getLogger(__name__)

KEY_PREFIX = "sk-gen-"
FAIL_MARKER = "[fail]"
"""A prompt containing this fails its task (or a sync call with 500 GENERATION_FAILED)."""

TaskDuration = Callable[[str, dict[str, Any]], float]

ReportedCost = Decimal | int | float | str
"""A ``cost_cents`` as the emulator reports it: normally a number, anything when a test says so."""


def chargeable(cost: ReportedCost) -> Decimal:
    """Return what ``cost`` takes off a balance: itself if a finite number >= 0, else 0."""
    try:
        amount = Decimal(str(cost)) if not isinstance(cost, bool) else Decimal(0)
    except ArithmeticError:
        return Decimal(0)
    return amount if amount.is_finite() and amount >= 0 else Decimal(0)


class EmulatedService:
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
        self._limiter = EmulatedRateWindow(rate_limit, rate_window)
        self._default_balance = default_balance_cents
        self._accounts: dict[str, Account] = {}
        self._faults: deque[Fault] = deque()
        self._fail_next: deque[str] = deque()
        self._task_duration: TaskDuration | None = None
        self._next_text: str | None = None
        self.completion_prices: dict[str, int] = {}
        """Cents per 1,000 completion tokens of a text model priced apart from its prompt
        tokens (see :meth:`price_completion`)."""
        self._echo_key = False
        self._next_costs: deque[ReportedCost] = deque()
        self._origin: str | None = None
        self._state_path: Path | None = None
        self.file_size: int | None = None
        """Bytes each output file is padded to (None: the tiny real file); see
        :meth:`set_file_size`."""
        self.files_redirect: str | None = None
        """Where ``/files`` requests are redirected; see :meth:`redirect_files`."""
        self.requests: list[RecordedRequest] = []
        """Every request received, in arrival order."""
        self.tasks: dict[str, EmulatedTask] = {}
        """Every task by id, sync image tasks included; after :meth:`restart_task_counter`, the
        newest task of each id."""
        self._task_counter: int | None = None
        self._hidden_models: dict[str, frozenset[str]] = {}
        self._replaced: dict[str, list[EmulatedTask]] = {}
        """Tasks whose id a later task reused, by id, oldest first (kept in memory only)."""

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
        self._accounts[key] = Account(balance_cents=Decimal(balance))
        return key

    def revoke_key(self, key: str) -> None:
        """Revoke ``key``: its requests get 401 from now on. Raises KeyError if unknown."""
        self._accounts[key].revoked = True

    def set_balance(self, key: str, cents: int | Decimal) -> None:
        """Set the balance of ``key`` in cents. Raises KeyError if unknown."""
        self._accounts[key].balance_cents = Decimal(cents)

    def balance(self, key: str) -> Decimal:
        """Return the balance of ``key`` in cents. Raises KeyError if unknown."""
        return self._accounts[key].balance_cents

    # -- persistence -----------------------------------------------------------------------

    def save(self, path: Path) -> None:
        """Write the accounts and tasks to ``path`` (JSON, mode 0600: it holds the keys).

        Times are stored as Unix seconds, since the monotonic clock restarts with the process;
        amounts as decimal strings (exact); output URLs are not stored, as they name this run's
        port and are rebuilt on observation. The write is atomic (a temporary file, then a
        rename), so a crash leaves the old state.

        Raises:
            OSError: the file cannot be written.
        """
        shift = time.time() - self._clock()
        state = {
            "accounts": {
                key: {"balance_cents": str(a.balance_cents), "revoked": a.revoked}
                for key, a in self._accounts.items()
            },
            "tasks": [
                {
                    "task_id": t.task_id,
                    "kind": t.kind,
                    "model": t.model,
                    "provider": t.provider,
                    "created_at": t.created_at + shift,
                    "completes_at": t.completes_at + shift,
                    "cost_cents": str(t.cost_cents),
                    "key": t.key,
                    "fail_message": t.fail_message,
                    "request": t.request,
                }
                for t in self.tasks.values()
            ],
        }
        temporary = path.with_name(path.name + ".tmp")
        fd = os.open(temporary, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        with os.fdopen(fd, "w", encoding="utf-8") as file:
            json.dump(state, file)
        os.replace(temporary, path)

    def load(self, path: Path) -> list[str]:
        """Restore the accounts and tasks that :meth:`save` wrote to ``path``, if it exists.

        A task due while the emulator was down completes (or fails) when next observed.

        Returns:
            The restored keys, oldest first; empty when there was no file.

        Raises:
            OSError: the file exists but cannot be read.
            ValueError: the file is not a saved state.
        """
        try:
            raw = path.read_text(encoding="utf-8")
        except FileNotFoundError:
            return []
        shift = time.time() - self._clock()
        try:
            state = json.loads(raw)
            for key, account in state["accounts"].items():
                self._accounts[key] = Account(
                    balance_cents=Decimal(account["balance_cents"]),
                    revoked=bool(account["revoked"]),
                )
            for t in state["tasks"]:
                task = EmulatedTask(
                    task_id=t["task_id"],
                    kind=t["kind"],
                    model=t["model"],
                    provider=t["provider"],
                    status="processing",
                    created_at=float(t["created_at"]) - shift,
                    completes_at=float(t["completes_at"]) - shift,
                    cost_cents=Decimal(t["cost_cents"]),
                    key=t["key"],
                    fail_message=t["fail_message"],
                    request=t["request"],
                )
                self.tasks[task.task_id] = task
        except (KeyError, TypeError, AttributeError, ArithmeticError) as exc:
            raise ValueError(f"not a saved sandbox state ({exc!r})") from None
        return list(state["accounts"])

    def persist_to(self, path: Path) -> None:
        """Save the state to ``path`` now, after every request that may change it, and at stop.

        The bot's sandbox mode keeps its key and tasks across restarts this way.

        Raises:
            OSError: the first save failed (later failures are logged).
        """
        self.save(path)
        self._state_path = path

    def _persist(self) -> None:
        if self._state_path is None:
            return
        try:
            self.save(self._state_path)
        except OSError as exc:
            # The answer is already decided; a sandbox losing state must not fail requests.
            log.warning("could not save the sandbox state to %s: %s", self._state_path, exc)

    # -- behaviour knobs -------------------------------------------------------------------

    def echo_keys_in_errors(self, echo: bool = True) -> None:
        """Make 401 messages name the key they refused, as some services do (default: off).

        For tests that the bot never logs or shows a service's message unredacted.
        """
        self._echo_key = echo

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

    def restart_task_counter(self) -> None:
        """Number the next tasks ``task-1``, ``task-2``... from a counter that starts over now.

        Plays a service that lost its id sequence (a restored backup, a reset node): a task id
        is only unique within the account that made it, and after a restart not even there.
        Each call starts the counter at 1 again, so the next tasks reuse ids given before, to
        the same key or to others. The earlier tasks keep their state: each stays reachable
        by its own key (a poll with another key's id is answered with that key's task) and its
        files stay served. Until the first call, task ids are random UUIDs.
        """
        self._task_counter = 0

    def hide_models(self, key: str, *model_ids: str) -> None:
        """Leave ``model_ids`` out of the ``GET /models`` that ``key`` is answered.

        Plays a provider that enables models per account, so that accounts see different
        catalogues. Only the listing changes; no arguments shows ``key`` everything again.
        """
        self._hidden_models[key] = frozenset(model_ids)

    def models_json(self, key: str | None) -> dict[str, Any]:
        """The body of ``GET /models`` for ``key``: the catalogue less its hidden models."""
        body = cat.catalogue_json()
        hidden = self._hidden_models.get(key or "", frozenset())
        if hidden:
            body["models"] = {
                kind: [m for m in models if m["id"] not in hidden]
                for kind, models in body["models"].items()
            }
        return body

    def set_task_duration(self, fn: TaskDuration | None) -> None:
        """Set how many service seconds a task takes, from (model id, request body).

        None restores the per-model defaults of the catalogue.
        """
        self._task_duration = fn

    def report_next_costs(self, *costs: ReportedCost) -> None:
        """Make the next charging responses report these ``cost_cents``, one each, in order.

        A finite number >= 0 (``Decimal("0.35")``) is also what the key is charged; anything
        else (negative, ``float("nan")``, a string) is reported as given and charges nothing, so
        tests can play a service that breaks the protocol. Decimals go on the wire as the
        shortest JSON number that reads back to the same value (up to 15 significant digits).
        """
        self._next_costs.extend(costs)

    def _cost(self, price: int) -> ReportedCost:
        """The ``cost_cents`` of the next charging response: the catalogue's unless overridden."""
        return self._next_costs.popleft() if self._next_costs else price

    def set_file_size(self, size: int | None) -> None:
        """Serve every output file padded to ``size`` bytes (a large result); None: as is."""
        self.file_size = size

    def redirect_files(self, origin: str | None) -> None:
        """Answer ``/files/<name>`` with a 302 to ``<origin>/files/<name>?redirected=1``.

        The redirected request is served: ``origin`` may be the emulator's own (a redirect
        within the origin) or the emulator under another name (``http://localhost:<port>``,
        another origin serving the same file). None: serve files directly again.
        """
        self.files_redirect = origin

    def price_completion(self, model_id: str, cents_per_1k_tokens: int | None) -> None:
        """Price ``model_id``'s completion tokens apart from its prompt tokens (None: alike).

        Services often charge an answer's tokens several times a prompt's; the charge is then
        ``max(1, ceil((prompt x catalogue price + completion x this price) / 1000))`` cents.
        """
        if cents_per_1k_tokens is None:
            self.completion_prices.pop(model_id, None)
        else:
            self.completion_prices[model_id] = cents_per_1k_tokens

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
        been charged. ``"404"`` answers 404 ``NOT_FOUND`` (a node that does not know the task
        yet), not processed. ``"gateway_502"`` processes and charges the request normally, then
        answers 502 ``BAD_GATEWAY`` in the spec's error shape instead of the result, as a
        gateway in front of the service that gave up waiting: such a POST may have charged.
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
        echoed = f": {key}" if self._echo_key else ""
        account = self._accounts.get(key)
        if account is None:
            raise ApiError(401, "UNAUTHORIZED", f"Invalid API key{echoed}")
        if account.revoked:
            raise ApiError(401, "UNAUTHORIZED", f"This API key has been revoked{echoed}")
        return key

    def _charge(self, key: str, cost: ReportedCost) -> Decimal:
        account = self._accounts[key]
        cents = chargeable(cost)
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
        cost: ReportedCost,
        body: dict[str, Any],
    ) -> EmulatedTask:
        now = self._clock()
        if self._task_counter is None:
            task_id = str(uuid.uuid4())
        else:
            self._task_counter += 1
            task_id = f"task-{self._task_counter}"
        task = EmulatedTask(
            task_id=task_id,
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
        earlier = self.tasks.get(task_id)
        if earlier is not None:
            self._replaced.setdefault(task_id, []).append(earlier)
        self.tasks[task_id] = task
        return task

    def _tasks_of_id(self, task_id: str) -> list[EmulatedTask]:
        """Every task given ``task_id``, newest first (more than one after a counter restart)."""
        newest = self.tasks.get(task_id)
        if newest is None:
            return []
        return [newest, *reversed(self._replaced.get(task_id, []))]

    def _task_of(self, key: str, task_id: str) -> EmulatedTask | None:
        """The newest task ``task_id`` of ``key``: what a poll with ``key`` reaches."""
        return next((t for t in self._tasks_of_id(task_id) if t.key == key), None)

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
