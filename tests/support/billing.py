"""Billing's test helpers: the settings of a server on the defaults, and a charge for a hold."""

from __future__ import annotations

from typing import Any

from pydantic import SecretStr

from bot.clock import ManualClock
from bot.config import Settings
from bot.domain import Charge, Reservation

GUILD = 100
"""The guild the billing tests charge."""


def settings(**overrides: Any) -> Settings:
    values: dict[str, Any] = {
        "discord_token": SecretStr("token"),
        "default_guild_monthly_budget_cents": None,
        "default_user_daily_budget_cents": None,
        "default_max_pending_videos_per_user": 3,
        "default_max_pending_videos_per_guild": 20,
    }
    values.update(overrides)
    return Settings(_env_file=None, **values)


def charge_for(
    reservation: Reservation,
    cost: int,
    clock: ManualClock,
    *,
    task_id: str | None = None,
    remaining: int = 10_000,
    key: str = "fp-default",
) -> Charge:
    return Charge(
        guild_id=reservation.guild_id,
        channel_id=7,
        user_id=reservation.user_id,
        kind=reservation.kind,
        model=reservation.model,
        task_id=task_id,
        cost_cents=cost,
        remaining_credits_cents=remaining,
        key_fingerprint=key,
        at=clock.time(),
    )
