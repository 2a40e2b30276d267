"""Personal mode (issue 22): who pays for a command, and the member's own wallet.

A command reaches the bot through an install: the server's (integration type 0, "guild
install") or the member's own (type 1, "user install"). Discord says which installs authorised
an interaction in ``authorizing_integration_owners`` (Discord docs, "Interaction Object":
``{"0": guild_id}`` for a guild install used in that guild, ``{"1": user_id}`` for the
member's user install, both when both apply; a guild install used outside a guild shows
``"0": "0"``).

**Who pays** (:func:`who_pays`): a server install in a server where the bot is a member pays
from the server (today's rules: its key, budgets, tiers, channels); anything else (a user
install in a server without the bot, the bot's DM, a group DM) pays from the member's wallet.

**The member's wallet** uses the same storage as a server's, under a wallet id that no server
can have: ``-user_id`` (:func:`wallet_id`; Discord snowflakes are positive). Its key is stored,
encrypted, validated and retired exactly like a server's (``guild_settings``,
``retired_keys``), its charges go to the same ledger with ``guild_id = -user_id`` and
``user_id`` the member, so they are never counted in a server's budgets or reports, and its
reservations take the wallet's lock, so its budget is atomic like every other.
"""

from __future__ import annotations

from collections.abc import Mapping
from enum import Enum

from bot.errors import ValidationFailed

GUILD_INSTALL = 0
"""``authorizing_integration_owners`` key of a guild install (Discord: APPLICATION_INTEGRATION_TYPE
``GUILD_INSTALL``)."""

USER_INSTALL = 1
"""``authorizing_integration_owners`` key of a user install (``USER_INSTALL``)."""

SET_KEY_SENTENCE = (
    "Outside servers that added me, requests are billed to your own Generation API key: "
    "set one with `/settings api-key set`."
)
"""The one sentence a member without a personal key (and no allowance) gets."""

PERSONAL_ALLOWANCE = "personal allowance"
"""The source named when ``PERSONAL_DAILY_BUDGET_CENTS`` refuses a request ("Your daily
allowance ($0.50, personal allowance) has ...")."""


class Payer(Enum):
    """Whose money a command spends."""

    GUILD = "guild"
    MEMBER = "member"


class PersonalKeyNeeded(ValidationFailed):
    """Personal use without a personal key, and the owner grants no allowance on the default key.

    Raised before any reservation or upstream call.
    """

    def __init__(self) -> None:
        super().__init__(SET_KEY_SENTENCE)


def who_pays(
    *,
    guild_id: int | None,
    user_id: int,
    owners: Mapping[int, int],
    bot_in_guild: bool,
) -> Payer:
    """Decide who pays for an interaction, from how it was authorised (issue 22).

    Args:
        guild_id: the guild the interaction happened in; None in a DM or group DM.
        user_id: the member who used the command.
        owners: ``authorizing_integration_owners`` as ints (install type -> guild or user id).
        bot_in_guild: the bot is a member of ``guild_id`` (in its gateway cache).

    Returns:
        ``Payer.GUILD`` only when the server's own install authorised the command in that
        server and the bot is a member there; ``Payer.MEMBER`` otherwise.
    """
    del user_id  # the user install is the member's own: it never bills anyone else
    if guild_id is not None and owners.get(GUILD_INSTALL) == guild_id and bot_in_guild:
        return Payer.GUILD
    return Payer.MEMBER


def wallet_id(user_id: int) -> int:
    """Return the id the member's personal wallet is stored under: ``-user_id``.

    Raises:
        ValueError: ``user_id`` is not a positive snowflake.
    """
    if user_id <= 0:
        raise ValueError(f"not a user id: {user_id}")
    return -user_id


def is_personal(guild_id: int) -> bool:
    """Whether a stored ``guild_id`` is a member's personal wallet (:func:`wallet_id`)."""
    return guild_id < 0
