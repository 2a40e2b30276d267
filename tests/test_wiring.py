"""The services' wiring: each service is reached one way, and built once."""

from __future__ import annotations

from bot.clock import ManualClock
from bot.i18n import SHIPPED, translations
from tests.support.stack import Stack, services_on_emulator


async def test_a_service_built_on_first_use_is_the_process_s_one(stack: Stack) -> None:
    services = stack.services
    showcases = services.showcases
    assert services.showcases is showcases  # one instance per process, like the others
    assert services.thumbnails is services.thumbnails


async def test_every_shipped_catalogue_is_compiled_when_the_services_are_built() -> None:
    """Not on the event loop at a locale's first answer."""
    translations.cache_clear()
    async with services_on_emulator(ManualClock()):
        compiled = translations.cache_info().currsize
        assert compiled >= len(SHIPPED)  # the shipped ones, and the source language
