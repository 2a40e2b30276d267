"""Typed rows of the store: what :class:`bot.storage.database.Store` takes and returns.

Money is :class:`~decimal.Decimal` cents, exact (the database holds integer micro-cents; see
``docs/storage.md``), except the budgets admins set, which are whole ``int`` cents. Times are
UTC epoch seconds (``float``). ``None`` in a :class:`GuildSettings` limit means "use the default
from Settings".
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from decimal import Decimal
from enum import StrEnum
from typing import Any, Final


class Kind(StrEnum):
    """What a generation produces; also the ledger's ``kind`` column."""

    TEXT = "text"
    IMAGE = "image"
    VIDEO = "video"


class JobStatus(StrEnum):
    """Life of an asynchronous job; only ``PENDING`` jobs are polled."""

    PENDING = "pending"
    COMPLETED = "completed"
    FAILED = "failed"


class DeliveryRoute(StrEnum):
    """Where a finished job's result is shown, in fallback order (docs/architecture.md).

    ``PLACEHOLDER``: the placeholder is edited into the result; ``CHANNEL``: a new message in
    the job's channel; ``DM``: a direct message to the requester; ``JOBS``: nowhere else took
    it, and ``/jobs`` lists it for the requester.
    """

    PLACEHOLDER = "placeholder"
    CHANNEL = "channel"
    DM = "dm"
    JOBS = "jobs"


@dataclass(frozen=True, slots=True)
class GuildSettings:
    """A guild's own settings; a guild without a row gets :meth:`default`.

    Attributes:
        guild_id: the Discord guild id.
        api_key_ciphertext: the guild's API key, Fernet-encrypted; None when not set.
        api_key_last4: the key's last four characters, for display; None when not set.
        monthly_budget_cents: guild budget per UTC calendar month; None = Settings default.
        user_daily_budget_cents: per-user budget per UTC day; None = Settings default.
        max_pending_videos_per_user: cap on a user's pending videos; None = Settings default.
        max_pending_videos_per_guild: cap on the guild's pending videos; None = Settings default.
        allowed_channel_ids: channels the commands may be used in; empty = everywhere.
        admin_channel_id: channel for admin notices; None = none.
        notified_problem: the last problem admins were told about (to notify once).
    """

    guild_id: int
    api_key_ciphertext: bytes | None = None
    api_key_last4: str | None = None
    monthly_budget_cents: int | None = None
    user_daily_budget_cents: int | None = None
    max_pending_videos_per_user: int | None = None
    max_pending_videos_per_guild: int | None = None
    allowed_channel_ids: frozenset[int] = frozenset()
    admin_channel_id: int | None = None
    notified_problem: str | None = None

    @classmethod
    def default(cls, guild_id: int) -> GuildSettings:
        """Return the settings of a guild that never changed any."""
        return cls(guild_id=guild_id)


@dataclass(frozen=True, slots=True)
class Charge:
    """One charge the service reported (``cost_cents`` of a generate response).

    Attributes:
        task_id: the service's task id; None for text, which has none. A charge with a
            task id is recorded at most once per kind.
        cost_cents: what the service charged, cents, exactly as reported.
        remaining_credits_cents: the balance the service reported after the charge, cents;
            None when it reported no usable number.
        key_fingerprint: :func:`bot.services.keys.fingerprint` of the key charged.
        at: when the charge was reported, UTC epoch seconds.
        tier_role_id: the role of the member's tier when they asked (issue 13; see
            :class:`Tier`), for ``/usage`` by tier; None = the server defaults.
    """

    guild_id: int
    channel_id: int
    user_id: int
    kind: Kind
    model: str
    task_id: str | None
    cost_cents: Decimal
    remaining_credits_cents: Decimal | None
    key_fingerprint: str
    at: float
    tier_role_id: int | None = None


TASK_ID_REUSED: Final = "task id given again by the service"
"""The reason of the anomaly recorded when a charged task's id is stored for another task.

A task id is unique only within the account that made it (tasks are private to the key that
paid for them: ``docs/genapi-choices.md``, error for an unknown task id), and a service that
lost its id sequence may give one again even there: the new task is stored and
charged on its own (a charge is identified by its key, kind, task id and time), never merged
with the earlier one (of any key, guild or wallet), and this anomaly tells the admins.
"""


@dataclass(frozen=True, slots=True)
class ChargeAnomaly:
    """A reported charge that breaks the protocol, kept for the admins (not summed in budgets).

    Attributes:
        reported_cost: ``cost_cents`` as the service reported it (``str`` of the Decimal).
        reported_remaining: ``remaining_credits_cents`` as reported.
        reason: what is wrong with it, e.g. ``"negative cost_cents"``.
        at: when it was reported, UTC epoch seconds.

    The other fields are those of the :class:`Charge` it came with.
    """

    guild_id: int
    channel_id: int
    user_id: int
    kind: Kind
    model: str
    task_id: str | None
    reported_cost: str
    reported_remaining: str
    reason: str
    key_fingerprint: str
    at: float

    @classmethod
    def of(cls, charge: Charge, reported_remaining: Decimal | None, reason: str) -> ChargeAnomaly:
        """Build the anomaly of ``charge``, keeping the reported amounts' exact text."""
        return cls(
            charge.guild_id,
            charge.channel_id,
            charge.user_id,
            charge.kind,
            charge.model,
            charge.task_id,
            str(charge.cost_cents),
            str(reported_remaining),
            reason,
            charge.key_fingerprint,
            charge.at,
        )


@dataclass(frozen=True, slots=True)
class NewJob:
    """An asynchronous task to poll until it finishes, as first stored.

    Attributes:
        message_id: the placeholder message to edit; None until it has been sent.
        prompt_summary: a short, display-safe summary of the prompt.
        details: JSON-serialisable display parameters (duration, aspect_ratio...).
        cost_cents: what the service charged for the task, cents (0 when the report was an
            anomaly, see :class:`ChargeAnomaly`).
        created_at: UTC epoch seconds.
        next_poll_at: when to poll first, UTC epoch seconds.
    """

    task_id: str
    provider: str
    poll_url: str
    kind: Kind
    model: str
    guild_id: int
    channel_id: int
    message_id: int | None
    user_id: int
    prompt_summary: str
    details: Mapping[str, Any]
    cost_cents: Decimal
    key_fingerprint: str
    created_at: float
    next_poll_at: float


@dataclass(frozen=True, slots=True)
class Job(NewJob):
    """A stored job: the :class:`NewJob` fields plus its progress.

    Attributes:
        id: the store's id of the job.
        status: PENDING until :meth:`Store.finish_job`.
        finished_at: UTC epoch seconds; None while pending.
        outputs: result URLs (completed jobs).
        error: failure text (failed jobs).
        poll_count: how many polls were made.
        announced_at: when the result was posted to Discord, UTC epoch seconds; None = not yet.
        last_progress_at: when the placeholder was last updated, UTC epoch seconds.
        unwatched_at: when the poller stopped watching it, still processing past the job
            timeout, UTC epoch seconds; None while watched. It stays PENDING.
        delivery_route: the route the next delivery attempt takes; once delivered, the route
            that showed it.
        delivery_attempts: delivery attempts that failed transiently so far.
        next_delivery_at: when to attempt delivery next, UTC epoch seconds; None while pending
            or once delivered.
        delivery_error: the last delivery failure, for people; None if none.
        poll_token: the fencing token of the latest poll lease (incremented by every
            ``claim_due``); a write carrying an older one is ignored.
        delivery_token: the same for delivery leases (``claim_deliveries``).
    """

    id: int
    status: JobStatus
    finished_at: float | None
    outputs: tuple[str, ...]
    error: str | None
    poll_count: int
    announced_at: float | None
    last_progress_at: float | None
    unwatched_at: float | None = None
    delivery_route: DeliveryRoute = DeliveryRoute.PLACEHOLDER
    delivery_attempts: int = 0
    next_delivery_at: float | None = None
    delivery_error: str | None = None
    poll_token: int = 0
    delivery_token: int = 0


@dataclass(frozen=True, slots=True)
class UsageRow:
    """Ledger charges grouped by user, kind and model: ``count`` charges, ``cents`` in total."""

    user_id: int
    kind: Kind
    model: str
    count: int
    cents: Decimal


@dataclass(frozen=True, slots=True)
class Reservation:
    """Budget held for a request in flight, until settled, released or expired.

    Attributes:
        amount_cents: cents held (known video cost, or the learned estimate).
        created_at: UTC epoch seconds.
        expires_at: UTC epoch seconds; after it the hold no longer counts.
        key_fingerprint: the fingerprint of the key the request is sent with: while the
            reservation lives that key is kept (issue 18, E1); None when not known (made before
            schema 0011, SQLite / 0006, PostgreSQL: it then keeps every key of its guild).
    """

    id: int
    guild_id: int
    user_id: int
    kind: Kind
    model: str
    amount_cents: Decimal
    created_at: float
    expires_at: float
    key_fingerprint: str | None = None


@dataclass(frozen=True, slots=True)
class PollUpdate:
    """One poll's outcome for :meth:`~bot.storage.repositories.JobRepository.schedule_polls`.

    Attributes:
        job_id: the job.
        next_poll_at: when to poll it next, UTC epoch seconds.
        poll_count: polls made so far.
        token: the poll lease's fencing token (``Job.poll_token`` as claimed); None: no lease
            checked.
        progress_at: when its placeholder was last refreshed (UTC epoch seconds), recorded with
            the rest; None leaves ``last_progress_at`` as it is.
    """

    job_id: int
    next_poll_at: float
    poll_count: int
    token: int | None = None
    progress_at: float | None = None


@dataclass(frozen=True, slots=True)
class RetiredKey:
    """A guild's replaced or removed API key, kept until its last pending job ends.

    Attributes:
        id: the row id.
        fingerprint: :func:`bot.services.keys.fingerprint` of the key; None when it could not
            be decrypted when it was retired.
        ciphertext: the key, Fernet-encrypted as in :class:`GuildSettings`.
        last4: the key's last four characters, for display.
        retired_at: UTC epoch seconds.
    """

    id: int
    guild_id: int
    fingerprint: str | None
    ciphertext: bytes
    last4: str
    retired_at: float


@dataclass(frozen=True, slots=True)
class ResultRequest:
    """The stored request behind a result, for the buttons under it (issue 12).

    Attributes:
        id: the row id (buttons of a synchronous result carry ``r<id>``).
        kind: ``"text"``, ``"image"`` or ``"video"``.
        guild_id: where it was asked.
        user_id: the requester (who may delete the result).
        job_id: the job of an asynchronous result (its buttons carry ``j<job_id>``), else None.
        options: the command's options as stored (a JSON object).
        outputs: result URLs of a synchronous answer (a job keeps its own).
    """

    id: int
    kind: str
    guild_id: int
    user_id: int
    job_id: int | None
    options: dict[str, Any]
    outputs: tuple[str, ...]


UNLIMITED: Final = -1
"""A tier's allowance that is unlimited (stored as -1; None in a :class:`Tier` = server default)."""


@dataclass(frozen=True, slots=True)
class Tier:
    """A role tier of a guild's policy (issue 13): what members with ``role_id`` may spend and use.

    Attributes:
        guild_id: the guild.
        role_id: the Discord role whose members get this tier.
        role_name: the role's name when the tier was last set, for messages.
        daily_per_user_cents: whole cents per member per UTC day; :data:`UNLIMITED`; None =
            the server's daily budget per member.
        monthly_per_user_cents: whole cents per member per UTC calendar month;
            :data:`UNLIMITED`; None = the server default (unlimited: the server has none).
        videos_at_once: cap on a member's pending videos; None = the server's cap per member.
        models: model ids or prefixes (``"motion-pro/"``) this tier may use, ``("*",)`` for
            all; None = the server's model list.
    """

    guild_id: int
    role_id: int
    role_name: str
    daily_per_user_cents: int | None = None
    monthly_per_user_cents: int | None = None
    videos_at_once: int | None = None
    models: tuple[str, ...] | None = None


@dataclass(frozen=True, slots=True)
class ModelLists:
    """A guild's server-wide model list, for members without a tier (issue 13).

    Attributes:
        allowed: ids or prefixes members may use; empty = every model.
        blocked: ids or prefixes members may not use, even if ``allowed`` matches them.
    """

    allowed: tuple[str, ...] = ()
    blocked: tuple[str, ...] = ()


@dataclass(frozen=True, slots=True)
class AuditEntry:
    """One change made through ``/config``, as kept in the database (never a key).

    Attributes:
        guild_id: the guild.
        user_id: the admin who made it.
        what: the setting, e.g. ``"tier Patron: daily per member"``.
        old: its value before, for people; ``"—"`` when it had none.
        new: its value after.
        at: UTC epoch seconds.
    """

    guild_id: int
    user_id: int
    what: str
    old: str
    new: str
    at: float


@dataclass(frozen=True, slots=True)
class Conversation:
    """A ``/chat`` conversation, keyed by its Discord thread (issue 21).

    Attributes:
        thread_id: the thread the conversation lives in (its id is the key).
        guild_id: the guild.
        channel_id: the thread's parent channel.
        user_id: the member who started it.
        model: the text model its turns use; None: the service's default.
        system: the starter's system prompt, sent with every turn; None if none.
        created_at: UTC epoch seconds.
        ended_at: when it ended (thread archived or deleted, turn cap), UTC epoch seconds;
            None while it goes on.
        end_reason: ``"archived"``, ``"deleted"`` or ``"turn cap"``; None while it goes on.
        summary: a summary of its first ``summary_upto`` turns (the Summarise button), sent
            instead of them; None if none was made.
        summary_upto: how many of the first turns ``summary`` stands for.
    """

    thread_id: int
    guild_id: int
    channel_id: int
    user_id: int
    model: str | None
    system: str | None
    created_at: float
    ended_at: float | None = None
    end_reason: str | None = None
    summary: str | None = None
    summary_upto: int = 0


@dataclass(frozen=True, slots=True)
class ConversationTurn:
    """One turn of a conversation: a member's text and the model's answer (issue 21).

    Attributes:
        thread_id: the conversation's thread.
        user_id: who wrote the turn.
        author: their display name when they wrote it (the label the model sees).
        text: what they wrote (the bot's mention removed).
        answer: the model's answer as shown (cut where it began a next turn by itself).
        model: the model that answered.
        prompt_tokens: the service's ``usage.prompt_tokens`` (spec 2.5).
        completion_tokens: the service's ``usage.completion_tokens``.
        cost_cents: what the call was charged, cents; None when the service reported no
            usable number (the anomaly is recorded by billing).
        carried: how many earlier turns the call's prompt carried.
        at: UTC epoch seconds.
    """

    thread_id: int
    user_id: int
    author: str
    text: str
    answer: str
    model: str
    prompt_tokens: int
    completion_tokens: int
    cost_cents: Decimal | None
    carried: int
    at: float


@dataclass(frozen=True, slots=True)
class Persona:
    """A channel's persona (issue 21, ``/config persona``): for ``/chat`` and ``/text`` there.

    Attributes:
        guild_id: the guild.
        channel_id: the text channel (its threads inherit it).
        system: the system prompt, sent before the member's own.
        model: the default text model; None: the member's choice or the service's default.
        locked: an admin locked it: a member's ``system`` is refused in the channel and its
            threads, and a conversation's own ``system`` is no longer sent there.
    """

    guild_id: int
    channel_id: int
    system: str
    model: str | None = None
    locked: bool = False


@dataclass(frozen=True, slots=True)
class MemberSettings:
    """A member's own defaults (issue 22, ``/settings``), wherever they use the bot.

    A member without a row gets :meth:`default` (nothing set). Each default applies where the
    member did not give the option; server policy still wins (a model the member's tiers do
    not allow is ignored, :mod:`bot.services.member_settings`).

    Attributes:
        user_id: the Discord user id.
        text_model, image_model, video_model: catalogue ids; None: the command's own default.
        aspect_ratio: ``/image`` and ``/video``'s shape (spec 4.2, 4.4), e.g. ``"16:9"``.
        video_duration: seconds of a ``/video``; None: the model's default (5 s).
        prompt_suffix: text added after every ``/image`` and ``/video`` prompt.
        private: ``/text`` and synchronous ``/image`` answers are ephemeral.
        remix: Vary on a text result opens a form prefilled with the prompt.
        notify_dm: a DM when a video or an asynchronous image is finished, besides its card.
    """

    user_id: int
    text_model: str | None = None
    image_model: str | None = None
    video_model: str | None = None
    aspect_ratio: str | None = None
    video_duration: float | None = None
    prompt_suffix: str | None = None
    private: bool = False
    remix: bool = False
    notify_dm: bool = False

    @classmethod
    def default(cls, user_id: int) -> MemberSettings:
        """Return the settings of a member who never set any."""
        return cls(user_id=user_id)
