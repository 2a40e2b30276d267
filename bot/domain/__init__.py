"""The types every layer speaks: jobs, kinds, charges, tiers, guilds', members' settings.

Plain values (frozen dataclasses, enums) and the store's failures, by role: :mod:`.jobs`,
:mod:`.charges`, :mod:`.guilds`, :mod:`.policy`, :mod:`.conversations`, :mod:`.members`,
:mod:`.errors`. The domain imports nothing of ours (the standard library only), so storage,
services, jobs, the Discord adapter and the cogs all import it, and it none of them
(``tests/test_layout.py``).

Money is :class:`~decimal.Decimal` cents, exact, except the budgets admins set, which are whole
``int`` cents. Times are UTC epoch seconds (``float``). Ids of Discord objects are ``int``
snowflakes.
"""

from bot.domain.charges import (
    DRAFT,
    FINAL,
    STAGES,
    TASK_ID_REUSED,
    Charge,
    ChargeAnomaly,
    Reservation,
    UsageRow,
)
from bot.domain.conversations import Conversation, ConversationTurn, Persona
from bot.domain.creative import (
    CAMERA_BY_VALUE,
    CAMERA_PRESETS,
    CameraPreset,
    Character,
    CreativeSettings,
    ImageRef,
    Style,
    StyleThumbnail,
)
from bot.domain.credits import (
    BillingMode,
    CreditBalance,
    CreditEntry,
    CreditEntryKind,
    Entitlement,
)
from bot.domain.dashboard import (
    DashboardSession,
    GuildRef,
    JobCounts,
    LedgerFilter,
    LedgerLine,
    MemberAccess,
    MemberProfile,
    MessageUnreachable,
    ResultItem,
    ShowcaseEntry,
    SpendBucket,
    Thumbnail,
)
from bot.domain.errors import (
    ConstraintError,
    SchemaTooNewError,
    StorageError,
    StorageUnavailableError,
)
from bot.domain.guard import GuardAlert, GuardSettings, Runway
from bot.domain.guilds import UNSET, GuildSettings, LimitUpdate, RetiredKey, Unset
from bot.domain.jobs import (
    DeliveryRoute,
    Job,
    JobStatus,
    Kind,
    NewJob,
    PollUpdate,
    ResultRequest,
)
from bot.domain.members import MemberSettings
from bot.domain.policy import UNLIMITED, Actor, AuditEntry, ModelLists, Tier
from bot.domain.safety import SafetyMode, SafetyPolicy, SafetyRecord, Visibility

__all__ = [
    "CAMERA_BY_VALUE",
    "CAMERA_PRESETS",
    "DRAFT",
    "FINAL",
    "STAGES",
    "TASK_ID_REUSED",
    "UNLIMITED",
    "UNSET",
    "Actor",
    "AuditEntry",
    "BillingMode",
    "CameraPreset",
    "Character",
    "Charge",
    "ChargeAnomaly",
    "ConstraintError",
    "Conversation",
    "ConversationTurn",
    "CreativeSettings",
    "CreditBalance",
    "CreditEntry",
    "CreditEntryKind",
    "DashboardSession",
    "DeliveryRoute",
    "Entitlement",
    "GuardAlert",
    "GuardSettings",
    "GuildRef",
    "GuildSettings",
    "ImageRef",
    "Job",
    "JobCounts",
    "JobStatus",
    "Kind",
    "LedgerFilter",
    "LedgerLine",
    "LimitUpdate",
    "MemberAccess",
    "MemberProfile",
    "MemberSettings",
    "MessageUnreachable",
    "ModelLists",
    "NewJob",
    "Persona",
    "PollUpdate",
    "Reservation",
    "ResultItem",
    "ResultRequest",
    "RetiredKey",
    "Runway",
    "SafetyMode",
    "SafetyPolicy",
    "SafetyRecord",
    "SchemaTooNewError",
    "ShowcaseEntry",
    "SpendBucket",
    "StorageError",
    "StorageUnavailableError",
    "Style",
    "StyleThumbnail",
    "Thumbnail",
    "Tier",
    "Unset",
    "UsageRow",
    "Visibility",
]
