"""The Generation API client: one pooled ``httpx.AsyncClient``, typed results, safe retries.

Every method takes the API key to use (a guild's own or the bot's default) as a
:class:`~pydantic.SecretStr`, and goes through that key's :class:`~bot.genapi.ratelimit.KeyLimiter`.

Retry rules (money is real, docs/genapi.md §7.3 and the project's rules):

* A generation ``POST`` that may have reached the service is never sent again: a retry could
  charge twice. It is retried only after a 429 (the service refused it, nothing was charged)
  and after a connection that provably never opened (connect error, connect or pool timeout).
* ``GET`` requests (catalogue, status polls) are idempotent and also retry on transport errors,
  5xx answers and non-JSON bodies, with exponential backoff and jitter (:func:`retry_delay`).
* A 429's ``Retry-After`` blocks the whole key in the limiter; an interactive caller that would
  wait longer than ``interactive_max_wait`` (``QUEUE_MAX_WAIT_SECONDS``) gets
  :class:`RateLimitedError` at once instead. A
  429 counts as refused whatever its body (JSON or a proxy's page), and ``Retry-After`` is read
  defensively and capped at :data:`MAX_RETRY_AFTER` (10 min): one bad header must not silence
  a key for good.
"""

from __future__ import annotations

import email.utils
import hashlib
import logging
import math
import random
from collections.abc import Iterable
from datetime import UTC, datetime
from decimal import Decimal
from typing import Any, TypeVar

import httpx2 as httpx
from pydantic import BaseModel, SecretStr, ValidationError

from bot.clock import Clock
from bot.genapi import errors
from bot.genapi.ratelimit import Kind, Limiter, Priority
from bot.genapi.wire import (
    Catalogue,
    ImageRequest,
    ImageResult,
    ModelsResponse,
    PendingTask,
    TaskState,
    TextRequest,
    TextResult,
    VideoRequest,
)
from bot.ops.metrics import Metrics
from bot.redaction import redact

log = logging.getLogger(__name__)

ModelT = TypeVar("ModelT", bound=BaseModel)

DEFAULT_RETRY_AFTER = 5.0
"""Seconds to wait after a 429 without a usable ``Retry-After`` (its unit is not shown)."""

MAX_RETRY_AFTER = 600.0
"""The longest a ``Retry-After`` may hold a key, seconds (a larger value is read as this)."""

GENERATION_TIMEOUT = httpx.Timeout(connect=5.0, read=120.0, write=15.0, pool=10.0)
"""Synchronous text and image generation may take a while; connecting may not."""

STATUS_TIMEOUT = httpx.Timeout(connect=5.0, read=15.0, write=10.0, pool=10.0)

BACKOFF_FIRST = 0.5
"""Seconds before the second attempt of a retryable request (then doubled each attempt)."""

BACKOFF_MAX = 8.0
"""The longest backoff between two attempts, seconds, before jitter."""

BACKOFF_JITTER = 0.5
"""Up to this many seconds added at random to each backoff, so clients do not retry in step."""

POLL_TARGETS = 20_000
"""Resolved poll URLs a client remembers (a few hundred bytes each; 10,000 pending jobs fit)."""


def retry_delay(failure: BaseException, attempt: int) -> float:
    """Seconds to wait after attempt number ``attempt`` (from 1) failed with ``failure``.

    0.5 s, 1 s, 2 s... capped at :data:`BACKOFF_MAX`, plus up to :data:`BACKOFF_JITTER`; none
    after a 429, whose ``Retry-After`` the key's limiter already holds the next attempt for.
    """
    if isinstance(failure, errors.RateLimitedError):
        return 0.0
    backoff = min(BACKOFF_MAX, BACKOFF_FIRST * 2.0 ** (attempt - 1))
    return backoff + random.uniform(0.0, BACKOFF_JITTER)


_NOT_SENT = (httpx.ConnectError, httpx.ConnectTimeout, httpx.PoolTimeout)
"""Transport failures that prove the request never reached the service."""


def key_fingerprint(key: SecretStr | str) -> str:
    """Return a short, non-reversible name of an API key, safe to log and to store.

    The first 12 hex digits of its SHA-256.
    """
    raw = key.get_secret_value() if isinstance(key, SecretStr) else key
    return hashlib.sha256(raw.encode()).hexdigest()[:12]


def parse_retry_after(value: str | None) -> float:
    """Read a ``Retry-After`` header as seconds (its unit is not stated, docs/genapi.md §7.2).

    Accepts delta-seconds (integer or decimal, the common form) and an HTTP date (RFC 9110).
    The result is always within ``[0, MAX_RETRY_AFTER]``: a value we cannot read (garbage,
    negative, NaN) gives :data:`DEFAULT_RETRY_AFTER`, a larger one (``inf``, a date far away)
    :data:`MAX_RETRY_AFTER`, a past date 0. Never raises: it runs on the error path.
    """
    if not value:
        return DEFAULT_RETRY_AFTER
    try:
        seconds = float(value)
    except ValueError:
        seconds = _seconds_until_http_date(value)
    if math.isnan(seconds) or seconds < 0:
        return DEFAULT_RETRY_AFTER
    return min(seconds, MAX_RETRY_AFTER)


def _seconds_until_http_date(value: str) -> float:
    try:
        when = email.utils.parsedate_to_datetime(value)
    except (TypeError, ValueError, OverflowError):
        return math.nan
    if when.tzinfo is None:  # "-0000" means UTC with no claim about the local zone (RFC 5322)
        when = when.replace(tzinfo=UTC)
    return max(0.0, (when - datetime.now(UTC)).total_seconds())


def error_from_response(
    response: httpx.Response, known: Iterable[str] = (), *, charging: bool = False
) -> errors.GenAPIError:
    """Turn an error response into the exception of its code (docs/genapi.md §7.2).

    The single place where HTTP statuses and ``error.code`` become exceptions (see the table in
    :mod:`bot.genapi.errors`), and where the service's message is redacted
    (:func:`~bot.redaction.redact`): the key the request carried, the ``known`` keys and
    anything shaped like a key never reach a log or a user.

    A 429 is a :class:`~bot.genapi.errors.RateLimitedError` whatever its body: a proxy in front
    of the service may answer with its own page, and its ``Retry-After`` still holds.

    ``charging``: the request was a generation ``POST``; a 5xx other than ``GENERATION_FAILED``
    then may have charged (:class:`~bot.genapi.errors.ServerError`, ``may_have_charged``).
    """
    status = response.status_code
    try:
        body = response.json()
        error = body["error"]
        code, message = str(error.get("code", "")), str(error.get("message", ""))
        secrets = (*known, *_request_key(response))
        code, message = redact(code, secrets), redact(message, secrets)
    except (ValueError, KeyError, TypeError, AttributeError):
        if status == 429:
            code, message = "RATE_LIMITED", f"rate limited ({_kind(response)} body)"
        else:
            return errors.MalformedResponseError(
                status, f"error body is not the spec's JSON error object ({_kind(response)})"
            )
    if status == 429 or code == "RATE_LIMITED":
        retry_after = parse_retry_after(response.headers.get("Retry-After"))
        return errors.RateLimitedError(status, code, message, retry_after)
    if code in errors.ERROR_CODES:
        return errors.ERROR_CODES[code](status, code, message)
    if status == 404:
        return errors.TaskNotFoundError(status, code, message)
    if status >= 500:
        return errors.ServerError(status, code, message, may_have_charged=charging)
    return errors.APIStatusError(status, code, message)


def _request_key(response: httpx.Response) -> list[str]:
    try:
        header = response.request.headers.get("Authorization", "")
    except RuntimeError:  # a response built without its request
        return []
    scheme, _, token = str(header).partition(" ")
    return [token.strip()] if scheme.lower() == "bearer" and token.strip() else []


def _kind(response: httpx.Response) -> str:
    content_type: str = response.headers.get("content-type", "no content type")
    return content_type.split(";")[0]


def _operation(method: str, path: str | httpx.URL) -> str:
    """The metrics label of a request: ``list_models``, ``generate_<kind>`` or ``status``."""
    if isinstance(path, str) and path == "models":
        return "list_models"
    if method == "POST" and isinstance(path, str):
        return "generate_" + path.split("/", 1)[0]
    return "status"


def _outcome(response: httpx.Response) -> str:
    """The metrics label of an answer: ``ok``, ``rate_limited``, ``client_error``..."""
    status = response.status_code
    if status == 429:
        return "rate_limited"
    if status >= 500:
        return "server_error"
    if status >= 400:
        return "client_error"
    return "ok"


def _is_retryable(exc: BaseException, *, idempotent: bool) -> bool:
    if isinstance(exc, errors.RateLimitWaitTooLong):
        return False
    if isinstance(exc, errors.RateLimitedError):
        return True
    if isinstance(exc, errors.APIConnectionError):
        return idempotent or not exc.request_sent
    if not idempotent:
        return False
    if isinstance(exc, errors.MalformedResponseError):
        return True
    return isinstance(exc, errors.APIStatusError) and exc.status >= 500


class GenAPIClient:
    """Async client of the Generation Service API v1 (``docs/genapi.md``).

    Args:
        base_url: the spec's ``{base_url}``, ending in ``/api/v1``.
        http: the shared, pooled HTTP client (owned by the caller).
        limiter: the process-wide per-key limiter.
        clock: used for backoff sleeps, so tests never wait.
        interactive_max_wait: the longest estimated wait, seconds, an interactive request is
            queued for in the limiter (``QUEUE_MAX_WAIT_SECONDS``, 5 minutes); beyond
            it :class:`~bot.genapi.errors.RateLimitWaitTooLong` is raised.
        attempts: tries per request, the first included, when the failure is retryable.
        generation_timeout: timeouts of generation POSTs, seconds.
        status_timeout: timeouts of GETs, seconds.
        known_keys: keys to redact from every message of the service besides the request's own
            (the bot's default key).
        metrics: counts every request sent, its outcome and latency; None counts nothing.
    """

    def __init__(
        self,
        base_url: str,
        *,
        http: httpx.AsyncClient,
        limiter: Limiter,
        clock: Clock,
        interactive_max_wait: float = 300.0,
        attempts: int = 3,
        generation_timeout: httpx.Timeout = GENERATION_TIMEOUT,
        status_timeout: httpx.Timeout = STATUS_TIMEOUT,
        known_keys: Iterable[SecretStr] = (),
        metrics: Metrics | None = None,
    ) -> None:
        self._metrics = metrics
        self._base = httpx.URL(base_url.rstrip("/") + "/")
        self._poll_targets: dict[str, httpx.URL] = {}
        self._http = http
        self._limiter = limiter
        self._clock = clock
        self._interactive_max_wait = interactive_max_wait
        self._attempts = attempts
        self._generation_timeout = generation_timeout
        self._status_timeout = status_timeout
        self._known_keys = tuple(k.get_secret_value() for k in known_keys)

    def __repr__(self) -> str:
        return f"GenAPIClient(base_url={str(self._base)!r})"

    @property
    def limiter(self) -> Limiter:
        """The limiter every request of this client goes through."""
        return self._limiter

    async def forget_key(self, key: SecretStr) -> None:
        """Forget everything the limiter keeps of ``key``, a key the service rejected (401).

        Called when a key being checked is rejected, so that typing bad keys leaves no
        limiter and no window rows.

        Raises:
            Exception: the database's error deleting the rows.
        """
        await self._limiter.forget(key_fingerprint(key))

    def poll_target(self, poll_url: str) -> httpx.URL:
        """Resolve a ``poll_url`` against the host of ``{base_url}`` (docs/genapi.md §1.1).

        The path already starts with ``/api/v1``, so it replaces the base path rather than
        being appended to it; its query (``provider``, ``pollUrl``) is kept as given. Resolved
        URLs are remembered (:data:`POLL_TARGETS` of them): a job is polled many times, and
        parsing and joining its URL was 4.5 % of the poller's CPU (docs/benchmarks.md).

        Raises:
            MalformedResponseError: an absolute URL on another host (our key must not leave).
        """
        target = self._poll_targets.get(poll_url)
        if target is None:
            target = self._resolve_poll_url(poll_url)
            if len(self._poll_targets) >= POLL_TARGETS:
                self._poll_targets.clear()  # rare; cheaper than an LRU's bookkeeping per poll
            self._poll_targets[poll_url] = target
        return target

    def _resolve_poll_url(self, poll_url: str) -> httpx.URL:
        target = self._base.join(poll_url)
        if (target.scheme, target.host, target.port) != (
            self._base.scheme,
            self._base.host,
            self._base.port,
        ):
            raise errors.MalformedResponseError(200, "poll_url points to another host")
        return target

    async def list_models(
        self, key: SecretStr, *, priority: Priority = Priority.INTERACTIVE
    ) -> Catalogue:
        """``GET /models`` (docs/genapi.md §4.1): the catalogue. Free, so also used to check a key.

        Raises:
            GenAPIError: any subclass; see :mod:`bot.genapi.errors`.
        """
        response = await self._request("GET", "models", key, priority=priority)
        return self._parse(response, ModelsResponse).models

    async def generate_video(self, key: SecretStr, request: VideoRequest) -> PendingTask:
        """``POST /video/generate`` (docs/genapi.md §4.2): submit a video task; never re-sent.

        Charged.

        Raises:
            GenAPIError: any subclass; :class:`APITimeoutError` means it may have been charged.
        """
        # A submission: its member waits for the task anyway, so it leaves the answers' slots.
        response = await self._request(
            "POST", "video/generate", key, json=request.body(), kind=Kind.SUBMISSION
        )
        return self._parse(response, PendingTask)

    async def video_status(
        self,
        key: SecretStr,
        task_id: str,
        provider: str | None = None,
        *,
        priority: Priority = Priority.BACKGROUND,
    ) -> TaskState:
        """``GET /video/:taskId`` (docs/genapi.md §4.3), passing ``provider`` as the submission did.

        Raises:
            TaskNotFoundError: the service does not know the task.
            GenAPIError: any other subclass.
        """
        return await self._status("video", key, task_id, provider, priority)

    async def image_status(
        self,
        key: SecretStr,
        task_id: str,
        provider: str | None = None,
        *,
        priority: Priority = Priority.BACKGROUND,
    ) -> TaskState:
        """``GET /image/:taskId``: an asynchronous image task's state.

        The service does not show this endpoint (docs/genapi.md §4.6); we assume it mirrors
        ``GET /video/:taskId`` (docs/genapi-choices.md). Prefer :meth:`poll` with the
        ``poll_url`` the service gave.

        Raises:
            TaskNotFoundError: the service does not know the task.
            GenAPIError: any other subclass.
        """
        return await self._status("image", key, task_id, provider, priority)

    async def poll(
        self, key: SecretStr, poll_url: str, *, priority: Priority = Priority.BACKGROUND
    ) -> TaskState:
        """Poll a video or image task at the ``poll_url`` the service gave (docs/genapi.md §4.3).

        Raises:
            TaskNotFoundError: the service does not know the task.
            GenAPIError: any other subclass.
        """
        response = await self._request("GET", self.poll_target(poll_url), key, priority=priority)
        return self._redacted(self._parse(response, TaskState), key)

    async def generate_image(
        self, key: SecretStr, request: ImageRequest
    ) -> ImageResult | PendingTask:
        """``POST /image/generate`` (docs/genapi.md §4.4). Charged; never re-sent.

        Returns:
            :class:`ImageResult` for a synchronous model, or :class:`PendingTask` (with
            ``poll_url``) for one that is not; poll that with :meth:`poll`.
        """
        response = await self._request("POST", "image/generate", key, json=request.body())
        data = self._json(response)
        if isinstance(data, dict) and data.get("poll_url"):
            return self._validate(response, data, PendingTask)
        return self._validate(response, data, ImageResult)

    async def generate_text(self, key: SecretStr, request: TextRequest) -> TextResult:
        """``POST /text/generate`` (docs/genapi.md §4.5), synchronous. Charged; never re-sent."""
        response = await self._request("POST", "text/generate", key, json=request.body())
        return self._parse(response, TextResult)

    async def _status(
        self, kind: str, key: SecretStr, task_id: str, provider: str | None, priority: Priority
    ) -> TaskState:
        params = {"provider": provider} if provider else None
        response = await self._request(
            "GET", f"{kind}/{task_id}", key, params=params, priority=priority
        )
        return self._redacted(self._parse(response, TaskState), key)

    def _redacted(self, state: TaskState, key: SecretStr) -> TaskState:
        # A failed task's reason is shown to users: the same redaction as error messages.
        if state.error is None:
            return state
        known = (key.get_secret_value(), *self._known_keys)
        return state.model_copy(update={"error": redact(state.error, known)})

    async def _request(
        self,
        method: str,
        path: str | httpx.URL,
        key: SecretStr,
        *,
        json: dict[str, Any] | None = None,
        params: dict[str, str] | None = None,
        priority: Priority = Priority.INTERACTIVE,
        kind: Kind = Kind.ANSWER,
    ) -> httpx.Response:
        """Send one request, again while its failure is retryable, up to ``attempts`` times.

        Only a failure :func:`_is_retryable` allows is tried again (never a generation that may
        have reached the service); the last failure is raised as it came.
        """
        idempotent = method == "GET"
        url = path if isinstance(path, httpx.URL) else self._base.join(path)
        attempt = 1
        while True:
            try:
                return await self._send(
                    method,
                    url,
                    key,
                    operation=_operation(method, path),
                    json=json,
                    params=params,
                    priority=priority,
                    kind=kind,
                )
            except Exception as exc:
                if attempt >= self._attempts or not _is_retryable(exc, idempotent=idempotent):
                    raise
                log.warning("retrying %s %s after %r", method, url.path, exc)
                await self._clock.sleep(retry_delay(exc, attempt))
                attempt += 1

    async def _send(
        self,
        method: str,
        url: httpx.URL,
        key: SecretStr,
        *,
        operation: str,
        json: dict[str, Any] | None,
        params: dict[str, str] | None,
        priority: Priority,
        kind: Kind,
    ) -> httpx.Response:
        """One attempt: a slot of the key's limiter, the HTTP exchange, its error mapped.

        Raises:
            errors.APIConnectionError: the transport failed (``request_sent`` says whether the
                request may have reached the service).
            errors.APITimeoutError: no answer in time (the request may have been processed).
            errors.RateLimitWaitTooLong: a 429's ``Retry-After`` is longer than an interactive
                caller may wait.
            errors.APIError: the service answered with an error (``error_from_response``).
            errors.MalformedResponseError: a GET's 2xx body is not JSON.
        """
        idempotent = method == "GET"
        limiter = self._limiter.for_key(key_fingerprint(key))
        max_wait = self._interactive_max_wait if priority is Priority.INTERACTIVE else None
        await limiter.acquire(priority, max_wait=max_wait, kind=kind)
        started = self._clock.monotonic()
        try:
            response = await self._http.request(
                method,
                url,
                json=json,
                params=params,
                headers={"Authorization": f"Bearer {key.get_secret_value()}"},
                timeout=self._status_timeout if idempotent else self._generation_timeout,
            )
        except _NOT_SENT as exc:
            self._count(operation, "not_sent", None)
            # Users only see "cannot be reached"; the operator needs the address (no key).
            log.warning("cannot reach the Generation API at %s: %r", self._base, exc)
            raise errors.APIConnectionError(
                f"could not connect ({type(exc).__name__})", request_sent=False
            ) from exc
        except httpx.TimeoutException as exc:
            self._count(operation, "timeout", None)
            raise errors.APITimeoutError() from exc
        except httpx.TransportError as exc:
            self._count(operation, "connection_error", None)
            log.warning("connection to the Generation API at %s failed: %r", self._base, exc)
            raise errors.APIConnectionError(
                f"connection failed ({type(exc).__name__})", request_sent=True
            ) from exc
        self._count(operation, _outcome(response), self._clock.monotonic() - started)
        if response.is_error:
            error = error_from_response(
                response, (key.get_secret_value(), *self._known_keys), charging=not idempotent
            )
            if isinstance(error, errors.RateLimitedError):
                limiter.block_for(error.retry_after)
                if max_wait is not None and error.retry_after > max_wait:
                    raise errors.RateLimitWaitTooLong(error.retry_after) from error
            raise error
        if idempotent:
            self._json(response)  # a non-JSON 200 is worth another try for a GET
        return response

    def _count(self, operation: str, outcome: str, seconds: float | None) -> None:
        if self._metrics is not None:
            self._metrics.upstream(operation, outcome, seconds)

    @staticmethod
    def _json(response: httpx.Response) -> Any:
        # Decimal for every non-integer number (and NaN/Infinity, which Python's json accepts):
        # money must reach the models as written, 0.35 not 0.34999999999999997779.
        try:
            return response.json(parse_float=Decimal, parse_constant=Decimal)
        except ValueError:
            raise errors.MalformedResponseError(
                response.status_code, f"body is not JSON ({_kind(response)})"
            ) from None

    def _parse(self, response: httpx.Response, model: type[ModelT]) -> ModelT:
        return self._validate(response, self._json(response), model)

    @staticmethod
    def _validate(response: httpx.Response, data: Any, model: type[ModelT]) -> ModelT:
        try:
            return model.model_validate(data)
        except ValidationError as exc:
            fields = ", ".join(".".join(map(str, e["loc"])) or "body" for e in exc.errors())
            raise errors.MalformedResponseError(
                response.status_code, f"{model.__name__} invalid at {fields}"
            ) from None
