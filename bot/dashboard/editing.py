"""The dashboard's editing pages: the server's settings changed from the web, as ``/config``.

Budgets and limits, Tiers, Blocked terms (with "try a prompt") and Dashboard access. One
policy path: every save calls the same :class:`~bot.services.guild_config.GuildConfigService`
methods as ``/config``, so the very next slash command is judged by it; it is audited the same
way (one row per changed setting, marked ``via="web"``) and posted in the admin channel as
``/config``'s changes are.

Each save is guarded four ways, in this order:

- the member may edit (Manage Server, or a dashboard role with ``edit``): a viewer's pages
  have no forms, and a POST from a viewer is refused (403);
- the form is the member's own and from this origin (:meth:`Dashboard.check_form`: the
  session's form token, ``Origin``, ``Sec-Fetch-Site``);
- writes are rate-limited per member (:data:`WRITES_PER_MINUTE`);
- optimistic concurrency: each form carries ``base``, a digest of the values it was rendered
  from; a save whose base no longer matches (another admin saved meanwhile, here or with
  ``/config``) changes nothing and is told so (409), with the current values shown.

User-facing sentences are module constants, one place, so they can be translated later.
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import json
import logging
import weakref
from collections import deque
from collections.abc import Awaitable, Callable, Coroutine, Mapping
from typing import Any, Final

from aiohttp import web

from bot.clock import Clock
from bot.dashboard.app import Dashboard, Signed
from bot.dashboard.limits import Bounded
from bot.dashboard.pages import Pages, add_pages, open_graph
from bot.dashboard.rights import KEPT, Rights
from bot.domain import UNLIMITED, UNSET, AuditEntry, Kind, LimitUpdate
from bot.errors import BotError, ValidationFailed, user_message
from bot.genapi.errors import GenAPIError
from bot.services.guild_config import (
    DEFAULT_WORDS,
    GuildConfigService,
    ModelsUpdate,
    parse_allowance,
    parse_budget,
)
from bot.services.policy import describe_models, find_blocked_term, parse_models
from bot.services.showcase import PERIODS as SHOWCASE_PERIODS
from bot.services.showcase import ShowcaseService

log = logging.getLogger(__name__)

WRITES_PER_MINUTE: Final = 20
"""Saves one member may make in any 60 seconds, across servers (a script cannot flood the
audit log and the admin channel)."""

ACCESS_LEVELS: Final = ("view", "edit")
"""Dashboard access a role may be granted below Manage Server."""

SAVED: Final = "Saved."
NOTHING_CHANGED: Final = "Nothing changed."
CHANGED_MEANWHILE: Final = (
    "Someone changed this setting since you opened the page; nothing was saved. "
    "The page now shows the current values: make your change again."
)
NOT_AN_EDITOR: Final = "You may view this server's settings but not change them."
TOO_MANY_WRITES: Final = "Too many changes in a minute; wait a little and save again."
UNKNOWN_ROLE: Final = "Pick one of the server's roles."
NO_SUCH_ENTRY: Final = "That entry is not in this server's showcase (removed already?)."
UNKNOWN_CHANNEL: Final = "Pick one of the server's text channels."
KEY_SAVED: Final = "Key saved: new requests use it."
KEY_REMOVED: Final = "Key removed."
BAD_NUMBER: Final = "{what} is a whole number from {low} to {high}, or empty for the default."


class WriteLimiter:
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


def digest(values: Mapping[str, str]) -> str:
    """The version of a form's settings: a short SHA-256 of their values as shown."""
    encoded = json.dumps(sorted(values.items()), ensure_ascii=False).encode()
    return hashlib.sha256(encoded).hexdigest()[:32]


def _tier_prefix(role_id: int) -> str:
    return f"(<@&{role_id}>):"


def tier_scope(role_id: int) -> Callable[[str], bool]:
    """The audited settings of one role's tier (the snapshot's ``tier <name> (<@&id>): ...``)."""
    marker = _tier_prefix(role_id)
    return lambda what: what.startswith("tier ") and marker in what


BUDGET_SETTINGS: Final = (
    "monthly budget",
    "daily budget per member",
    "videos in progress per member",
    "videos in progress per server",
)


def budgets_scope(what: str) -> bool:
    """The settings of the Budgets and limits form: budgets, caps and cooldowns."""
    return what in BUDGET_SETTINGS or what.startswith("cooldown /")


def terms_scope(what: str) -> bool:
    """The settings of the Blocked terms form."""
    return what.startswith("blocked term ")


def _number(raw: str, what: str, low: int, high: int) -> int | None:
    raw = raw.strip()
    if not raw:
        return None
    if not raw.isdigit() or not low <= int(raw) <= high:
        raise ValidationFailed(BAD_NUMBER.format(what=what, low=low, high=high))
    return int(raw)


def _allowance_text(cents: int | None) -> str:
    """A tier's allowance as its form field shows it (what ``parse_allowance`` reads back)."""
    if cents is None:
        return "default"
    if cents == UNLIMITED:
        return "unlimited"
    return _money_field(cents)


class Refused(Exception):
    """A save refused with a sentence and a status, the page shown again."""

    def __init__(self, sentence: str, status: int) -> None:
        super().__init__(sentence)
        self.sentence = sentence
        self.status = status


def add_all_pages(app: Dashboard, routes: web.UrlDispatcher) -> None:
    """Add the read-only pages (:func:`bot.dashboard.pages.add_pages`) and the editing ones."""
    add_pages(app, routes)
    pages = SettingsPages(app)
    base = "/servers/{guild_id}/settings"
    routes.add_get(f"{base}/budgets", pages.budgets)
    routes.add_post(f"{base}/budgets", pages.save_budgets)
    routes.add_get(f"{base}/tiers", pages.tiers)
    routes.add_post(f"{base}/tiers", pages.save_tier)
    routes.add_get(f"{base}/blocked-terms", pages.terms)
    routes.add_post(f"{base}/blocked-terms", pages.save_term)
    routes.add_get(f"{base}/access", pages.access)
    routes.add_post(f"{base}/access", pages.save_access)
    routes.add_get(f"{base}/key", pages.key)
    routes.add_post(f"{base}/key", pages.save_key)
    routes.add_get(f"{base}/models", pages.models_page)
    routes.add_post(f"{base}/models", pages.save_models)
    routes.add_get(f"{base}/channels", pages.channels)
    routes.add_post(f"{base}/channels", pages.save_channels)
    routes.add_get("/servers/{guild_id}/showcase", pages.showcase)
    routes.add_post("/servers/{guild_id}/showcase", pages.save_showcase)
    routes.add_get("/showcase/{guild_id}", pages.public_showcase)


class SettingsPages(Pages):
    """The editing pages' handlers, over the :class:`Dashboard` that serves them."""

    def __init__(self, app: Dashboard) -> None:
        super().__init__(app)
        self.config: GuildConfigService = app.services.guild_config
        self.limiter = WriteLimiter(app.clock)
        # One save at a time per server in this process: the base check and the write are
        # one step, so two saves racing here cannot both pass the check.
        # A lock lives while a save holds or waits on it, no longer (weak values).
        self._locks: weakref.WeakValueDictionary[int, asyncio.Lock] = weakref.WeakValueDictionary()
        self._posting: set[asyncio.Task[None]] = set()
        self.showcases = app.services.service(ShowcaseService)

    # -- the save path every form shares ----------------------------------------------------

    async def _editor(self, request: web.Request) -> tuple[Signed, int, Rights, dict[str, str]]:
        signed, guild_id, rights = await self._server(request)
        if not rights.may_edit:
            raise web.HTTPForbidden(text=NOT_AN_EDITOR)
        form = await self.app.check_form(request, signed)
        if not self.limiter.allow(signed.user_id):
            raise web.HTTPTooManyRequests(text=TOO_MANY_WRITES)
        return signed, guild_id, rights, form

    async def _save(
        self,
        guild_id: int,
        user_id: int,
        base: str,
        scope: Callable[[str], bool],
        apply: Callable[[], Awaitable[None]],
    ) -> list[AuditEntry]:
        """Apply a change if the settings in ``scope`` are still those of ``base``; audit it.

        Raises:
            Refused: the base changed meanwhile (409).
            ValidationFailed: from ``apply``; nothing was changed.
        """
        lock = self._locks.setdefault(guild_id, asyncio.Lock())
        async with lock:
            before = await self.config.snapshot(guild_id)
            if digest({k: v for k, v in before.items() if scope(k)}) != base:
                raise Refused(CHANGED_MEANWHILE, 409)
            await apply()
            entries = await self.config.record_changes(guild_id, user_id, before, via="web")
        if entries:
            channel_id = await self.config.admin_channel(guild_id)
            if channel_id is not None:
                self._post(guild_id, channel_id, entries)
        return entries

    def _post(self, guild_id: int, channel_id: int, entries: list[AuditEntry]) -> None:
        self._later(self.app.directory.post_changes(guild_id, channel_id, entries), guild_id)

    def _later(self, work: Coroutine[Any, Any, None], guild_id: int) -> None:
        # The answer goes first; Discord's part follows (it may wait on a rate limit).
        task = asyncio.get_running_loop().create_task(work, name=f"dashboard-post-{guild_id}")
        self._posting.add(task)
        task.add_done_callback(self._posting.discard)

    async def _base(self, guild_id: int, scope: Callable[[str], bool]) -> str:
        snapshot = await self.config.snapshot(guild_id)
        return digest({k: v for k, v in snapshot.items() if scope(k)})

    async def _outcome(
        self,
        request: web.Request,
        show: Callable[..., Awaitable[web.Response]],
        work: Callable[[], Awaitable[list[AuditEntry]]],
    ) -> web.Response:
        try:
            entries = await work()
        except Refused as exc:
            return await show(request, error=exc.sentence, status=exc.status)
        except ValidationFailed as exc:
            return await show(request, error=exc.sentence, status=400)
        except BotError as exc:
            # The one sentence /config would answer (no key storage, a cooldown...).
            return await show(request, error=user_message(exc), status=400)
        except GenAPIError as exc:
            # The key could not be checked (the service is down or rate limited).
            return await show(request, error=user_message(exc), status=503)
        return await show(request, notice=SAVED if entries else NOTHING_CHANGED)

    # -- Budgets and limits ----------------------------------------------------------------

    async def budgets(
        self,
        request: web.Request,
        *,
        error: str | None = None,
        notice: str | None = None,
        status: int = 200,
    ) -> web.Response:
        """``/servers/<id>/settings/budgets``: budgets, caps and cooldowns."""
        _, guild_id, rights = await self._server(request)
        config = await self.config.show(guild_id)
        limits = config.limits
        raw = await self.config.snapshot(guild_id)
        return self._render(
            request,
            "settings_budgets.html",
            guild_id,
            rights,
            "budgets",
            status=status,
            error=error,
            notice=notice,
            base=digest({k: v for k, v in raw.items() if budgets_scope(k)}),
            monthly=_money_field(limits.monthly_budget_cents),
            daily=_money_field(limits.user_daily_budget_cents),
            per_user=limits.max_pending_videos_per_user,
            per_guild=limits.max_pending_videos_per_guild,
            cooldowns={k.value: config.policy.cooldowns.get(k, 0) for k in Kind},
        )

    async def save_budgets(self, request: web.Request) -> web.Response:
        """POST: set the budgets, caps and cooldowns, as ``/config budget|limits|cooldown``."""
        signed, guild_id, _, form = await self._editor(request)

        async def work() -> list[AuditEntry]:
            monthly: LimitUpdate = parse_budget(form.get("monthly", "") or "unlimited")
            daily: LimitUpdate = parse_budget(form.get("daily", "") or "unlimited")
            per_user = _number(form.get("per_user", ""), "Videos per member", 1, 100)
            per_guild = _number(form.get("per_guild", ""), "Videos per server", 1, 1000)
            cooldowns = {
                kind: _number(form.get(f"cooldown_{kind.value}", ""), "A cooldown", 0, 86400)
                for kind in Kind
            }

            async def apply() -> None:
                await self.config.set_budgets(guild_id, monthly=monthly, daily_per_user=daily)
                await self.config.set_caps(
                    guild_id,
                    per_user=UNSET if per_user is None else per_user,
                    per_guild=UNSET if per_guild is None else per_guild,
                )
                for kind, seconds in cooldowns.items():
                    await self.config.set_cooldown(guild_id, kind, seconds or 0)

            return await self._save(
                guild_id, signed.user_id, form.get("base", ""), budgets_scope, apply
            )

        return await self._outcome(request, self.budgets, work)

    # -- Tiers -----------------------------------------------------------------------------

    async def tiers(
        self,
        request: web.Request,
        *,
        error: str | None = None,
        notice: str | None = None,
        status: int = 200,
    ) -> web.Response:
        """``/servers/<id>/settings/tiers``: each role tier's allowances, cap and models."""
        _, guild_id, rights = await self._server(request)
        policy = await self.config.policy(guild_id)
        snapshot = await self.config.snapshot(guild_id)
        roles = await self._roles(guild_id)
        rows = [
            {
                "tier": tier,
                "base": digest({k: v for k, v in snapshot.items() if tier_scope(tier.role_id)(k)}),
                "daily": _allowance_text(tier.daily_per_user_cents),
                "monthly": _allowance_text(tier.monthly_per_user_cents),
                "videos": "" if tier.videos_at_once is None else str(tier.videos_at_once),
                "models": _models_field(tier.models),
                "models_text": describe_models(tier.models),
            }
            for tier in policy.tiers
        ]
        tiered = {t.role_id for t in policy.tiers}
        return self._render(
            request,
            "settings_tiers.html",
            guild_id,
            rights,
            "tiers",
            status=status,
            error=error,
            notice=notice,
            rows=rows,
            free_roles=[(i, n) for i, n in roles if i not in tiered],
            new_base=digest({}),
        )

    async def _roles(self, guild_id: int) -> list[tuple[int, str]]:
        try:
            return await self.app.directory.roles(guild_id)
        except Exception as exc:
            log.warning("dashboard: roles of %s not read: %s", guild_id, exc)
            raise web.HTTPServiceUnavailable(text="Discord did not answer; try again.") from None

    async def save_tier(self, request: web.Request) -> web.Response:
        """POST: set or remove a role's tier, as ``/config tier set|remove``."""
        signed, guild_id, _, form = await self._editor(request)

        async def work() -> list[AuditEntry]:
            raw_role = form.get("role_id", "")
            roles = dict(await self._roles(guild_id))
            if not raw_role.isdigit() or int(raw_role) not in roles:
                raise ValidationFailed(UNKNOWN_ROLE)
            role_id = int(raw_role)
            if form.get("action") == "remove":

                async def remove() -> None:
                    await self.config.remove_tier(guild_id, role_id)

                return await self._save(
                    guild_id, signed.user_id, form.get("base", ""), tier_scope(role_id), remove
                )
            daily = parse_allowance(form.get("daily", "") or "default")
            monthly = parse_allowance(form.get("monthly", "") or "default")
            videos = _number(form.get("videos", ""), "Videos at once", 1, 100)
            raw_models = form.get("models", "").strip()
            models: ModelsUpdate = (
                None
                if not raw_models or raw_models.casefold() in DEFAULT_WORDS
                else parse_models(raw_models)
            )

            async def apply() -> None:
                await self.config.set_tier(
                    guild_id,
                    role_id,
                    roles[role_id],
                    daily_per_user=daily,
                    monthly_per_user=monthly,
                    videos_at_once=videos,
                    models=models,
                )

            return await self._save(
                guild_id, signed.user_id, form.get("base", ""), tier_scope(role_id), apply
            )

        return await self._outcome(request, self.tiers, work)

    # -- Blocked terms ---------------------------------------------------------------------

    async def terms(
        self,
        request: web.Request,
        *,
        error: str | None = None,
        notice: str | None = None,
        status: int = 200,
    ) -> web.Response:
        """``/servers/<id>/settings/blocked-terms``: the terms, and "try a prompt" (``?prompt=``).

        The try box uses :func:`bot.services.policy.find_blocked_term` over the stored terms,
        the very check a command makes before any reservation.
        """
        _, guild_id, rights = await self._server(request)
        terms = (await self.config.policy(guild_id)).blocked_terms
        prompt = request.query.get("prompt", "")[:4000] if request.method == "GET" else ""
        matched = find_blocked_term(prompt, terms) if prompt else None
        return self._render(
            request,
            "settings_terms.html",
            guild_id,
            rights,
            "terms",
            status=status,
            error=error,
            notice=notice,
            terms=terms,
            base=await self._base(guild_id, terms_scope),
            prompt=prompt,
            matched=matched,
        )

    async def save_term(self, request: web.Request) -> web.Response:
        """POST: add or remove a blocked term, as ``/config blocked-terms add|remove``."""
        signed, guild_id, _, form = await self._editor(request)

        async def work() -> list[AuditEntry]:
            term = form.get("term", "")

            async def apply() -> None:
                if form.get("action") == "remove":
                    await self.config.remove_blocked_term(guild_id, term)
                else:
                    await self.config.add_blocked_term(guild_id, term)

            return await self._save(
                guild_id, signed.user_id, form.get("base", ""), terms_scope, apply
            )

        return await self._outcome(request, self.terms, work)

    # -- Dashboard access ------------------------------------------------------------------

    async def access(
        self,
        request: web.Request,
        *,
        error: str | None = None,
        notice: str | None = None,
        status: int = 200,
    ) -> web.Response:
        """``/servers/<id>/settings/access``: roles that may view or edit below Manage Server."""
        _, guild_id, rights = await self._server(request)
        granted = await self.dashboard.access_roles(guild_id)
        roles = await self._roles(guild_id)
        return self._render(
            request,
            "settings_access.html",
            guild_id,
            rights,
            "access",
            status=status,
            error=error,
            notice=notice,
            roles=[(i, n, granted.get(i, "")) for i, n in roles],
            base=digest({str(k): v for k, v in granted.items()}),
            levels=ACCESS_LEVELS,
        )

    async def save_access(self, request: web.Request) -> web.Response:
        """POST: grant a role ``view`` or ``edit`` (or nothing); audited like a setting.

        Only Manage Server may change who else may edit (a role with ``edit`` could otherwise
        hand the dashboard to anyone).
        """
        signed, guild_id, rights, form = await self._editor(request)
        if not rights.admin:
            raise web.HTTPForbidden(text=NOT_AN_EDITOR)

        async def work() -> list[AuditEntry]:
            raw_role = form.get("role_id", "")
            roles = dict(await self._roles(guild_id))
            if not raw_role.isdigit() or int(raw_role) not in roles:
                raise ValidationFailed(UNKNOWN_ROLE)
            role_id = int(raw_role)
            level = form.get("access", "")
            new = level if level in ACCESS_LEVELS else None
            lock = self._locks.setdefault(guild_id, asyncio.Lock())
            async with lock:
                granted = await self.dashboard.access_roles(guild_id)
                if digest({str(k): v for k, v in granted.items()}) != form.get("base", ""):
                    raise Refused(CHANGED_MEANWHILE, 409)
                old = granted.get(role_id)
                if old == new:
                    return []
                await self.dashboard.set_access_role(guild_id, role_id, new)
                entry = AuditEntry(
                    guild_id,
                    signed.user_id,
                    f"dashboard access of {roles[role_id]} (<@&{role_id}>)",
                    old or "none",
                    new or "none",
                    self.app.clock.time(),
                    "web",
                )
                await self.dashboard.add_audit(entry)
            self.app.rights.forget_guild(guild_id)
            channel_id = await self.config.admin_channel(guild_id)
            if channel_id is not None:
                self._post(guild_id, channel_id, [entry])
            return [entry]

        return await self._outcome(request, self.access, work)

    # -- Key ------------------------------------------------------------------------------

    async def key(
        self,
        request: web.Request,
        *,
        error: str | None = None,
        notice: str | None = None,
        status: int = 200,
    ) -> web.Response:
        """``/servers/<id>/settings/key``: whose key, its fingerprint, credits left; set/rotate.

        The key itself is never shown nor sent back: the field is write-only (a password
        field, never filled in).
        """
        _, guild_id, rights = await self._server(request)
        fingerprint, source = None, None
        with contextlib.suppress(BotError):
            resolved = await self.services.keys.resolve(guild_id)
            fingerprint, source = resolved.fingerprint, resolved.source
        money = await self.dashboard.overview(guild_id, fingerprint if source == "guild" else None)
        config = await self.config.show(guild_id)
        return self._render(
            request,
            "settings_key.html",
            guild_id,
            rights,
            "key",
            status=status,
            error=error,
            notice=notice,
            fingerprint=fingerprint,
            source=source,
            last4=config.key_last4,
            balance_micro=money.balance_micro,
            encryption=config.encryption_available,
            base=await self._base(guild_id, key_scope),
        )

    async def save_key(self, request: web.Request) -> web.Response:
        """POST: set, rotate or remove the server's key, as ``/config api-key set|remove``."""
        signed, guild_id, _, form = await self._editor(request)

        async def work() -> list[AuditEntry]:
            async def apply() -> None:
                if form.get("action") == "remove":
                    await self.config.remove_api_key(guild_id)
                else:
                    await self.config.set_api_key(
                        guild_id, form.get("api_key", ""), user_id=signed.user_id
                    )

            return await self._save(
                guild_id, signed.user_id, form.get("base", ""), key_scope, apply
            )

        return await self._outcome(request, self.key, work)

    # -- Models ---------------------------------------------------------------------------

    async def models_page(
        self,
        request: web.Request,
        *,
        error: str | None = None,
        notice: str | None = None,
        status: int = 200,
    ) -> web.Response:
        """``/servers/<id>/settings/models``: the server's model lists; each tier's, shown."""
        _, guild_id, rights = await self._server(request)
        policy = await self.config.policy(guild_id)
        return self._render(
            request,
            "settings_models.html",
            guild_id,
            rights,
            "models",
            status=status,
            error=error,
            notice=notice,
            allowed=", ".join(policy.models.allowed) or "all",
            blocked=", ".join(policy.models.blocked) or "none",
            tiers=[(t.role_name, describe_models(t.models)) for t in policy.tiers],
            base=await self._base(guild_id, models_scope),
        )

    async def save_models(self, request: web.Request) -> web.Response:
        """POST: the server-wide model lists, as ``/config models allow|block``."""
        signed, guild_id, _, form = await self._editor(request)

        async def work() -> list[AuditEntry]:
            allowed = parse_models(form.get("allowed", "") or "all")
            raw_blocked = form.get("blocked", "").strip()
            blocked = (
                ()
                if not raw_blocked or raw_blocked.casefold() in ("none", "nothing", "off")
                else parse_models(raw_blocked)
            )

            async def apply() -> None:
                await self.config.set_models(guild_id, allowed=allowed, blocked=blocked)

            return await self._save(
                guild_id, signed.user_id, form.get("base", ""), models_scope, apply
            )

        return await self._outcome(request, self.models_page, work)

    # -- Channels -------------------------------------------------------------------------

    async def _channels(self, guild_id: int) -> list[tuple[int, str]]:
        try:
            return await self.app.directory.channels(guild_id)
        except Exception as exc:
            log.warning("dashboard: channels of %s not read: %s", guild_id, exc)
            raise web.HTTPServiceUnavailable(text="Discord did not answer; try again.") from None

    async def channels(
        self,
        request: web.Request,
        *,
        error: str | None = None,
        notice: str | None = None,
        status: int = 200,
    ) -> web.Response:
        """``/servers/<id>/settings/channels``: channels, the admin and showcase ones, personas.

        Where the commands may be used, where notices and shared results go, and each
        channel's persona with its lock.
        """
        _, guild_id, rights = await self._server(request)
        config = await self.config.show(guild_id)
        showcase_channel, _ = await self.showcases.settings(guild_id)
        snapshot = await self.config.snapshot(guild_id)
        personas = [
            (
                p,
                digest({k: v for k, v in snapshot.items() if persona_scope(p.channel_id)(k)}),
            )
            for p in await self.config.personas(guild_id)
        ]
        return self._render(
            request,
            "settings_channels.html",
            guild_id,
            rights,
            "channels",
            status=status,
            error=error,
            notice=notice,
            channels=await self._channels(guild_id),
            allowed=config.allowed_channel_ids,
            admin_channel=config.admin_channel_id,
            showcase_channel=showcase_channel,
            personas=personas,
            base=digest({k: v for k, v in snapshot.items() if channels_scope(k)}),
            new_persona_base=digest({}),
        )

    async def save_channels(self, request: web.Request) -> web.Response:
        """POST: the channels, or one persona, as ``/config`` changes them.

        ``/config channels``, ``admin-channel`` and ``showcase``; ``/config persona set|remove``.
        """
        signed, guild_id, _, _ = await self._editor(request)
        # Allowed channels are checkboxes: one field name, many values.
        fields = await request.post()
        form = {k: str(v) for k, v in fields.items()}
        picked = [str(v) for v in fields.getall("allowed", [])]

        async def work() -> list[AuditEntry]:
            known = dict(await self._channels(guild_id))
            if form.get("action") in ("persona", "remove-persona"):
                channel_id = _channel_id(form.get("channel_id", ""), known)
                if channel_id is None:
                    raise ValidationFailed(UNKNOWN_CHANNEL)

                async def persona() -> None:
                    if form.get("action") == "remove-persona":
                        await self.config.remove_persona(channel_id)
                    else:
                        await self.config.set_persona(
                            guild_id,
                            channel_id,
                            form.get("system", ""),
                            form.get("model", "").strip() or None,
                            locked=form.get("locked") == "on",
                        )

                return await self._save(
                    guild_id,
                    signed.user_id,
                    form.get("base", ""),
                    persona_scope(channel_id),
                    persona,
                )
            allowed = {c for c in (_channel_id(raw, known) for raw in picked) if c is not None}
            admin = _channel_id(form.get("admin_channel", ""), known)
            showcase = _channel_id(form.get("showcase_channel", ""), known)

            async def apply() -> None:
                current = (await self.config.show(guild_id)).allowed_channel_ids
                if not allowed:
                    await self.config.allow_everywhere(guild_id)
                for channel_id in allowed - current:
                    await self.config.allow_channel(guild_id, channel_id, allowed=True)
                for channel_id in current - allowed if allowed else ():
                    await self.config.allow_channel(guild_id, channel_id, allowed=False)
                await self.config.set_admin_channel(guild_id, admin)
                await self.config.set_showcase_channel(guild_id, showcase)

            return await self._save(
                guild_id, signed.user_id, form.get("base", ""), channels_scope, apply
            )

        return await self._outcome(request, self.channels, work)

    # -- Showcase --------------------------------------------------------------------------

    async def showcase(
        self,
        request: web.Request,
        *,
        error: str | None = None,
        notice: str | None = None,
        status: int = 200,
    ) -> web.Response:
        """``/servers/<id>/showcase?period=7|30|365|all``: shared results, most votes first."""
        _, guild_id, rights = await self._server(request)
        period, days = _period(request)
        entries = await self.showcases.ranked(guild_id, days)
        channel_id, public = await self.showcases.settings(guild_id)
        names = await self._names(guild_id, [e.user_id for e in entries])
        return self._render(
            request,
            "showcase.html",
            guild_id,
            rights,
            "showcase",
            status=status,
            error=error,
            notice=notice,
            entries=entries,
            thumbs=await self._thumbs([e.result for e in entries]),
            names=names,
            period=period,
            periods=list(SHOWCASE_PERIODS),
            public=public,
            channel_id=channel_id,
            base=await self._base(guild_id, public_scope),
            public_url=f"{self.app.public_url}/showcase/{guild_id}",
        )

    async def save_showcase(self, request: web.Request) -> web.Response:
        """POST: make the showcase public or not (audited), or remove an entry (an admin's)."""
        signed, guild_id, _, form = await self._editor(request)

        async def work() -> list[AuditEntry]:
            if form.get("action") == "remove":
                raw = form.get("entry", "")
                if not raw.isdigit():
                    raise ValidationFailed(NO_SUCH_ENTRY)
                entry = await self.showcases.entry(int(raw))
                if entry is None or not await self.showcases.remove(
                    guild_id, int(raw), signed.user_id
                ):
                    raise ValidationFailed(NO_SUCH_ENTRY)
                removal = AuditEntry(
                    guild_id,
                    signed.user_id,
                    f"showcase: result {entry.result.job_id} shared by <@{entry.user_id}>",
                    "shown",
                    "removed",
                    self.app.clock.time(),
                    "web",
                )
                await self.dashboard.add_audit(removal)
                if entry.post is not None:  # its post leaves the showcase channel too
                    self._later(self.app.directory.delete_message(*entry.post), guild_id)
                return [removal]
            public = form.get("public") == "on"

            async def apply() -> None:
                await self.config.set_showcase_public(guild_id, public)

            return await self._save(
                guild_id, signed.user_id, form.get("base", ""), public_scope, apply
            )

        return await self._outcome(request, self.showcase, work)

    async def public_showcase(self, request: web.Request) -> web.Response:
        """``/showcase/<id>``: the showcase without signing in, when the server made it public.

        A server whose showcase is not public answers the same plain 404 as one that does not
        exist. Removed entries are never listed (the query leaves them out).
        """
        raw = request.match_info["guild_id"]
        if not raw.isdigit() or len(raw) > 20:
            raise web.HTTPNotFound()
        guild_id = int(raw)
        period, days = _period(request)
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


def _period(request: web.Request) -> tuple[str, int | None]:
    raw = request.query.get("period", "30")
    raw = raw if raw in SHOWCASE_PERIODS else "30"
    return raw, SHOWCASE_PERIODS[raw]


def key_scope(what: str) -> bool:
    """The setting of the Key form."""
    return what == "API key"


def models_scope(what: str) -> bool:
    """The settings of the Models form: the server-wide lists."""
    return what in ("allowed models", "blocked models")


def channels_scope(what: str) -> bool:
    """The settings of the Channels form: where the bot answers and posts."""
    return what in ("channels", "admin channel", "showcase channel")


def persona_scope(channel_id: int) -> Callable[[str], bool]:
    """The setting of one channel's persona."""
    return lambda what: what == f"persona <#{channel_id}>"


def _channel_id(raw: str, known: Mapping[int, str]) -> int | None:
    """A channel picked in a form: None for none; refused unless it is the server's."""
    if not raw:
        return None
    if not raw.isdigit() or int(raw) not in known:
        raise ValidationFailed(UNKNOWN_CHANNEL)
    return int(raw)


def public_scope(what: str) -> bool:
    """The setting of the Showcase page's form: whether it is public."""
    return what == "public showcase page"


def _models_field(models: tuple[str, ...] | None) -> str:
    """A tier's models as its form field shows them (what ``parse_models`` reads back)."""
    if models is None:
        return "default"
    return "all" if models == ("*",) else ", ".join(models)


def _money_field(cents: int | None) -> str:
    """A budget as its form field shows it: dollars, empty for unlimited."""
    return "" if cents is None else f"{cents // 100}.{cents % 100:02d}"
