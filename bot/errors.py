"""Domain errors, each with the sentence a member sees, and :func:`user_message` for any error.

Services raise these (or :mod:`bot.genapi.errors`); the command tree's error handler calls
:func:`user_message` and sends the result as one ephemeral sentence. A domain error says its
own sentence (:meth:`BotError.user_sentence`); :func:`user_message` phrases only the service's
errors, which know nothing of members.
"""

from __future__ import annotations

import math
from decimal import Decimal

from bot.genapi import errors as api
from bot.i18n import N_, _, fill, money, n_, number, relative_time


class BotError(Exception):
    """Base of the bot's own domain errors."""

    def user_sentence(self, now: float | None = None) -> str:
        """The one sentence a member sees for this error (the generic one unless overridden).

        Args:
            now: wall time, UTC epoch seconds, for "try again" timestamps; None where a
                relative phrase is used instead.
        """
        return _(GENERIC_SENTENCE)


class ValidationFailed(BotError):
    """A request failed a check before any upstream call (bad option, not allowed here...).

    Attributes:
        sentence: the complete sentence to show the user, in English (logs, tests).
        template: the sentence as marked (``{name}`` placeholders), looked up in the catalogue.
        values: what the placeholders stand for.
    """

    def __init__(self, sentence: str, /, **values: object) -> None:
        english = fill(sentence, values)
        super().__init__(english)
        self.sentence = english  # for logs and tests: English, filled
        self.template = sentence
        self.values = values

    def user_sentence(self, now: float | None = None) -> str:
        """The sentence the check was raised with, in the answer's locale.

        A sentence marked with :func:`bot.i18n.N_` (English, ``{name}`` placeholders, filled
        from the ``values`` given) is looked up in the catalogue here; any other reads as given.
        """
        return _(self.template, **self.values)


class NoApiKeyConfigured(BotError):
    """Neither the guild's own key nor ``GENAPI_API_KEY`` is set."""

    def user_sentence(self, now: float | None = None) -> str:
        """How an admin sets the server's key."""
        return _(
            "No Generation API key is set for this server. "
            "An admin can set one with `/config api-key set`."
        )


class KeyEncryptionUnavailable(BotError):
    """An admin tried to store a key but ``KEY_ENCRYPTION_KEY`` is not configured."""

    def user_sentence(self, now: float | None = None) -> str:
        """What the bot's owner must set, and how to make the key."""
        return _(
            "Keys cannot be stored: the bot owner must set `KEY_ENCRYPTION_KEY` (make one with "
            "{command}).",
            command='`python -c "from cryptography.fernet import Fernet; '
            'print(Fernet.generate_key().decode())"`',
        )


class CreditsNeeded(BotError):
    """A member's credit balance cannot cover a request in a server where members pay.

    Attributes:
        available_cents: the balance less what requests in flight hold (may be below 0).
        needed_cents: what the request holds, the markup included, cents.
        packs: the packs on offer, ``(SKU id, cents credited)``, for the premium buttons
            the answer carries (:mod:`bot.services.credits`).
    """

    def __init__(
        self, available_cents: Decimal, needed_cents: Decimal, packs: tuple[tuple[int, int], ...]
    ) -> None:
        super().__init__(f"credit balance: {available_cents} available, {needed_cents} needed")
        self.available_cents = available_cents
        self.needed_cents = needed_cents
        self.packs = packs

    def user_sentence(self, now: float | None = None) -> str:
        """What the balance has and the request needs, and the way forward (the packs)."""
        left = money(max(Decimal(0), self.available_cents))
        needed = money(self.needed_cents)
        if not self.packs:
            return _(
                "Members pay for commands here, and your credit balance has {left}; this "
                "request needs about {needed}. No credit packs are offered on this bot yet.",
                left=left,
                needed=needed,
            )
        return _(
            "Members pay for commands here, and your credit balance has {left}; this request "
            "needs about {needed}. Buy a credit pack below to go on.",
            left=left,
            needed=needed,
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
        left, needed = money(self.remaining_cents), money(self.needed_cents)
        if self.scope == "guild":
            return _(
                "This server's monthly budget has {left} left; this request needs about {needed}.",
                left=left,
                needed=needed,
            )
        if self.scope == "personal_total":
            return _(
                "Personal use of the bot's shared key has {left} left today for all members "
                "together; this request needs about {needed}. Your own key has no such "
                "limit: `/settings api-key set`.",
                left=left,
                needed=needed,
            )
        if self.limit_cents is not None and self.source is not None:
            limit = money(self.limit_cents)
            if self.scope == "user_month":
                return _(
                    "Your monthly allowance ({limit}, {source}) has {left} left; this request "
                    "needs about {needed}.",
                    limit=limit,
                    source=self.source,
                    left=left,
                    needed=needed,
                )
            return _(
                "Your daily allowance ({limit}, {source}) has {left} left; this request needs "
                "about {needed}.",
                limit=limit,
                source=self.source,
                left=left,
                needed=needed,
            )
        return _(
            "Your daily budget has {left} left; this request needs about {needed}.",
            left=left,
            needed=needed,
        )


class SpendingPaused(BotError):
    """The server's new paid requests are paused by its spend guard (docs/guard.md).

    Free commands, pending jobs and their deliveries go on; an admin resumes with ``/config
    guard resume`` or the dashboard's Guard page.
    """

    def user_sentence(self, now: float | None = None) -> str:
        """That the server paused spending, and who can resume it."""
        return _(
            "This server paused paid requests after unusual spending; an admin (Manage Server) "
            "can resume them with `/config guard resume`."
        )


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
        return _(
            "/{command} has a cooldown here; try again {when}.",
            command=self.command,
            when=relative_time(self.until),
        )


PROMPT_BLOCKED = N_("This prompt uses a term this server does not allow; nothing was sent.")
"""The one neutral sentence of a blocked prompt."""


class PromptBlocked(ValidationFailed):
    """A prompt contains one of the server's blocked terms (refused before any reservation).

    Attributes:
        term: the blocked term (normalised), for the admins' log only; never shown to the
            member, who gets one neutral sentence.
    """

    def __init__(self, term: str) -> None:
        super().__init__(PROMPT_BLOCKED)
        self.term = term

    def user_sentence(self, now: float | None = None) -> str:
        """One neutral sentence, in the answer's locale."""
        return _(PROMPT_BLOCKED)


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
            return n_(
                "You already have {count} video in progress; wait for it to finish.",
                "You already have {count} videos in progress; wait for one to finish.",
                self.limit,
            )
        return n_(
            "This server already has {count} video in progress; try again later.",
            "This server already has {count} videos in progress; try again later.",
            self.limit,
        )


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
        if self.job_kind == "image":
            return _(
                "Your request went through (it was charged); the image will be delivered here "
                "or by DM when it is ready, and `/jobs` will list it."
            )
        return _(
            "Your request went through (it was charged); the video will be delivered here or "
            "by DM when it is ready, and `/jobs` will list it."
        )


_SHARED_KEY_REMEDY = N_(
    "Tell the bot's owner, or a server admin can set the server's own key with "
    "`/config api-key set`."
)
"""What a server on the default key can do about it: the key is not its own to top up."""

_ALLOWANCE_KEY_REMEDY = N_(
    "Tell the bot's owner, or set your own key with `/settings api-key set`."
)
"""What a member on the owner's personal allowance can do about the default key's problem:
no server is involved, and the member's own key is billed instead."""


GENERIC_SENTENCE = N_("Something went wrong on our side; it has been logged.")
"""What a member reads for an error that has no sentence of its own (the details are logged)."""


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
            return _("Cancelled; nothing was sent or charged.")
        case api.RateLimitWaitTooLong(on_personal_key=True, queued=int() as queued) if queued > 0:
            minutes = max(1, math.ceil(exc.retry_after / 60))
            return _(
                "The queue for your key is too long: {waiting} requests are waiting, about "
                "{minutes} min; try again later.",
                waiting=number(queued),
                minutes=number(minutes),
            )
        case api.RateLimitWaitTooLong(queued=int() as queued) if queued > 0:
            # A refusal says how long the queue is.
            minutes = max(1, math.ceil(exc.retry_after / 60))
            return _(
                "The queue for this key is too long: {waiting} requests are waiting, about "
                "{minutes} min; try again later.",
                waiting=number(queued),
                minutes=number(minutes),
            )
        case api.RateLimitedError(on_personal_key=True):
            # The member's own key: its own 30 requests a minute, whoever else uses it.
            wait = max(1, math.ceil(exc.retry_after))
            if now is not None:
                return _(
                    "The service is rate limiting your key; try again {when}.",
                    when=relative_time(now + wait),
                )
            return _(
                "The service is rate limiting your key; try again in {seconds} s.",
                seconds=number(wait),
            )
        case api.RateLimitedError():
            wait = max(1, math.ceil(exc.retry_after))
            if now is not None:
                return _("The service is busy; try again {when}.", when=relative_time(now + wait))
            return _("The service is busy; try again in {seconds} s.", seconds=number(wait))
        case api.InvalidModelError():
            return _("That model does not exist; pick one from the list.")
        case api.InvalidParamsError():
            # The service's own words stay as it wrote them.
            return _("The service refused the request: {reason}.", reason=exc.message.rstrip("."))
        case api.UnauthorizedError(on_personal_key=True):
            return _(
                "The service rejected your API key; set it again with `/settings api-key set`."
            )
        case api.InsufficientCreditsError(on_personal_key=True):
            return _("Your API key is out of credits; top it up with the service.")
        case api.UnauthorizedError(on_personal_allowance=True):
            return _(
                "The service rejected the bot's shared API key, which your personal allowance "
                "uses. {remedy}",
                remedy=_(_ALLOWANCE_KEY_REMEDY),
            )
        case api.InsufficientCreditsError(on_personal_allowance=True):
            return _(
                "The bot's shared API key, which your personal allowance uses, is out of "
                "credits. {remedy}",
                remedy=_(_ALLOWANCE_KEY_REMEDY),
            )
        case api.UnauthorizedError(on_shared_key=True):
            return _(
                "The service rejected the bot's shared API key. {remedy}",
                remedy=_(_SHARED_KEY_REMEDY),
            )
        case api.UnauthorizedError():
            return _("The service rejected this server's API key; ask an admin to check it.")
        case api.InsufficientCreditsError(on_shared_key=True):
            return _(
                "The bot's shared API key is out of credits. {remedy}",
                remedy=_(_SHARED_KEY_REMEDY),
            )
        case api.InsufficientCreditsError():
            return _("This server's API key is out of credits; ask an admin to top it up.")
        case api.GenerationFailedError():
            return _("The generation failed at the provider; nothing was produced. Try again.")
        case api.APITimeoutError():
            return _(
                "The service did not answer in time; the request may still have been charged, "
                "so check `/usage` and `/jobs` before trying again."
            )
        case api.APIConnectionError(request_sent=True):
            return _(
                "The connection to the generation service dropped after the request was sent; "
                "it may still have been charged, so check `/usage` and `/jobs` before trying "
                "again."
            )
        case api.APIConnectionError():
            return _("The generation service cannot be reached right now; try again later.")
        case api.MalformedResponseError():
            return _(
                "The generation service gave an answer we could not read; it may still have "
                "charged for it, so check `/usage` and `/jobs` before trying again."
            )
        case api.ServerError(may_have_charged=True):
            return _(
                "The generation service answered with an error after the request was sent; it "
                "may still have been charged, so check `/usage` and `/jobs` before trying again."
            )
        case api.APIStatusError():
            return _("The generation service had a problem; try again later.")
        case _:
            return _(GENERIC_SENTENCE)
