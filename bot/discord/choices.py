"""Buttons whose state lives in this process: Cancel, confirmations, pages.

They are a queued request's Cancel, a price to confirm, a summary to confirm, a list's pages.

Why not a plain ``discord.ui.View``: discord.py dispatches a view's buttons only once the HTTP
call that showed them has returned (it stores the view after that call), while Discord
delivers a click on the gateway, another connection. A member quick to click, or an event loop
busy for a moment, has the click read first: discord.py drops it, and the member sees "This
interaction failed" under a button that was on screen. These buttons are one
``DynamicItem`` (:class:`ChoiceButton`), whose template is registered at start-up, so a click
is dispatched whatever the order; the state it acts on is found in :class:`OpenChoices` by the
token in its custom id, registered before the message is sent.

A click on a choice this process no longer holds (it expired, or the bot restarted) is
answered ephemerally (:data:`EXPIRED`); so is a click by anyone but the member it was shown
to (:data:`NOT_YOURS`).
"""

from __future__ import annotations

import asyncio
import re
import secrets
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Protocol

import discord

from bot.discord.tree import admit, answer_error, send_ephemeral
from bot.i18n import N_, _
from bot.services.generation import Requester

CHOICE_TEMPLATE = r"choice:(?P<token>[0-9a-f]{16}):(?P<option>[a-z]{1,16})"
"""A choice button's custom id: the choice's token and the option the button stands for."""

EXPIRED = N_("These buttons have expired; run the command again.")
NOT_YOURS = N_("Only the member who asked can use these buttons.")


class PendingChoice(Protocol):
    """What a shown choice does when one of its buttons is pressed (in :class:`OpenChoices`)."""

    @property
    def owner_id(self) -> int:
        """The only member who may press its buttons."""

    def admits(self, option: str) -> bool:
        """Whether ``option`` starts work, so must pass the admission guard first.

        (:func:`bot.discord.tree.admit`: refused during a shutdown); a Cancel only stops work
        and is honoured always.
        """

    async def choose(self, interaction: discord.Interaction[Any], option: str) -> bool:
        """Act on the owner's press of ``option``; errors are answered with their sentence.

        Returns:
            Whether the choice stays open for more presses (a pager's); else it is closed.
        """


class OneChoice:
    """A :class:`PendingChoice` the first press closes, shown to the member who asked.

    A price to confirm (``ConfirmVideo``), Enhance's choice (``EnhanceChoice``): only
    ``who`` may press; every option but :attr:`CANCEL` starts work, so is admitted only while
    the bot is not shutting down; the first press wins, and a later one (a double click, a
    second tab) is told :meth:`already` and changes nothing.

    Subclasses give :meth:`chosen` (the first press's work) and :meth:`already`.

    Args:
        who: the member who asked, and where.
    """

    CANCEL = "cancel"

    def __init__(self, who: Requester) -> None:
        self.who = who
        self._chosen: str | None = None

    @property
    def owner_id(self) -> int:
        """The member who asked."""
        return self.who.user_id

    def admits(self, option: str) -> bool:
        """Every option but Cancel starts work: not during a shutdown; Cancel always."""
        return option != self.CANCEL

    async def choose(self, interaction: discord.Interaction[Any], option: str) -> bool:
        """Act on the first press (:meth:`chosen`); tell a later one :meth:`already`.

        Returns:
            False: the choice closes with its first press.
        """
        if self._chosen is not None:
            await send_ephemeral(interaction, self.already(self._chosen))
            return False
        self._chosen = option
        await self.chosen(interaction, option)
        return False

    async def chosen(self, interaction: discord.Interaction[Any], option: str) -> None:
        """Do what the first press of ``option`` asks."""
        raise NotImplementedError

    def already(self, option: str) -> str:
        """The sentence for a press after the first, which chose ``option``."""
        raise NotImplementedError


class OpenChoices:
    """The choices shown and not yet closed, by token; this process's only (never stored)."""

    def __init__(self) -> None:
        self._open: dict[str, PendingChoice] = {}

    def open(self, choice: PendingChoice, timeout: float) -> str:
        """Hold ``choice`` for ``timeout`` seconds at most; return its token for the buttons.

        Must be called from the event loop (the expiry is a timer on it).
        """
        token = secrets.token_hex(8)
        self._open[token] = choice
        asyncio.get_running_loop().call_later(timeout, self._open.pop, token, None)
        return token

    def get(self, token: str) -> PendingChoice | None:
        """The choice ``token`` names; None once it expired or was closed."""
        return self._open.get(token)

    def close(self, token: str) -> None:
        """Forget the choice: its buttons answer :data:`EXPIRED` from now on."""
        self._open.pop(token, None)


@dataclass(frozen=True, slots=True)
class ChoiceOption:
    """One button of a choice: ``option`` is what :meth:`PendingChoice.choose` is told."""

    option: str
    label: str
    style: discord.ButtonStyle = discord.ButtonStyle.secondary
    disabled: bool = False


class ChoiceButton(
    discord.ui.DynamicItem[discord.ui.Button[discord.ui.View]], template=CHOICE_TEMPLATE
):
    """A button of an open choice (see the module's docstring), registered at start-up."""

    def __init__(self, token: str, option: ChoiceOption) -> None:
        super().__init__(
            discord.ui.Button(
                custom_id=f"choice:{token}:{option.option}",
                label=option.label,
                style=option.style,
                disabled=option.disabled,
            )
        )
        self.token = token
        self.option = option.option

    @classmethod
    async def from_custom_id(  # type: ignore[override]
        cls,
        interaction: discord.Interaction[Any],
        item: discord.ui.Button[discord.ui.View],
        match: re.Match[str],
    ) -> ChoiceButton:
        """Rebuild the button from its custom id (discord.py calls this on every click)."""
        return cls(match["token"], ChoiceOption(match["option"], item.label or ""))

    async def callback(self, interaction: discord.Interaction[Any]) -> None:
        """Hand the press to its choice, once the presser and the admission guard allow it."""
        choices: OpenChoices = interaction.client.choices
        choice = choices.get(self.token)
        if choice is None:
            await send_ephemeral(interaction, _(EXPIRED))
            return
        if interaction.user.id != choice.owner_id:
            await send_ephemeral(interaction, _(NOT_YOURS))
            return
        # Counted as in flight only once it is sure to run (tree.admit's rule).
        if choice.admits(self.option) and not await admit(interaction):
            return
        keep = False
        try:
            keep = await choice.choose(interaction, self.option)
        except Exception as exc:
            await answer_error(interaction, exc)
        finally:
            if not keep:
                choices.close(self.token)


def choice_view(token: str, options: Sequence[ChoiceOption]) -> discord.ui.View:
    """The buttons of choice ``token``, in one row, as a view to send with a message.

    The view holds nothing discord.py must keep: every button is a :class:`ChoiceButton`.
    """
    view = discord.ui.View(timeout=None)
    for option in options:
        view.add_item(ChoiceButton(token, option))
    return view


PAGES_SECONDS = 600.0
"""How long a list's pages can be turned."""


class Pager:
    """Previous / Next over a list of embeds, for the member who asked (a :class:`PendingChoice`).

    Args:
        pages: the embeds, one per page (two or more).
        owner_id: the member who may turn the pages.
        choices: where the pager is held for :data:`PAGES_SECONDS`.
    """

    def __init__(self, pages: Sequence[discord.Embed], owner_id: int, choices: OpenChoices) -> None:
        self.pages = list(pages)
        self.index = 0
        self._owner_id = owner_id
        self._token = choices.open(self, PAGES_SECONDS)

    @property
    def owner_id(self) -> int:
        """The member who asked."""
        return self._owner_id

    def admits(self, option: str) -> bool:
        """Turning a page is an entry point like any other: refused during a shutdown."""
        return True

    def view(self) -> discord.ui.View:
        """The buttons for the page shown: Previous and Next, each disabled at its end."""
        return choice_view(
            self._token,
            [
                ChoiceOption("previous", "Previous", disabled=self.index == 0),
                ChoiceOption(
                    "next",
                    "Next",
                    discord.ButtonStyle.primary,
                    disabled=self.index >= len(self.pages) - 1,
                ),
            ],
        )

    async def choose(self, interaction: discord.Interaction[Any], option: str) -> bool:
        """Show the previous or the next page; the pager stays open."""
        step = -1 if option == "previous" else 1
        self.index = max(0, min(len(self.pages) - 1, self.index + step))
        await interaction.response.edit_message(embed=self.pages[self.index], view=self.view())
        return True
