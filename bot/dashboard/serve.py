"""Starting the dashboard beside the bot (``python -m bot``) or a worker."""

from __future__ import annotations

import contextlib
import logging

from bot.clock import Clock
from bot.config import Settings, SettingsError
from bot.dashboard.app import Dashboard
from bot.dashboard.editing import add_all_pages
from bot.dashboard.rights import Directory
from bot.wiring import Services

log = logging.getLogger("bot")


async def serve_dashboard(
    settings: Settings,
    services: Services,
    directory: Directory,
    *,
    application_id: int,
    clock: Clock,
    stack: contextlib.AsyncExitStack,
) -> Dashboard | None:
    """Serve the dashboard when it is configured; print the redirect URI to register.

    Nothing is served (None) unless ``DASHBOARD_PUBLIC_URL`` and ``DISCORD_CLIENT_SECRET`` are
    both set. It is stopped by ``stack``.

    Raises:
        SettingsError: ``DASHBOARD_PORT: cannot listen on ...`` (in use, not permitted).
    """
    if not settings.dashboard_enabled:
        if settings.dashboard_public_url is not None:
            log.warning("DASHBOARD_PUBLIC_URL is set without DISCORD_CLIENT_SECRET: no dashboard")
        return None
    dashboard = Dashboard(
        settings,
        services,
        directory,
        application_id=application_id,
        clock=clock,
        pages=add_all_pages,
    )
    where = f"{settings.dashboard_host}:{settings.dashboard_listen_port}"
    try:
        await dashboard.start()
    except OSError as exc:
        raise SettingsError(
            f"DASHBOARD_PORT: cannot listen on {where}: {exc.strerror or exc}"
        ) from None
    stack.push_async_callback(dashboard.stop)
    log.info(
        "dashboard at %s (listening on %s); OAuth2 redirect URI to add in the Discord "
        "developer portal (OAuth2, Redirects): %s",
        settings.dashboard_public_url,
        where,
        settings.dashboard_redirect_uri,
    )
    return dashboard
