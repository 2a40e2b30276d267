"""One bot process per test module: started once, shared by that module's scenarios."""

import warnings
from collections.abc import AsyncIterator
from pathlib import Path

import pytest
import pytest_asyncio

from tests.support.e2e.harness import BOT_TOKEN, World, close_world, open_world


@pytest_asyncio.fixture(loop_scope="module", scope="module")
async def world(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> AsyncIterator[World]:
    """The module's world; a module's ``BOT_OVERRIDES`` (a dict) replace parts of the bot's
    environment."""
    overrides = getattr(request.module, "BOT_OVERRIDES", None)
    opened = await open_world(Path(tmp_path_factory.mktemp("e2e")), overrides=overrides)
    yield opened
    await close_world(opened)
    if opened.discord.late_acks:
        warnings.warn(f"acknowledged after Discord's 3 s: {opened.discord.late_acks}", stacklevel=1)
    # Whatever the scenarios did, the bot never made Discord choke or leak a secret.
    assert opened.discord.unhandled == []
    assert opened.discord.server_errors == []
    log = opened.bot.log()
    assert opened.key not in log
    assert BOT_TOKEN not in log
    assert "Traceback" not in log
