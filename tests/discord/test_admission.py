"""One admission guard for every entry point (command, button, modal).

During the shutdown grace nothing new may start a paid call that the shutdown would not wait
for; the end-to-end proof is ``tests/e2e/test_shutdown_e2e.py``. Here: every modal and
dynamic item of the bot passes :func:`bot.discord.tree.admit`, so a new one cannot forget it.
"""

from __future__ import annotations

import importlib
import pkgutil
from decimal import Decimal
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import discord
import pytest

import cogs
from bot.discord.tree import RESTARTING, AdmittedModal

MODULES = [
    "bot.discord.request_flows",
    "bot.discord.choices",
    "bot.discord.queue_status",
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
    return SimpleNamespace(
        client=client,
        response=response,
        extras={},
        sent=sent,
        type=discord.InteractionType.component,
        guild_id=None,
    )


def test_every_modal_passes_the_admission_guard_and_no_view_holds_buttons() -> None:
    modals = [m for m in ours(discord.ui.Modal) if m is not AdmittedModal]
    assert {m.__name__ for m in modals} >= {"AnimateModal", "EditModal", "VideoModal"}
    assert [m for m in modals if not issubclass(m, AdmittedModal)] == []
    # Buttons are DynamicItems (each admits its clicks below): a View's would be dispatched
    # only once the call that showed them returned (bot.discord.choices).
    views = [v for v in ours(discord.ui.view.BaseView) if not issubclass(v, discord.ui.Modal)]
    assert {v.__name__ for v in views} <= {"_SentView", "_SentLayout"}  # link buttons only


def confirm_video() -> Any:
    from bot.discord.request_flows import ConfirmVideo
    from bot.services.generation import Requester, VideoOptions

    return ConfirmVideo(Requester(1, 2, 5), VideoOptions("a fox", "m"))


@pytest.mark.parametrize("kind", ["modal", "choice", "button"])
async def test_an_interaction_during_shutdown_is_refused_politely(kind: str) -> None:
    from bot.discord.choices import ChoiceButton, ChoiceOption, OpenChoices
    from cogs.results import ResultAction

    interaction = refused_interaction()
    interaction.user = SimpleNamespace(id=5)
    if kind == "modal":
        allowed = await AdmittedModal(title="x").interaction_check(interaction)
    elif kind == "choice":
        choices = OpenChoices()
        interaction.client.choices = choices
        confirm = confirm_video()
        token = choices.open(confirm, 60)
        await ChoiceButton(token, ChoiceOption(confirm.GENERATE, "Generate")).callback(interaction)
        allowed = confirm._chosen is not None
    else:
        from bot.discord.draft_flow import FinalButton
        from cogs.chat import SummariseButton
        from cogs.safety import ReportSelect, ReviewAction
        from cogs.sequences import SequenceAction, TakeSelect
        from cogs.showcase import ShowcaseAction

        # Every restart-safe button (and select) of ours: each admits its clicks like a command.
        buttons = [
            ResultAction("again", "r1"),
            SummariseButton(1),
            SequenceAction("join", "j1"),
            TakeSelect("j1"),
            ShowcaseAction("vote", "s1"),
            ReviewAction("approve", "j1"),
            ReportSelect("j1"),
            FinalButton("final", "j1"),
        ]
        # ActionButton and ActionSelect are the bases the buttons and selects share (never
        # registered themselves); their admission is their subclasses', checked through them.
        bases = {"ChoiceButton", "ActionButton", "ActionSelect"}
        assert {type(b).__name__ for b in buttons} | bases == {
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


async def test_a_cancel_is_honoured_during_shutdown_and_only_for_who_asked() -> None:
    from bot.discord.choices import EXPIRED, NOT_YOURS, ChoiceButton, ChoiceOption, OpenChoices

    choices = OpenChoices()
    confirm = confirm_video()
    token = choices.open(confirm, 60)
    cancel = ChoiceButton(token, ChoiceOption(confirm.CANCEL, "Cancel"))

    someone_else = refused_interaction()
    someone_else.client.choices, someone_else.user = choices, SimpleNamespace(id=6)
    await cancel.callback(someone_else)
    assert [text for text, _ in someone_else.sent] == [NOT_YOURS]

    edits: list[dict[str, Any]] = []

    async def edit_message(**kwargs: Any) -> None:
        edits.append(kwargs)

    asker = refused_interaction()
    asker.client.choices, asker.user = choices, SimpleNamespace(id=5)
    asker.response.edit_message = edit_message
    await cancel.callback(asker)
    assert edits == [{"content": "Cancelled; nothing was charged.", "view": None}]
    assert asker.sent == []

    again = refused_interaction()
    again.client.choices, again.user = choices, SimpleNamespace(id=5)
    await cancel.callback(again)  # the choice closed with the first press
    assert [text for text, _ in again.sent] == [EXPIRED]


def test_every_form_is_shown_through_admitted_modal_show() -> None:
    # A form sent otherwise is registered too late (bot.discord.choices' docstring) and, not
    # known to OpenForms, its submission would also be answered "no longer open".
    root = Path(__file__).resolve().parents[2]
    senders = [
        str(path.relative_to(root))
        for package in ("bot", "cogs")
        for path in (root / package).rglob("*.py")
        if ".send_modal(" in path.read_text(encoding="utf-8")
    ]
    assert senders == ["bot/discord/tree.py"]


async def test_a_price_to_confirm_and_enhances_choice_close_with_their_first_press(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from bot.discord import choices
    from bot.discord.enhance_flow import ALREADY_CHOSEN, EnhanceChoice
    from bot.discord.request_flows import ALREADY_GENERATING
    from bot.services.creative import RewriteRefused
    from bot.services.generation import ImageOptions, Requester

    told: list[str] = []

    async def send_ephemeral(interaction: Any, text: str) -> None:
        told.append(text)

    monkeypatch.setattr(choices, "send_ephemeral", send_ephemeral)
    who = Requester(1, 2, 5)
    enhance = EnhanceChoice(
        who, ImageOptions("a fox"), RewriteRefused("a fox", Decimal(1), None), takes=1
    )
    for choice, first, again in (
        (confirm_video(), "generate", ALREADY_GENERATING),
        (enhance, "keep", ALREADY_CHOSEN),
    ):
        assert isinstance(choice, choices.OneChoice) and choice.owner_id == 5
        assert choice.admits(first) and not choice.admits(choice.CANCEL)
        pressed: list[str] = []

        async def chosen(interaction: Any, option: str, pressed: list[str] = pressed) -> None:
            pressed.append(option)

        monkeypatch.setattr(choice, "chosen", chosen)
        assert await choice.choose(SimpleNamespace(), first) is False
        assert await choice.choose(SimpleNamespace(), choice.CANCEL) is False  # a double click
        assert pressed == [first] and told[-1] == again


@pytest.mark.parametrize("custom_id", ["gb:report:j12", "gb:report:r345", "gb:take:j67"])
async def test_the_selects_understand_the_custom_ids_already_sent(custom_id: str) -> None:
    """A select sent before a restart (or before a release) still reaches its callback."""
    from cogs.safety import ReportSelect
    from cogs.sequences import TakeSelect

    [select] = [
        s
        for s in (ReportSelect, TakeSelect)
        if s.__discord_ui_compiled_template__.fullmatch(custom_id)
    ]
    match = select.__discord_ui_compiled_template__.fullmatch(custom_id)
    assert match is not None
    sent = discord.ui.Select[discord.ui.View](custom_id=custom_id)
    rebuilt = await select.from_custom_id(SimpleNamespace(), sent, match)
    assert (rebuilt.custom_id, rebuilt.ref) == (custom_id, custom_id.rsplit(":", 1)[1])
    chosen = SimpleNamespace(data={"values": ["j68"]})
    assert (rebuilt.chosen(chosen), rebuilt.chosen(SimpleNamespace(data={}))) == ("j68", "")
