"""What one Discord message is made of, and who it may ping."""

from __future__ import annotations

import io
from dataclasses import dataclass
from typing import Any

import discord

from bot.render import limits
from bot.render.text import truncate

NO_PINGS = discord.AllowedMentions.none()
DANGER_PREFIX = "gb:delete:"
"""Custom ids of destructive buttons start so; they are drawn red."""
"""Allowed mentions that ping nobody: for anything echoing a prompt or a model's output."""


def ping_only(user_id: int) -> discord.AllowedMentions:
    """Allowed mentions that can ping ``user_id`` and nobody else (no roles, no @everyone).

    Even a mention of someone else inside the same content (say, from a service's error text)
    stays silent, as Discord pings only the users listed.
    """
    return discord.AllowedMentions(
        everyone=False, users=[discord.Object(id=user_id)], roles=False, replied_user=False
    )


@dataclass(frozen=True)
class MessageParts:
    """The parts of one message, built without a bot or an event loop.

    Limits (Discord developer docs): content 2000 characters, 10 embeds and 6000 embed
    characters per message, 25 link buttons (5 rows of 5), 10 files. The render functions
    respect them; :meth:`kwargs` does not check them again.

    Attributes:
        content: the message text; None for none.
        embeds: the embeds, at most 10.
        link_buttons: ``(label, url)`` pairs shown as link buttons, at most 25.
        files: ``(filename, data)`` pairs sent as attachments, at most 10.
        action_buttons: ``(label, custom_id)`` pairs of restart-safe buttons, answered by the
            ``discord.ui.DynamicItem`` registered for their custom id (``cogs/cards.py``);
            at most 5, in the last row.
        allowed_mentions: who the message may ping; nobody unless stated.
    """

    content: str | None = None
    embeds: tuple[discord.Embed, ...] = ()
    link_buttons: tuple[tuple[str, str], ...] = ()
    files: tuple[tuple[str, bytes], ...] = ()
    action_buttons: tuple[tuple[str, str], ...] = ()
    allowed_mentions: discord.AllowedMentions = NO_PINGS

    def view(self) -> discord.ui.View | None:
        """A view holding the link buttons, five to a row; None when there are none.

        Built on each call: a view belongs to one message, and discord.py ties it to the
        running event loop, which pure render code does not have.
        """
        if not self.link_buttons and not self.action_buttons:
            return None
        view = _SentView(timeout=None)
        actions = self.action_buttons[: limits.BUTTONS_PER_ROW]
        # The actions take the last row when there are any.
        room = limits.BUTTONS - (limits.BUTTONS_PER_ROW if actions else 0)
        links = self.link_buttons[:room]
        for index, (label, url) in enumerate(links):
            view.add_item(
                discord.ui.Button(
                    label=truncate(label, limits.BUTTON_LABEL),
                    url=url,
                    row=index // limits.BUTTONS_PER_ROW,
                )
            )
        row = -(-len(links) // limits.BUTTONS_PER_ROW)
        for label, custom_id in actions:
            danger = custom_id.startswith(DANGER_PREFIX)
            view.add_item(
                discord.ui.Button(
                    label=truncate(label, limits.BUTTON_LABEL),
                    custom_id=custom_id,
                    style=discord.ButtonStyle.danger if danger else discord.ButtonStyle.secondary,
                    row=row,
                )
            )
        return view

    def discord_files(self) -> list[discord.File]:
        """Fresh :class:`discord.File` objects; a File is read once, so each send needs new."""
        return [discord.File(io.BytesIO(data), filename=name) for name, data in self.files]

    def kwargs(self) -> dict[str, Any]:
        """Keyword arguments for ``Messageable.send`` or ``Interaction.followup.send``.

        Parts that are empty are left out rather than passed as None: a webhook (and so an
        interaction followup) refuses ``view=None``.
        """
        out: dict[str, Any] = {"allowed_mentions": self.allowed_mentions}
        if self.content is not None:
            out["content"] = self.content
        if self.embeds:
            out["embeds"] = list(self.embeds)
        view = self.view()
        if view is not None:
            out["view"] = view
        if self.files:
            out["files"] = self.discord_files()
        return out

    def edit_kwargs(self) -> dict[str, Any]:
        """Keyword arguments for ``Message.edit`` (or ``edit_original_response``).

        Every part is passed, empty ones included, so the edit replaces the whole message: no
        content clears the text, no view removes old buttons, and files go in
        ``attachments`` (the edit methods have no ``files``), replacing the old ones.
        """
        return {
            "content": self.content,
            "embeds": list(self.embeds),
            "view": self.view(),
            "attachments": self.discord_files(),
            "allowed_mentions": self.allowed_mentions,
        }


class _SentView(discord.ui.View):
    """A view that is only drawn: discord.py does not keep it in memory after sending.

    Link buttons send no interaction, and action buttons are answered by the
    ``discord.ui.DynamicItem`` matching their custom id, after any restart; keeping each sent
    view in the view store would only grow memory with every result.
    """

    def is_dispatchable(self) -> bool:
        """Never stored by discord.py (see the class docstring)."""
        return False
