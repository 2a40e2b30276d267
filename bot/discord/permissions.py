"""What the bot needs in Discord: the permissions its commands check, and its install links.

One list (:data:`COMMAND_PERMISSIONS`) behind the commands' checks
(``bot.discord.interactions``), the start-up check (``GenBot.check_permissions``) and the
invite URL (``python -m bot invite``).
"""

from __future__ import annotations

from collections.abc import Iterable

import discord

from bot.services.personal import GUILD_INSTALL, USER_INSTALL

PLACEHOLDER_PERMISSIONS = (
    "view_channel",
    "send_messages",
    "send_messages_in_threads",
    "embed_links",
    "attach_files",
    "read_message_history",
)
"""What posting, editing and replying to a placeholder needs in the channel (Discord docs:
replies need Read Message History; embeds need Embed Links; a result edited in as a file needs
Attach Files; a thread needs Send Messages in Threads instead of Send Messages). The one list
behind both the check and the invite URL (:func:`invite_url`)."""

CHAT_PERMISSIONS = ("create_public_threads", "send_messages_in_threads")
"""What ``/chat`` needs besides :data:`PLACEHOLDER_PERMISSIONS` in a text channel: starting a
conversation's thread from its answer (Discord docs, "Start Thread from Message") and answering
there (Send Messages in Threads)."""

COMMAND_PERMISSIONS = tuple(dict.fromkeys((*PLACEHOLDER_PERMISSIONS, *CHAT_PERMISSIONS)))
"""Every permission the commands need: the one list behind the invite URL
(:func:`invite_permissions`) and the start-up check (:func:`missing_permissions`)."""

INVITE_SCOPES = ("bot", "applications.commands")
"""OAuth2 scopes of the invite: the bot user and its slash commands (Discord OAuth2 docs)."""

PERMISSION_TITLES = {"send_messages_in_threads": "Send Messages in Threads"}
"""Names Discord's client spells otherwise than title case."""


def permission_names(names: Iterable[str]) -> str:
    """Return permissions as Discord's client names them, e.g. "Create Public Threads".

    Args:
        names: discord.py attribute names (``send_messages_in_threads``).

    Returns:
        The names joined with ", ", e.g. "Create Public Threads, Send Messages in Threads".
    """
    return ", ".join(PERMISSION_TITLES.get(name, name.replace("_", " ").title()) for name in names)


def missing_permissions(granted: discord.Permissions) -> list[str]:
    """Return which of :data:`COMMAND_PERMISSIONS` ``granted`` lacks, in that list's order.

    Args:
        granted: the bot's permissions, e.g. its roles' in a server (``Guild.me``'s
            ``guild_permissions``: channel overwrites aside, which each command checks).

    Returns:
        discord.py attribute names (empty when nothing is missing).
    """
    if granted.administrator:
        return []
    return [name for name in COMMAND_PERMISSIONS if not getattr(granted, name)]


def invite_permissions() -> discord.Permissions:
    """Return every permission the commands check (the invite asks for exactly these).

    :data:`COMMAND_PERMISSIONS`: the placeholder's
    (:func:`bot.discord.interactions.require_placeholder_permissions`) and ``/chat``'s
    (:data:`CHAT_PERMISSIONS`). Its ``value`` is the ``permissions`` integer of the invite URL.
    """
    return discord.Permissions(**dict.fromkeys(COMMAND_PERMISSIONS, True))


def invite_url(application_id: int) -> str:
    """Return the URL that adds the bot to a server with the permissions its checks need.

    The server install (``integration_type=0``, Discord OAuth2 docs, "Installation
    Context"): the bot joins the server and the server pays for its members' requests.

    Args:
        application_id: the Discord application's id (the bot user's id, for bots).
    """
    url = discord.utils.oauth_url(
        application_id, permissions=invite_permissions(), scopes=INVITE_SCOPES
    )
    return f"{url}&integration_type={GUILD_INSTALL}"


def user_install_url(application_id: int) -> str:
    """Return the URL that installs the bot to a member's account (personal use).

    The user install (``integration_type=1``, scope ``applications.commands`` only, Discord
    OAuth2 docs): the member's commands work in any server, the bot's DM and group DMs, and
    are billed to the member (:func:`bot.services.personal.who_pays`).

    Args:
        application_id: the Discord application's id.
    """
    url = discord.utils.oauth_url(application_id, scopes=("applications.commands",))
    return f"{url}&integration_type={USER_INSTALL}"


def install_links(application_id: int) -> str:
    """Return both install links, one a line, labelled (``python -m bot invite``)."""
    return (
        f"server install: {invite_url(application_id)}\n"
        f"user install: {user_install_url(application_id)}"
    )
