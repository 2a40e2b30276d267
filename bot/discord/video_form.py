"""The parts the video forms share: their models priced, and the duration select.

``/video-advanced`` and Continue list video models the same way (cheapest first, at their
default duration) and offer the same durations (every length any listed model takes).
"""

from __future__ import annotations

from decimal import Decimal
from typing import Final, TypeVar

import discord

from bot.genapi.wire import VideoModel
from bot.i18n import _, number
from bot.services.billing import video_cost_cents
from bot.services.generation import default_duration

MAX_SELECT_OPTIONS: Final = 25
"""Options in a select menu (Discord: at most 25)."""

FormT = TypeVar("FormT", bound=discord.ui.Modal)


def priced_models(models: tuple[VideoModel, ...]) -> list[tuple[Decimal | None, VideoModel]]:
    """``models`` with their price at their default duration, cheapest first (at most 25).

    A model whose price is unknown (None) comes last.
    """
    priced = sorted(
        ((video_cost_cents(m.cost_cents_per_5s, default_duration(m)), m) for m in models),
        key=lambda p: (p[0] is None, p[0] or 0),
    )
    return priced[:MAX_SELECT_OPTIONS]


def add_duration_select(
    form: FormT, priced: list[tuple[Decimal | None, VideoModel]]
) -> discord.ui.Select[FormT] | None:
    """Add an optional select of every length the listed models take, seconds; None if none.

    Left empty, the chosen model's own default applies.
    """
    durations = sorted({d for _, m in priced for d in m.durations})[:MAX_SELECT_OPTIONS]
    if not durations:
        return None
    select: discord.ui.Select[FormT] = discord.ui.Select(
        custom_id="duration",
        required=False,
        min_values=0,
        placeholder=_("The model's default"),
        options=[
            discord.SelectOption(label=_("{seconds} seconds", seconds=number(d)), value=f"{d:g}")
            for d in durations
        ],
    )
    form.add_item(
        discord.ui.Label(
            text=_("Duration"),
            description=_("Not every model offers every length."),
            component=select,
        )
    )
    return select
