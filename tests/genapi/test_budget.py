"""How a key's budget is shared between users and polls, on a simulated clock.

The rules are pure functions of the window's record, so these tests drive time themselves:
a step loop sends users' requests when :meth:`BudgetRules.interactive_delay` allows and polls
whenever :meth:`BudgetRules.background_delay` does, as a poller with endless due jobs would.
"""

from dataclasses import dataclass, field

import pytest

from bot.genapi.budget import BudgetRules

RULES = BudgetRules()  # 30 per 61 s (60 s + 1 s margin), 2 slots for users, floor 10 s
STEP = 0.05


@dataclass
class Run:
    sent: list[tuple[float, bool]] = field(default_factory=list)
    waits: list[float] = field(default_factory=list)

    @property
    def polls(self) -> list[float]:
        return [at for at, background in self.sent if background]

    def most_in_a_window(self) -> int:
        times = sorted(at for at, _ in self.sent)
        return max(
            (sum(1 for t in times if start <= t < start + RULES.window) for start in times),
            default=0,
        )


def drive(users: list[float], until: float, *, polls_wanted: bool = True) -> Run:
    """Users arrive at ``users`` (seconds); polls are always wanted; step until ``until``."""
    run = Run()
    queue = sorted(users)
    t = 0.0
    while t < until:
        live = [(at, bg) for at, bg in run.sent if at > t - RULES.window]
        # As the limiter's queue does: a poll owed its floor goes before waiting users.
        if polls_wanted and RULES.floor_due(t, live) and RULES.background_delay(t, live) <= 0:
            run.sent.append((t, True))
            live.append((t, True))
        while queue and queue[0] <= t and RULES.interactive_delay(t, live) <= 0:
            run.waits.append(t - queue.pop(0))
            run.sent.append((t, False))
            live.append((t, False))
        if polls_wanted and RULES.background_delay(t, live) <= 0:
            run.sent.append((t, True))
        t = round(t + STEP, 6)
    return run


def test_polls_never_push_the_key_past_its_limit() -> None:
    run = drive([5.0 * k for k in range(60)], 300.0)
    assert run.most_in_a_window() <= RULES.limit


def test_polls_use_the_whole_budget_when_nobody_uses_the_bot() -> None:
    run = drive([], 61.0 * 4)
    # After the first window, every slot but the one kept for a user who may come.
    last_window = [at for at in run.polls if at > 61.0 * 3]
    assert len(last_window) >= RULES.limit - RULES.idle_reserve - 1


def test_a_user_never_waits_more_than_two_seconds_behind_polls() -> None:
    # A steady trickle (one /text every 5 s) while polls take everything they may.
    run = drive([20.0 + 5.0 * k for k in range(50)], 300.0)
    assert len(run.waits) == 50
    assert max(run.waits) <= RULES.user_wait + STEP


def test_a_user_arriving_while_the_bot_was_idle_gets_a_slot_within_two_seconds() -> None:
    for arrival in (70.0, 95.5, 130.25):
        run = drive([arrival], 200.0)
        assert run.waits[0] <= RULES.user_wait + STEP


def test_two_slots_are_kept_for_active_users() -> None:
    # A user request 5 s ago: polls stop two slots short of the limit.
    sent = [(10.0 + i, True) for i in range(26)] + [(55.0, False)]
    assert RULES.background_delay(60.0, sent) > 0
    assert RULES.interactive_delay(60.0, sent) <= 0
    # Nobody came for a while: the second reserved slot is lent to polls.
    idle = [(10.0 + i, True) for i in range(27)]
    assert RULES.background_delay(60.0, idle) <= 0


def test_polls_keep_a_floor_however_busy_the_users() -> None:
    # Users alone would fill the key (40 a minute): polls still get a slot per 10 s of window.
    users = [0.5 + 1.5 * k for k in range(400)]
    run = drive(users, 600.0)
    for start in range(61, 540, 7):
        in_window = [at for at in run.polls if start <= at < start + RULES.window]
        assert len(in_window) >= RULES.window // RULES.floor - 1
    assert run.most_in_a_window() <= RULES.limit


@pytest.mark.parametrize("pace", [3.0, 5.0, 10.0])
def test_polls_get_what_users_leave(pace: float) -> None:
    run = drive([pace * k for k in range(int(600 / pace))], 600.0)
    per_window = len([at for at in run.polls if at > 300.0]) / (300.0 / RULES.window)
    users_per_window = RULES.window / pace
    assert per_window >= RULES.limit - users_per_window - RULES.reserve - 3
