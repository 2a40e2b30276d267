"""Personal mode: who pays for a command, and the member's own wallet.

A command reaches the bot through an install: the server's (integration type 0, "guild
install") or the member's own (type 1, "user install"). Discord says which installs authorised
an interaction in ``authorizing_integration_owners`` (Discord docs, "Interaction Object":
``{"0": guild_id}`` for a guild install used in that guild, ``{"1": user_id}`` for the
member's user install, both when both apply; a guild install used outside a guild shows
``"0": "0"``).

**Who pays** (:func:`who_pays`): a server install in a server where the bot is a member pays
from the server (today's rules: its key, budgets, tiers, channels). The member's wallet (their
own key, or the owner's personal allowance) pays only where the member allowed it: their own
install authorised the interaction, or it happened in a DM or group DM, or it is a click on a
personal card (whoever clicks pays, from their own wallet). A server install where the bot is
not a member (a commands-only install) pays from nobody: it is refused with one sentence
saying the server must add the bot (:class:`BotNotInServer`).

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
from bot.i18n import N_

GUILD_INSTALL = 0
"""``authorizing_integration_owners`` key of a guild install (Discord: APPLICATION_INTEGRATION_TYPE
``GUILD_INSTALL``)."""

USER_INSTALL = 1
"""``authorizing_integration_owners`` key of a user install (``USER_INSTALL``)."""

SET_KEY_SENTENCE = N_(
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


BOT_NOT_IN_SERVER_SENTENCE = N_(
    "This server installed my commands without adding me: a server admin must add the bot "
    "to this server before they can be used here; nothing was charged."
)
"""The one sentence a server install without the bot as a member gets."""

NOT_YOUR_INSTALL_SENTENCE = N_(
    "Only your own install of the app can bill you here; nothing was charged."
)
"""The sentence for an interaction no install of the member's (nor a DM) authorised."""

PAID_BY_SERVER = N_("this server")
PAID_BY_KEY = N_("your key")
PAID_BY_ALLOWANCE = N_("your allowance")
PAID_BY_CREDITS = N_("your credits")
"""How an answer's footer names who paid (``paid by this server``, ``paid by your key``,
``paid by your allowance``: the owner's shared key within ``PERSONAL_DAILY_BUDGET_CENTS``;
``paid by your credits``: the member's credit balance, docs/credits.md)."""

PERSONAL_SEAT = 0
"""The fair queue's seat of every personal request (:class:`bot.genapi.ratelimit.QueueSeat`).

Turns go round guilds; a member's wallet is a "guild" of one, so without this the members
using the owner's shared key would each take a turn as large as a whole server's. All
personal use shares this one seat (0: no guild, and no wallet, has that id) instead.
"""


PERSONAL_POOL_LOCK = 0
"""The lock id (``db.guilds.lock``) of all members' personal use of the shared key together,
taken after a wallet's own lock when ``PERSONAL_TOTAL_DAILY_BUDGET_CENTS`` is checked. No
server (ids > 0) nor wallet (ids < 0) has it."""


class BotNotInServer(ValidationFailed):
    """A server install authorised the interaction, but the bot is not a member there.

    Nobody may pay: the server's install cannot be billed without the bot (no gateway, no
    channels), and the member did not authorise their own wallet. Raised before anything is
    reserved or sent.
    """

    def __init__(self) -> None:
        super().__init__(BOT_NOT_IN_SERVER_SENTENCE)


class NotYourInstall(ValidationFailed):
    """No install of the member's authorised the interaction, and it is no DM or card click."""

    def __init__(self) -> None:
        super().__init__(NOT_YOUR_INSTALL_SENTENCE)


class PersonalKeyUnreadable(ValidationFailed):
    """The member's stored key cannot be decrypted (``KEY_ENCRYPTION_KEY`` changed since).

    The member's own remedy, in their words: no server and no admin is involved.
    """

    def __init__(self) -> None:
        super().__init__(
            N_(
                "Your stored API key can no longer be read (the bot's encryption key changed); "
                "set it again with `/settings api-key set`."
            )
        )


KEY_CHANGING_PERSONAL = N_("Your API key is being changed; try again in a moment.")
"""Said when the member's key changed between choosing it and reserving, twice over."""

KEY_CHANGING_SERVER = N_("The server's API key is being changed; try again in a moment.")
"""The same, for a server's key."""


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
    click: bool = False,
) -> Payer:
    """Decide who pays for an interaction, from how it was authorised.

    Discord, "Interaction Object" (``authorizing_integration_owners``): ``"0"`` is the guild
    whose install authorised it (``"0"`` outside guilds), ``"1"`` the user whose install did.
    A component (or a form opened by one) carries the owners of the interaction whose response
    holds it, so on a personal card ``"1"`` is the card's owner, not the clicker.

    Args:
        guild_id: the guild the interaction happened in; None in a DM or group DM.
        user_id: the member who used the command or clicked.
        owners: ``authorizing_integration_owners`` as ints (install type -> guild or user id).
        bot_in_guild: the bot is a member of ``guild_id`` (in its gateway cache).
        click: the interaction is a component or a form submitted from one.

    Returns:
        ``Payer.GUILD`` when the server's own install authorised it in that server and the bot
        is a member there; ``Payer.MEMBER`` when the member's own install authorised it, in a
        DM or group DM, or for a click on a personal card.

    Raises:
        BotNotInServer: the server's install authorised it but the bot is not a member there.
        NotYourInstall: nothing above applies (an install of someone else's).
    """
    if guild_id is not None and owners.get(GUILD_INSTALL) == guild_id and bot_in_guild:
        return Payer.GUILD
    if guild_id is None or owners.get(USER_INSTALL) == user_id:
        return Payer.MEMBER
    if click and USER_INSTALL in owners:
        return Payer.MEMBER  # a personal card: whoever clicks pays, from their own wallet
    if owners.get(GUILD_INSTALL) == guild_id:
        raise BotNotInServer()
    raise NotYourInstall()


def paid_by(guild_id: int, *, own_key: bool) -> str:
    """Name who pays for a request billed to ``guild_id``, as an answer's footer says it.

    Args:
        guild_id: the server, or a member's wallet (:func:`wallet_id`).
        own_key: the wallet's own key is used (a server's or the member's), not the bot's
            shared ``GENAPI_API_KEY``.

    Returns:
        ``"this server"`` for a server (whichever key: its budgets pay), ``"your key"`` for a
        member's own key, ``"your allowance"`` for a member on the owner's shared key.
    """
    if not is_personal(guild_id):
        return PAID_BY_SERVER
    return PAID_BY_KEY if own_key else PAID_BY_ALLOWANCE


def queue_seat(guild_id: int) -> int:
    """The fair queue's seat of a request billed to ``guild_id``.

    :data:`PERSONAL_SEAT` for every member's wallet, the guild itself otherwise.
    """
    return PERSONAL_SEAT if is_personal(guild_id) else guild_id


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
