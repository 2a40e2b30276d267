"""Discord's allowed_mentions rules."""

from __future__ import annotations

import re
from collections.abc import Collection
from typing import Any

from .models import Mentions

USER_MENTION = re.compile(r"<@!?(\d{15,21})>")
ROLE_MENTION = re.compile(r"<@&(\d{15,21})>")
EVERYONE_MENTION = re.compile(r"@(?:everyone|here)")


def resolve_mentions(
    content: str,
    allowed_mentions: dict[str, Any] | None,
    *,
    known_users: Collection[int],
    roles: dict[int, bool],
    can_mention_everyone: bool,
    replied_user_id: int | None = None,
) -> Mentions:
    """Work out who a message notifies.

    Without ``allowed_mentions`` Discord parses everything (and pings the replied-to
    author); with it, only the ``parse`` types plus explicitly listed ids are pinged
    and the replied user only when ``replied_user`` is true.

    Args:
        content: Message content.
        allowed_mentions: The request's allowed_mentions object, or ``None``.
        known_users: Ids of users that exist.
        roles: Guild role id -> mentionable.
        can_mention_everyone: Whether the author has Mention Everyone.
        replied_user_id: Author of the referenced message for replies.

    Returns:
        The resolved mentions.
    """
    if allowed_mentions is None:
        parse = {"users", "roles", "everyone"}
        user_list: list[int] | None = None
        role_list: list[int] | None = None
        replied = True
    else:
        parse = set(allowed_mentions.get("parse") or [])
        user_list = [int(u) for u in allowed_mentions.get("users") or []]
        role_list = [int(r) for r in allowed_mentions.get("roles") or []]
        replied = bool(allowed_mentions.get("replied_user", False))
    in_content_users = {int(m) for m in USER_MENTION.findall(content)} & set(known_users)
    in_content_roles = {int(m) for m in ROLE_MENTION.findall(content)} & set(roles)
    users = in_content_users if "users" in parse else in_content_users & set(user_list or [])
    if replied and replied_user_id is not None:
        users.add(replied_user_id)
    allowed_roles = (
        in_content_roles if "roles" in parse else in_content_roles & set(role_list or [])
    )
    pinged_roles = {r for r in allowed_roles if roles[r] or can_mention_everyone}
    everyone = (
        "everyone" in parse and can_mention_everyone and bool(EVERYONE_MENTION.search(content))
    )
    return Mentions(frozenset(users), frozenset(pinged_roles), everyone)
