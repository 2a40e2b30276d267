"""Persistent storage: the engine-neutral interface (``repositories``) and its implementation.

Services depend on :class:`Database` and the repositories' Protocols only. One implementation
serves both engines (SQLite, the default, and PostgreSQL): the repositories of ``repos`` over
``engine``, put together by ``database``, the schema in ``schema`` and ``migrations``; rows are
the dataclasses of ``models``; money conversion for the columns is in ``money``.
"""

from bot.storage.models import (
    TASK_ID_REUSED,
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
    "TASK_ID_REUSED",
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
