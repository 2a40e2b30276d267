"""The services' wiring: a stored concern's service is reached without a line in the wiring."""

from __future__ import annotations

from bot.clock import Clock, ManualClock
from bot.i18n import SHIPPED, translations
from bot.storage import Database
from bot.storage.repos.meta import MetaStore
from tests.support.stack import Stack, services_on_emulator


class NoteService:
    """A stand-in for a new concern's service: built from the database and the clock only."""

    def __init__(self, db: Database, clock: Clock) -> None:
        self.db = db
        self.clock = clock

    async def remember(self, text: str) -> None:
        await self.db.of(MetaStore).set("note", f"{text} at {self.clock.time():.0f}")


async def test_a_concern_s_service_is_built_once_from_the_shared_database(stack: Stack) -> None:
    services = stack.services
    notes = services.service(NoteService)
    assert services.service(NoteService) is notes  # one instance per process, like the others
    assert notes.db is services.db and notes.clock is services.clock
    await notes.remember("hello")
    assert await services.db.meta.get("note") == f"hello at {stack.clock.time():.0f}"


async def test_every_shipped_catalogue_is_compiled_when_the_services_are_built() -> None:
    """Not on the event loop at a locale's first answer."""
    translations.cache_clear()
    async with services_on_emulator(ManualClock()):
        compiled = translations.cache_info().currsize
        assert compiled >= len(SHIPPED)  # the shipped ones, and the source language
