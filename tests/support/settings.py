"""Settings for tests: the bot's own ``Settings``, without reading any ``.env`` file."""

from typing import Any

from pydantic import SecretStr

from bot.config import Settings


def make_settings(**overrides: Any) -> Settings:
    values: dict[str, Any] = {"discord_token": SecretStr("test-token")}
    values.update(overrides)
    return Settings(_env_file=None, **values)
