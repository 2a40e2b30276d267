"""A server's language for its public messages (``/config language``), kept with its settings."""

from decimal import Decimal

import pytest

from bot.errors import ValidationFailed
from bot.i18n import using
from tests.support.stack import ADMIN_ACTOR, Stack


async def test_a_chosen_language_is_kept_audited_and_cleared(stack: Stack) -> None:
    config = stack.services.guild_config
    assert await config.locale(7) is None  # Discord's preferred locale until an admin chooses
    await config.set_confirm_above(7, Decimal(150), actor=ADMIN_ACTOR)
    with using("de"):  # an admin whose Discord is German: the audit's records stay English
        before = await config.snapshot(7)
    assert before["language"] == "server default"
    assert "$1.50" in before["confirm above"]  # not "1,50 $"
    with using("de"):
        await config.set_locale(7, "fr", actor=ADMIN_ACTOR)
    assert await config.locale(7) == "fr"
    assert (await stack.services.db.guilds.settings(7)).locale == "fr"
    entries = await config.audit(7, 1)
    assert [(e.what, e.old, e.new) for e in entries] == [("language", "server default", "fr")]
    await config.set_locale(7, None, actor=ADMIN_ACTOR)
    assert await config.locale(7) is None


async def test_a_language_the_bot_does_not_speak_is_refused_and_changes_nothing(
    stack: Stack,
) -> None:
    config = stack.services.guild_config
    with pytest.raises(ValidationFailed):
        await config.set_locale(7, "tlh", actor=ADMIN_ACTOR)
    assert await config.locale(7) is None
