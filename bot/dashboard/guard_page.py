"""The dashboard's Guard page: every alert of the spend guard, the pause and its Resume button.

The Overview's guard panel is :mod:`bot.dashboard.guard_panel`. docs/guard.md, issue 38.

Resume goes through the dashboard's one write path: an editor only (403 otherwise), the
session's form token and this origin (:meth:`Dashboard.check_form`), the member's write limit
(shared with the settings pages), and an optimistic check: the form carries the pause it was
rendered from (``base``), and a pause that changed meanwhile (resumed by another admin, or
paused again) changes nothing (409). The resume is audited like ``/config guard resume``
(``spending: paused → on``, ``via="web"``) and posted in the admin channel.
"""

from __future__ import annotations

import asyncio
import hashlib
import logging
from typing import Final, Protocol

from aiohttp import web

from bot.dashboard.app import Dashboard
from bot.dashboard.forms import web_actor
from bot.dashboard.guard_panel import alert_view
from bot.dashboard.pages import Pages
from bot.domain import GuardSettings
from bot.i18n import N_, _
from bot.services.guard import SpendGuard


class SaveThrottle(Protocol):
    """The settings pages' write limit: ``bot.dashboard.editing.SaveThrottle``.

    editing.py adds this page, so it is not imported from there.
    """

    def allow(self, user_id: int) -> bool:
        """Count a save of the member's; False (not counted) when over the limit."""
        ...


RESUMED: Final = N_("Paid requests are allowed again.")
NOT_PAUSED: Final = N_("Paid requests were not paused; nothing changed.")
PAUSE_CHANGED: Final = N_(
    "The pause changed since you opened the page (another admin resumed or it paused again); "
    "nothing was done. The page now shows the current state."
)
NOT_AN_EDITOR: Final = N_("You may view this server's guard but not resume its spending.")
TOO_MANY_WRITES: Final = N_("Too many changes in a minute; wait a little and try again.")

log = logging.getLogger(__name__)


def pause_base(config: GuardSettings) -> str:
    """The version of the pause a Resume form was rendered from."""
    seen = f"{config.paused_at!r} {config.paused_by!r}".encode()
    return hashlib.sha256(seen).hexdigest()[:32]


class GuardPages(Pages):
    """The Guard page's handlers.

    Args:
        app: the dashboard.
        limiter: the settings pages' write limiter (one budget of saves per member).
    """

    def __init__(self, app: Dashboard, limiter: SaveThrottle) -> None:
        super().__init__(app)
        self.guard: SpendGuard = app.services.guard
        self.limiter = limiter
        self._lock = asyncio.Lock()

    async def page(
        self,
        request: web.Request,
        *,
        error: str | None = None,
        notice: str | None = None,
        status: int = 200,
    ) -> web.Response:
        """``/servers/<id>/guard``: every alert (newest first), the pause and Resume."""
        _signed, guild_id, rights = await self._server(request)
        config = await self.guard.settings(guild_id)
        alerts = [alert_view(a) for a in await self.guard.alerts(guild_id, 500)]
        return self._render(
            request,
            "guard.html",
            guild_id,
            rights,
            "guard",
            status=status,
            error=error,
            notice=notice,
            config=config,
            alerts=alerts,
            base=pause_base(config),
        )

    async def resume(self, request: web.Request) -> web.Response:
        """POST ``/servers/<id>/guard``: resume paid requests, as ``/config guard resume``."""
        signed, guild_id, rights = await self._server(request)
        if not rights.may_edit:
            raise web.HTTPForbidden(text=_(NOT_AN_EDITOR))
        form = await self.app.check_form(request, signed)
        if not self.limiter.allow(signed.user_id):
            raise web.HTTPTooManyRequests(text=_(TOO_MANY_WRITES))
        async with self._lock:
            config = await self.guard.settings(guild_id)
            if pause_base(config) != form.get("base", ""):
                return await self.page(request, error=_(PAUSE_CHANGED), status=409)
            # Audited and posted in the admin channel by the service (one place for the audit).
            async with self.services.guild_config.changing(guild_id, web_actor(signed.user_id)):
                resumed = await self.guard.resume(guild_id)
        return await self.page(request, notice=_(RESUMED if resumed else NOT_PAUSED))


def add_guard_pages(app: Dashboard, routes: web.UrlDispatcher, limiter: SaveThrottle) -> GuardPages:
    """Add ``/servers/<id>/guard`` (GET, POST) and return the pages (the Overview's panel)."""
    pages = GuardPages(app, limiter)
    resource = routes.add_resource("/servers/{guild_id}/guard", name="guard")
    resource.add_route("GET", pages.page)
    resource.add_route("POST", pages.resume)
    return pages


__all__ = ["GuardPages", "add_guard_pages", "pause_base"]
