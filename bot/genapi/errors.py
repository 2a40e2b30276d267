"""Exceptions raised by the Generation API client.

One class per error code of docs/genapi.md §7.2, under :class:`APIStatusError`; transport
failures and timeouts have their own classes, and a body that is not the spec's JSON raises
:class:`MalformedResponseError`.

=====  ======================  ============================
HTTP   code                    exception
=====  ======================  ============================
400    INVALID_PARAMS          :class:`InvalidParamsError`
400    INVALID_MODEL           :class:`InvalidModelError`
401    UNAUTHORIZED            :class:`UnauthorizedError`
402    INSUFFICIENT_CREDITS    :class:`InsufficientCreditsError`
404    (not in spec)           :class:`TaskNotFoundError`
429    RATE_LIMITED            :class:`RateLimitedError`
500    GENERATION_FAILED       :class:`GenerationFailedError`
5xx    other                   :class:`ServerError` (a generation POST: may have charged)
other  other                   :class:`APIStatusError`
=====  ======================  ============================

The sentence a Discord user sees for each lives in :func:`bot.errors.user_message`, nowhere else.

Every message the service sends is passed through :func:`redact` before an exception carries
it: a 401 may echo the key it refused, and exceptions are logged and shown.
"""

from __future__ import annotations


class GenAPIError(Exception):
    """Base of every error the client raises.

    Attributes:
        on_shared_key: the request used the bot's shared default key (``GENAPI_API_KEY``), not
            a server's own. Set by the service that chose the key (the client does not know
            whose key it holds), so that a 401 or 402 is not blamed on the server's key.
        on_personal_key: the request used a member's own key (personal use), set
            the same way: the member, not a server's admin, must fix a 401 or 402.
        on_personal_allowance: with ``on_shared_key``, the request was a member's on the
            owner's allowance (``PERSONAL_DAILY_BUDGET_CENTS``): no server or admin is
            involved, so a 401 or 402 is the owner's to fix, or the member's own key avoids it.
    """

    on_shared_key: bool = False
    on_personal_key: bool = False
    on_personal_allowance: bool = False


class APIStatusError(GenAPIError):
    """The service answered with an error status.

    Attributes:
        status: the HTTP status code.
        code: the spec's ``error.code`` (e.g. ``"INVALID_PARAMS"``), or ``""`` if absent.
        message: the service's ``error.message``.
    """

    def __init__(self, status: int, code: str, message: str) -> None:
        super().__init__(f"{status} {code}: {message}")
        self.status = status
        self.code = code
        self.message = message


class InvalidParamsError(APIStatusError):
    """400 ``INVALID_PARAMS``: a request parameter is missing or invalid."""


class InvalidModelError(APIStatusError):
    """400 ``INVALID_MODEL``: the model identifier does not exist."""


class UnauthorizedError(APIStatusError):
    """401 ``UNAUTHORIZED``: the API key is missing, invalid or revoked."""


class InsufficientCreditsError(APIStatusError):
    """402 ``INSUFFICIENT_CREDITS``: the key's credit balance is too low."""


class TaskNotFoundError(APIStatusError):
    """404 on a status poll: the service does not know the task (shape not in the spec)."""


class RateLimitedError(APIStatusError):
    """429 ``RATE_LIMITED``, or our own limiter refusing to wait that long.

    Attributes:
        retry_after: seconds to wait before the key may send again (``Retry-After``, read as
            seconds; an HTTP date is converted).
    """

    def __init__(self, status: int, code: str, message: str, retry_after: float) -> None:
        super().__init__(status, code, message)
        self.retry_after = retry_after


class GenerationFailedError(APIStatusError):
    """500 ``GENERATION_FAILED``: generation failed at the upstream provider."""


class ServerError(APIStatusError):
    """A 5xx whose code is not ``GENERATION_FAILED``: a gateway's 502 or 504, an internal error.

    The spec defines only ``GENERATION_FAILED`` as a 5xx (docs/genapi.md §7.3), which charges
    nothing. Any other 5xx may come from something in front of the service that gave up after
    passing the request on, so on a generation ``POST`` the service may have processed and charged
    it (docs/genapi-choices.md): the budget reservation is kept and the request never re-sent.

    Attributes:
        may_have_charged: the request was a generation ``POST`` (set by the client); False for
            a ``GET``, which charges nothing.
    """

    def __init__(
        self, status: int, code: str, message: str, *, may_have_charged: bool = False
    ) -> None:
        super().__init__(status, code, message)
        self.may_have_charged = may_have_charged


class APIConnectionError(GenAPIError):
    """The request could not be completed at the transport level.

    Attributes:
        request_sent: False only when the request provably never left (connect failure); a
            generation POST may have been charged whenever this is True.
    """

    def __init__(self, message: str, *, request_sent: bool) -> None:
        super().__init__(message)
        self.request_sent = request_sent


class APITimeoutError(APIConnectionError):
    """The service did not answer in time; the request may have been processed."""

    def __init__(self, message: str = "request timed out") -> None:
        super().__init__(message, request_sent=True)


class MalformedResponseError(GenAPIError):
    """The body is not the spec's JSON (an HTML error page, a missing required field...).

    Attributes:
        status: the HTTP status of the response.
    """

    def __init__(self, status: int, detail: str) -> None:
        super().__init__(f"malformed response (HTTP {status}): {detail}")
        self.status = status


ERROR_CODES: dict[str, type[APIStatusError]] = {
    "INVALID_PARAMS": InvalidParamsError,
    "INVALID_MODEL": InvalidModelError,
    "UNAUTHORIZED": UnauthorizedError,
    "INSUFFICIENT_CREDITS": InsufficientCreditsError,
    "GENERATION_FAILED": GenerationFailedError,
}
"""The codes of docs/genapi.md §7.2 to classes; ``RATE_LIMITED`` is built apart since it carries
a delay."""


class RateLimitWaitTooLong(RateLimitedError):
    """Our own limiter would make an interactive caller wait longer than it may.

    Nothing was sent. ``retry_after`` is the estimated wait in seconds, ``queued`` how many
    users' requests were waiting on the key before this one (0 when unknown).
    """

    def __init__(self, retry_after: float, *, queued: int = 0) -> None:
        super().__init__(0, "RATE_LIMITED", "local rate limit: wait too long", retry_after)
        self.queued = queued


class QueueCancelled(GenAPIError):
    """The member cancelled a request while it waited in the key's queue.

    Nothing was sent, so nothing can have been charged.
    """

    def __init__(self) -> None:
        super().__init__("cancelled in the queue")
