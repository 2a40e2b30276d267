"""The engine-neutral storage interface: one repository per concern, and the database.

Services, the poller and the cogs depend on these Protocols only; one implementation for both
engines (SQLite and PostgreSQL: :mod:`bot.storage.repos` over :mod:`bot.storage.engine`, put
together by :class:`bot.storage.database.Database`) implements them.

Shapes and units, for every engine:

- Rows are the dataclasses of :mod:`bot.storage.models`.
- Money is :class:`~decimal.Decimal` cents, exact as the service reported it (budgets admins set
  stay whole ``int`` cents). How an engine stores it (INTEGER micro-cents in both engines today,
  see :mod:`bot.storage.money`) is its own business; an amount finer than a micro-cent is
  stored rounded *up* to the next micro-cent.
- Times are UTC epoch seconds (``float``). Ids of Discord objects are ``int`` snowflakes.

Transactions:

- Used directly (``db.jobs.finish(...)``), every method is atomic on its own: a method that
  writes several rows (``guilds.replace_api_key``, ``guilds.reencrypt_keys``) commits all of
  them or none. Reads made this way see committed data only.
- ``async with db.transaction() as tx:`` gives the same repositories bound to one transaction:
  reads see its own writes, it commits when the block exits normally and rolls back (nothing
  kept) when the block raises or is cancelled. Keep blocks short and free of network calls.
- A check followed by a write (a budget check and reservation) must not interleave with another
  one for the same guild, in this process or another: the block calls
  :meth:`GuildRepository.lock` first, and so does every block that changes what such a check
  sums (settling a charge). SQLite serialises all write transactions anyway; PostgreSQL takes
  a per-guild lock held until the transaction ends.

Errors (engines translate their drivers' errors into these; the driver's error is the
``__cause__``):

- :class:`ConstraintError`: a write broke a constraint of the schema (a negative cost, a cap
  below 1); nothing of the transaction it ran in is kept once the error leaves the block.
- :class:`SchemaTooNewError`: at open, the database was written by a newer release.
- :class:`StorageUnavailableError`: :meth:`Database.ping` got no answer.
- Anything else the driver raises (a busy or lost connection) propagates as it is; see
  :mod:`bot.jobs.supervisor` for the ones treated as transient.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Collection, Iterable, Mapping, Sequence
from contextlib import AbstractAsyncContextManager
from dataclasses import dataclass
from decimal import Decimal
from enum import Enum
from typing import Any, Final, Protocol, TypeAlias

from bot.genapi.rate_window import RateWindowRepository
from bot.storage.models import (
    AuditEntry,
    Charge,
    ChargeAnomaly,
    Conversation,
    ConversationTurn,
    DeliveryRoute,
    GuildSettings,
    Job,
    JobStatus,
    Kind,
    MemberSettings,
    ModelLists,
    NewJob,
    Persona,
    PollUpdate,
    Reservation,
    ResultRequest,
    RetiredKey,
    Tier,
    UsageRow,
)
from bot.storage.repos.sequences import SequenceStore


class StorageError(Exception):
    """Base of the storage errors that do not depend on the engine."""


class ConstraintError(StorageError):
    """A write broke a constraint of the schema (e.g. a negative amount, a cap below 1).

    Only the conflicts a method documents as expected ("task already recorded") are not errors.
    The transaction the write ran in is rolled back when the error leaves its block.
    """


class StorageUnavailableError(StorageError):
    """The database did not answer (closed, unreachable, or refusing connections).

    Raised by :meth:`Database.ping`; the driver's error is the ``__cause__`` (its text never
    contains a password: engines build it from the error, not from the connection string).
    """


class SchemaTooNewError(StorageError, RuntimeError):
    """The database was written by a newer version of the bot; start-up must stop.

    Attributes:
        found: the database's schema version.
        supported: the newest version this code knows.
    """

    def __init__(self, found: int, supported: int) -> None:
        super().__init__(
            f"The database has schema version {found}, but this version of the bot only knows "
            f"versions up to {supported}: it was last used by a newer release. Run that release "
            "(or restore a backup taken before the upgrade); refusing to start so that the "
            "data is not damaged."
        )
        self.found = found
        self.supported = supported


@dataclass(frozen=True, slots=True)
class PollCandidate:
    """A due job as a claim sees it, read from the claim index: which job, whose, when due.

    Attributes:
        id: the job's id.
        key_fingerprint: the key it is polled with.
        guild_id: the guild it belongs to.
        next_poll_at: when it fell due, UTC epoch seconds.
    """

    id: int
    key_fingerprint: str
    guild_id: int
    next_poll_at: float


PollRanking: TypeAlias = Callable[[Sequence[PollCandidate]], list[PollCandidate]]
"""Orders due jobs (given earliest due first) in the order they should be claimed; each key's
first ``per_key`` available are (the poller's: :meth:`bot.services.schedule.FairShare.rank`)."""


def per_key_cap(jobs: Sequence[PollCandidate], per_key: int) -> list[PollCandidate]:
    """Keep, in order, at most ``per_key`` of ``jobs`` of one key fingerprint (engines' claims)."""
    taken: Counter[str] = Counter()
    kept: list[PollCandidate] = []
    for job in jobs:
        if taken[job.key_fingerprint] < per_key:
            taken[job.key_fingerprint] += 1
            kept.append(job)
    return kept


def last_per_job(updates: Sequence[PollUpdate]) -> list[PollUpdate]:
    """Keep each job's last update of ``updates``, in the order of those (``schedule_polls``)."""
    return list({update.job_id: update for update in updates}.values())


class _Unset(Enum):
    UNSET = "UNSET"

    def __repr__(self) -> str:
        return "UNSET"


UNSET: Final = _Unset.UNSET
"""Sentinel of :meth:`GuildRepository.update_limits`: leave this limit as it is."""

Unset: TypeAlias = _Unset
"""The type of :data:`UNSET`, for other "value, None or keep" parameters."""

LimitUpdate: TypeAlias = int | _Unset | None
"""A new limit: a value, None (back to the Settings default) or :data:`UNSET` (unchanged)."""

LIMIT_NAMES: Final = (
    "monthly_budget_cents",
    "user_daily_budget_cents",
    "max_pending_videos_per_user",
    "max_pending_videos_per_guild",
)
"""The limits of :class:`~bot.storage.models.GuildSettings` that admins change."""


def limit_changes(*updates: LimitUpdate) -> dict[str, int | None]:
    """Pair ``update_limits``' arguments (in :data:`LIMIT_NAMES` order) with their names.

    Returns:
        ``{column: value}`` for the limits given, :data:`UNSET` ones left out; the names
        come from :data:`LIMIT_NAMES`, never from user input, so engines may put them in SQL.
    """
    pairs = zip(LIMIT_NAMES, updates, strict=True)
    return {name: value for name, value in pairs if not isinstance(value, Unset)}


class JobRepository(Protocol):
    """Asynchronous jobs: storing, polling (with leases), delivery and listing.

    A job is PENDING until :meth:`finish`; a finished job is undelivered until
    :meth:`mark_announced`. The poller's reads (:meth:`due`, :meth:`due_deliveries`) cost
    O(due jobs), not O(all jobs): engines serve them from indexes.
    """

    async def get(self, job_id: int) -> Job | None:
        """Return the job with the store's id ``job_id``, or None."""
        ...

    async def by_task(self, task_id: str) -> Job | None:
        """Return the job of the service's ``task_id``, or None."""
        ...

    async def insert(self, job: NewJob) -> Job:
        """Store a PENDING job and return it as stored.

        Idempotent on ``task_id``: if the task is stored already, nothing is written and the
        stored job is returned.

        Raises:
            ConstraintError: the job breaks a constraint (e.g. a negative cost).
        """
        ...

    # -- polling ------------------------------------------------------------------------------

    async def due(self, now: float, limit: int, *, skip_keys: Collection[str] = ()) -> list[Job]:
        """Return up to ``limit`` watched pending jobs with ``next_poll_at <= now``, earliest first.

        Args:
            now: UTC epoch seconds.
            limit: the most jobs to return (>= 1).
            skip_keys: key fingerprints whose jobs are left out (keys with no room to poll now),
                so that one key's backlog cannot fill the batch and starve the others.

        Jobs with ``unwatched_at`` set are never due.
        """
        ...

    async def next_due_at(self) -> float | None:
        """Return the earliest ``next_poll_at`` of the watched pending jobs; None if none."""
        ...

    async def pending_count(self) -> int:
        """Return how many jobs are PENDING (watched or not)."""
        ...

    async def claim_due(
        self,
        now: float,
        until: float,
        *,
        limit: int,
        per_key: int,
        skip_keys: Collection[str] = (),
        rank: PollRanking | None = None,
    ) -> list[Job]:
        """Lease due jobs to the caller, atomically across processes, and return them.

        In one transaction: the watched pending jobs with ``next_poll_at <= now`` (earliest
        first, at most ``limit`` read, at most ``per_key`` of one key, none of ``skip_keys``)
        get ``next_poll_at = until`` (the lease's expiry) and ``poll_token + 1`` (its fencing
        token). The returned jobs carry the new token (and, as ``next_poll_at``, the time each
        fell due, for the poll-lag metric): pass the token as ``token=`` to
        :meth:`schedule_poll`, :meth:`set_unwatched` and :meth:`finish`, so that a holder whose
        lease expired (and whose job another process claimed since) changes nothing. Two
        callers never get the same job while its lease runs: PostgreSQL claims with
        ``FOR UPDATE SKIP LOCKED``, SQLite's ``BEGIN IMMEDIATE`` serialises the claims.

        Args:
            now: UTC epoch seconds.
            until: the lease's expiry, UTC epoch seconds (after it, a job whose holder died is
                due again and another process claims it).
            limit: the most due jobs to consider (>= 1).
            per_key: the most jobs of one key fingerprint to claim (>= 1).
            skip_keys: key fingerprints whose jobs are left out (keys with no room now).
            rank: orders the due jobs read for the claim (None: earliest due first); a job
                another process claims meanwhile is skipped for the next in that order.
        """
        ...

    async def schedule_poll(
        self, job_id: int, next_poll_at: float, poll_count: int, *, token: int | None = None
    ) -> bool:
        """Set when a pending job is polled next (UTC epoch seconds) and the polls made so far.

        A job that is no longer PENDING is left alone, and so is one whose ``poll_token`` is
        not ``token`` (a stale lease; None: no lease checked).

        Returns:
            Whether the job was changed.
        """
        ...

    async def schedule_polls(self, updates: Sequence[PollUpdate]) -> int:
        """Apply many polls' outcomes in one transaction, each as :meth:`schedule_poll` would.

        Each row is fenced on its own: a job no longer PENDING, or whose ``poll_token`` is not
        the update's ``token`` (None: not checked), is left alone, and the others are written.
        A job listed more than once gets its last update only. ``progress_at``, when given, is
        recorded under the same conditions (as :meth:`set_progress_at` would).

        One transaction (one commit) instead of one per poll: the poller's write-behind
        (``bot.jobs.poll_writes``) flushes its reschedules with it.

        Returns:
            How many jobs were changed.
        """
        ...

    async def set_unwatched(
        self, job_id: int, at: float | None, *, token: int | None = None
    ) -> bool:
        """Stop watching a pending job at ``at`` (UTC epoch seconds), or resume it (None).

        Returns:
            Whether the job was still PENDING, under ``poll_token == token`` when a token is
            given (only then is anything changed).
        """
        ...

    async def set_progress_at(self, job_id: int, at: float) -> None:
        """Record when the job's placeholder was last updated (UTC epoch seconds)."""
        ...

    async def set_message(self, job_id: int, message_id: int, due_at: float | None = None) -> None:
        """Record the job's placeholder message; a pending job falls due no later than ``due_at``.

        Args:
            job_id: the job.
            message_id: the placeholder's Discord message id.
            due_at: poll the pending job no later than this (UTC epoch seconds); an earlier
                ``next_poll_at`` stays. None, or a finished job: the schedule is left alone.
        """
        ...

    async def finish(
        self,
        job_id: int,
        status: JobStatus,
        outputs: Sequence[str],
        error: str | None,
        finished_at: float,
        *,
        token: int | None = None,
    ) -> bool:
        """Mark a pending job COMPLETED or FAILED; it becomes due for delivery at ``finished_at``.

        Args:
            job_id: the job.
            status: COMPLETED or FAILED.
            outputs: result URLs (completed jobs), in the service's order.
            error: failure text for people (failed jobs); None otherwise.
            finished_at: UTC epoch seconds.
            token: the poll lease's fencing token; a job claimed since under a newer one is
                left alone. None: no lease checked.

        Returns:
            True only the first time (a job finishes exactly once); False if it was not pending
            (or the token is stale).

        Raises:
            ValueError: ``status`` is PENDING.
        """
        ...

    # -- delivery -----------------------------------------------------------------------------

    async def due_deliveries(self, now: float, limit: int) -> list[Job]:
        """Return up to ``limit`` finished, undelivered jobs whose delivery is due, oldest first.

        Due means ``next_delivery_at <= now`` (UTC epoch seconds).
        """
        ...

    async def next_delivery_at(self) -> float | None:
        """Return when the next delivery attempt is due (UTC epoch seconds), or None."""
        ...

    async def claim_deliveries(self, now: float, until: float, *, limit: int) -> list[Job]:
        """Lease due deliveries to the caller, atomically across processes, and return them.

        Like :meth:`claim_due`: finished, undelivered jobs with ``next_delivery_at <= now``
        (oldest first, at most ``limit``) get ``next_delivery_at = until`` and
        ``delivery_token + 1``; pass the returned token to :meth:`schedule_delivery` and
        :meth:`mark_announced`.
        """
        ...

    async def schedule_delivery(
        self,
        job_id: int,
        route: DeliveryRoute,
        attempts: int,
        next_at: float,
        error: str | None,
        *,
        token: int | None = None,
    ) -> None:
        """Set a finished, undelivered job's next delivery attempt.

        Args:
            job_id: the job.
            route: the route the next attempt takes.
            attempts: transient failures on that route so far.
            next_at: when to try, UTC epoch seconds.
            error: the last failure, for people; None if none.
            token: the delivery lease's fencing token (None: no lease checked).

        A pending or delivered job is left alone, and so is one claimed since under a newer
        token.
        """
        ...

    async def mark_announced(
        self,
        job_id: int,
        at: float,
        route: DeliveryRoute = DeliveryRoute.PLACEHOLDER,
        *,
        token: int | None = None,
    ) -> bool:
        """Record that the job's result was delivered at ``at`` (UTC epoch seconds) by ``route``.

        Returns:
            True only the first time: a job is delivered once. False too when ``token`` is
            given and the job was claimed since under a newer one (a stale holder must not
            ping the requester).
        """
        ...

    async def release_leases(
        self, polls: Mapping[int, int], deliveries: Mapping[int, int], at: float
    ) -> int:
        """Give back the poll and delivery leases a stopping process still holds.

        A job whose lease is released falls due again at ``at``, so another process claims it
        at once instead of waiting out the lease (issue 18, "Worker stop"). Only the lease's
        due time changes (and only ever earlier): route, attempts and poll count stay as
        recorded. Pass only the leases whose work was cut short: a poll or delivery that ended
        has set the job's next time itself.

        Args:
            polls: job id -> the poll lease's fencing token (``Job.poll_token`` as claimed).
            deliveries: job id -> the delivery lease's fencing token (``Job.delivery_token``).
            at: when the jobs fall due again, UTC epoch seconds (the caller's now).

        A job claimed since under a newer token, finished (polls) or delivered (deliveries) is
        left alone, in one transaction.

        Returns:
            How many leases were released.
        """
        ...

    # -- listing and statistics ---------------------------------------------------------------

    async def recent(self, guild_id: int, *, user_id: int | None, limit: int) -> list[Job]:
        """Return a guild's most recent jobs, newest first, whatever their status (``/jobs``).

        Args:
            guild_id: the guild.
            user_id: only this member's jobs; None for the whole guild's.
            limit: the most jobs to return.
        """
        ...

    async def completion_seconds(self, model: str, limit: int = 20) -> list[float]:
        """Return how long the model's last ``limit`` completed jobs took, seconds, newest first."""
        ...

    async def pending_videos(self, guild_id: int, *, user_id: int | None = None) -> int:
        """Return how many of the guild's (or a member's) video jobs are pending and watched.

        A job the poller stopped watching (``unwatched_at`` set) is no longer progressing and
        does not count toward the pending-video caps.
        """
        ...

    async def pending_on_key(self, guild_id: int, key_fingerprint: str) -> dict[Kind, int]:
        """Return how many of the guild's jobs submitted with the key are pending, by kind.

        Kinds without a pending job are absent.
        """
        ...

    async def state_counts(self) -> dict[tuple[str, str], int]:
        """Count the open jobs by ``(state, kind)``, for the ``genbot_jobs`` gauge.

        States: ``pending`` (being made) and ``undelivered`` (finished, result not yet shown).
        Pairs with no job are absent. Reads only open jobs (partial indexes), never the
        finished and shown ones, which only grow.
        """
        ...


class LedgerRepository(Protocol):
    """The ledger (charges the service reported), protocol anomalies, and reservations.

    The ledger and the anomalies are append-only. Sums are exact Decimal cents.
    """

    async def insert_charge(self, charge: Charge) -> bool:
        """Append the charge to the ledger.

        Returns:
            False if a charge of the same kind and task was recorded before (nothing written);
            charges without a task id (text) are always appended.

        Raises:
            ConstraintError: the charge breaks another constraint (a negative cost...); it never
                passes for "already recorded".
            ValueError: an amount is not a finite number.
        """
        ...

    async def insert_anomaly(self, anomaly: ChargeAnomaly) -> bool:
        """Record a reported charge that breaks the protocol (not summed into budgets).

        Returns:
            False if an anomaly of the same kind and task was recorded before.
        """
        ...

    async def spent_since(
        self, guild_id: int, since: float, *, user_id: int | None = None
    ) -> Decimal:
        """Return the cents charged to the guild (or one member in it) at or after ``since``."""
        ...

    async def recent_costs(self, model: str, limit: int = 20) -> list[Decimal]:
        """Return the cents of the model's last ``limit`` charges, newest first."""
        ...

    async def usage(
        self, guild_id: int, since: float, user_id: int | None = None
    ) -> list[UsageRow]:
        """Return the guild's (or a member's) charges at or after ``since``, per user, kind, model.

        Rows are ordered by cents, largest first, then user id, kind and model.
        """
        ...

    async def total(self, guild_id: int) -> Decimal:
        """Return all cents ever charged to the guild."""
        ...

    async def last_remaining_credits(self, key_fingerprint: str) -> Decimal | None:
        """Return the balance, cents, the service last reported for the key; None if never.

        Charges whose reported balance was unusable are skipped.
        """
        ...

    async def anomalies(self, guild_id: int, since: float) -> list[ChargeAnomaly]:
        """Return the guild's protocol anomalies reported at or after ``since``, oldest first."""
        ...

    async def anomaly_count(self, guild_id: int, since: float) -> int:
        """Return how many protocol anomalies the guild had at or after ``since``."""
        ...

    # -- reservations -------------------------------------------------------------------------

    async def add_reservation(
        self,
        *,
        guild_id: int,
        user_id: int,
        kind: Kind,
        model: str,
        amount_cents: Decimal,
        created_at: float,
        expires_at: float,
        key_fingerprint: str | None = None,
    ) -> Reservation:
        """Hold ``amount_cents`` (>= 0) for a request in flight until ``expires_at``.

        ``key_fingerprint`` names the key the request is sent with: while the reservation
        exists (expired or not, until deleted) that key is not dropped by
        :meth:`GuildRepository.replace_api_key` nor released (issue 18, E1), since its task may
        be stored a moment later. None: unknown, every key of the guild is kept meanwhile.

        Raises:
            ConstraintError: a negative amount.
        """
        ...

    async def delete_reservation(self, reservation_id: int) -> bool:
        """Drop a reservation; False if it was already gone (expired or settled)."""
        ...

    async def expire_reservations(self, now: float) -> int:
        """Drop the reservations with ``expires_at <= now``; return how many."""
        ...

    async def reserved_cents(
        self, guild_id: int, now: float, *, user_id: int | None = None
    ) -> Decimal:
        """Return the cents held by the guild's (or a member's) reservations live at ``now``."""
        ...

    async def active_reservations(
        self, guild_id: int, now: float, *, kind: Kind, user_id: int | None = None
    ) -> int:
        """Return how many unexpired reservations of ``kind`` the guild (or a member) holds."""
        ...


class GuildRepository(Protocol):
    """Per-guild settings: limits, channels, the notified problem, current and retired API keys.

    Keys are stored Fernet-encrypted only (``ciphertext``) with their last four characters for
    display; a plaintext key never reaches storage. The bot's default keys (``GENAPI_API_KEY``,
    current and previous) are kept here too, encrypted the same way (issue 18, E4).
    """

    async def lock(self, guild_id: int) -> None:
        """Serialise this transaction against every other one that locks ``guild_id``.

        Only meaningful inside :meth:`Database.transaction`; held until it ends. A budget check
        and the writes that change what it sums call it first.
        """
        ...

    async def settings(self, guild_id: int) -> GuildSettings:
        """Return the guild's settings; :meth:`GuildSettings.default` if it never changed any."""
        ...

    async def update_limits(
        self,
        guild_id: int,
        *,
        monthly_budget_cents: LimitUpdate = UNSET,
        user_daily_budget_cents: LimitUpdate = UNSET,
        max_pending_videos_per_user: LimitUpdate = UNSET,
        max_pending_videos_per_guild: LimitUpdate = UNSET,
    ) -> None:
        """Change some of the guild's limits.

        Args:
            guild_id: the guild.
            monthly_budget_cents: whole cents per UTC calendar month.
            user_daily_budget_cents: whole cents per member per UTC day.
            max_pending_videos_per_user: cap on a member's pending videos.
            max_pending_videos_per_guild: cap on the guild's pending videos.

        Each limit is a value, None (back to the Settings default) or :data:`UNSET` (kept).

        Raises:
            ConstraintError: a negative budget or a cap below 1.
        """
        ...

    async def set_allowed_channels(self, guild_id: int, channel_ids: Iterable[int]) -> None:
        """Replace the channels the commands may be used in (empty = everywhere)."""
        ...

    async def set_admin_channel(self, guild_id: int, channel_id: int | None) -> None:
        """Set (or with None, clear) the channel for admin notices."""
        ...

    async def set_notified_problem(self, guild_id: int, problem: str | None) -> bool:
        """Record the problem admins were last told about (None = resolved).

        Returns:
            True if it changed, i.e. admins should be notified (once per problem).
        """
        ...

    # -- API keys -----------------------------------------------------------------------------

    async def set_api_key(self, guild_id: int, ciphertext: bytes, last4: str) -> None:
        """Store the guild's encrypted API key and its last four characters."""
        ...

    async def clear_api_key(self, guild_id: int) -> None:
        """Forget the guild's API key (not retiring it)."""
        ...

    async def replace_api_key(
        self,
        guild_id: int,
        new: tuple[bytes, str] | None,
        *,
        retire: bool,
        old_fingerprint: str | None,
        at: float,
    ) -> None:
        """Store ``new`` (ciphertext, last4) as the guild's key, or remove its key (None).

        Args:
            guild_id: the guild.
            new: the new key's ciphertext and last four characters; None to remove the key.
            retire: first move the current key to the retired keys if a pending job or a
                reservation (a request in flight) of the guild uses it, all in one transaction
                under the guild's lock: a live job's key is never missing.
            old_fingerprint: the current key's fingerprint; None when it cannot be decrypted
                now (then it is retired whatever its jobs, as they cannot be counted).
            at: UTC epoch seconds, the retirement time.
        """
        ...

    async def retired_keys(self, guild_id: int) -> list[RetiredKey]:
        """Return the guild's retired API keys, most recently retired first."""
        ...

    async def set_retired_fingerprint(self, retired_id: int, key_fingerprint: str) -> None:
        """Record the fingerprint of a retired key first decrypted after it was retired.

        If the guild has another retired row with that fingerprint, this one is deleted instead.
        """
        ...

    async def delete_released_keys(self) -> int:
        """Delete the retired keys no pending job nor reservation uses; return how many.

        Guilds' retired keys (fingerprint known) and retired default keys (:meth:`keep_default_key`)
        alike.
        """
        ...

    async def keep_default_key(
        self, key_fingerprint: str, ciphertext: bytes, at: float
    ) -> list[str]:
        """Store the bot's default key (``GENAPI_API_KEY``) encrypted; retire the previous ones.

        In one transaction: the key is stored (or its ciphertext replaced) as current; any other
        current default key is retired at ``at``; retired default keys that no pending job and
        no reservation use are deleted (issue 18, E4).

        Args:
            key_fingerprint: :func:`bot.services.keys.fingerprint` of the key.
            ciphertext: the key, Fernet-encrypted with ``KEY_ENCRYPTION_KEY``.
            at: UTC epoch seconds.

        Returns:
            The fingerprints of the retired default keys still kept (something uses them).
        """
        ...

    async def default_key(self, key_fingerprint: str) -> bytes | None:
        """Return the ciphertext of the stored default key with that fingerprint, or None."""
        ...

    async def reencrypt_keys(self, reencrypt: Callable[[bytes], bytes]) -> int:
        """Replace every stored ciphertext (current, retired and default keys) by ``reencrypt(it)``.

        All or none: one transaction.

        Returns:
            How many ciphertexts were replaced.
        """
        ...


class MetaRepository(Protocol):
    """Small named values of bot state (e.g. the hash of the last synced command tree)."""

    async def get(self, key: str) -> str | None:
        """Return the value stored under ``key``, or None."""
        ...

    async def set(self, key: str, value: str) -> None:
        """Store ``value`` under ``key``, replacing any previous value."""
        ...

    async def get_many(self, keys: Sequence[str]) -> dict[str, str]:
        """Return the values stored under ``keys`` (one query); keys without a value are absent."""
        ...


class CardRepository(Protocol):
    """What the buttons under a result need after any restart (issue 12).

    The request behind each result, found by the reference its buttons' custom ids carry
    (``j<job id>`` or ``r<request id>``), and each guild's confirmation threshold.
    """

    async def add_request(
        self,
        *,
        kind: str,
        guild_id: int,
        user_id: int,
        options: Mapping[str, Any],
        outputs: Sequence[str] = (),
        job_id: int | None = None,
        at: float,
    ) -> int:
        """Store the request behind a result; return its id (the ``r<id>`` of its buttons).

        Args:
            kind: ``"text"``, ``"image"`` or ``"video"``.
            guild_id: where it was asked.
            user_id: the requester.
            options: the command's options, JSON-serialisable.
            outputs: result URLs of a synchronous answer.
            job_id: the job of an asynchronous result (at most one request per job).
            at: when, UTC epoch seconds.
        """
        ...

    async def request(self, ref: str) -> ResultRequest | None:
        """Return the request behind ``ref`` (``j<job id>`` or ``r<id>``); None if unknown."""
        ...

    async def confirm_above(self, guild_id: int) -> Decimal | None:
        """Return the guild's confirmation threshold (``/config confirm-above``), cents.

        None when it is off (the default).
        """
        ...

    async def set_confirm_above(self, guild_id: int, cents: Decimal | None) -> None:
        """Set the guild's confirmation threshold, cents (exact), or turn it off with None."""
        ...


class PolicyRepository(Protocol):
    """A guild's policy (issue 13): role tiers, model list, blocked terms, cooldowns, audit.

    Allowances are whole cents, :data:`~bot.storage.models.UNLIMITED` or None (server default),
    as in :class:`~bot.storage.models.Tier`.
    """

    async def tiers(self, guild_id: int) -> list[Tier]:
        """Return the guild's tiers, ordered by role name then role id."""
        ...

    async def set_tier(self, tier: Tier) -> None:
        """Create or replace the tier of ``tier.role_id``.

        Raises:
            ConstraintError: an allowance below -1 or a cap below 1.
        """
        ...

    async def delete_tier(self, guild_id: int, role_id: int) -> bool:
        """Delete a tier; False if the role had none."""
        ...

    async def model_lists(self, guild_id: int) -> ModelLists:
        """Return the guild's server-wide model list (both parts sorted)."""
        ...

    async def set_model_lists(self, guild_id: int, lists: ModelLists) -> None:
        """Replace the guild's server-wide model list."""
        ...

    async def blocked_terms(self, guild_id: int) -> list[str]:
        """Return the guild's blocked terms (normalised), sorted."""
        ...

    async def add_blocked_term(self, guild_id: int, term: str) -> bool:
        """Add a normalised term; False if it was there already."""
        ...

    async def remove_blocked_term(self, guild_id: int, term: str) -> bool:
        """Remove a normalised term; False if it was not there."""
        ...

    async def cooldowns(self, guild_id: int) -> dict[Kind, int]:
        """Return the guild's cooldowns, seconds per command; commands without one are absent."""
        ...

    async def set_cooldown(self, guild_id: int, command: Kind, seconds: int) -> None:
        """Set a command's cooldown in seconds; 0 removes it.

        Raises:
            ConstraintError: negative seconds.
        """
        ...

    async def last_use(self, guild_id: int, user_id: int, command: Kind) -> float | None:
        """Return when the member last used the command (UTC epoch seconds), or None."""
        ...

    async def record_use(self, guild_id: int, user_id: int, command: Kind, at: float) -> None:
        """Record that the member used the command at ``at`` (UTC epoch seconds)."""
        ...

    async def add_audit(self, entry: AuditEntry) -> None:
        """Append a change made through ``/config`` to the audit log."""
        ...

    async def audit(self, guild_id: int, limit: int = 20) -> list[AuditEntry]:
        """Return the guild's latest ``limit`` audit entries, newest first."""
        ...

    async def spent_by_tier(self, guild_id: int, since: float) -> list[tuple[int | None, Decimal]]:
        """Return the cents charged at or after ``since`` per tier role (None = no tier).

        Ordered by cents, largest first, then role id (None last).
        """
        ...


class ConversationRepository(Protocol):
    """Conversations of ``/chat`` and their turns, keyed by thread (issue 21).

    A restart keeps every conversation: the history each call folds into its prompt is read
    from here.
    """

    async def start(self, conversation: Conversation) -> bool:
        """Store a new conversation; False when its thread already has one (kept as it was)."""
        ...

    async def get(self, thread_id: int) -> Conversation | None:
        """Return the conversation of ``thread_id``; None if it has none."""
        ...

    async def add_turn(self, turn: ConversationTurn) -> int:
        """Store a turn (after its charge is in the ledger); return the conversation's turns.

        Raises:
            ConstraintError: the thread has no conversation.
        """
        ...

    async def turns(self, thread_id: int) -> list[ConversationTurn]:
        """Return the turns of ``thread_id``, oldest first."""
        ...

    async def turn_count(self, thread_id: int) -> int:
        """Return how many turns ``thread_id``'s conversation has."""
        ...

    async def spend_by_thread(
        self, guild_id: int, since: float, user_id: int | None = None
    ) -> list[tuple[int, int, Decimal]]:
        """Conversations' spend: ``(thread_id, turns, cents)``, largest first.

        From the turns' charges (each is its call's ledger row; the first turn's row carries
        the parent channel, as the thread did not exist yet), at or after ``since`` (UTC
        epoch seconds), optionally one member's turns only.
        """
        ...

    async def persona(self, channel_id: int) -> Persona | None:
        """Return the persona of a channel; None if it has none."""
        ...

    async def personas(self, guild_id: int) -> list[Persona]:
        """Return a guild's personas, by channel id."""
        ...

    async def set_persona(self, persona: Persona, at: float) -> None:
        """Set (or replace) a channel's persona; ``at`` UTC epoch seconds."""
        ...

    async def remove_persona(self, channel_id: int) -> bool:
        """Remove a channel's persona; False if it had none."""
        ...

    async def set_summary(self, thread_id: int, summary: str, upto: int) -> bool:
        """Keep a summary of the first ``upto`` turns.

        Returns:
            False when a summary covers as many turns already (a second click made it).
        """
        ...

    async def end(self, thread_id: int, reason: str, at: float) -> bool:
        """End the conversation (archived, deleted, turn cap); False if none or already ended.

        Args:
            thread_id: the thread.
            reason: ``"archived"``, ``"deleted"`` or ``"turn cap"``.
            at: UTC epoch seconds.
        """
        ...


class MemberSettingsRepository(Protocol):
    """Members' own defaults (issue 22, ``/settings``), keyed by user id."""

    async def get(self, user_id: int) -> MemberSettings:
        """Return the member's settings; :meth:`MemberSettings.default` when they set none."""
        ...

    async def save(self, settings: MemberSettings, at: float) -> None:
        """Store (insert or replace) the member's settings; ``at`` UTC epoch seconds."""
        ...


class Repositories(Protocol):
    """The repositories of one scope: the database itself, or one transaction."""

    @property
    def jobs(self) -> JobRepository:
        """Jobs: polling, leases, delivery, listing."""
        ...

    @property
    def ledger(self) -> LedgerRepository:
        """Ledger, anomalies and reservations."""
        ...

    @property
    def guilds(self) -> GuildRepository:
        """Guild settings, limits, channels and keys."""
        ...

    @property
    def meta(self) -> MetaRepository:
        """Small named values (command-sync hash...)."""
        ...

    @property
    def cards(self) -> CardRepository:
        """Result requests and confirmation thresholds (the buttons under results)."""
        ...

    @property
    def sequences(self) -> SequenceStore:
        """Video sequences: clips continued from one another, and each guild's bound."""
        ...

    @property
    def policy(self) -> PolicyRepository:
        """Role tiers, model list, blocked terms, cooldowns and the audit log (issue 13)."""
        ...

    @property
    def conversations(self) -> ConversationRepository:
        """``/chat`` conversations and their turns, by thread (issue 21)."""
        ...

    @property
    def members(self) -> MemberSettingsRepository:
        """Members' own defaults (issue 22, ``/settings``)."""
        ...


class Database(Repositories, Protocol):
    """An open database: the repositories plus transactions, health and shutdown.

    Built by :meth:`bot.storage.database.Database.open_sqlite` or ``open_postgresql``, which
    migrate the schema first and raise :class:`SchemaTooNewError` for a newer one.
    """

    @property
    def engine(self) -> str:
        """The engine's name: ``"sqlite"`` or ``"postgresql"`` (for logs and metrics)."""
        ...

    @property
    def rates(self) -> RateWindowRepository:
        """The shared per-key rate windows (never inside a transaction)."""
        ...

    @property
    def schema_version(self) -> int:
        """The schema version the database is at.

        The position of its Alembic revision in the one sequence of both engines
        (``bot.storage.migrations``; ``0001_baseline`` is 1).
        """
        ...

    def transaction(self) -> AbstractAsyncContextManager[Repositories]:
        """Open one transaction; ``async with db.transaction() as tx:`` yields its repositories.

        Commits when the block exits normally; rolls back when it raises or is cancelled. The
        yielded repositories must not be used after the block. Not re-entrant: inside the
        block use only the yielded repositories (an engine may make ``db.*`` wait for the
        block to end, as SQLite's single writer does).
        """
        ...

    async def ping(self) -> None:
        """Check cheaply that the database answers (a trivial query; for health checks).

        Raises:
            StorageUnavailableError: the database did not answer.
        """
        ...

    async def close(self) -> None:
        """Close the connections once a write in progress finishes; unusable afterwards."""
        ...
