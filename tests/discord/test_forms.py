"""Forms the bot holds: a submission of any other is answered, not dropped (tree.OpenForms)."""

from __future__ import annotations

from bot.clock import ManualClock
from bot.discord.tree import FORM_SECONDS, AdmittedModal, OpenForms


def test_a_form_is_open_for_its_time_and_unknown_ones_never() -> None:
    clock = ManualClock()
    forms = OpenForms(clock)
    forms.opened("a")
    clock.advance(FORM_SECONDS - 1)
    forms.opened("b")
    assert forms.is_open("a") and forms.is_open("b")
    assert not forms.is_open("never-shown")  # shown by an earlier process
    clock.advance(1)
    assert not forms.is_open("a")  # discord.py's timeout has dropped it too
    assert forms.is_open("b")


def test_forms_wait_as_long_as_the_bot_holds_them() -> None:
    assert AdmittedModal(title="x").timeout == FORM_SECONDS
