"""Persistent storage: the engine-neutral interface (``repositories``) and its engines.

Services depend on :class:`Database` and the repositories' Protocols only. The SQLite engine
(``sqlite``) is the default; rows are the dataclasses of ``models``; money conversion for the
columns is in ``money``.
"""

from bot.storage.models import (
    Charge,
    ChargeAnomaly,
    DeliveryRoute,
    GuildSettings,
    Job,
    JobStatus,
    Kind,
    NewJob,
    PollUpdate,
    Reservation,
    RetiredKey,
    UsageRow,
)
from bot.storage.repositories import (
    UNSET,
    ConstraintError,
    Database,
    GuildRepository,
    JobRepository,
    LedgerRepository,
    LimitUpdate,
    MetaRepository,
    Repositories,
    SchemaTooNewError,
    StorageError,
    StorageUnavailableError,
)

__all__ = [
    "UNSET",
    "Charge",
    "ChargeAnomaly",
    "ConstraintError",
    "Database",
    "DeliveryRoute",
    "GuildRepository",
    "GuildSettings",
    "Job",
    "JobRepository",
    "JobStatus",
    "Kind",
    "LedgerRepository",
    "LimitUpdate",
    "MetaRepository",
    "NewJob",
    "PollUpdate",
    "Repositories",
    "Reservation",
    "RetiredKey",
    "SchemaTooNewError",
    "StorageError",
    "StorageUnavailableError",
    "UsageRow",
]
