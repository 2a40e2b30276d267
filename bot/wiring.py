"""The one place that opens the database and builds every service the bot shares.

``python -m bot`` (:func:`bot.__main__.run`) calls :func:`build_services`; the bot
(:class:`bot.discord.bot.GenBot`) receives the result and builds only what needs Discord (the
announcer and the poller that uses it, and the admin notices). The tests' fixtures use
:func:`open_database` and :func:`assemble_services`, the same code minus the network set-up.
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TypeVar, cast

import httpx2 as httpx
from pydantic import SecretStr
from sqlalchemy.exc import DBAPIError

from bot.clock import Clock
from bot.config import Settings, SettingsError, redact_database_url, settlement_spool_file
from bot.genapi.catalogue import CatalogueCache
from bot.genapi.client import GenAPIClient
from bot.genapi.downloads import Downloads
from bot.genapi.outputs import output_client
from bot.genapi.ratelimit import Limiter, RateLimiter
from bot.genapi.shared_ratelimit import SharedRateLimiter
from bot.genapi.slots import RATE_WINDOW_MARGIN, SlotRules
from bot.genapi.transport import ApiTransport
from bot.i18n import warm as warm_languages
from bot.jobs.announcer import JobAnnouncer
from bot.jobs.poller import (
    DELIVERY_BACKOFF_FIRST,
    DELIVERY_BACKOFF_MAX,
    NOT_FOUND_RETRY,
    Poller,
)
from bot.media.safety import SafetyModelError, SafetyScorer, load_model
from bot.ops.health import refresh_job_counts
from bot.ops.metrics import Metrics
from bot.sandbox import GenApiEmulator
from bot.services.billing import Billing
from bot.services.command_sync import CommandSync
from bot.services.conversations import ConversationService
from bot.services.creative import CreativeService
from bot.services.credits import CreditService, MemberCredits
from bot.services.dashboard import DashboardService
from bot.services.drafts import DraftService
from bot.services.generation import GenerationService
from bot.services.guard import SpendGuard
from bot.services.guild_config import GuildConfigService
from bot.services.joins import JoinService
from bot.services.keys import KeyResolver, KeyVault
from bot.services.member_settings import MemberSettingsService
from bot.services.private_cards import PrivateCards
from bot.services.response_tokens import ResponseTokens
from bot.services.retention import Retention, RetentionPeriods
from bot.services.safety import SafetyService
from bot.services.schedule import MAX_INTERVAL, MIN_INTERVAL, PollSchedule, scaled_priors
from bot.services.sequences import SequenceService
from bot.services.settlement_spool import SettlementSpool
from bot.services.showcase import ShowcaseService
from bot.services.submissions import SubmissionService
from bot.services.thumbnails import ThumbnailService
from bot.storage import Database
from bot.storage.engine import DatabaseUnavailable

log = logging.getLogger(__name__)

S = TypeVar("S")


@dataclass(frozen=True, slots=True)
class Services:
    """Everything the cogs and the poller share; built once by :func:`build_services`.

    Attributes:
        db: the database (either engine: :class:`bot.storage.Database`).
        generation: ``/text``, ``/image``, ``/video``; its admin notifier is set by the bot.
        guild_config: ``/config``.
        conversations: ``/chat`` conversations in threads.
        members: members' own defaults (``/settings``).
        response_tokens: personal jobs' interaction tokens, kept encrypted.
        private_cards: where private results' cards are (the member's DM, or a response).
        command_sync: the hash of the command definitions last synced with Discord.
        sequences: video sequences (Continue) and each server's bound on them.
        submissions: the member actions that charge (a video, its takes, Continue, an image,
            a text), one method each.
        drafts: Draft → Final (:mod:`bot.services.drafts`): the draft models, a draft's and a
            Final's options; the same the submissions use.
        creative: ✨ Enhance, styles and characters (:mod:`bot.services.creative`); the same
            the submissions use.
        guard: the spend guard (thresholds, the key's runway, anomalies and the pause), told
            of every charge by billing; its outlets are set by the bot.
        sandbox: results come from the built-in emulator, and say so.
        default_key: the bot-wide key (``GENAPI_API_KEY``, or the sandbox's own).
        metrics: the process's metrics (``bot/ops/metrics.py``), also given to the client, the
            limiter and billing where they are built.
        downloads: the one pooled client results are downloaded with, under the download
            rule (``bot.genapi.outputs``: the API's origin, else https on public addresses);
            None where no network was set up (the tests' services).
        safety: scores results before they are shown (``SAFETY_MODEL``, docs/safety.md);
            without a model it says checking is unavailable (:attr:`SafetyScorer.available`).
    """

    settings: Settings
    clock: Clock
    db: Database
    client: GenAPIClient
    catalogue: CatalogueCache
    billing: Billing
    vault: KeyVault
    keys: KeyResolver
    schedule: PollSchedule
    generation: GenerationService
    guild_config: GuildConfigService
    conversations: ConversationService
    members: MemberSettingsService
    response_tokens: ResponseTokens
    private_cards: PrivateCards
    command_sync: CommandSync
    sequences: SequenceService
    submissions: SubmissionService
    drafts: DraftService
    creative: CreativeService
    guard: SpendGuard
    sandbox: bool
    default_key: SecretStr | None = None
    metrics: Metrics = field(default_factory=Metrics)
    downloads: httpx.AsyncClient | None = None
    safety: SafetyScorer = field(default_factory=lambda: SafetyScorer(None))
    _concerns: dict[object, object] = field(
        default_factory=dict, init=False, repr=False, compare=False
    )

    def _once(self, kind: type[S], build: Callable[[], S]) -> S:
        """The process's one ``kind`` of service, made by ``build`` on first use, then shared."""
        if kind not in self._concerns:
            self._concerns[kind] = build()
        return cast(S, self._concerns[kind])

    @property
    def moderation(self) -> SafetyService:
        """The safety policy over :attr:`safety` (held results, reports, reviews), built once."""
        return self._once(SafetyService, lambda: SafetyService(self.db, self.safety, self.clock))

    @property
    def credits(self) -> CreditService:
        """Members' credit packs and balances (docs/credits.md), built once."""
        return self._once(CreditService, lambda: CreditService(self.db, self.clock, self.settings))

    @property
    def joins(self) -> JoinService:
        """Join (several videos as one film) and Continue's frame, over :attr:`downloads`."""
        return self._once(
            JoinService,
            lambda: JoinService(self.sequences.joins, Downloads(self.downloads).to_file),
        )

    @property
    def thumbnails(self) -> ThumbnailService:
        """The dashboard's small pictures of results (docs/dashboard.md), built once."""
        return self._once(ThumbnailService, lambda: ThumbnailService(self.db, self.clock))

    @property
    def showcases(self) -> ShowcaseService:
        """Servers' public showcases, built once."""
        return self._once(ShowcaseService, lambda: ShowcaseService(self.db, self.clock))

    @property
    def dashboard(self) -> DashboardService:
        """The dashboard's reads (lists, totals, spend), built once."""
        return self._once(DashboardService, lambda: DashboardService(self.db, self.clock))

    async def ping_database(self) -> None:
        """Return when the database answers (``/readyz``); raise its error when it does not."""
        await self.db.ping()

    async def count_open_jobs(self) -> None:
        """Set the ``genbot_jobs`` gauges from the open jobs by state and kind (``/metrics``)."""
        await refresh_job_counts(self.metrics, self.db.jobs.state_counts)


OnSecret = Callable[[str], None]
"""Called with every secret the services come to hold (a decrypted key, the sandbox's key), so
that the log redaction filter (``bot/ops/logs.py``) learns it before any line could carry it."""


async def open_database(settings: Settings, clock: Clock) -> Database:
    """Open and migrate the database the settings name.

    PostgreSQL at ``DATABASE_URL`` when it is set (it wins over ``DATABASE_PATH``), else SQLite
    at ``DATABASE_PATH``.

    Raises:
        SettingsError: the database cannot be opened (e.g. a read-only disk, a PostgreSQL
            server that cannot be reached); one line, never the URL's password.
        SchemaTooNewError: the database was written by a newer release.
    """
    if settings.database_url is not None:
        url = settings.database_url.get_secret_value()
        try:
            db: Database = await Database.open_postgresql(url, clock=clock)
        except DatabaseUnavailable as exc:
            raise SettingsError(str(exc)) from None
        log.info(
            "database: PostgreSQL at %s, schema version %d",
            redact_database_url(url),
            db.schema_version,
        )
        return db
    try:
        db = await Database.open_sqlite(
            settings.database_path,
            clock=clock,
            busy_timeout_ms=round(settings.database_busy_timeout_seconds * 1000),
        )
    except (DBAPIError, OSError) as exc:
        # e.g. a read-only disk that os.access could not see (check_database_path).
        reason = exc.orig if isinstance(exc, DBAPIError) else exc  # the driver's one line
        raise SettingsError(
            f"DATABASE_PATH: cannot open {settings.database_path}: {reason}"
        ) from None
    log.info("database: SQLite at %s, schema version %d", settings.database_path, db.schema_version)
    return db


def sandbox_state_path(database_path: Path) -> Path:
    """Where sandbox mode keeps its emulator's key and tasks: beside the database.

    ``data/bot.db`` gives ``data/bot.sandbox.json``. Kept with the database, so a pending
    sandbox video survives a restart exactly as the job row that waits for it does.
    """
    return database_path.with_name(database_path.stem + ".sandbox.json")


async def _start_sandbox(settings: Settings, stack: contextlib.AsyncExitStack) -> tuple[str, str]:
    """Start the built-in emulator; return its base URL and its key (kept across restarts).

    Raises:
        SettingsError: its state file beside the database cannot be read or written.
    """
    emulator = GenApiEmulator(time_scale=settings.sandbox_time_scale)
    state_path = sandbox_state_path(settings.database_path)
    try:
        keys = emulator.load(state_path)
        key = keys[0] if keys else emulator.create_key()
        emulator.persist_to(state_path)
    except (OSError, ValueError) as exc:
        raise SettingsError(
            f"DATABASE_PATH: cannot keep the sandbox state in {state_path}: {exc}"
        ) from None
    await emulator.start()
    stack.push_async_callback(emulator.stop)
    log.warning(
        "SANDBOX MODE: GENAPI_BASE_URL is not set, so the built-in emulator at %s "
        "answers every request; results are marked as sandbox and cost nothing. "
        "Its key and tasks are kept in %s. To leave it, set GENAPI_BASE_URL to the "
        "Generation API's address and restart, then give each server its key with "
        "/config api-key set (or the bot one key for every server: docs/settings.md).",
        emulator.base_url,
        state_path,
    )
    return emulator.base_url, key


def build_safety(settings: Settings, metrics: Metrics | None = None) -> SafetyScorer:
    """The safety scorer ``SAFETY_MODEL`` asks for (its pool's threads and timeout set).

    The model's files are checked here, its weights loaded later in the scorer's own pool
    (:meth:`SafetyScorer.warm_up`, or the first score). Close it with
    :meth:`SafetyScorer.close`.

    Raises:
        SettingsError: ``SAFETY_MODEL: <why>``, one line (a missing file, no unsafe label among
            the model's, NudeNet not installed).
    """
    try:
        model = load_model(settings.safety_model, settings.unsafe_labels)
    except SafetyModelError as exc:
        raise SettingsError(f"SAFETY_MODEL: {exc}") from None
    return SafetyScorer(
        model,
        threads=settings.safety_threads,
        timeout=settings.safety_timeout,
        metrics=metrics,
    )


async def start_safety(services: Services) -> None:
    """Log whether results are checked (model, labels) in one line, and load the model now.

    The model is loaded in the scorer's pool rather than on the first result. Called by the
    entry points (``python -m bot``, ``python -m bot worker``) once their services are built;
    a model that fails to load is logged, and results are then held for review (fail closed).
    """
    log.info("%s", services.safety.describe())
    await services.safety.warm_up()


def assemble_services(
    settings: Settings,
    clock: Clock,
    db: Database,
    client: GenAPIClient,
    default_key: SecretStr | None,
    *,
    metrics: Metrics | None = None,
    on_secret: OnSecret | None = None,
    downloads: httpx.AsyncClient | None = None,
    safety: SafetyScorer | None = None,
) -> Services:
    """Build the services over an open database and API client (no network I/O).

    The shipped message catalogues are compiled here, once per process
    (:func:`bot.i18n.warm`).

    Args:
        settings: the bot's settings (defaults of limits, job timeout...).
        clock: the clock every service reads.
        db: the open database.
        client: the API client.
        default_key: the bot-wide key; None when servers must bring their own.
        metrics: the process's metrics; a fresh, unserved registry when None.
        on_secret: learns every key the vault encrypts or decrypts.
        downloads: the client results are downloaded with (:attr:`Services.downloads`).
        safety: the safety scorer (:func:`build_safety`); None: checking unavailable.
    """
    metrics = Metrics() if metrics is None else metrics
    warm_languages()  # at start-up, never on the event loop at a locale's first answer
    vault = KeyVault(settings.key_encryption_key, on_key=on_secret)
    catalogue = CatalogueCache(client, clock)
    billing = Billing(
        db,
        settings,
        clock,
        metrics=metrics,
        spool=SettlementSpool(settlement_spool_file(settings)),
        credits=MemberCredits(settings.credit_pack_cents, settings.credit_markup_percent),
    )
    keys = KeyResolver(
        db,
        vault,
        default_key,
        clock=clock,
        personal_allowance=settings.personal_daily_budget_cents > 0,
    )
    # Refreshed from the jobs table on a TTL: a gateway without a poller finishes no job, and
    # each worker sees only the jobs it finished itself.
    schedule = PollSchedule(
        db.jobs.completion_seconds,
        max_interval=settings.scaled(MAX_INTERVAL),
        priors=scaled_priors(settings.wait_scale),
        clock=clock,
    )
    generation = GenerationService(
        client=client,
        catalogue=catalogue,
        billing=billing,
        keys=keys,
        db=db,
        schedule=schedule,
        placeholder_grace=settings.placeholder_grace_seconds,
        clock=clock,
    )
    guild_config = GuildConfigService(
        db=db,
        keys=keys,
        vault=vault,
        billing=billing,
        client=client,
        default_key_set=default_key is not None,
        catalogue=catalogue,
        clock=clock,
        credit_packs_offered=bool(settings.credit_pack_cents),
    )
    members = MemberSettingsService(
        db=db,
        billing=billing,
        catalogue=catalogue,
        clock=clock,
        # Kept in memory where this process is the only one (it alone changes them).
        cache=not settings.rate_limit_shared,
    )
    sequences = SequenceService(db, clock)
    creative = CreativeService(db, clock, generation, guild_config)
    guard = SpendGuard(db, clock, billing, settings)
    billing.set_watcher(guard.after_charge)
    drafts = DraftService(
        db=db, generation=generation, billing=billing, members=members, guild_config=guild_config
    )
    return Services(
        settings=settings,
        clock=clock,
        db=db,
        client=client,
        catalogue=catalogue,
        billing=billing,
        vault=vault,
        keys=keys,
        schedule=schedule,
        generation=generation,
        guild_config=guild_config,
        conversations=ConversationService(
            db=db,
            generation=generation,
            clock=clock,
            max_prompt_chars=settings.chat_max_prompt_chars,
            max_turns=settings.chat_max_turns,
            members=members,
            catalogue=catalogue,
        ),
        members=members,
        response_tokens=ResponseTokens(db, vault, clock),
        private_cards=PrivateCards(db),
        sequences=sequences,
        submissions=SubmissionService(
            generation=generation,
            sequences=sequences,
            members=members,
            guild_config=guild_config,
            creative=creative,
            drafts=drafts,
        ),
        drafts=drafts,
        creative=creative,
        guard=guard,
        command_sync=CommandSync(db),
        sandbox=settings.sandbox,
        default_key=default_key,
        metrics=metrics,
        downloads=downloads,
        safety=SafetyScorer(None) if safety is None else safety,
    )


def build_poller(services: Services, announcer: JobAnnouncer) -> Poller:
    """The poller over ``services``, delivering through ``announcer`` (the Discord side).

    The one place a poller is built, for the gateway (``GenBot``) and for ``python -m bot
    worker``: its leases, timeouts and waits come from the settings (``WAIT_SCALE`` shortens
    the delivery backoff in the end-to-end tests).
    """
    settings = services.settings
    return Poller(
        db=services.db,
        client=services.client,
        keys=services.keys,
        schedule=services.schedule,
        announcer=announcer,
        clock=services.clock,
        job_timeout=settings.job_timeout_seconds,
        lease=settings.poll_lease_seconds,
        delivery_lease=settings.delivery_lease_seconds,
        drain_grace=settings.shutdown_grace_seconds,
        delivery_backoff_first=settings.scaled(DELIVERY_BACKOFF_FIRST),
        delivery_backoff_max=settings.scaled(DELIVERY_BACKOFF_MAX),
        metrics=services.metrics,
        # Never closer than the spec's least interval between two polls of a job.
        not_found_retry=tuple(max(MIN_INTERVAL, settings.scaled(s)) for s in NOT_FOUND_RETRY),
    )


RESERVATION_SWEEP_SECONDS = 300.0
"""Seconds between two sweeps of :func:`sweep_stale`."""


async def sweep_stale(services: Services) -> None:
    """Release what unsettled requests left, every :data:`RESERVATION_SWEEP_SECONDS`.

    Run for ever by each gateway process as a supervised background task (``GenBot``): the
    budget reservations and the credit holds expired by now (docs/credits.md: an expired hold
    stops counting at once, and its row goes here), the keys kept for a request that ended
    without a job, and the settlements spooled while the database failed, once it answers.
    """
    while True:
        expired = await services.billing.expire_stale()
        if expired:
            log.info("released %d stale budget reservations", expired)
        held = await services.credits.expire_holds()
        if held:
            log.info("released %d stale credit holds", held)
        await services.keys.sweep_retired()
        await services.billing.replay_spool()
        await services.clock.sleep(RESERVATION_SWEEP_SECONDS)


def build_retention(services: Services) -> Retention:
    """The retention sweep over ``services``: its periods and interval from the settings.

    Run by each gateway process as a supervised background task (``GenBot``).
    """
    settings = services.settings
    return Retention(
        services.db,
        services.clock,
        RetentionPeriods.from_settings(settings),
        interval=settings.retention_sweep_seconds,
        metrics=services.metrics,
    )


async def build_services(
    settings: Settings,
    clock: Clock,
    stack: contextlib.AsyncExitStack,
    *,
    metrics: Metrics | None = None,
    on_secret: OnSecret | None = None,
) -> Services:
    """Open the database, start the sandbox if needed, and build every shared service.

    Everything opened is closed by ``stack`` (database, emulator, HTTP connections).
    ``metrics`` and ``on_secret`` are as in :func:`assemble_services`.

    Raises:
        SettingsError: the database or the sandbox state cannot be opened, or the safety
            model cannot be used.
        SchemaTooNewError: the database was written by a newer release.
    """
    metrics = Metrics() if metrics is None else metrics
    # Before anything is opened: a model that cannot be used stops start-up at once.
    safety = build_safety(settings, metrics)
    stack.callback(safety.close)
    db = await open_database(settings, clock)
    stack.push_async_callback(db.close)
    base_url = settings.genapi_base_url
    default_key = settings.genapi_api_key
    if base_url is None:
        if settings.genapi_api_key is not None:
            log.warning(
                "GENAPI_API_KEY is set but GENAPI_BASE_URL is not: running in sandbox "
                "mode, and that key is not used; set GENAPI_BASE_URL to use the real API."
            )
        base_url, sandbox_key = await _start_sandbox(settings, stack)
        if on_secret is not None:
            on_secret(sandbox_key)
        default_key = SecretStr(sandbox_key)
    # aiohttp's pool under httpx's interface: under half httpcore's CPU a poll (transport.py).
    limits = httpx.Limits(max_connections=200, max_keepalive_connections=50)
    http = await stack.enter_async_context(httpx.AsyncClient(transport=ApiTransport(limits=limits)))
    # Results are fetched by their own pool: an output URL is the service's choice, not ours.
    downloads = await stack.enter_async_context(output_client(base_url))
    limiter: Limiter
    rules = SlotRules(
        limit=settings.genapi_rate_limit,
        window=settings.genapi_rate_window_seconds + RATE_WINDOW_MARGIN,
    )
    if settings.rate_limit_shared:
        # Several processes may use one key: the window lives in the database.
        limiter = SharedRateLimiter(clock, db.rates, rules, metrics=metrics)
    else:
        # One process: its window starts from what the database recorded.
        limiter = RateLimiter(clock, rules, metrics=metrics, rates=db.rates)
    client = GenAPIClient(
        base_url,
        http=http,
        limiter=limiter,
        clock=clock,
        interactive_max_wait=settings.queue_max_wait_seconds,
        known_keys=() if default_key is None else (default_key,),
        metrics=metrics,
    )
    services = assemble_services(
        settings,
        clock,
        db,
        client,
        default_key,
        metrics=metrics,
        on_secret=on_secret,
        downloads=downloads,
        safety=safety,
    )
    # Paid answers the database could not take last time are recorded before anything else:
    # before the poller looks for jobs and before any command is accepted.
    await services.billing.replay_spool()
    if settings.genapi_base_url is not None:
        # Stored encrypted, so that its jobs outlive a change of GENAPI_API_KEY.
        # Not the sandbox's key: it lives in the sandbox's state file with its tasks.
        await services.keys.keep_default()
    return services
