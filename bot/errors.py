"""Domain errors, each with the sentence a member sees, and :func:`user_message` for any error.

Services raise these (or :mod:`bot.genapi.errors`); the command tree's error handler calls
:func:`user_message` and sends the result as one ephemeral sentence. A domain error says its
own sentence (:meth:`BotError.user_sentence`); :func:`user_message` phrases only the service's
errors, which know nothing of members.
"""

from __future__ import annotations

import math
from decimal import ROUND_HALF_UP, Decimal

from bot.genapi import errors as api


class BotError(Exception):
    """Base of the bot's own domain errors."""

    def user_sentence(self, now: float | None = None) -> str:
        """The one sentence a member sees for this error (the generic one unless overridden).

        Args:
            now: wall time, UTC epoch seconds, for "try again" timestamps; None where a
                relative phrase is used instead.
        """
        return GENERIC_SENTENCE


class ValidationFailed(BotError):
    """A request failed a check before any upstream call (bad option, not allowed here...).

    Attributes:
        sentence: the complete sentence to show the user.
    """

    def __init__(self, sentence: str) -> None:
        super().__init__(sentence)
        self.sentence = sentence

    def user_sentence(self, now: float | None = None) -> str:
        """The sentence the check was raised with."""
        return self.sentence


class NoApiKeyConfigured(BotError):
    """Neither the guild's own key nor ``GENAPI_API_KEY`` is set."""

    def user_sentence(self, now: float | None = None) -> str:
        """How an admin sets the server's key."""
        return (
            "No Generation API key is set for this server. "
            "An admin can set one with `/config api-key set`."
        )


class KeyEncryptionUnavailable(BotError):
    """An admin tried to store a key but ``KEY_ENCRYPTION_KEY`` is not configured."""

    def user_sentence(self, now: float | None = None) -> str:
        """What the bot's owner must set, and how to make the key."""
        return (
            "Keys cannot be stored: the bot owner must set `KEY_ENCRYPTION_KEY` (make one with "
            '`python -c "from cryptography.fernet import Fernet; '
            'print(Fernet.generate_key().decode())"`).'
        )


class BudgetExceeded(BotError):
    """A budget would be exceeded by the request.

    Attributes:
        scope: ``"guild"`` (monthly guild budget), ``"user"`` (the member's daily allowance),
            ``"user_month"`` (the member's monthly allowance, from a role tier) or
            ``"personal_total"`` (all members' personal use of the shared key, per day).
        remaining_cents: what is left of that budget, in cents (never negative).
        needed_cents: what the request would cost or is estimated to cost, in cents.
        limit_cents: the budget itself, whole cents; None when not given.
        source: where a member's allowance comes from (``"role Patron"``, ``"server
            default"``); None when not given.
    """

    def __init__(
        self,
        scope: str,
        remaining_cents: Decimal,
        needed_cents: Decimal,
        *,
        limit_cents: int | None = None,
        source: str | None = None,
    ) -> None:
        super().__init__(f"{scope} budget: {remaining_cents} left, {needed_cents} needed")
        self.scope = scope
        self.remaining_cents = remaining_cents
        self.needed_cents = needed_cents
        self.limit_cents = limit_cents
        self.source = source

    def user_sentence(self, now: float | None = None) -> str:
        """Which budget, what is left of it and what the request needs, in dollars."""
        left, needed = format_cents(self.remaining_cents), format_cents(self.needed_cents)
        if self.scope == "guild":
            return (
                f"This server's monthly budget has {left} left; this request needs about {needed}."
            )
        if self.scope == "personal_total":
            return (
                f"Personal use of the bot's shared key has {left} left today for all members "
                f"together; this request needs about {needed}. Your own key has no such "
                "limit: `/settings api-key set`."
            )
        if self.limit_cents is not None and self.source is not None:
            period = "monthly" if self.scope == "user_month" else "daily"
            return (
                f"Your {period} allowance ({format_cents(self.limit_cents)}, {self.source}) "
                f"has {left} left; this request needs about {needed}."
            )
        return f"Your daily budget has {left} left; this request needs about {needed}."


class CooldownActive(BotError):
    """The member used this command too recently (a ``/config cooldown``).

    Attributes:
        command: ``"text"``, ``"image"`` or ``"video"``.
        until: when the member may use it again, UTC epoch seconds.
    """

    def __init__(self, command: str, until: float) -> None:
        super().__init__(f"{command} cooldown until {until}")
        self.command = command
        self.until = until

    def user_sentence(self, now: float | None = None) -> str:
        """When the member may use the command again."""
        # Discord renders <t:…:R> as a relative time ("in 25 seconds") in the reader's locale.
        return f"/{self.command} has a cooldown here; try again <t:{math.ceil(self.until)}:R>."


class PromptBlocked(ValidationFailed):
    """A prompt contains one of the server's blocked terms (refused before any reservation).

    Attributes:
        term: the blocked term (normalised), for the admins' log only; never shown to the
            member, who gets one neutral sentence.
    """

    def __init__(self, term: str) -> None:
        super().__init__("This prompt uses a term this server does not allow; nothing was sent.")
        self.term = term


class ConcurrencyLimitReached(BotError):
    """Too many videos pending already.

    Attributes:
        scope: ``"user"`` or ``"guild"``.
        limit: the cap that was reached.
    """

    def __init__(self, scope: str, limit: int) -> None:
        super().__init__(f"{scope} pending-video cap of {limit} reached")
        self.scope = scope
        self.limit = limit

    def user_sentence(self, now: float | None = None) -> str:
        """Whose cap was reached and what to do."""
        if self.scope == "user":
            return f"You already have {self.limit} videos in progress; wait for one to finish."
        return f"This server already has {self.limit} videos in progress; try again later."


class SettlementDeferred(BotError):
    """The service charged and answered, but the database could not record it yet.

    The charge and the job are in the settlement spool (``bot.services.settlement_spool``)
    and will be recorded and delivered from it; the request did not fail.

    Attributes:
        job_kind: what the job makes (``"video"``, ``"image"``), for the sentence.
    """

    def __init__(self, job_kind: str) -> None:
        super().__init__("settlement spooled")
        self.job_kind = job_kind

    def user_sentence(self, now: float | None = None) -> str:
        """After a charge, never a failure: the spool records and delivers it."""
        return (
            f"Your request went through (it was charged); the {self.job_kind} will be "
            "delivered here or by DM when it is ready, and `/jobs` will list it."
        )


_SHARED_KEY_REMEDY = (
    "Tell the bot's owner, or a server admin can set the server's own key with "
    "`/config api-key set`."
)
"""What a server on the default key can do about it: the key is not its own to top up."""

_ALLOWANCE_KEY_REMEDY = "Tell the bot's owner, or set your own key with `/settings api-key set`."
"""What a member on the owner's personal allowance can do about the default key's problem:
no server is involved, and the member's own key is billed instead."""


GENERIC_SENTENCE = "Something went wrong on our side; it has been logged."
"""What a member reads for an error that has no sentence of its own (the details are logged)."""

_SMALLEST_SHOWN = Decimal("0.000001")
"""Dollars: amounts are shown to a ten-thousandth of a cent at most."""

_LARGEST_EXACT = Decimal(10**15)
"""Dollars from which amounts are shown in scientific notation (only an absurd report is)."""


def format_cents(cents: Decimal | int) -> str:
    """Render an amount of cents as dollars for people, e.g. ``1234 -> "$12.34"``.

    For display only, never for the ledger: at least two decimals, more when the amount has
    them (``Decimal("0.35") -> "$0.0035"``, ``1234.5 -> "$12.345"``), rounded half up to
    :data:`_SMALLEST_SHOWN` dollars; a non-zero amount below that reads
    ``"less than $0.000001"``. NaN or infinite (a protocol anomaly shown as reported) reads
    ``"an unreadable amount"``; an absurdly large one is shown in scientific notation.
    """
    dollars = Decimal(cents) / 100
    if not dollars.is_finite():
        return "an unreadable amount"
    if abs(dollars) >= _LARGEST_EXACT:
        return f"${dollars:.3E}"
    shown = dollars.quantize(_SMALLEST_SHOWN, rounding=ROUND_HALF_UP)
    if shown == 0 and dollars != 0:
        return f"{'-' if dollars < 0 else ''}less than ${_SMALLEST_SHOWN}"
    text = f"{shown:,f}".rstrip("0")
    whole, _, fraction = text.partition(".")
    return f"${whole}.{fraction.ljust(2, '0')}"


def user_message(exc: BaseException, *, now: float | None = None) -> str:
    """Return the one sentence a Discord user sees for ``exc``.

    Args:
        exc: any exception raised while serving a command.
        now: wall time (UTC epoch seconds) used to render "try again" timestamps; when None a
            relative phrase in seconds is used.

    Returns:
        A short sentence; a generic one (without details) for unknown exceptions.
    """
    if isinstance(exc, BotError):
        return exc.user_sentence(now)
    match exc:
        case api.QueueCancelled():
            return "Cancelled; nothing was sent or charged."
        case api.RateLimitWaitTooLong(on_personal_key=True, queued=int() as queued) if queued > 0:
            minutes = max(1, math.ceil(exc.retry_after / 60))
            return (
                f"The queue for your key is too long: {queued} requests are waiting, about "
                f"{minutes} min; try again later."
            )
        case api.RateLimitWaitTooLong(queued=int() as queued) if queued > 0:
            # A refusal says how long the queue is.
            minutes = max(1, math.ceil(exc.retry_after / 60))
            return (
                f"The queue for this key is too long: {queued} requests are waiting, about "
                f"{minutes} min; try again later."
            )
        case api.RateLimitedError(on_personal_key=True):
            # The member's own key: its own 30 requests a minute, whoever else uses it.
            wait = max(1, math.ceil(exc.retry_after))
            when = f"<t:{math.ceil(now + wait)}:R>" if now is not None else f"in {wait} s"
            return f"The service is rate limiting your key; try again {when}."
        case api.RateLimitedError():
            wait = max(1, math.ceil(exc.retry_after))
            if now is not None:
                return f"The service is busy; try again <t:{math.ceil(now + wait)}:R>."
            return f"The service is busy; try again in {wait} s."
        case api.InvalidModelError():
            return "That model does not exist; pick one from the list."
        case api.InvalidParamsError():
            return f"The service refused the request: {exc.message.rstrip('.')}."
        case api.UnauthorizedError(on_personal_key=True):
            return "The service rejected your API key; set it again with `/settings api-key set`."
        case api.InsufficientCreditsError(on_personal_key=True):
            return "Your API key is out of credits; top it up with the service."
        case api.UnauthorizedError(on_personal_allowance=True):
            return (
                "The service rejected the bot's shared API key, which your personal allowance "
                f"uses. {_ALLOWANCE_KEY_REMEDY}"
            )
        case api.InsufficientCreditsError(on_personal_allowance=True):
            return (
                "The bot's shared API key, which your personal allowance uses, is out of "
                f"credits. {_ALLOWANCE_KEY_REMEDY}"
            )
        case api.UnauthorizedError(on_shared_key=True):
            return f"The service rejected the bot's shared API key. {_SHARED_KEY_REMEDY}"
        case api.UnauthorizedError():
            return "The service rejected this server's API key; ask an admin to check it."
        case api.InsufficientCreditsError(on_shared_key=True):
            return f"The bot's shared API key is out of credits. {_SHARED_KEY_REMEDY}"
        case api.InsufficientCreditsError():
            return "This server's API key is out of credits; ask an admin to top it up."
        case api.GenerationFailedError():
            return "The generation failed at the provider; nothing was produced. Try again."
        case api.APITimeoutError():
            return (
                "The service did not answer in time; the request may still have been charged, "
                "so check `/usage` and `/jobs` before trying again."
            )
        case api.APIConnectionError(request_sent=True):
            return (
                "The connection to the generation service dropped after the request was sent; "
                "it may still have been charged, so check `/usage` and `/jobs` before trying "
                "again."
            )
        case api.APIConnectionError():
            return "The generation service cannot be reached right now; try again later."
        case api.MalformedResponseError():
            return (
                "The generation service gave an answer we could not read; it may still have "
                "charged for it, so check `/usage` and `/jobs` before trying again."
            )
        case api.ServerError(may_have_charged=True):
            return (
                "The generation service answered with an error after the request was sent; it "
                "may still have been charged, so check `/usage` and `/jobs` before trying again."
            )
        case api.APIStatusError():
            return "The generation service had a problem; try again later."
        case _:
            return GENERIC_SENTENCE
