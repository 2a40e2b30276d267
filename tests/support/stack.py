"""The services of the bot on a manual clock, against the sandbox emulator.

Everything is real but Discord: the emulator over loopback HTTP, a database of the test's
engine. The emulator and the bot read the same manual clock, so task durations, rate windows
and budgets' days pass without sleeping.
"""

import contextlib
import tempfile
from collections.abc import AsyncIterator
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import httpx2 as httpx
from pydantic import SecretStr

from bot.clock import ManualClock
from bot.domain import Actor
from bot.genapi.catalogue import CatalogueCache
from bot.genapi.client import GenAPIClient
from bot.genapi.ratelimit import RateLimiter
from bot.sandbox import GenApiEmulator
from bot.services.billing import Billing
from bot.services.creative import CreativeService
from bot.services.drafts import DraftService
from bot.services.generation import GenerationService, KeyProblem
from bot.services.keys import KeyResolver
from bot.services.schedule import PollSchedule
from bot.services.submissions import SubmissionService
from bot.storage import Database
from bot.wiring import Services, assemble_services, open_database
from tests.support.settings import make_settings

ADMIN_ACTOR = Actor(9, "discord")
"""An admin changing settings with ``/config``, for tests that set a server up (audited)."""

GENERATION_TIMEOUT = httpx.Timeout(5.0, read=1.0)
"""The emulator answers in milliseconds; a short read timeout lets tests provoke one."""


@dataclass
class Stack:
    """The bot's services, built by ``bot.wiring`` as ``python -m bot`` builds them."""

    clock: ManualClock
    api: GenApiEmulator
    key: str
    services: Services
    notices: list[tuple[int, int, KeyProblem]] = field(default_factory=list)

    @property
    def db(self) -> Database:
        return self.services.db

    @property
    def client(self) -> GenAPIClient:
        return self.services.client

    @property
    def billing(self) -> Billing:
        return self.services.billing

    @property
    def keys(self) -> KeyResolver:
        return self.services.keys

    @property
    def schedule(self) -> PollSchedule:
        return self.services.schedule

    @property
    def catalogue(self) -> CatalogueCache:
        return self.services.catalogue

    @property
    def generation(self) -> GenerationService:
        return self.services.generation

    def posts(self) -> int:
        return sum(1 for r in self.api.requests if r.method == "POST")


@contextlib.asynccontextmanager
async def services_on_emulator(
    clock: ManualClock, **settings: Any
) -> AsyncIterator[tuple[Services, GenApiEmulator, str]]:
    """Services as ``python -m bot`` builds them (``assemble_services``), on the API emulator.

    Yields the services, the emulator and the default key (100,000 cents of credit); the
    database is closed on the way out. ``settings`` are passed to :func:`make_settings`;
    without a database among them, a fresh SQLite file in a temporary folder (never the
    working tree's ``data/bot.db``, which another run may have left at an older schema).
    """
    async with contextlib.AsyncExitStack() as stack:
        if "database_path" not in settings and "database_url" not in settings:
            folder = stack.enter_context(tempfile.TemporaryDirectory(prefix="genbot-stack-"))
            settings["database_path"] = Path(folder) / "bot.db"
        api = await stack.enter_async_context(GenApiEmulator(clock=clock.monotonic))
        http = await stack.enter_async_context(httpx.AsyncClient())
        key = api.create_key(balance_cents=100_000)
        made = make_settings(genapi_api_key=key, genapi_base_url=api.base_url, **settings)
        db = await open_database(made, clock)
        client = GenAPIClient(
            api.base_url,
            http=http,
            limiter=RateLimiter(clock),
            clock=clock,
            generation_timeout=GENERATION_TIMEOUT,
        )
        try:
            yield assemble_services(made, clock, db, client, SecretStr(key)), api, key
        finally:
            await db.close()


def on_keys(stack: Stack, keys: KeyResolver) -> Stack:
    """The stack, its generation service and poller resolving keys with ``keys``."""
    generation = GenerationService(
        client=stack.client,
        catalogue=stack.catalogue,
        billing=stack.billing,
        keys=keys,
        db=stack.db,
        schedule=stack.schedule,
        clock=stack.clock,
    )
    services = stack.services
    creative = CreativeService(stack.db, stack.clock, generation, services.guild_config)
    drafts = DraftService(
        db=stack.db,
        generation=generation,
        billing=stack.billing,
        members=services.members,
        guild_config=services.guild_config,
    )
    submissions = SubmissionService(
        generation=generation,
        sequences=services.sequences,
        members=services.members,
        guild_config=services.guild_config,
        creative=creative,
        drafts=drafts,
    )
    stack.services = replace(
        services,
        keys=keys,
        generation=generation,
        submissions=submissions,
        creative=creative,
        drafts=drafts,
    )
    return stack
