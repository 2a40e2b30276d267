"""The bot's languages: the message catalogues, the locale of an answer, amounts per locale.

English is the source language: every sentence is written in English in the code, marked with
:func:`_` (or :func:`n_` when it has a count, :func:`N_` for a constant translated where it is
used), and looked up at run time in the catalogue of the answer's locale
(``bot/locales/<locale>/LC_MESSAGES/genbot.po``, gettext's format, read with Babel and compiled
in memory at start-up). A message a catalogue lacks (or leaves empty or fuzzy) is shown in
English, that message only. Placeholders are named (``{amount}``) and filled after the lookup,
so a translation may move them. Plural forms follow each catalogue's ``Plural-Forms`` (Babel's
CLDR rules). How to add a locale or a message: ``docs/translating.md``.

The locale of "this answer" is a context variable (:data:`current`), set by the Discord
adapter where an interaction enters (the member's locale for an ephemeral answer) and around
the rendering of a public card (the server's locale); it defaults to English, so logs, metrics
and the audit's records, written outside any answer, stay English.
"""

from __future__ import annotations

import gettext
import io
import math
import re
from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar, Token
from decimal import ROUND_HALF_UP, Decimal
from functools import cache
from pathlib import Path

from babel import Locale
from babel.messages.catalog import Catalog
from babel.messages.mofile import write_mo
from babel.messages.pofile import read_po
from babel.numbers import format_currency, format_decimal

LOCALES_DIR = Path(__file__).resolve().parent / "locales"
"""Where the catalogues live: ``<locale>/LC_MESSAGES/genbot.po`` and the ``genbot.pot``
template extracted from the code (``python -m bot.i18n_tool extract``)."""

DOMAIN = "genbot"

SOURCE = "en-US"
"""The source language, Discord's code for it: the code's own sentences."""

SHIPPED = ("es-ES", "pt-BR", "fr", "de", "ja")
"""The locales a catalogue ships for, by Discord's codes (``discord.Locale`` values)."""

LANGUAGE_NAMES = {
    "en-US": "English",
    "es-ES": "Español",
    "pt-BR": "Português do Brasil",
    "fr": "Français",
    "de": "Deutsch",
    "ja": "日本語",
}
"""Every language the bot speaks, by its own name (never translated: a reader finds their own)."""

_BY_LANGUAGE = {code.split("-")[0]: code for code in SHIPPED}
"""A language's catalogue for its other regions: Discord's ``es-419`` reads Spanish (Spain),
``pt-PT`` would read Brazilian Portuguese, the only Portuguese shipped."""

_current: ContextVar[str] = ContextVar("genbot_locale", default=SOURCE)

_FIELD = re.compile(r"\{(\w+)\}")


def resolve(code: str | None) -> str:
    """The shipped locale for a Discord locale code, or :data:`SOURCE` (English).

    Args:
        code: a Discord locale (``"ja"``, ``"es-419"``, ``"en-GB"``; Discord's Locales
            reference), or None when none is known.

    Returns:
        One of :data:`SHIPPED`, the exact code first, then by language; else ``"en-US"``.
    """
    if not code:
        return SOURCE
    if code in SHIPPED:
        return code
    return _BY_LANGUAGE.get(code.replace("_", "-").split("-")[0].lower(), SOURCE)


def current() -> str:
    """The locale of the answer being written (a :data:`SHIPPED` code or ``"en-US"``)."""
    return _current.get()


def set_locale(code: str | None) -> Token[str]:
    """Make ``code`` (a Discord locale, resolved) the locale of the current task's answers.

    Returns:
        The token that :func:`reset_locale` takes to restore the previous locale.
    """
    return _current.set(resolve(code))


def reset_locale(token: Token[str]) -> None:
    """Restore the locale :func:`set_locale` replaced."""
    _current.reset(token)


@contextmanager
def using(code: str | None) -> Iterator[str]:
    """Write in ``code``'s language within the block (a public card in the server's locale).

    Args:
        code: a Discord locale; None keeps the current one (the caller chose none).

    Yields:
        The resolved locale.
    """
    token = _current.set(_current.get() if code is None else resolve(code))
    try:
        yield _current.get()
    finally:
        _current.reset(token)


def read_catalogue(locale: str) -> Catalog:
    """The catalogue of a shipped locale, as Babel reads the ``.po`` file.

    Raises:
        FileNotFoundError: the locale has no catalogue.
    """
    path = LOCALES_DIR / locale / "LC_MESSAGES" / f"{DOMAIN}.po"
    with path.open("rb") as file:
        return read_po(file, locale=Locale.parse(locale, sep="-"), domain=DOMAIN)


@cache
def translations(locale: str) -> gettext.NullTranslations:
    """The compiled translations of ``locale`` (compiled in memory once; no ``.mo`` file).

    English, or a locale without a catalogue, is the identity: every message as written.
    Empty and fuzzy entries are left out, so they read in English.
    """
    if locale == SOURCE or locale not in SHIPPED:
        return gettext.NullTranslations()
    compiled = io.BytesIO()
    write_mo(compiled, read_catalogue(locale))
    compiled.seek(0)
    return gettext.GNUTranslations(compiled)


def warm() -> None:
    """Load now what an answer's first use of a language would otherwise load then.

    Compiles every shipped catalogue (:func:`translations`) and loads Babel's number and
    currency data of every language, a few to a few tens of milliseconds each the first time:
    a process calls this once at start-up, so a member's first command in their language does
    not hold the event loop, and every acknowledgement queued behind it, while it loads
    (docs/benchmarks.md, "The acknowledgement first").
    """
    for code in (SOURCE, *SHIPPED):
        translations(code)
        number(1234.5, code)
        money(Decimal("1.5"), code)


def fill(text: str, values: dict[str, object]) -> str:
    """``text`` with its ``{name}`` placeholders replaced from ``values`` (others left)."""
    # Named fields only, replaced one by one: a sentence may show a literal brace (a code
    # sample) and a translation may omit a value it words differently.
    if not values:
        return text
    return _FIELD.sub(lambda m: str(values[m[1]]) if m[1] in values else m[0], text)


def _(message: str, /, **values: object) -> str:
    """``message`` in the current locale, its ``{name}`` placeholders filled from ``values``.

    Args:
        message: the English sentence, literal at the call (the extractor reads it there).
        values: what the placeholders stand for, already formatted for the locale
            (:func:`money`, :func:`number`).
    """
    return fill(translations(_current.get()).gettext(message), values)


def n_(singular: str, plural: str, count: int, /, **values: object) -> str:
    """The plural form of the current locale for ``count`` (CLDR rules, gettext's indexes).

    ``{count}`` is filled with ``count`` formatted for the locale; other placeholders come from
    ``values``.
    """
    text = translations(_current.get()).ngettext(singular, plural, count)
    return fill(text, {"count": number(count), **values})


def N_(message: str, /) -> str:
    """Mark a constant for the catalogue without translating it.

    The constant is passed to :func:`_` where it is shown, in that answer's locale.
    """
    return message


class Later(str):
    """A sentence filled in English now, translated later, where its reader's locale is known.

    A service writing a line for a server's admin channel while a member's answer is being
    written (their locale current) passes one of these: it reads as the English line (logs,
    tests), and the Discord adapter posts :meth:`translated` in the server's locale.

    Args:
        template: the sentence as marked with :func:`N_` (``{name}`` placeholders).
        values: what the placeholders stand for.
    """

    template: str
    values: dict[str, object]

    def __new__(cls, template: str, /, **values: object) -> Later:
        """The English sentence, filled, keeping its template and values."""
        said = super().__new__(cls, fill(template, values))
        said.template = template
        said.values = values
        return said

    def translated(self) -> str:
        """The sentence in the current locale (:func:`using` the reader's)."""
        return _(self.template, **self.values)


def locale_of(code: str | None = None) -> Locale:
    """Babel's locale for a Discord code (the current locale when None)."""
    return Locale.parse(resolve(code) if code else _current.get(), sep="-")


_SMALLEST_SHOWN = Decimal("0.000001")
"""Dollars: amounts are shown to a ten-thousandth of a cent at most."""

_LARGEST_EXACT = Decimal(10**15)
"""Dollars from which amounts are shown in scientific notation (only an absurd report is)."""


def money(cents: Decimal | int, locale: str | None = None) -> str:
    """Render an amount of cents as US dollars for people, in ``locale``'s conventions.

    For display only, never for the ledger: at least two decimals, more when the amount has
    them (``Decimal("0.35") -> "$0.0035"``, ``1234.5 -> "$12.345"``; in German ``"12,345 $"``),
    rounded half up to :data:`_SMALLEST_SHOWN` dollars; a non-zero amount below that reads
    "less than $0.000001". NaN or infinite (a protocol anomaly shown as reported) reads "an
    unreadable amount"; an absurdly large one is shown in scientific notation. Formatted by
    Babel from CLDR data (symbol, its place, separators).

    Args:
        cents: the amount, cents.
        locale: a Discord locale; the current one when None.
    """
    where = locale_of(locale)
    dollars = Decimal(cents) / 100
    if not dollars.is_finite():
        return _("an unreadable amount")
    if abs(dollars) >= _LARGEST_EXACT:
        return f"${dollars:.3E}"
    shown = dollars.quantize(_SMALLEST_SHOWN, rounding=ROUND_HALF_UP)
    if shown == 0 and dollars != 0:
        smallest = format_currency(_SMALLEST_SHOWN, "USD", locale=where, decimal_quantization=False)
        if dollars < 0:
            return _("less than -{amount}", amount=smallest)
        return _("less than {amount}", amount=smallest)
    # normalize(): only the decimals the amount has; the pattern adds up to the two of USD.
    exact = shown.normalize() if shown != 0 else Decimal(0)
    return format_currency(exact, "USD", locale=where, decimal_quantization=False)


def number(value: int | float | Decimal, locale: str | None = None) -> str:
    """A count or quantity in ``locale``'s digits grouping and decimal sign (Babel, CLDR)."""
    return format_decimal(value, locale=locale_of(locale), decimal_quantization=False)


def relative_time(at: float) -> str:
    """A Discord timestamp, relative (``<t:…:R>``), never translated here.

    The client writes it in the reader's language ("in 25 seconds", "25秒後").

    Args:
        at: UTC epoch seconds (rounded up to the second).
    """
    return f"<t:{math.ceil(at)}:R>"
