"""Issue 18, E2: one admission guard for every entry point (command, button, modal, view).

During the shutdown grace nothing new may start a paid call that the shutdown would not wait
for; the end-to-end proof is ``tests/e2e/test_shutdown_e2e.py``. Here: every view, modal and
dynamic item of the bot passes :func:`bot.discord.tree.admit`, so a new one cannot forget it.
"""

from __future__ import annotations

import importlib
import pkgutil
from decimal import Decimal
from types import SimpleNamespace
from typing import Any

import discord
import pytest

import cogs
from bot.discord.tree import RESTARTING, AdmittedModal, AdmittedView

MODULES = [
    "bot.discord.request_flows",
    *(f"cogs.{m.name}" for m in pkgutil.iter_modules(cogs.__path__)),
]


def ours(base: type) -> list[type]:
    """Every subclass of ``base`` defined in the bot's own modules."""
    for name in MODULES:
        importlib.import_module(name)
    found: list[type] = []
    stack: list[type] = list(base.__subclasses__())
    while stack:
        cls = stack.pop()
        stack.extend(cls.__subclasses__())
        if cls.__module__.split(".")[0] in ("bot", "cogs") and cls not in found:
            found.append(cls)
    return found


def refused_interaction() -> Any:
    """An interaction arriving during a shutdown: ``admit_command`` says no."""
    sent: list[tuple[str, dict[str, Any]]] = []

    async def send_message(text: str, **kwargs: Any) -> None:
        sent.append((text, kwargs))

    response = SimpleNamespace(is_done=lambda: False, send_message=send_message)
    client = SimpleNamespace(admit_command=lambda: False)
    return SimpleNamespace(client=client, response=response, extras={}, sent=sent)


def test_every_modal_and_view_passes_the_admission_guard() -> None:
    modals = [m for m in ours(discord.ui.Modal) if m is not AdmittedModal]
    views = [
        v
        for v in ours(discord.ui.View)
        if v is not AdmittedView
        and "_SentView" not in v.__qualname__  # never dispatched
        # A queued request's Cancel only stops spending: it must work during a shutdown too.
        and v.__qualname__ != "CancelView"
    ]
    assert {m.__name__ for m in modals} >= {"AnimateModal", "EditModal", "VideoModal"}
    assert "ConfirmView" in {v.__name__ for v in views}
    assert [m for m in modals if not issubclass(m, AdmittedModal)] == []
    assert [v for v in views if not issubclass(v, AdmittedView)] == []


@pytest.mark.parametrize("kind", ["modal", "view", "button"])
async def test_an_interaction_during_shutdown_is_refused_politely(kind: str) -> None:
    from bot.discord.request_flows import ConfirmView
    from bot.services.generation import Requester, VideoOptions
    from cogs.results import ResultAction

    interaction = refused_interaction()
    interaction.user = SimpleNamespace(id=5)
    if kind == "modal":
        allowed = await AdmittedModal(title="x").interaction_check(interaction)
    elif kind == "view":
        view = ConfirmView(Requester(1, 2, 5), VideoOptions("a fox", "m"), Decimal(100))
        allowed = await view.interaction_check(interaction)
    else:
        from cogs.chat import SummariseButton

        # Every restart-safe button of ours: each admits its clicks like a command.
        buttons = [ResultAction("again", "r1"), SummariseButton(1)]
        assert {type(b).__name__ for b in buttons} == {
            d.__name__ for d in ours(discord.ui.DynamicItem)
        }
        for button in buttons[1:]:
            clicked = refused_interaction()
            clicked.user = SimpleNamespace(id=5)
            assert await button.interaction_check(clicked) is False
            [(text, options)] = clicked.sent
            assert (text, options["ephemeral"]) == (RESTARTING, True)
        allowed = await buttons[0].interaction_check(interaction)
    assert allowed is False
    [(text, options)] = interaction.sent
    assert (text, options["ephemeral"]) == (RESTARTING, True)
