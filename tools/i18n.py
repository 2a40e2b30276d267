"""The message catalogues' upkeep: extract the English messages, merge them, check them.

    python -m tools.i18n extract   # bot/locales/genbot.pot from the code, merged into every .po
    python -m tools.i18n check     # every shipped locale complete, placeholders kept, limits met

``extract`` reads the messages marked in ``bot/`` and ``cogs/`` (``_("…")``, ``N_("…")``,
``n_("…", "…", n)``, Babel's Python extractor), the dashboard's templates (``{% trans %}``,
``_("…")``, ``N_("…")``: Jinja2's Babel extractor, ``bot/dashboard/templates``) and the
slash commands' own words (group,
command and option descriptions, choice names: the strings discord.py hands the command tree's
translator), writes the template and merges it into each catalogue: a new message arrives
untranslated (empty), a changed one as new, a message gone from the code is dropped. ``check``
exits non-zero and lists the problems (tests/test_i18n.py runs the same checks). How to
translate: docs/translating.md.
"""

from __future__ import annotations

import importlib
import pkgutil
import re
import sys
from collections.abc import Iterator
from pathlib import Path

from babel.messages.catalog import Catalog
from babel.messages.extract import extract_from_dir
from babel.messages.pofile import read_po, write_po

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from bot.i18n import DOMAIN, LOCALES_DIR, SHIPPED, read_catalogue  # noqa: E402

TEMPLATE = LOCALES_DIR / f"{DOMAIN}.pot"
KEYWORDS = {"_": None, "N_": None, "n_": (1, 2)}
"""Babel's keyword spec: the functions of bot/i18n.py whose literal arguments are messages."""

DESCRIPTION_LIMIT = 100
"""Characters of a command's or an option's description (Discord: Application Commands)."""

COMMAND_LIMIT = 8000
"""Characters of one command's names, descriptions and choice names together, per locale
(Discord: Application Commands, "Application Command Naming")."""

TEMPLATES = ROOT / "bot" / "dashboard" / "templates"
"""The dashboard's Jinja2 templates: their messages are extracted with the code's."""

TEMPLATE_KEYWORDS = {"_": None, "N_": None, "gettext": None, "ngettext": (1, 2)}
"""The templates' keywords: ``_``/``N_`` as written, ``gettext``/``ngettext`` from
``{% trans %}`` blocks (Jinja2's extractor names them so)."""

TEMPLATE_OPTIONS = {"trimmed": "true", "newstyle_gettext": "true"}
"""As the dashboard's environment renders them (``bot.dashboard.language.install``)."""

PLACEHOLDER = re.compile(r"\{(\w+)\}|%\((\w+)\)s")
"""A placeholder: ``{name}`` in the code's messages, ``%(name)s`` in the templates'."""


def command_strings() -> Iterator[tuple[str, str]]:
    """The slash commands' translatable words: (text, where), read from the cogs' classes.

    The cogs are imported, not run: discord.py builds each class's commands (descriptions from
    the docstrings) when the class is defined.
    """
    from discord import app_commands
    from discord.ext import commands

    import cogs

    def walk(item: object, where: str) -> Iterator[tuple[str, str]]:
        if isinstance(item, app_commands.Group):
            yield str(item.description), f"{where}{item.name}"
            for child in item.commands:
                yield from walk(child, f"{where}{item.name} ")
        elif isinstance(item, app_commands.Command):
            name = f"{where}{item.name}"
            yield str(item.description), name
            for parameter in item.parameters:
                yield str(parameter.description), f"{name} {parameter.name}"
                for choice in parameter.choices:
                    if choice._locale_name.extras.get("keep"):
                        continue  # a language's own name: never translated
                    if re.search(r"[^\W\d_]", choice.name):  # "16:9" is no word to translate
                        yield choice.name, f"{name} {parameter.name} choice"

    for info in pkgutil.iter_modules(cogs.__path__):
        module = importlib.import_module(f"cogs.{info.name}")
        for value in vars(module).values():
            if not (isinstance(value, type) and issubclass(value, commands.Cog)):
                continue
            if value.__module__ != module.__name__:
                continue
            where = "/"
            if issubclass(value, commands.GroupCog):
                yield str(value.__cog_group_description__), f"/{value.__cog_group_name__}"
                where = f"/{value.__cog_group_name__} "
            for item in value.__cog_app_commands__:
                yield from walk(item, where)


def template() -> Catalog:
    """The catalogue of every English message of the code, unstranslated."""
    catalogue = Catalog(domain=DOMAIN, project="genbot", msgid_bugs_address="", fuzzy=False)
    for folder in ("bot", "cogs"):
        found = extract_from_dir(ROOT / folder, method_map=[("**.py", "python")], keywords=KEYWORDS)
        for filename, line, message, comments, _context in found:
            catalogue.add(
                message,
                locations=[(f"{folder}/{filename}", line)],
                auto_comments=comments,
            )
    found = extract_from_dir(
        TEMPLATES,
        method_map=[("**.html", "jinja2.ext:babel_extract")],
        options_map={"**.html": TEMPLATE_OPTIONS},
        keywords=TEMPLATE_KEYWORDS,
    )
    for filename, line, message, comments, _context in found:
        catalogue.add(
            message,
            locations=[(f"bot/dashboard/templates/{filename}", line)],
            auto_comments=comments,
        )
    for text, where in command_strings():
        if text and text != "…":
            catalogue.add(text, auto_comments=["command", where])
    return catalogue


def extract() -> None:
    """Write the template and merge it into each shipped locale's catalogue."""
    pot = template()
    with TEMPLATE.open("wb") as file:
        write_po(file, pot, omit_header=False, sort_output=True, width=100)
    for locale in SHIPPED:
        path = LOCALES_DIR / locale / "LC_MESSAGES" / f"{DOMAIN}.po"
        path.parent.mkdir(parents=True, exist_ok=True)
        if path.exists():
            catalogue = read_catalogue(locale)
        else:
            catalogue = Catalog(locale=locale.replace("-", "_"), domain=DOMAIN)
        catalogue.update(pot, no_fuzzy_matching=True, update_creation_date=False)
        with path.open("wb") as file:
            write_po(file, catalogue, ignore_obsolete=True, sort_output=True, width=100)
    print(f"{len(pot)} messages; catalogues: {', '.join(SHIPPED)}")


def placeholders(text: str) -> set[str]:
    """The ``{name}`` (code) and ``%(name)s`` (templates) placeholders of a message."""
    return {brace or percent for brace, percent in PLACEHOLDER.findall(text)}


def problems() -> list[str]:
    """Everything wrong with the catalogues, one line each (empty when all is well)."""
    found: list[str] = []
    pot = template()
    with TEMPLATE.open("rb") as file:
        stored = read_po(file)
    expected = {m.id if isinstance(m.id, str) else m.id[0] for m in pot if m.id}
    written = {m.id if isinstance(m.id, str) else m.id[0] for m in stored if m.id}
    for missing in sorted(expected - written):
        found.append(f"genbot.pot: not extracted (run `python -m tools.i18n extract`): {missing!r}")
    for locale in SHIPPED:
        catalogue = read_catalogue(locale)
        for message in pot:
            if not message.id:
                continue
            ids = (message.id,) if isinstance(message.id, str) else message.id
            entry = catalogue.get(message.id)
            strings: tuple[str, ...] = ()
            if entry is not None and not entry.fuzzy:
                strings = (entry.string,) if isinstance(entry.string, str) else entry.string
            if not strings or not all(strings):
                found.append(f"{locale}: not translated: {ids[0]!r}")
                continue
            wanted = placeholders(ids[-1]) | placeholders(ids[0])
            if isinstance(message.id, tuple):
                wanted -= {"count"}  # a language without plurals may leave the count out
            for string in strings:
                if placeholders(string) - (wanted | {"count"}) or wanted - placeholders(string):
                    found.append(
                        f"{locale}: placeholders {sorted(placeholders(string))} for "
                        f"{sorted(wanted)}: {ids[0]!r}"
                    )
            if "command" in message.auto_comments:
                for string in strings:
                    if len(string) > DESCRIPTION_LIMIT:
                        found.append(f"{locale}: over {DESCRIPTION_LIMIT} characters: {string!r}")
    return found


def main(argv: list[str]) -> int:
    """``extract`` or ``check``; the exit status is 1 when ``check`` finds a problem."""
    if argv[:1] == ["extract"]:
        extract()
        return 0
    if argv[:1] == ["check"]:
        found = problems()
        for line in found:
            print(line)
        print(f"{len(found)} problems")
        return 1 if found else 0
    print(__doc__)
    return 2


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
