"""The dashboard's pages, the media links that stay valid, and results' thumbnails.

Servers, Overview, Spend, Ledger (and its CSV), Audit log (and its CSV), Gallery, My results,
a result's own page (``/results/<job id>``: the full image or a video player, its prompt,
model, cost, member and time).

Thumbnails (``/thumbs/<job id>/<n>``; a public showcase entry's ``/public/thumbs/<entry id>``)
are the dashboard's own copies (``bot.services.thumbnails``): a gallery asks Discord for
nothing. A thumbnail has its result's rights; its ETag is its digest, and a URL that carries
it (``?v=<digest>``) may be kept for a year (:data:`IMMUTABLE`). A public one is checked again
on every use (``no-cache``), so an entry an admin removed is gone at once.

A server's page first checks the member's rights through the bot (:mod:`bot.dashboard.rights`);
a server they may not see, or one the bot is not in, is the same plain 404. Filters are query
parameters (a bookmarkable, shareable URL); a bad one is one sentence on the page, status 400,
and changes nothing. Pages are keyset-paged (``before``: the last row's cursor).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from datetime import UTC, date, datetime
from typing import Any, Final
from urllib.parse import urlencode

from aiohttp import web

from bot.dashboard.app import Dashboard, Signed
from bot.dashboard.charts import Stack, meter, stacked_chart
from bot.dashboard.csv_export import (
    AUDIT_COLUMNS,
    LEDGER_COLUMNS,
    CsvWriter,
    audit_rows,
    ledger_rows,
)
from bot.dashboard.guard_panel import guard_panel
from bot.dashboard.language import day_text, kind_name, short_day_text, usd_text
from bot.dashboard.rights import ADMINISTRATOR, MANAGE_GUILD, Person, Rights
from bot.domain import (
    Kind,
    LedgerFilter,
    LedgerLine,
    MessageUnreachable,
    ResultItem,
    ShowcaseEntry,
    StyleThumbnail,
    Thumbnail,
)
from bot.errors import BotError, ValidationFailed
from bot.i18n import N_, _
from bot.services.billing import month_start
from bot.services.dashboard import PERIODS

log = logging.getLogger(__name__)

PAGE_SIZE: Final = 50
"""Ledger lines and audit entries per page."""

GALLERY_SIZE: Final = 60
"""Results per gallery page (a grid of thumbnails)."""

IMMUTABLE: Final = "private, max-age=31536000, immutable"
"""The ``Cache-Control`` of a thumbnail whose URL names its digest (``?v=``): it never changes."""

REVALIDATE: Final = "private, no-cache"
"""The ``Cache-Control`` of a thumbnail asked for without its digest: kept, asked again."""

PUBLIC_THUMB: Final = "public, no-cache"
"""The ``Cache-Control`` of a public showcase entry's thumbnail: asked again on every use, so a
removed entry's is gone at once (the ETag makes asking cheap)."""

NAME_LOOKUPS: Final = 200
"""Members whose names one CSV export asks Discord for; past them, the id alone (an export of
a huge server must not flood Discord with member lookups)."""

STATUSES: Final = ("pending", "completed", "failed", "charged")

FILTER_NAMES: Final = ("member", "model", "kind", "status", "what", "since", "until")

_ID = re.compile(r"^[0-9]{1,20}$")


def _guild_id(request: web.Request) -> int:
    raw = request.match_info["guild_id"]
    if not _ID.match(raw):
        raise web.HTTPNotFound()
    return int(raw)


FROM_DATE: Final = N_("From is a date like 2026-01-31.")
TO_DATE: Final = N_("To is a date like 2026-01-31.")
BAD_MEMBER: Final = N_("Member is a member's id (digits).")
BAD_PAGE: Final = N_("That page link is broken; start from the first page.")
NO_ANSWER: Final = N_("Discord did not answer; try again.")


def _day(value: str, refusal: str) -> float | None:
    """A filter's ``YYYY-MM-DD`` as UTC midnight; ``refusal`` (marked) when malformed."""
    if not value:
        return None
    try:
        day = date.fromisoformat(value)
    except ValueError:
        raise ValidationFailed(refusal) from None
    return datetime(day.year, day.month, day.day, tzinfo=UTC).timestamp()


def _unless_admin(signed: Signed, rights: Rights) -> int | None:
    """The viewer from whom private members' results are hidden; None for an admin."""
    return None if rights.admin else signed.user_id


@dataclass(frozen=True, slots=True)
class Filters:
    """A page's filters as read from its query (and written back into its links)."""

    member: str = ""
    model: str = ""
    kind: str = ""
    status: str = ""
    what: str = ""
    since: str = ""
    until: str = ""

    @classmethod
    def read(cls, query: Any) -> Filters:
        """Read the filters of a query string (each at most 100 characters)."""
        return cls(**{name: str(query.get(name, "")).strip()[:100] for name in FILTER_NAMES})

    def ledger(self) -> LedgerFilter:
        """The ledger filter these give.

        Raises:
            ValidationFailed: a filter is malformed.
        """
        if self.member and not _ID.match(self.member):
            raise ValidationFailed(BAD_MEMBER)
        if self.kind and self.kind not in {k.value for k in Kind}:
            raise ValidationFailed(N_("Kind is video, image or text."))
        if self.status and self.status not in STATUSES:
            raise ValidationFailed(N_("Status is pending, completed, failed or charged."))
        since, until = _day(self.since, FROM_DATE), _day(self.until, TO_DATE)
        return LedgerFilter(
            user_id=int(self.member) if self.member else None,
            model=self.model or None,
            kind=self.kind or None,
            since=since,
            until=None if until is None else until + 86_400,  # "to" includes its day
            status=self.status or None,
        )

    def query(self, **more: str) -> str:
        """The query string of these filters (and ``more``), empty values left out."""
        values = {n: getattr(self, n) for n in FILTER_NAMES if getattr(self, n)}
        values.update({k: v for k, v in more.items() if v})
        return urlencode(values)


def _cursor(raw: str) -> tuple[float, int] | None:
    if not raw:
        return None
    at, _, row_id = raw.partition("_")
    try:
        return float(at), int(row_id)
    except ValueError:
        raise ValidationFailed(BAD_PAGE) from None


class ExportNames:
    """Members' names for an export, asked of Discord once each.

    At most :data:`NAME_LOOKUPS` members are asked about; past them, the id alone.
    """

    def __init__(self, app: Dashboard, guild_id: int) -> None:
        self._app = app
        self._guild_id = guild_id
        self._known: dict[int, str] = {}

    async def of(self, user_ids: Iterable[int]) -> dict[int, str]:
        """Return the names known so far, after asking for the new ones in ``user_ids``."""
        for user_id in set(user_ids) - self._known.keys():
            if len(self._known) >= NAME_LOOKUPS:
                break
            self._known[user_id] = await self._app.rights.name(self._guild_id, user_id) or ""
        return self._known


OG_DESCRIPTION: Final = N_("The results this server's members are proudest of, most votes first.")
"""The public showcase's description when it has no entry to describe."""


@dataclass(frozen=True, slots=True)
class OpenGraph:
    """The Open Graph and Twitter card tags of a public showcase page.

    Attributes:
        title: ``og:title``.
        description: ``og:description``: the top entry's prompt, else :data:`OG_DESCRIPTION`.
        url: ``og:url``, absolute.
        image: ``og:image``: the top entry's thumbnail, an absolute URL (``DASHBOARD_PUBLIC_URL``
            and its digest); empty without one.
        image_alt: its alt text (the prompt).
        width: the image's pixels (0 without one).
        height: the image's pixels.
    """

    title: str
    description: str
    url: str
    image: str = ""
    image_alt: str = ""
    width: int = 0
    height: int = 0


def open_graph(
    public_url: str, guild_id: int, entries: list[ShowcaseEntry], thumbs: Mapping[int, Thumbnail]
) -> OpenGraph:
    """The public showcase's tags: its top entry (most votes) as the picture of its link."""
    url = f"{public_url}/showcase/{guild_id}"
    title, description = _("Showcase"), _(OG_DESCRIPTION)
    if not entries:
        return OpenGraph(title, description, url)
    top = entries[0]
    prompt = top.result.prompt[:200]
    thumb = thumbs.get(top.result.job_id)
    if thumb is None:
        return OpenGraph(title, prompt or description, url)
    image = f"{public_url}/public/thumbs/{top.id}?v={thumb.digest}"
    return OpenGraph(title, prompt or description, url, image, prompt, thumb.width, thumb.height)


def add_pages(app: Dashboard, routes: web.UrlDispatcher) -> None:
    """Add every page's route to ``routes``, each named (templates link with ``url(name)``)."""
    pages = Pages(app)
    routes.add_get("/servers", pages.servers, name="servers")
    routes.add_get("/servers/{guild_id}", pages.overview, name="overview")
    routes.add_get("/servers/{guild_id}/spend", pages.spend, name="spend")
    routes.add_get("/servers/{guild_id}/ledger", pages.ledger, name="ledger")
    routes.add_get("/servers/{guild_id}/ledger.csv", pages.ledger_csv, name="ledger-csv")
    routes.add_get("/servers/{guild_id}/audit", pages.audit, name="audit")
    routes.add_get("/servers/{guild_id}/audit.csv", pages.audit_csv, name="audit-csv")
    routes.add_get("/servers/{guild_id}/gallery", pages.gallery, name="gallery")
    routes.add_get("/me", pages.me, name="me")
    routes.add_get("/media/{job_id}/{index}", pages.media, name="media")
    routes.add_get("/results/{job_id}", pages.result, name="result")
    routes.add_get("/thumbs/{job_id}/{index}", pages.thumb, name="thumb")
    routes.add_get("/public/thumbs/{entry_id}", pages.public_thumb, name="public-thumb")
    routes.add_get(
        "/thumbs/styles/{guild_id}/{style_id}/{position}", pages.style_thumb, name="style-thumb"
    )


def thumbnail_response(
    request: web.Request, thumb: Thumbnail | StyleThumbnail, *, public: bool
) -> web.Response:
    """A thumbnail's bytes, or 304 when the browser holds them (``If-None-Match``).

    ETag: the digest. ``Cache-Control``: :data:`PUBLIC_THUMB` for a public one; else
    :data:`IMMUTABLE` when the URL names the digest (``?v=``), :data:`REVALIDATE` otherwise.
    """
    etag = f'"{thumb.digest}"'
    if public:
        cache = PUBLIC_THUMB
    else:
        cache = IMMUTABLE if request.query.get("v") == thumb.digest else REVALIDATE
    headers = {"ETag": etag, "Cache-Control": cache}
    held = request.headers.get("If-None-Match", "")
    if etag in [tag.strip() for tag in held.split(",")]:
        return web.Response(status=304, headers=headers)
    return web.Response(body=thumb.data, content_type=thumb.mime, headers=headers)


class Pages:
    """The page handlers, over the :class:`Dashboard` that serves them."""

    def __init__(self, app: Dashboard) -> None:
        self.app = app
        self.services = app.services
        self.dashboard = app.dashboard
        self.thumbnails = app.services.thumbnails
        self.showcases = app.services.showcases
        self.safety = app.services.moderation

    async def _server(self, request: web.Request) -> tuple[Signed, int, Rights]:
        """The member, the server and their rights there; 404 when they may not see it."""
        signed = self.app.signed(request)
        guild_id = _guild_id(request)
        try:
            rights = await self.app.rights.of(guild_id, signed.user_id)
        except Exception as exc:
            log.warning("dashboard: rights in %s not read: %s", guild_id, exc)
            raise web.HTTPServiceUnavailable(text=_(NO_ANSWER)) from None
        if rights is None:
            raise web.HTTPNotFound()
        return signed, guild_id, rights

    def _render(
        self,
        request: web.Request,
        template: str,
        guild_id: int | None,
        rights: Rights | None,
        nav: str,
        **values: Any,
    ) -> web.Response:
        return self.app.page(
            request,
            template,
            guild_id=guild_id,
            rights=rights,
            nav=nav,
            **values,
        )

    async def _thumbs(self, items: Iterable[ResultItem]) -> dict[int, Thumbnail]:
        """The first file's thumbnail of each result that has one: job id -> thumbnail."""
        found = await self.thumbnails.described([(i.job_id, 0) for i in items if i.outputs])
        return {job_id: thumb for (job_id, _), thumb in found.items()}

    async def _people(self, guild_id: int, user_ids: Iterable[int]) -> dict[int, Person]:
        """The page's members as the ``member`` macro shows them (each asked once, cached)."""
        return await self.app.rights.people(guild_id, user_ids)

    # -- the server picker -----------------------------------------------------------------

    async def servers(self, request: web.Request) -> web.Response:
        """``/servers``: the servers the member may open, and My results."""
        signed = self.app.signed(request)
        guilds = signed.session.guilds
        granted = await self.dashboard.guilds_with_roles([g.id for g in guilds])
        # Only servers where Discord says the member manages the server, or that granted a
        # dashboard role, are asked about: a member of 200 servers costs no 200 lookups.
        candidates = [
            g
            for g in guilds
            if g.owner or g.permissions & (MANAGE_GUILD | ADMINISTRATOR) or g.id in granted
        ]

        async def check(guild_id: int) -> Rights | None:
            try:
                return await self.app.rights.of(guild_id, signed.user_id)
            except Exception as exc:
                log.warning("dashboard: rights in %s not read: %s", guild_id, exc)
                return None

        rights = await asyncio.gather(*(check(g.id) for g in candidates))
        visible = [(g, r) for g, r in zip(candidates, rights, strict=True) if r is not None]
        return self._render(request, "servers.html", None, None, "servers", servers=visible)

    # -- Overview --------------------------------------------------------------------------

    async def overview(self, request: web.Request) -> web.Response:
        """``/servers/<id>``: this month against the budget, jobs now and today, the key."""
        _signed, guild_id, rights = await self._server(request)
        services = self.services
        fingerprint, source = None, None
        with contextlib.suppress(BotError):
            key = await services.keys.resolve(guild_id)
            fingerprint, source = key.fingerprint, key.source
        money = await self.dashboard.overview(guild_id, fingerprint if source == "guild" else None)
        limits = await services.billing.limits(guild_id)
        budget_micro = (
            None if limits.monthly_budget_cents is None else limits.monthly_budget_cents * 10**6
        )
        counts = await self.dashboard.job_counts(guild_id)
        # The shared key's credits and runway are the bot owner's, not the server's.
        guard = await guard_panel(self.app, guild_id, fingerprint if source == "guild" else None)
        return self._render(
            request,
            "overview.html",
            guild_id,
            rights,
            "overview",
            money=money,
            budget_micro=budget_micro,
            meter=meter(
                money.month_micro, budget_micro, label=_("This month's spend against the budget")
            ),
            counts=counts,
            fingerprint=fingerprint,
            key_source=source,
            sandbox=services.sandbox,
            **guard,
        )

    # -- Spend -----------------------------------------------------------------------------

    async def spend(self, request: web.Request) -> web.Response:
        """``/servers/<id>/spend?days=7|30|90``: by day, model, kind, tier and member."""
        _signed, guild_id, rights = await self._server(request)
        raw = request.query.get("days", "30")
        days = int(raw) if raw.isdigit() and int(raw) in PERIODS else 30
        report = await self.dashboard.spend(guild_id, days)
        money = await self.dashboard.overview(guild_id, None)
        people = await self._people(guild_id, [int(b.key or 0) for b, _ in report.by_member])
        kinds = [k.value for k in Kind]
        chart = stacked_chart(
            [
                Stack(
                    short_day_text(float(b.key or 0)),
                    report.by_day_kind.get(int(b.key or 0), {}),
                    day_text(float(b.key or 0)),
                )
                for b in report.by_day
            ],
            kinds=kinds,
            label=_("Spend per day by kind, last {days} days", days=days),
            value_text=usd_text,
            names={k: kind_name(k) for k in kinds},
        )
        return self._render(
            request,
            "spend.html",
            guild_id,
            rights,
            "spend",
            report=report,
            periods=PERIODS,
            chart=chart,
            kinds=kinds,
            people=people,
            month_micro=money.month_micro,
        )

    # -- Ledger ----------------------------------------------------------------------------

    async def ledger(self, request: web.Request) -> web.Response:
        """``/servers/<id>/ledger``: the charges, filtered, newest first, paged."""
        signed, guild_id, rights = await self._server(request)
        filters = Filters.read(request.query)
        error, total, following = None, (0, 0), ""
        lines: list[LedgerLine] = []
        where: LedgerFilter | None = None
        try:
            where = filters.ledger()
            before = _cursor(request.query.get("before", ""))
            lines, total = await self.dashboard.ledger(
                guild_id,
                where,
                before,
                PAGE_SIZE + 1,
                private_hidden_from=_unless_admin(signed, rights),
            )
        except ValidationFailed as exc:
            error = exc.user_sentence()
        if len(lines) > PAGE_SIZE:
            lines = lines[:PAGE_SIZE]
            last = lines[-1]
            following = filters.query(before=f"{last.at!r}_{last.id}")
        # Members' credit packs bought here, and refunds: for the server's admins only.
        credits: list[LedgerLine] = []
        if rights.admin and where is not None:
            credits = await self.dashboard.credit_lines(guild_id, where, PAGE_SIZE)
        people = await self._people(
            guild_id, [line.user_id for line in lines] + [line.user_id for line in credits]
        )
        return self._render(
            request,
            "ledger.html",
            guild_id,
            rights,
            "ledger",
            status=400 if error else 200,
            error=error,
            filters=filters,
            lines=lines,
            credits=credits,
            total=total,
            people=people,
            following=following,
            csv_query=filters.query(),
            models=await self.dashboard.models(guild_id),
            kinds=[k.value for k in Kind],
            statuses=STATUSES,
        )

    async def ledger_csv(self, request: web.Request) -> web.StreamResponse:
        """``/servers/<id>/ledger.csv``: the filtered ledger, streamed, oldest first."""
        signed, guild_id, rights = await self._server(request)
        try:
            where = Filters.read(request.query).ledger()
        except ValidationFailed as exc:
            return web.Response(status=400, text=exc.user_sentence())
        response = web.StreamResponse(
            headers={
                "Content-Type": "text/csv; charset=utf-8",
                "Content-Disposition": f'attachment; filename="ledger-{guild_id}.csv"',
            }
        )
        await response.prepare(request)
        writer = CsvWriter()
        await response.write(writer.rows([LEDGER_COLUMNS]))
        names = ExportNames(self.app, guild_id)
        hidden_from = _unless_admin(signed, rights)
        # An admin's export holds the members' credit packs bought here, and refunds.
        batches = (
            self.dashboard.export_with_credits(guild_id, where)
            if rights.admin
            else self.dashboard.export(guild_id, where, private_hidden_from=hidden_from)
        )
        async for batch in batches:
            known = await names.of(line.user_id for line in batch)
            await response.write(writer.rows(ledger_rows(batch, known)))
        await response.write_eof()
        return response

    # -- Audit log -------------------------------------------------------------------------

    def _audit_filters(self, filters: Filters) -> dict[str, Any]:
        if filters.member and not _ID.match(filters.member):
            raise ValidationFailed(BAD_MEMBER)
        until = _day(filters.until, TO_DATE)
        return {
            "user_id": int(filters.member) if filters.member else None,
            "what": filters.what or None,
            "since": _day(filters.since, FROM_DATE),
            "until": None if until is None else until + 86_400,
        }

    async def audit(self, request: web.Request) -> web.Response:
        """``/servers/<id>/audit``: the configuration changes, filtered, newest first."""
        _signed, guild_id, rights = await self._server(request)
        filters = Filters.read(request.query)
        error, entries, following = None, [], ""
        raw = request.query.get("before", "")
        try:
            if raw and not raw.isdigit():
                raise ValidationFailed(BAD_PAGE)
            entries = await self.dashboard.audit(
                guild_id,
                **self._audit_filters(filters),
                before=int(raw) if raw else None,
                limit=PAGE_SIZE + 1,
            )
        except ValidationFailed as exc:
            error = exc.user_sentence()
        if len(entries) > PAGE_SIZE:
            entries = entries[:PAGE_SIZE]
            following = filters.query(before=str(entries[-1][0]))
        people = await self._people(guild_id, [e.user_id for _, e in entries])
        return self._render(
            request,
            "audit.html",
            guild_id,
            rights,
            "audit",
            status=400 if error else 200,
            error=error,
            filters=filters,
            entries=entries,
            people=people,
            following=following,
            csv_query=filters.query(),
        )

    async def audit_csv(self, request: web.Request) -> web.StreamResponse:
        """``/servers/<id>/audit.csv``: the filtered audit log as CSV, newest first."""
        _signed, guild_id, _rights = await self._server(request)
        try:
            found = await self.dashboard.audit(
                guild_id, **self._audit_filters(Filters.read(request.query)), limit=None
            )
        except ValidationFailed as exc:
            return web.Response(status=400, text=exc.user_sentence())
        writer = CsvWriter()
        entries = [e for _, e in found]
        known = await ExportNames(self.app, guild_id).of(e.user_id for e in entries)
        body = writer.rows([AUDIT_COLUMNS]) + writer.rows(audit_rows(entries, known))
        return web.Response(
            body=body,
            headers={
                "Content-Type": "text/csv; charset=utf-8",
                "Content-Disposition": f'attachment; filename="audit-{guild_id}.csv"',
            },
        )

    # -- Gallery and My results ------------------------------------------------------------

    async def _results(
        self,
        request: web.Request,
        guild_id: int | None,
        user_id: int | None,
        private_hidden_from: int | None = None,
    ) -> tuple[Filters, list[ResultItem], str, str | None]:
        filters = Filters.read(request.query)
        try:
            where = filters.ledger()
            if where.kind == "text":
                raise ValidationFailed(N_("Kind is video or image."))
            items = await self.dashboard.results(
                guild_id=guild_id,
                user_id=user_id,
                kind=where.kind,
                model=where.model,
                since=where.since,
                until=where.until,
                before=_cursor(request.query.get("before", "")),
                limit=GALLERY_SIZE + 1,
                private_hidden_from=private_hidden_from,
            )
        except ValidationFailed as exc:
            return filters, [], "", exc.user_sentence()
        following = ""
        if len(items) > GALLERY_SIZE:
            items = items[:GALLERY_SIZE]
            following = filters.query(before=f"{items[-1].created_at!r}_{items[-1].job_id}")
        return filters, items, following, None

    async def gallery(self, request: web.Request) -> web.Response:
        """``/servers/<id>/gallery``: the server's results, newest first."""
        signed, guild_id, rights = await self._server(request)
        filters, items, following, error = await self._results(
            request, guild_id, None, _unless_admin(signed, rights)
        )
        people = await self._people(guild_id, [i.user_id for i in items])
        return self._render(
            request,
            "gallery.html",
            guild_id,
            rights,
            "gallery",
            status=400 if error else 200,
            error=error,
            filters=filters,
            items=items,
            thumbs=await self._thumbs(items),
            people=people,
            following=following,
            models=await self.dashboard.models(guild_id),
        )

    async def me(self, request: web.Request) -> web.Response:
        """``/me``: the member's own results, spend this month, and ``/settings`` defaults.

        With ``CREDIT_PACKS``, also their credit balance (what requests in flight hold of it)
        and its latest purchases, refunds and spends (docs/credits.md).
        """
        signed = self.app.signed(request)
        filters, items, following, error = await self._results(request, None, signed.user_id)
        now = self.app.clock.time()
        spend = await self.dashboard.member_spend(signed.user_id, month_start(now))
        server_names = {g.id: g.name for g in signed.session.guilds}
        defaults = await self.services.members.get(signed.user_id)
        credits = self.services.credits
        offered = bool(credits.packs)
        return self._render(
            request,
            "me.html",
            None,
            None,
            "me",
            status=400 if error else 200,
            error=error,
            filters=filters,
            items=items,
            thumbs=await self._thumbs(items),
            people={},
            following=following,
            models=[],
            spend=spend,
            server_names=server_names,
            defaults=defaults,
            credits_offered=offered,
            balance=await credits.balance(signed.user_id) if offered else None,
            credit_history=await credits.history(signed.user_id) if offered else [],
        )

    async def _seen_result(self, request: web.Request) -> tuple[ResultItem, bool]:
        """The finished result of the route's ``job_id``, if the member may see it.

        Theirs; else one of a server they are in (OAuth2's list, so Discord is asked nothing
        about another), where they may see the server's pages, unless its member keeps their
        results private and the viewer is no admin there. A member's own wallet's results are
        theirs alone.

        Returns:
            The result, and whether the member is in its server (or it is a wallet's).

        Raises:
            web.HTTPNotFound: no such finished result, or not theirs to see.
        """
        signed = self.app.signed(request)
        raw_job = request.match_info["job_id"]
        if not _ID.match(raw_job):
            raise web.HTTPNotFound()
        item = await self.dashboard.result(int(raw_job))
        if item is None:
            raise web.HTTPNotFound()
        # Discord is asked nothing about a server the member is not in (OAuth2's list).
        member_of = item.guild_id < 0 or item.guild_id in {g.id for g in signed.session.guilds}
        if await self.safety.is_hidden(f"j{item.job_id}"):
            if item.guild_id < 0 or not member_of:
                raise web.HTTPNotFound()
            rights = await self.app.rights.of(item.guild_id, signed.user_id)
            if rights is None or not rights.may_review:
                raise web.HTTPNotFound()  # the same 404 as no such result: no oracle
            return item, member_of
        if item.user_id != signed.user_id:
            if item.guild_id < 0 or not member_of:
                raise web.HTTPNotFound()  # a member's own wallet: theirs alone
            rights = await self.app.rights.of(item.guild_id, signed.user_id)
            if rights is None or await self.dashboard.hidden_from(
                item, signed.user_id, rights.admin
            ):
                raise web.HTTPNotFound()  # not theirs to see: a private member's result
        return item, member_of

    async def thumb(self, request: web.Request) -> web.Response:
        """``/thumbs/<job id>/<n>``: the result file's thumbnail, with the result's rights.

        Read from the bot's own database: no question to Discord beyond the rights (cached).
        """
        raw_index = request.match_info["index"]
        if not raw_index.isdigit() or len(raw_index) > 3:
            raise web.HTTPNotFound()
        item, _ = await self._seen_result(request)
        thumb = await self.thumbnails.thumbnail(item.job_id, int(raw_index))
        if thumb is None:
            raise web.HTTPNotFound()
        return thumbnail_response(request, thumb, public=False)

    async def public_thumb(self, request: web.Request) -> web.Response:
        """``/public/thumbs/<entry id>``: a public showcase entry's thumbnail, for anyone.

        Only an entry its public page lists (public showcase, shared since it became public,
        not removed), checked on every request.
        """
        entry = await self.showcases.public_entry(int(request.match_info["entry_id"]))
        if entry is None:
            raise web.HTTPNotFound()
        thumb = await self.thumbnails.thumbnail(entry.result.job_id, 0)
        if thumb is None:
            raise web.HTTPNotFound()
        return thumbnail_response(request, thumb, public=True)

    async def style_thumb(self, request: web.Request) -> web.Response:
        """``/thumbs/styles/<guild id>/<style id>/<n>``: a style reference's thumbnail.

        For those who may see the server's pages (rights through the bot, cached; a server not
        in the member's OAuth2 list is a 404 before any question). From the bot's own store.
        """
        raw_position = request.match_info["position"]
        if not raw_position.isdigit() or len(raw_position) > 1:
            raise web.HTTPNotFound()
        signed = self.app.signed(request)
        if _guild_id(request) not in {g.id for g in signed.session.guilds}:
            raise web.HTTPNotFound()
        _signed, guild_id, _rights = await self._server(request)
        style_id = int(request.match_info["style_id"])
        thumb = await self.services.creative.style_thumbnail(guild_id, style_id, int(raw_position))
        if thumb is None:
            raise web.HTTPNotFound()
        return thumbnail_response(request, thumb, public=False)

    async def result(self, request: web.Request) -> web.Response:
        """``/results/<job id>``: one result, as its thumbnail's link opens it.

        Its files (an image, or a video player, through :meth:`media`), its prompt, model,
        cost, member and time, and its Discord message; with the result's rights.
        """
        item, member_of = await self._seen_result(request)
        signed = self.app.signed(request)
        rights = None
        person = None
        if item.guild_id > 0 and member_of:
            rights = await self.app.rights.of(item.guild_id, signed.user_id)
            if rights is not None:
                person = await self.app.rights.person(item.guild_id, item.user_id)
        found = await self.thumbnails.described(
            [(item.job_id, index) for index in range(len(item.outputs))]
        )
        return self._render(
            request,
            "result.html",
            item.guild_id if rights is not None else None,
            rights,
            "gallery" if rights is not None else "me",
            item=item,
            thumbs={index: thumb for (_, index), thumb in found.items()},
            person=person,
        )

    async def media(self, request: web.Request) -> web.StreamResponse:
        """``/media/<job id>/<n>``: redirect to the result's file at a URL valid now.

        Discord's attachment URLs expire; the card's message is fetched again through the bot
        (fresh signed URLs). Without a message (or with the file no longer on it), the
        service's own URL of the result.
        """
        raw_index = request.match_info["index"]
        if not raw_index.isdigit():
            raise web.HTTPNotFound()
        item, member_of = await self._seen_result(request)
        index = int(raw_index)
        # The takes of one request share one card: take 3's file is not the card's first.
        place = await self.dashboard.card_file(item, index)
        if item.message_id is not None and place is not None and member_of:
            try:  # cached: the URLs until they expire, a refusal for a while
                urls = await self.app.directory.attachment_urls(item.channel_id, item.message_id)
            except MessageUnreachable:
                urls = []
            except Exception as exc:
                log.info("dashboard: message of job %s not read: %s", item.job_id, exc)
                urls = []
            at, held = place
            if at < len(urls) and held in (None, len(urls)):
                raise web.HTTPFound(urls[at])
        if index < len(item.outputs) and item.outputs[index].startswith(("https://", "http://")):
            raise web.HTTPFound(item.outputs[index])
        raise web.HTTPNotFound()
