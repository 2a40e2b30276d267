"""The dashboard in its reader's language: which locale a request reads, and its formats.

A request's locale (``docs/dashboard.md``, "Languages"), first found of:

1. the ``lang`` cookie: the header's language menu (``GET /language``) sets it, and so does a
   sign-in, to the locale Discord's ``users/@me`` gives, unless the browser already chose one;
2. the browser's ``Accept-Language`` (RFC 9110 §12.5.4), negotiated by Babel against the
   shipped locales;
3. English.

The locale is made the answer's (:func:`bot.i18n.set_locale`) for the whole request, so the
templates' ``{% trans %}`` and ``_()`` (Jinja2's i18n extension, bound to the same gettext
catalogues as the bot: :func:`install`) and the pages' Python sentences (``bot.i18n._``) read
it. Amounts, numbers and times are formatted by Babel in it (:func:`usd_text`,
:func:`when_text`, :func:`day_text`, :func:`number_text`).
"""

from __future__ import annotations

from datetime import UTC, datetime
from decimal import Decimal
from typing import Final

import jinja2
from babel import Locale
from babel.core import negotiate_locale
from babel.dates import format_date, format_skeleton, format_time

from bot.i18n import (
    LANGUAGE_NAMES,
    N_,
    SHIPPED,
    SOURCE,
    _,
    current,
    money,
    number,
    resolve,
    translations,
)

LANG_COOKIE: Final = "lang"
"""The cookie that keeps a browser's language (a code of :data:`LANGUAGES`)."""

LANG_SECONDS: Final = 365 * 86_400
"""How long the ``lang`` cookie is kept."""

LANGUAGES: Final = tuple(LANGUAGE_NAMES.items())
"""The language menu: ``(code, its own name)``, English first (``bot.i18n.LANGUAGE_NAMES``)."""

_OFFERED: Final = (SOURCE, *SHIPPED, *sorted({code.split("-")[0] for code in (SOURCE, *SHIPPED)}))
"""What Babel negotiates against: the shipped codes, then their bare languages (``pt-PT``
falls back to ``pt``, read as Brazilian Portuguese: :func:`bot.i18n.resolve`)."""

MICRO_PER_CENT: Final = 10**6

KIND_NAMES: Final = {"video": N_("video"), "image": N_("image"), "text": N_("text")}
"""A result's or a charge's kind, as the pages name it (the stored value is the key)."""

STATUS_NAMES: Final = {
    "pending": N_("pending"),
    "completed": N_("completed"),
    "failed": N_("failed"),
    "charged": N_("charged"),
}
"""A ledger line's status, as the pages name it (the stored value is the key)."""


def preferred(header: str | None) -> list[str]:
    """The languages of an ``Accept-Language`` header, most wanted first (``q=0`` left out).

    Args:
        header: e.g. ``"fr-CH, fr;q=0.9, en;q=0.8, *;q=0.5"``; None or malformed parts ignored.
    """
    ranked: list[tuple[float, int, str]] = []
    for place, part in enumerate((header or "").split(",")[:20]):
        tag, _sep, params = part.strip().partition(";")
        tag = tag.strip()
        if not tag or tag == "*" or len(tag) > 35:
            continue
        weight = 1.0
        params = params.strip()
        if params.startswith("q="):
            try:
                weight = float(params[2:])
            except ValueError:
                continue
        if weight > 0:
            ranked.append((-weight, place, tag))
    return [tag for _weight, _place, tag in sorted(ranked)]


def negotiate(header: str | None) -> str:
    """The shipped locale an ``Accept-Language`` header asks for, else English (``en-US``)."""
    found = negotiate_locale(preferred(header), _OFFERED, sep="-")
    return resolve(found) if found else SOURCE


def locale_of_request(cookie: str | None, accept_language: str | None) -> str:
    """The locale a request reads: its ``lang`` cookie's, else its browser's, else English."""
    if cookie in LANGUAGE_NAMES:
        return cookie
    return negotiate(accept_language)


def _babel() -> Locale:
    return Locale.parse(current(), sep="-")


def usd_text(micro: int) -> str:
    """Micro-cents as an exact amount in the current locale (``$12.345``, ``12,345 $``).

    Every digit the amount has, down to the micro-cent (``$0.13850001``), at least two
    decimals: the pages' figures equal the ledger's exactly. Babel's CLDR data place the
    symbol and choose the separators.
    """
    return money(Decimal(micro) / MICRO_PER_CENT, current(), exact=True)  # the one formatter


def cents_text(cents: Decimal | int) -> str:
    """Exact cents (a credit balance, a credit entry) as :func:`usd_text` writes micro-cents."""
    return money(Decimal(cents), current(), exact=True)


def number_text(value: int | float | Decimal) -> str:
    """A count in the current locale's digits (``1,234``, ``1.234``)."""
    return number(value)


def day_text(at: float) -> str:
    """UTC epoch seconds as their UTC date in the current locale (``Jan 31, 2026``)."""
    return format_date(datetime.fromtimestamp(at, UTC), "medium", locale=_babel())


def short_day_text(at: float) -> str:
    """UTC epoch seconds as their UTC day and month (a chart's bars: ``1/31``, ``31.1.``)."""
    return format_skeleton("Md", datetime.fromtimestamp(at, UTC), locale=_babel())


def when_text(at: float) -> str:
    """UTC epoch seconds as a UTC date and time in the current locale, marked ``UTC``.

    CLDR's pattern joins them (``Jan 31, 2026, 1:05 PM UTC``, ``2026/01/31 13:05 UTC``).
    """
    moment = datetime.fromtimestamp(at, UTC)
    where = _babel()
    date = format_date(moment, "medium", locale=where)
    time = format_time(moment, "short", tzinfo=UTC, locale=where)
    pattern = str(where.datetime_formats["medium"]).replace("'", "")
    return pattern.replace("{1}", date).replace("{0}", time) + " UTC"


ACCESS_NAMES: Final = {"view": N_("view"), "edit": N_("edit")}
"""A dashboard role's access level, as the pages name it."""


def access_name(level: str) -> str:
    """A dashboard access level in the current locale; another as stored."""
    return _(ACCESS_NAMES[level]) if level in ACCESS_NAMES else level


SAFETY_MODES: Final = {"off": N_("off"), "review": N_("review"), "block": N_("block")}
"""A server's safety mode, as the Safety page names it (``bot.domain.SafetyMode``)."""

REVIEW_STATES: Final = {
    "shown": N_("shown"),
    "spoiler": N_("spoiler"),
    "held": N_("held"),
    "withheld": N_("withheld"),
    "approved": N_("approved"),
    "rejected": N_("rejected"),
}
"""A result's safety state, as the Review page names it (``bot.domain.Visibility``)."""


def safety_mode(mode: str) -> str:
    """A safety mode in the current locale; another as stored."""
    return _(SAFETY_MODES[mode]) if mode in SAFETY_MODES else mode


def review_state(state: str) -> str:
    """A result's safety state in the current locale; another as stored."""
    return _(REVIEW_STATES[state]) if state in REVIEW_STATES else state


def kind_name(kind: str) -> str:
    """A kind (``video``, ``image``, ``text``) in the current locale; another as stored."""
    return _(KIND_NAMES[kind]) if kind in KIND_NAMES else kind


def status_name(status: str) -> str:
    """A ledger line's status in the current locale; another as stored."""
    return _(STATUS_NAMES[status]) if status in STATUS_NAMES else status


def _identity(message: str) -> str:
    return message


def _gettext(message: str) -> str:
    return translations(current()).gettext(message)


def _ngettext(singular: str, plural: str, count: int) -> str:
    return translations(current()).ngettext(singular, plural, count)


def install(environment: jinja2.Environment) -> None:
    """Give ``environment`` the i18n extension bound to the current locale, and the formats.

    Templates mark text with ``{% trans %}…{% endtrans %}`` (whitespace trimmed) or
    ``_("…")``; placeholders are ``%(name)s`` (Jinja2's newstyle gettext), a literal ``%`` is
    ``%%``; ``N_("…")`` marks a constant shown later with ``_(name)``. Filters: ``usd``
    (micro-cents), ``cents`` (exact cents), ``num``; functions: ``when``, ``day``,
    ``kind_name``, ``status_name``, ``access_name``, ``safety_mode``, ``review_state``;
    ``lang()`` is the page's locale and ``languages`` the language menu.
    """
    environment.add_extension("jinja2.ext.i18n")
    environment.policies["ext.i18n.trimmed"] = True
    environment.install_gettext_callables(  # type: ignore[attr-defined]
        _gettext, _ngettext, newstyle=True
    )
    environment.filters["usd"] = usd_text
    environment.filters["cents"] = cents_text
    environment.filters["num"] = number_text
    environment.globals["when"] = when_text
    environment.globals["day"] = day_text
    environment.globals["languages"] = LANGUAGES
    environment.globals["lang"] = current
    environment.globals["kind_name"] = kind_name
    environment.globals["access_name"] = access_name
    environment.globals["safety_mode"] = safety_mode
    environment.globals["review_state"] = review_state
    environment.globals["status_name"] = status_name
    environment.globals["N_"] = _identity  # marks a constant translated where shown: _(label)


__all__ = [
    "LANGUAGES",
    "LANG_COOKIE",
    "LANG_SECONDS",
    "access_name",
    "day_text",
    "install",
    "kind_name",
    "locale_of_request",
    "negotiate",
    "number_text",
    "preferred",
    "review_state",
    "safety_mode",
    "short_day_text",
    "status_name",
    "usd_text",
    "when_text",
]
