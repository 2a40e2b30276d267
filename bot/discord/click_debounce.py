"""One paid click at a time: the guard against a double click paying twice."""

from __future__ import annotations

from bot.clock import Clock
from bot.i18n import N_

CLICK_DEBOUNCE_SECONDS = 5.0
"""How long a member's click on a paid button of one message holds back their next click on
it, besides the time it runs (a double click made two paid requests)."""

SHOW_DEBOUNCE_SECONDS = 10.0
"""How long a member's Show result (or ``/jobs show``) of a job holds back their next one of
that job: each may download the result's files (:mod:`bot.discord.shown_files`)."""

JUST_SHOWN = N_(
    "You asked to see job #{job_id} a moment ago; it is shown there. Ask again in a few seconds."
)

ALREADY_RUNNING = N_(
    "Your first click on this is still being handled; this one was ignored (nothing charged)."
)


class ClickDebounce:
    """One paid click at a time per member, message and button, and none again for a few seconds.

    A double click reaches the bot as two interactions a few milliseconds apart; both would
    run and both be charged. The first claims ``(member, message, button)``; the same click
    again is refused while it runs and for ``seconds`` after it began (Again then Vary on one
    message are two requests the member meant). A guild's interactions all reach one gateway
    process (its shard), so memory is enough.

    Args:
        clock: the time source (seconds).
        seconds: the hold after a click began, seconds.
    """

    def __init__(self, clock: Clock, seconds: float = CLICK_DEBOUNCE_SECONDS) -> None:
        self._clock = clock
        self._seconds = seconds
        self._held: dict[tuple[int, int, str], tuple[float, bool]] = {}

    def claim(self, user_id: int, message_id: int, button: str = "") -> bool:
        """Claim a click; False while the member's previous same click still holds."""
        now = self._clock.monotonic()
        for key, (began, running) in list(self._held.items()):
            if not running and now - began >= self._seconds:
                del self._held[key]
        if (user_id, message_id, button) in self._held:
            return False
        self._held[(user_id, message_id, button)] = (now, True)
        return True

    def release(
        self, user_id: int, message_id: int, button: str = "", *, hold: bool = True
    ) -> None:
        """The claimed click finished.

        Args:
            user_id: the member.
            message_id: the message clicked.
            button: which of its buttons.
            hold: keep holding the same click for the rest of the few seconds; False for a
                click refused before any request was sent, which a retry cannot pay twice.
        """
        key = (user_id, message_id, button)
        held = self._held.pop(key, None)
        if held is not None and hold:
            self._held[key] = (held[0], False)
