"""Persistent storage: one SQLite file, migrated at start-up; all SQL lives in ``database``."""

from bot.storage.database import UNSET, LimitUpdate, SchemaTooNewError, Store, Transaction
from bot.storage.models import (
    Charge,
    ChargeAnomaly,
    DeliveryRoute,
    GuildSettings,
    Job,
    JobStatus,
    Kind,
    NewJob,
    Reservation,
    UsageRow,
)

__all__ = [
    "UNSET",
    "Charge",
    "ChargeAnomaly",
    "DeliveryRoute",
    "GuildSettings",
    "Job",
    "JobStatus",
    "Kind",
    "LimitUpdate",
    "NewJob",
    "Reservation",
    "SchemaTooNewError",
    "Store",
    "Transaction",
    "UsageRow",
]
