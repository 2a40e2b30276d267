"""The command tree's translator: slash commands' descriptions and choices in every language.

Discord shows a command's description, its options' descriptions and its choices' names in the
member's client language when the app registers ``*_localizations`` for it (Discord:
Application Commands, Localization). discord.py asks a :class:`discord.app_commands.Translator`
for each string and locale when it syncs (``CommandTree.set_translator``). Command and option
names stay English, so help pages and docs stay valid.
"""

from __future__ import annotations

from typing import Any

import discord
from discord import app_commands

from bot.i18n import SHIPPED, SOURCE, resolve, translations


class CatalogueTranslator(app_commands.Translator):
    """Reads the bot's message catalogues (:mod:`bot.i18n`) for discord.py's command sync."""

    async def translate(
        self,
        string: app_commands.locale_str,
        locale: discord.Locale,
        context: app_commands.TranslationContextTypes,
    ) -> str | None:
        """The string in ``locale``, or None where English stands (no catalogue, no entry).

        Names are never translated (only descriptions and choice names), and a regional
        variant reads its language's catalogue (``es-419``: Spanish).
        """
        if context.location in (
            app_commands.TranslationContextLocation.command_name,
            app_commands.TranslationContextLocation.group_name,
            app_commands.TranslationContextLocation.parameter_name,
        ):
            return None
        if string.extras.get("keep"):
            return None  # a language's own name, the same in every language
        shipped = resolve(locale.value)
        if shipped == SOURCE or shipped not in SHIPPED:
            return None
        message = string.message
        translated = translations(shipped).gettext(message)
        return translated if translated != message else None


async def translated_payload(tree: app_commands.CommandTree[Any], guild: Any) -> list[Any]:
    """The commands of ``guild``'s scope as a sync would send them, localizations included.

    What the command sync hash is taken over: a translation changed re-syncs.
    """
    translator = tree.translator
    commands = tree.get_commands(guild=guild)
    if translator is None:
        return [command.to_dict(tree) for command in commands]
    return [await command.get_translated_payload(tree, translator) for command in commands]
