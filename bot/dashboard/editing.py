"""The dashboard's editing pages: the server's settings changed from the web, as ``/config``.

Each settings page is a :class:`~bot.dashboard.forms.SettingsForm` (the pages themselves are
in :mod:`bot.dashboard.settings_forms`); this module serves them all the same way. One policy
path: every save calls the same :class:`~bot.services.guild_config.GuildConfigService`
methods as ``/config``, which audits it (one row per changed setting, marked ``via="web"``)
and posts it in the admin channel as ``/config``'s changes are.

Each save is guarded four ways, in this order:

- the member may edit (Manage Server, or a dashboard role with ``edit``): a viewer's pages
  have no forms, and a POST from a viewer is refused (403);
- the form is the member's own and from this origin (:meth:`Dashboard.check_form`: the
  session's form token, ``Origin``, ``Sec-Fetch-Site``);
- writes are rate-limited per member (:data:`WRITES_PER_MINUTE`);
- optimistic concurrency: each form carries ``base``, a digest of the values it was rendered
  from; a save whose base no longer matches (another admin saved meanwhile, here or with
  ``/config``) changes nothing and is told so (409), with the current values shown.

Every route is named (``url(name, **parts)`` in the templates); a settings page's name is its
form's. User-facing sentences are module constants marked for the catalogue (``N_``), shown
in the request's language (``bot.dashboard.language``).
"""

from __future__ import annotations

import asyncio
import logging
import weakref
from collections import deque
from collections.abc import Awaitable, Callable, Coroutine, Iterable, Mapping
from typing import Any, Final

from aiohttp import web

from bot.clock import Clock
from bot.dashboard import settings_forms, styles_page
from bot.dashboard.app import Dashboard
from bot.dashboard.forms import (
    CHANGED_MEANWHILE,
    FORMS,
    NOTHING_CHANGED,
    SAVED,
    Apply,
    Posted,
    Refused,
    Scope,
    SettingsForm,
    scoped,
    tabs,
    web_actor,
)
from bot.dashboard.guard_page import add_guard_pages
from bot.dashboard.limits import Bounded
from bot.dashboard.pages import Pages, add_pages, open_graph
from bot.dashboard.rights import KEPT, Person
from bot.domain import AuditEntry, ResultItem, Thumbnail
from bot.errors import BotError, ValidationFailed, user_message
from bot.genapi.errors import GenAPIError
from bot.i18n import N_, _
from bot.services.guild_config import GuildConfigService
from bot.services.showcase import PERIODS as SHOWCASE_PERIODS

log = logging.getLogger(__name__)

WRITES_PER_MINUTE: Final = 20
"""Saves one member may make in any 60 seconds, across servers (a script cannot flood the
audit log and the admin channel)."""

NOT_AN_EDITOR: Final = N_("You may view this server's settings but not change them.")
TOO_MANY_WRITES: Final = N_("Too many changes in a minute; wait a little and save again.")
NO_ANSWER: Final = N_("Discord did not answer; try again.")

Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]

__all__ = [
    "WRITES_PER_MINUTE",
    "SaveThrottle",
    "SettingsPages",
    "add_all_pages",
    "settings_forms",
    "styles_page",
]


class SaveThrottle:
    """At most :data:`WRITES_PER_MINUTE` saves per member in any 60 seconds (in memory).

    Args:
        clock: monotonic time.
    """

    def __init__(self, clock: Clock, per_minute: int = WRITES_PER_MINUTE) -> None:
        self._clock = clock
        self._per_minute = per_minute
        # Bounded: a member's saves are forgotten a minute after the last (they count no more
        # by then), and at most KEPT members are remembered.
        self._writes: Bounded[int, deque[float]] = Bounded(KEPT, 60.0, clock.monotonic)

    def allow(self, user_id: int) -> bool:
        """Count a save of the member's; False (not counted) when over the limit."""
        now = self._clock.monotonic()
        writes = self._writes.get(user_id) or deque()
        while writes and writes[0] <= now - 60.0:
            writes.popleft()
        if len(writes) >= self._per_minute:
            return False
        writes.append(now)
        self._writes.put(user_id, writes)
        return True


def add_all_pages(
    app: Dashboard, routes: web.UrlDispatcher, forms: Iterable[type[SettingsForm]] = FORMS
) -> None:
    """Add the read-only pages (:func:`bot.dashboard.pages.add_pages`) and the settings ones.

    Args:
        app: the dashboard.
        routes: its router.
        forms: the settings pages (:data:`bot.dashboard.forms.FORMS`): each one's GET and POST
            under its name, and its tab (``settings_tabs`` in the templates).
    """
    add_pages(app, routes)
    pages = SettingsPages(app)
    listed = list(forms)
    for form in listed:
        resource = routes.add_resource(form.path, name=form.name)
        resource.add_route("GET", pages.show(form))
        resource.add_route("POST", pages.post(form))
    routes.add_get("/showcase/{guild_id}", pages.public_showcase, name="public-showcase")
    app.templates.globals["settings_tabs"] = tabs(listed)
    add_guard_pages(app, routes, pages.limiter)  # bot/dashboard/guard_page.py


class SettingsPages(Pages):
    """The settings pages' handlers and what their forms share, over the :class:`Dashboard`."""

    def __init__(self, app: Dashboard) -> None:
        super().__init__(app)
        self.config: GuildConfigService = app.services.guild_config
        self.limiter = SaveThrottle(app.clock)
        # One save at a time per server in this process: the base check and the write are
        # one step, so two saves racing here cannot both pass the check.
        # A lock lives while a save holds or waits on it, no longer (weak values).
        self._locks: weakref.WeakValueDictionary[int, asyncio.Lock] = weakref.WeakValueDictionary()
        self._posting: set[asyncio.Task[None]] = set()
        self.showcases = app.services.showcases

    # -- the handlers every form shares ---------------------------------------------------

    def show(self, form: type[SettingsForm]) -> Handler:
        """The GET handler of ``form``'s page."""

        async def handler(request: web.Request) -> web.StreamResponse:
            return await self._page(form, request)

        return handler

    def post(self, form: type[SettingsForm]) -> Handler:
        """The POST handler of ``form``'s page: the guards, the save, then the page again."""

        async def handler(request: web.Request) -> web.StreamResponse:
            signed, guild_id, rights = await self._server(request)
            if not form.may_save(rights):
                raise web.HTTPForbidden(text=_(form.refusal or NOT_AN_EDITOR))
            fields = await self.app.check_form(request, signed)
            if not self.limiter.allow(signed.user_id):
                raise web.HTTPTooManyRequests(text=_(TOO_MANY_WRITES))
            if form.admin_only and not rights.admin:
                raise web.HTTPForbidden(text=_(NOT_AN_EDITOR))
            every = await request.post()
            posted = Posted(fields, {k: [str(v) for v in every.getall(k)] for k in every})
            editor = form(self, request, signed, guild_id, rights)
            try:
                entries = await editor.save(posted)
            except Refused as exc:
                return await self._page(form, request, error=_(exc.sentence), status=exc.status)
            except ValidationFailed as exc:
                return await self._page(form, request, error=exc.user_sentence(), status=400)
            except BotError as exc:
                # The one sentence /config would answer (no key storage, a cooldown...).
                return await self._page(form, request, error=user_message(exc), status=400)
            except GenAPIError as exc:
                # The key could not be checked (the service is down or rate limited).
                return await self._page(form, request, error=user_message(exc), status=503)
            return await self._page(form, request, notice=_(SAVED if entries else NOTHING_CHANGED))

        return handler

    async def _page(
        self,
        form: type[SettingsForm],
        request: web.Request,
        *,
        error: str | None = None,
        notice: str | None = None,
        status: int = 200,
    ) -> web.Response:
        signed, guild_id, rights = await self._server(request)
        values = await form(self, request, signed, guild_id, rights).values()
        return self._render(
            request,
            form.template,
            guild_id,
            rights,
            form.name,
            status=status,
            error=error,
            notice=notice,
            **values,
        )

    # -- what the forms use -----------------------------------------------------------------

    def lock(self, guild_id: int) -> asyncio.Lock:
        """The server's page lock: one save at a time per server in this process."""
        return self._locks.setdefault(guild_id, asyncio.Lock())

    async def save(
        self, guild_id: int, user_id: int, base: str, scope: Scope, apply: Apply
    ) -> list[AuditEntry]:
        """Apply a change if the settings in ``scope`` are still those of ``base``.

        The service audits it, as one change made on the web, and posts it.

        Raises:
            Refused: the base changed meanwhile (409).
            ValidationFailed: from ``apply``; nothing was changed.
        """

        def check(before: Mapping[str, str]) -> None:
            if scoped(before, scope) != base:
                raise Refused(CHANGED_MEANWHILE, 409)

        actor = web_actor(user_id)
        async with (
            self.lock(guild_id),
            self.config.changing(guild_id, actor, check=check) as change,
        ):
            await apply(actor)
        return change.entries

    def later(self, work: Coroutine[Any, Any, None], guild_id: int) -> None:
        """Run ``work`` (Discord's part) after the answer: it may wait on a rate limit."""
        task = asyncio.get_running_loop().create_task(work, name=f"dashboard-post-{guild_id}")
        self._posting.add(task)
        task.add_done_callback(self._posting.discard)

    async def roles(self, guild_id: int) -> list[tuple[int, str]]:
        """The server's roles, ``(id, name)``; 503 when Discord does not answer."""
        try:
            return await self.app.directory.roles(guild_id)
        except Exception as exc:
            log.warning("dashboard: roles of %s not read: %s", guild_id, exc)
            raise web.HTTPServiceUnavailable(text=_(NO_ANSWER)) from None

    async def role_colours(self, guild_id: int) -> dict[int, int]:
        """The server's roles' colours (``0xRRGGBB``, 0: none); empty when not read.

        From the same cached list as :meth:`roles` (no other question to Discord).
        """
        try:
            return await self.app.cached.role_colours(guild_id)
        except Exception as exc:  # a colour is a nicety: the name is always shown
            log.info("dashboard: role colours of %s not read: %s", guild_id, exc)
            return {}

    async def channels(self, guild_id: int) -> list[tuple[int, str]]:
        """The server's text channels, ``(id, name)``; 503 when Discord does not answer."""
        try:
            return await self.app.directory.channels(guild_id)
        except Exception as exc:
            log.warning("dashboard: channels of %s not read: %s", guild_id, exc)
            raise web.HTTPServiceUnavailable(text=_(NO_ANSWER)) from None

    async def people(self, guild_id: int, user_ids: Iterable[int]) -> dict[int, Person]:
        """The members as the pages show them (each asked of Discord once, cached)."""
        return await self._people(guild_id, user_ids)

    async def thumbs(self, items: Iterable[ResultItem]) -> dict[int, Thumbnail]:
        """The first file's thumbnail of each result that has one: job id -> thumbnail."""
        return await self._thumbs(items)

    # -- the public showcase ----------------------------------------------------------------

    async def public_showcase(self, request: web.Request) -> web.Response:
        """``/showcase/<id>``: the showcase without signing in, when the server made it public.

        A server whose showcase is not public answers the same plain 404 as one that does not
        exist. Removed entries are never listed (the query leaves them out).
        """
        raw = request.match_info["guild_id"]
        if not raw.isdigit() or len(raw) > 20:
            raise web.HTTPNotFound()
        guild_id = int(raw)
        period, days = settings_forms.period_of(request.query)
        entries = await self.showcases.public(guild_id, days)
        if entries is None:
            raise web.HTTPNotFound()
        thumbs = await self._thumbs([e.result for e in entries])
        return self.app.page(
            request,
            "showcase_public.html",
            entries=entries,
            thumbs=thumbs,
            og=open_graph(self.app.public_url, guild_id, entries, thumbs),
            period=period,
            periods=list(SHOWCASE_PERIODS),
            public_guild_id=guild_id,
        )
