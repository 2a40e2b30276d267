"""A local emulator of the Generation Service API v1, on aiohttp.

It follows the wire contract in ``docs/genapi-choices.md`` and adds knobs that the real service
does not have (balances, forced failures, injected transport faults), for tests, for the bot's
sandbox mode and for benchmarks.

Order of processing for a request under ``/api/v1``:

1. record it (:attr:`GenApiEmulator.requests`) and read its body;
2. an injected fault, if one is queued, answers instead (nothing processed or charged), except
   ``slow``, which lets the request through and holds the response back;
3. the rate limiter, per bearer string (so before authentication; unknown keys are limited too);
4. authentication, then the endpoint, whose validation runs before any charge.

Time: ``clock`` gives monotonic seconds; service time runs ``time_scale`` times faster, so a
task taking 60 service seconds completes 60 / time_scale clock seconds after submission.
"""

from __future__ import annotations

import asyncio
import json
import logging
import math
from decimal import Decimal
from typing import Any, Self
from urllib.parse import quote

from aiohttp import web
from aiohttp.typedefs import Handler

from bot.sandbox import catalogue as cat
from bot.sandbox import clips, files
from bot.sandbox.service import FAIL_MARKER, EmulatedService
from bot.sandbox.state import ApiError, EmulatedTask, Fault, RecordedRequest, invalid
from bot.sandbox.validation import parse_image, parse_text, parse_video

log = logging.getLogger(__name__)

API_PREFIX = "/api/v1"

_RECORD = web.RequestKey("sandbox_record", RecordedRequest)
_KEY = web.RequestKey("sandbox_key", str)


def _error(status: int, code: str, message: str) -> web.Response:
    return web.json_response({"error": {"message": message, "code": code}}, status=status)


def _bearer(request: web.Request) -> str | None:
    header = request.headers.get("Authorization", "")
    if header[:7].lower() != "bearer ":
        return None
    return header[7:].strip() or None


def _wire(value: Any) -> Any:
    """Return a money value ready for JSON.

    A whole Decimal becomes an int; any other Decimal the float whose shortest form is the same
    digits (``Decimal("0.35")`` is written ``0.35``, exact up to 15 significant digits); other
    values are left as they are (tests use them to break the protocol).
    """
    if isinstance(value, Decimal):
        return (
            int(value) if value.is_finite() and value == value.to_integral_value() else float(value)
        )
    return value


def _parse_json(raw: bytes) -> Any:
    try:
        return json.loads(raw) if raw else None
    except ValueError:  # also UnicodeDecodeError
        return None


class GenApiEmulator(EmulatedService):
    """The Generation Service API, served locally with controllable time, money and faults.

    Constructed as :class:`EmulatedService` is (time scale, rate limit and window, clock, default
    balance), which also provides the knobs: keys, balances, forced failures, faults, statistics.
    """

    _runner: web.AppRunner | None = None

    # -- lifecycle -------------------------------------------------------------------------

    async def start(self, host: str = "127.0.0.1", port: int = 0) -> None:
        """Listen on ``host``:``port`` (0 picks a free port).

        Raises:
            RuntimeError: if already started.
        """
        if self._runner is not None:
            raise RuntimeError("emulator already started")
        app = web.Application(middlewares=[self._middleware])
        app.router.add_get(f"{API_PREFIX}/models", self._models)
        app.router.add_post(f"{API_PREFIX}/video/generate", self._video_generate)
        app.router.add_get(f"{API_PREFIX}/video/{{task_id}}", self._video_status)
        app.router.add_post(f"{API_PREFIX}/image/generate", self._image_generate)
        app.router.add_get(f"{API_PREFIX}/image/{{task_id}}", self._image_status)
        app.router.add_post(f"{API_PREFIX}/text/generate", self._text_generate)
        app.router.add_get("/files/{name}", self._file)
        # A short shutdown timeout: stop() must not wait on a held-back "slow" response.
        runner = web.AppRunner(app, access_log=None, shutdown_timeout=1.0)
        await runner.setup()
        # A large backlog: benchmarks open hundreds of connections at once.
        site = web.TCPSite(runner, host, port, backlog=2048)
        await site.start()
        self._runner = runner
        bound_port = runner.addresses[0][1]
        shown = "127.0.0.1" if host in ("", "0.0.0.0", "::") else host
        shown = f"[{shown}]" if ":" in shown else shown
        self._origin = f"http://{shown}:{bound_port}"
        log.info("Generation API emulator listening on %s", self._origin)

    async def stop(self) -> None:
        """Stop listening; a no-op if not started."""
        if self._runner is not None:
            runner, self._runner = self._runner, None
            await runner.cleanup()
            self._persist()

    async def __aenter__(self) -> Self:
        await self.start()
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.stop()

    @property
    def base_url(self) -> str:
        """The ``{base_url}`` of the spec, e.g. ``http://127.0.0.1:8765/api/v1``."""
        return self.origin + API_PREFIX

    # -- request pipeline ------------------------------------------------------------------

    @web.middleware
    async def _middleware(self, request: web.Request, handler: Handler) -> web.StreamResponse:
        record = RecordedRequest(
            time=self._clock(), key=_bearer(request), method=request.method, path=request.path_qs
        )
        self.requests.append(record)
        if not request.path.startswith(API_PREFIX + "/"):
            try:
                response = await handler(request)
            except web.HTTPException as exc:
                record.status = exc.status
                raise
            record.status = response.status
            return response
        record.json = _parse_json(await request.read())
        fault = self._faults.popleft() if self._faults else None
        if fault is not None and fault.kind not in ("slow", "gateway_502"):
            return self._fault_response(fault, request, record)
        response = await self._serve_api(request, handler, record)
        record.status = response.status
        if request.method == "POST":
            self._persist()
        if fault is not None and fault.kind == "gateway_502":
            # Processed (and charged) above; the gateway in front answers in the result's place.
            response = _error(502, "BAD_GATEWAY", "Sandbox: the gateway gave up waiting")
            record.status = response.status
        elif fault is not None:
            await asyncio.sleep(fault.delay)
        return response

    def _fault_response(
        self, fault: Fault, request: web.Request, record: RecordedRequest
    ) -> web.Response:
        kind = fault.kind
        if kind == "drop":
            if request.transport is not None:
                request.transport.abort()
            record.status = 0  # aiohttp's write of the response below fails silently
            return web.Response(status=204)
        if kind == "500":
            response = _error(500, "INTERNAL", "Sandbox: injected internal error")
        elif kind == "404":
            response = _error(404, "NOT_FOUND", "Sandbox: injected not found")
        elif kind == "429":
            response = _error(429, "RATE_LIMITED", "Sandbox: injected rate limit")
            response.headers["Retry-After"] = str(math.ceil(fault.delay))
        elif kind == "html_502":
            page = (
                "<html><head><title>502 Bad Gateway</title></head><body>Bad Gateway</body></html>"
            )
            response = web.Response(status=502, text=page, content_type="text/html")
        else:
            response = web.Response(text="{not json", content_type="application/json")
        record.status = response.status
        return response

    async def _serve_api(
        self, request: web.Request, handler: Handler, record: RecordedRequest
    ) -> web.StreamResponse:
        retry_after = self._limiter.acquire(record.key or "", record.time)
        if retry_after is not None:
            response = _error(429, "RATE_LIMITED", "More than the allowed requests per minute")
            response.headers["Retry-After"] = str(retry_after)
            return response
        record.counted = True
        try:
            request[_KEY] = self._authenticate(record.key)
            request[_RECORD] = record
            return await handler(request)
        except ApiError as exc:
            return _error(exc.status, exc.code, exc.message)
        except web.HTTPException as exc:  # the router's 404 and 405, in the spec's shape
            code = "NOT_FOUND" if exc.status == 404 else "METHOD_NOT_ALLOWED"
            return _error(exc.status, code, exc.reason)

    # -- endpoints -------------------------------------------------------------------------

    async def _models(self, request: web.Request) -> web.Response:
        return web.json_response(self.models_json(request[_KEY]))

    async def _video_generate(self, request: web.Request) -> web.Response:
        body = self._body(request)
        req = parse_video(body)
        cost = self._cost(math.ceil(req.model.cost_cents_per_5s * req.duration / 5))
        remaining = self._charge(request[_KEY], cost)
        task = self._new_task(request[_KEY], "video", req.model.id, req.model.provider, cost, body)
        self._schedule(task, req.prompt, req.model.task_seconds)
        poll_url = f"{API_PREFIX}/video/{task.task_id}?provider={task.provider}"
        if task.provider == cat.DEFAULT_PROVIDER:
            upstream = f"https://{task.provider}.upstream.invalid/v1/jobs/{task.task_id}"
            poll_url += "&pollUrl=" + quote(upstream, safe="")
        return self._submitted(task, poll_url, remaining)

    async def _image_generate(self, request: web.Request) -> web.Response:
        body = self._body(request)
        req = parse_image(body)
        model = req.model
        if not model.is_async and FAIL_MARKER in req.prompt:
            raise ApiError(500, "GENERATION_FAILED", "Sandbox: the prompt asked to fail")
        cost = self._cost(model.cost_cents)
        remaining = self._charge(request[_KEY], cost)
        task = self._new_task(request[_KEY], "image", model.id, model.provider, cost, body)
        if model.is_async:
            self._schedule(task, req.prompt, model.task_seconds)
            poll_url = f"{API_PREFIX}/image/{task.task_id}?provider={task.provider}"
            return self._submitted(task, poll_url, remaining)
        self._settle(task)
        result = {"task_id": task.task_id, "status": task.status, "outputs": task.outputs}
        return web.json_response(
            result | {"cost_cents": _wire(cost), "remaining_credits_cents": _wire(remaining)}
        )

    async def _text_generate(self, request: web.Request) -> web.Response:
        req = parse_text(self._body(request))
        if FAIL_MARKER in req.prompt:
            raise ApiError(500, "GENERATION_FAILED", "Sandbox: the prompt asked to fail")
        content = (
            self._next_text if self._next_text is not None else f"Sandbox reply to: {req.prompt}"
        )
        finish_reason = "stop"
        if len(content) > req.max_tokens * 4:  # about 4 characters per token
            content, finish_reason = content[: req.max_tokens * 4], "length"
        prompt_tokens = max(1, math.ceil((len(req.prompt) + len(req.system)) / 4))
        completion_tokens = math.ceil(len(content) / 4)
        total = prompt_tokens + completion_tokens
        rate = req.model.cents_per_1k_tokens
        answer_rate = self.completion_prices.get(req.model.id, rate)
        price = prompt_tokens * rate + completion_tokens * answer_rate
        cost = self._cost(max(1, math.ceil(price / 1000)))
        remaining = self._charge(request[_KEY], cost)
        self._next_text = None
        usage = {
            "prompt_tokens": prompt_tokens,
            "completion_tokens": completion_tokens,
            "total_tokens": total,
        }
        return web.json_response(
            {
                "content": content,
                "model": req.model.id,
                "usage": usage,
                "finish_reason": finish_reason,  # not in the spec: clients must tolerate extras
                "cost_cents": _wire(cost),
                "remaining_credits_cents": _wire(remaining),
            }
        )

    async def _video_status(self, request: web.Request) -> web.Response:
        return self._status(request, "video")

    async def _image_status(self, request: web.Request) -> web.Response:
        return self._status(request, "image")

    def _status(self, request: web.Request, kind: str) -> web.Response:
        task = self._task_of(request[_KEY], request.match_info["task_id"])
        provider = request.query.get("provider", cat.DEFAULT_PROVIDER)
        # Another key's task is as unknown as a missing one; the provider must match too.
        if task is None or task.kind != kind:
            raise ApiError(404, "NOT_FOUND", f"No such {kind} task")
        if task.provider != provider:
            raise ApiError(404, "NOT_FOUND", f"No such {kind} task for provider {provider}")
        self._settle(task)
        status: dict[str, Any] = {
            "task_id": task.task_id,
            "status": task.status,
            "outputs": task.outputs,
            "provider": task.provider,
        }
        if task.error is not None:
            status["error"] = task.error
        return web.json_response(status)

    async def _file(self, request: web.Request) -> web.Response:
        name = request.match_info["name"]
        if self.files_redirect is not None and "redirected" not in request.query:
            raise web.HTTPFound(f"{self.files_redirect}/files/{name}?redirected=1")
        url = f"{self.origin}/files/{name}"
        found = False
        for task in self._tasks_of_id(files.task_id_of(name) or ""):
            self._settle(task)
            found = found or url in task.outputs
        if not found:
            return web.Response(status=404, text="Not found")
        content_type, data = files.CONTENT_TYPES[name[name.rindex(".") :]]
        colour = files.colour_of(task.request.get("prompt"))
        if name.endswith(".mp4"):
            shape = task.request.get("aspect_ratio")
            shape = shape if isinstance(shape, str) else None
            data = clips.clip_of_task(task.task_id, shape, colour)
        elif colour is not None:
            data = files.solid_png(colour)
        if self.file_size is not None and self.file_size > len(data):
            # Trailing zeros: a valid header followed by padding, as large as a test needs.
            data = files.padded(data, self.file_size)
        return web.Response(body=data, content_type=content_type)

    # -- helpers ---------------------------------------------------------------------------

    def _body(self, request: web.Request) -> dict[str, Any]:
        body = request[_RECORD].json
        if not isinstance(body, dict):
            raise invalid("The request body must be a JSON object")
        return body

    def _submitted(self, task: EmulatedTask, poll_url: str, remaining: Decimal) -> web.Response:
        return web.json_response(
            {
                "task_id": task.task_id,
                "status": "processing",
                "provider": task.provider,
                "poll_url": poll_url,
                "cost_cents": _wire(task.cost_cents),
                "remaining_credits_cents": _wire(remaining),
            }
        )
