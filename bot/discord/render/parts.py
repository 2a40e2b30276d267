"""What one Discord message is made of, and who it may ping."""

from __future__ import annotations

import io
from dataclasses import dataclass, field, replace
from typing import Any

import discord

from bot.discord.render import limits
from bot.discord.render.text import truncate

NO_PINGS = discord.AllowedMentions.none()
"""Allowed mentions that ping nobody: for anything echoing a prompt or a model's output."""
CARD_LINK_ROWS = 3
"""Rows of link buttons under a card: with the actions, 37 of Discord's 40 components."""
ACTION_ROWS = 2
"""Rows of action buttons at most (a result's: the first row, then Enhance)."""
DANGER_PREFIX = "gb:delete:"
"""Custom ids of destructive buttons start so; they are drawn red."""


def ping_only(user_id: int) -> discord.AllowedMentions:
    """Allowed mentions that can ping ``user_id`` and nobody else (no roles, no @everyone).

    Even a mention of someone else inside the same content (say, from a service's error text)
    stays silent, as Discord pings only the users listed.
    """
    return discord.AllowedMentions(
        everyone=False, users=[discord.Object(id=user_id)], roles=False, replied_user=False
    )


@dataclass(frozen=True)
class Select:
    """A restart-safe select menu under a message (answered by a ``DynamicItem``).

    Attributes:
        custom_id: its custom id (at most 100 characters).
        options: ``(label, value)`` pairs, at most 25.
        chosen: the value shown as chosen; None for none.
        placeholder: the text shown while nothing is chosen; None for Discord's.
    """

    custom_id: str
    options: tuple[tuple[str, str], ...]
    chosen: str | None = None
    placeholder: str | None = None

    def item(self) -> discord.ui.Select[Any]:
        """The select as a discord.py item, built on each call."""
        return discord.ui.Select(
            custom_id=self.custom_id,
            placeholder=None if self.placeholder is None else truncate(self.placeholder, 150),
            options=[
                discord.SelectOption(
                    label=truncate(label, 100), value=value, default=value == self.chosen
                )
                for label, value in self.options[:25]
            ],
        )


@dataclass(frozen=True)
class MessageParts:
    """The parts of one message, built without a bot or an event loop.

    Limits (Discord developer docs): content 2000 characters, 10 embeds and 6000 embed
    characters per message, 25 link buttons (5 rows of 5), 10 files. The render functions
    respect them; :meth:`kwargs` does not check them again.

    A message with a :class:`Card` is sent in Components V2 and its content and embeds are
    the fallback form (:meth:`legacy`), for when Discord refuses the card.

    Attributes:
        content: the message text; None for none.
        embeds: the embeds, at most 10.
        link_buttons: ``(label, url)`` pairs shown as link buttons, at most 25.
        files: ``(filename, data)`` pairs sent as attachments, at most 10.
        action_buttons: ``(label, custom_id)`` pairs of restart-safe buttons, answered by the
            ``discord.ui.DynamicItem`` registered for their custom id (``cogs/results.py``);
            at most 10, five to a row, in the last rows.
        allowed_mentions: who the message may ping; nobody unless stated.
        card: the Components V2 form of the message; None sends content and embeds.
        select: a select menu above the action buttons; None for none.
    """

    content: str | None = None
    embeds: tuple[discord.Embed, ...] = ()
    link_buttons: tuple[tuple[str, str], ...] = ()
    files: tuple[tuple[str, bytes], ...] = ()
    action_buttons: tuple[tuple[str, str], ...] = ()
    allowed_mentions: discord.AllowedMentions = NO_PINGS
    card: Card | None = None
    select: Select | None = None

    def legacy(self) -> MessageParts:
        """The same message without its Components V2 card: content, embeds and buttons."""
        return replace(self, card=None)

    def view(self) -> discord.ui.view.BaseView | None:
        """A view holding the link buttons, five to a row; None when there are none.

        Built on each call: a view belongs to one message, and discord.py ties it to the
        running event loop, which pure render code does not have.
        """
        if self.card is not None:
            return self.card.layout(self.link_buttons, self.action_buttons, self.select)
        if not self.link_buttons and not self.action_buttons and self.select is None:
            return None
        view = _SentView(timeout=None)
        actions = self.action_buttons[: ACTION_ROWS * limits.BUTTONS_PER_ROW]
        action_rows = -(-len(actions) // limits.BUTTONS_PER_ROW)
        # The actions take the last rows when there are any, the select the row above.
        reserved = action_rows + (1 if self.select is not None else 0)
        room = limits.BUTTONS - limits.BUTTONS_PER_ROW * reserved
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
        if self.select is not None:
            select = self.select.item()
            select.row = row
            view.add_item(select)
            row += 1
        for index, (label, custom_id) in enumerate(actions):
            danger = custom_id.startswith(DANGER_PREFIX)
            view.add_item(
                discord.ui.Button(
                    label=truncate(label, limits.BUTTON_LABEL),
                    custom_id=custom_id,
                    style=discord.ButtonStyle.danger if danger else discord.ButtonStyle.secondary,
                    row=row + index // limits.BUTTONS_PER_ROW,
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
        if self.card is not None:
            # Discord refuses content and embeds beside IS_COMPONENTS_V2, which discord.py
            # sets for a LayoutView.
            out["view"] = self.view()
            if self.files:
                out["files"] = self.discord_files()
            return out
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
        ``attachments`` (the edit methods have no ``files``), replacing the old ones. A card
        clears the content and embeds, which turns a message first sent in the old form into
        a Components V2 one (Discord allows setting the flag by an edit, never removing it).
        """
        return {
            "content": None if self.card is not None else self.content,
            "embeds": [] if self.card is not None else list(self.embeds),
            "view": self.view(),
            "attachments": self.discord_files(),
            "allowed_mentions": self.allowed_mentions,
        }


@dataclass(frozen=True)
class Card:
    """A Components V2 card: one container with an accent colour, texts, media and buttons.

    Limits (Discord developer docs, "Component reference"): a message flagged
    ``IS_COMPONENTS_V2`` (1 << 15) has no content or embeds, at most 40 components counting
    nested ones, and at most 4000 characters across its text displays; a media gallery holds
    1 to 10 items, each a URL or ``attachment://<file name>``. The render functions respect
    them: a card holds at most 1 + 3 texts + 1 gallery + 2 notes, then 3 rows of 5 link
    buttons (:data:`CARD_LINK_ROWS`) and a row of 5 actions: 31 components.

    Attributes:
        accent: the container's accent colour, a 24-bit RGB integer.
        texts: the text displays above the media, markdown.
        media: ``(url, description)`` items of the media gallery, at most 10; none for none.
        notes: the text displays below the media (file names, notes).
        spoiler: the media are blurred until clicked (safety checking's spoilers).
    """

    accent: int
    texts: tuple[str, ...]
    media: tuple[tuple[str, str], ...] = ()
    notes: tuple[str, ...] = field(default=())
    spoiler: bool = False

    def layout(
        self,
        links: tuple[tuple[str, str], ...],
        actions: tuple[tuple[str, str], ...],
        select: Select | None = None,
    ) -> discord.ui.LayoutView:
        """The layout view: the container, then a row of link buttons and a row of actions.

        Built on each call, like :meth:`MessageParts.view`, and never stored by discord.py.
        """
        container: discord.ui.Container[discord.ui.LayoutView] = discord.ui.Container(
            accent_colour=self.accent
        )
        for text in self.texts:
            container.add_item(discord.ui.TextDisplay(text))
        if self.media:
            container.add_item(
                discord.ui.MediaGallery(
                    *(
                        discord.MediaGalleryItem(
                            url, description=truncate(about, 256) or None, spoiler=self.spoiler
                        )
                        for url, about in self.media[: limits.FILES_PER_MESSAGE]
                    )
                )
            )
        for note in self.notes:
            container.add_item(discord.ui.TextDisplay(note))
        view = _SentLayout(timeout=None)
        view.add_item(container)
        link_buttons = [
            discord.ui.Button[discord.ui.LayoutView](
                label=truncate(label, limits.BUTTON_LABEL), url=url
            )
            for label, url in links[: CARD_LINK_ROWS * limits.BUTTONS_PER_ROW]
        ]
        link_rows = [
            link_buttons[start : start + limits.BUTTONS_PER_ROW]
            for start in range(0, len(link_buttons), limits.BUTTONS_PER_ROW)
        ]
        action_buttons = [
            discord.ui.Button[discord.ui.LayoutView](
                label=truncate(label, limits.BUTTON_LABEL),
                custom_id=custom_id,
                style=discord.ButtonStyle.danger
                if custom_id.startswith(DANGER_PREFIX)
                else discord.ButtonStyle.secondary,
            )
            for label, custom_id in actions[: ACTION_ROWS * limits.BUTTONS_PER_ROW]
        ]
        for buttons in link_rows:
            view.add_item(discord.ui.ActionRow(*buttons))
        if select is not None:
            view.add_item(discord.ui.ActionRow(select.item()))
        for start in range(0, len(action_buttons), limits.BUTTONS_PER_ROW):
            view.add_item(
                discord.ui.ActionRow(*action_buttons[start : start + limits.BUTTONS_PER_ROW])
            )
        return view

    def text(self) -> str:
        """All the card's text, in order (for length checks and logs)."""
        return "\n".join((*self.texts, *self.notes))


class _SentLayout(discord.ui.LayoutView):
    """A layout view that is only drawn, like :class:`_SentView`."""

    def is_dispatchable(self) -> bool:
        """Never stored by discord.py (see :class:`_SentView`)."""
        return False


class _SentView(discord.ui.View):
    """A view that is only drawn: discord.py does not keep it in memory after sending.

    Link buttons send no interaction, and action buttons are answered by the
    ``discord.ui.DynamicItem`` matching their custom id, after any restart; keeping each sent
    view in the view store would only grow memory with every result.
    """

    def is_dispatchable(self) -> bool:
        """Never stored by discord.py (see the class docstring)."""
        return False
