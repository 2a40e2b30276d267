"""The bot's languages: the catalogues complete and faithful, the locale chosen, amounts shown.

The catalogues are checked as ``python -m tools.i18n check`` checks them (docs/translating.md):
every message of the code is in the template and translated in every shipped locale, with the
same ``{placeholders}``, and every command description fits Discord's limits.
"""

from collections.abc import AsyncIterator
from decimal import Decimal
from typing import Any

import discord
import pytest

from bot.discord.bot import EXTENSIONS, GenBot
from bot.discord.render.text import format_duration
from bot.discord.translator import CatalogueTranslator, translated_payload
from bot.errors import BudgetExceeded, ConcurrencyLimitReached, format_cents, user_message
from bot.genapi import errors as api
from bot.i18n import (
    SHIPPED,
    SOURCE,
    _,
    current,
    money,
    n_,
    resolve,
    translations,
    using,
    warm,
)
from tests.support.stack import Stack
from tools import i18n as tool

DESCRIPTION_LIMIT = 100
"""Discord (Application Commands): a description, 1-100 characters, in every locale."""

COMMAND_LIMIT = 8000
"""Discord (Application Commands): a command's names, descriptions and choice names together,
at most 8000 characters in any one locale."""


def test_every_message_is_extracted_translated_and_keeps_its_placeholders() -> None:
    assert tool.problems() == []


def test_the_check_reports_a_renamed_placeholder_a_missing_translation_and_a_long_description(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    budget = "This server's monthly budget has {left} left; this request needs about {needed}."
    original = tool.read_catalogue

    def broken(locale: str) -> Any:
        catalogue = original(locale)
        if locale == "de":
            catalogue.get(budget).string = "Das Monatsbudget hat noch {rest}."
            catalogue.get("Usage").string = ""
            catalogue.get("Generate an image.").string = "Ein Bild erzeugen. " * 10
        return catalogue

    monkeypatch.setattr(tool, "read_catalogue", broken)
    found = tool.problems()
    assert any(p.startswith("de: placeholders ['rest']") and "monthly budget" in p for p in found)
    assert "de: not translated: 'Usage'" in found
    assert any(p.startswith("de: over 100 characters") for p in found)
    assert all(p.startswith("de: ") for p in found)


@pytest.mark.parametrize(
    ("discord_locale", "shipped"),
    [
        ("ja", "ja"),
        ("de", "de"),
        ("es-ES", "es-ES"),
        ("es-419", "es-ES"),
        ("pt-BR", "pt-BR"),
        ("fr", "fr"),
        ("en-US", SOURCE),
        ("en-GB", SOURCE),
        ("ko", SOURCE),
        (None, SOURCE),
    ],
)
def test_a_discord_locale_reads_its_languages_catalogue(
    discord_locale: str | None, shipped: str
) -> None:
    assert resolve(discord_locale) == shipped


def test_every_language_is_compiled_at_start_up_not_at_a_members_first_command() -> None:
    # A catalogue compiled on a member's first command held the event loop tens of ms, and
    # every acknowledgement queued behind it; the bot warms them in setup_hook.
    translations.cache_clear()
    warm()
    compiled = translations.cache_info().misses
    for code in (SOURCE, *SHIPPED):
        translations(code)
    assert translations.cache_info().misses == compiled


def test_an_answer_is_written_in_its_locale_and_english_outside_any() -> None:
    assert current() == SOURCE
    with using("ja"):
        assert _("Usage") == "利用状況"
        with using(None):  # a render given no locale keeps the answer's
            assert current() == "ja"
        with using("de"):
            assert _("Usage") == "Nutzung"
    assert _("Usage") == "Usage"


def test_a_message_without_a_translation_falls_back_to_english_alone() -> None:
    with using("fr"):
        assert _("Not in any catalogue {x}", x=3) == "Not in any catalogue 3"
        assert _("Usage") == "Utilisation"


def test_plurals_follow_each_languages_rules() -> None:
    one = "You already have {count} video in progress; wait for it to finish."
    many = "You already have {count} videos in progress; wait for one to finish."
    assert n_(one, many, 1) == one.format(count=1)
    with using("de"):
        assert n_(one, many, 1).startswith("Du hast bereits 1 Video ")
        assert n_(one, many, 3).startswith("Du hast bereits 3 Videos ")
    with using("fr"):  # French: 0 and 1 are singular
        assert "0 vidéo en cours" in n_(one, many, 0)
    with using("ja"):  # one form only
        assert n_(one, many, 1) == n_(one, many, 5).replace("5", "1")


@pytest.mark.parametrize(
    ("locale", "cents", "shown"),
    [
        ("en-US", Decimal("1234.5"), "$12.345"),
        ("en-US", Decimal("0.35"), "$0.0035"),
        ("en-US", Decimal("123456789"), "$1,234,567.89"),
        ("ja", Decimal("1234.5"), "$12.345"),
        ("ja", 100000, "$1,000.00"),
        ("de", Decimal("1234.5"), "12,345\xa0$"),
        ("de", 100000, "1.000,00\xa0$"),
        ("fr", 1234, "12,34\xa0$US"),
        ("es-ES", 50, "0,50\xa0US$"),
        ("pt-BR", 1234, "US$\xa012,34"),
    ],
)
def test_amounts_keep_their_digits_in_each_locales_format(
    locale: str, cents: Decimal | int, shown: str
) -> None:
    assert money(cents, locale) == shown
    with using(locale):
        assert format_cents(cents) == shown


def test_tiny_and_unreadable_amounts_are_worded_in_the_locale() -> None:
    with using("de"):
        assert format_cents(Decimal("0.0000001")) == "weniger als 0,000001\xa0$"
        assert format_cents(Decimal("NaN")) == "ein unlesbarer Betrag"


def test_durations_use_the_locales_units_and_english_keeps_its_own() -> None:
    assert format_duration(125) == "2 m 05 s"
    with using("de"):
        assert format_duration(125) == "2 Min. 5 Sek."
    with using("ja"):
        assert "時間" in format_duration(3720)


def test_errors_are_told_in_the_members_language_with_its_amounts() -> None:
    budget = BudgetExceeded("user", Decimal("12.5"), Decimal(150))
    with using("de"):
        assert budget.user_sentence() == (
            "Dein Tagesbudget hat noch 0,125\xa0$; diese Anfrage braucht etwa 1,50\xa0$."
        )
        assert "2 Videos" in ConcurrencyLimitReached("user", 2).user_sentence()
    with using("ja"):
        sentence = user_message(api.APIConnectionError("down", request_sent=False))
        assert sentence == "現在、生成サービスに接続できません。しばらくしてからお試しください。"
    assert budget.user_sentence().startswith("Your daily budget has $0.125 left")


# -- the commands as Discord registers them ----------------------------------------------------


@pytest.fixture
async def payload(stack: Stack) -> AsyncIterator[list[dict[str, Any]]]:
    async with GenBot(stack.services) as bot:
        for extension in EXTENSIONS:
            await bot.load_extension(extension)
        await bot.tree.set_translator(CatalogueTranslator())
        yield await translated_payload(bot.tree, None)


def localized_strings(command: dict[str, Any], locale: str) -> list[str]:
    """A command's names, descriptions and choice names as a member of ``locale`` reads them."""
    found = [
        (command.get("name_localizations") or {}).get(locale, command["name"]),
        (command.get("description_localizations") or {}).get(
            locale, command.get("description", "")
        ),
    ]
    for option in command.get("options", []):
        found += localized_strings(option, locale)
    for choice in command.get("choices", []):
        found.append((choice.get("name_localizations") or {}).get(locale, choice["name"]))
    return found


def descriptions(command: dict[str, Any]) -> list[dict[str, Any]]:
    found = [command] if command.get("description") else []
    for option in command.get("options", []):
        found += descriptions(option)
    return found


async def test_every_description_and_choice_is_localized_within_discords_limits(
    payload: list[dict[str, Any]],
) -> None:
    locales = [locale.value for locale in discord.Locale if resolve(locale.value) in SHIPPED]
    assert {"es-419", "es-ES", "pt-BR", "fr", "de", "ja"} <= set(locales)
    for command in payload:
        assert not command.get("name_localizations")  # names stay English
        for item in descriptions(command):
            for locale in locales:
                text = item["description_localizations"][locale]
                assert 1 <= len(text) <= DESCRIPTION_LIMIT, (locale, text)
                assert not item.get("name_localizations")
        for locale in locales:
            assert sum(map(len, localized_strings(command, locale))) <= COMMAND_LIMIT


async def test_a_changed_translation_changes_what_is_synced(
    stack: Stack, monkeypatch: pytest.MonkeyPatch
) -> None:
    async with GenBot(stack.services) as bot:
        for extension in EXTENSIONS:
            await bot.load_extension(extension)
        await bot.tree.set_translator(CatalogueTranslator())
        before = await translated_payload(bot.tree, None)
        german = translations("de")
        original = german.gettext
        monkeypatch.setattr(
            german, "gettext", lambda m: "Anders" if m == "Generate an image." else original(m)
        )
        after = await translated_payload(bot.tree, None)
    assert before != after
