"""The dashboard's settings form pattern: one :class:`SettingsForm` per settings page.

A settings page is a form class and a template, nothing else. The class says where the page
is (``path``, named ``name`` in the router: templates link with ``url(name, guild_id=...)``),
its template and its label in the server's tabs; :meth:`SettingsForm.values` reads what the
template shows, and :meth:`SettingsForm.save` reads the posted fields, validates them through
:class:`~bot.services.guild_config.GuildConfigService` and saves with :meth:`SettingsForm.commit`
(the optimistic check and the audit). Decorated with :func:`settings_form`, it is in
:data:`FORMS`: its routes (GET and POST) and its tab follow.

What every save shares is done once, around :meth:`SettingsForm.save`, by
:class:`bot.dashboard.editing.SettingsPages`: the member may edit, the form is theirs and from
this origin, the write limiter, the page lock and the optimistic check, and the outcome shown
(saved, nothing changed, or the one sentence of a refusal, with its status).
"""

from __future__ import annotations

import asyncio
import hashlib
import json
from collections.abc import Awaitable, Callable, Coroutine, Iterable, Mapping
from dataclasses import dataclass
from typing import Any, ClassVar, Final, Protocol, TypeVar

from aiohttp import web

from bot.dashboard.app import Dashboard, Signed
from bot.dashboard.rights import Person, Rights
from bot.domain import Actor, AuditEntry, ResultItem, Thumbnail
from bot.i18n import N_
from bot.services.dashboard import DashboardService
from bot.services.guild_config import GuildConfigService
from bot.services.showcase import ShowcaseService
from bot.wiring import Services

SAVED: Final = N_("Saved.")
NOTHING_CHANGED: Final = N_("Nothing changed.")
CHANGED_MEANWHILE: Final = N_(
    "Someone changed this setting since you opened the page; nothing was saved. "
    "The page now shows the current values: make your change again."
)

Scope = Callable[[str], bool]
"""Which audited settings (the snapshot's keys) a form shows and changes."""

Apply = Callable[[Actor], Awaitable[None]]
"""A save's change: the service calls, made as the given actor."""


class Refused(Exception):
    """A save refused with a sentence (marked ``N_``, English) and a status; the page again."""

    def __init__(self, sentence: str, status: int) -> None:
        super().__init__(sentence)
        self.sentence = sentence
        self.status = status


def digest(values: Mapping[str, str]) -> str:
    """The version of a form's settings: a short SHA-256 of their values as shown."""
    encoded = json.dumps(sorted(values.items()), ensure_ascii=False).encode()
    return hashlib.sha256(encoded).hexdigest()[:32]


def scoped(snapshot: Mapping[str, str], scope: Scope) -> str:
    """The :func:`digest` of the settings of ``snapshot`` in ``scope``: a form's ``base``."""
    return digest({k: v for k, v in snapshot.items() if scope(k)})


def web_actor(user_id: int) -> Actor:
    """A member changing settings on the dashboard, as the audit log names them."""
    return Actor(user_id, "web")


@dataclass(frozen=True, slots=True)
class Posted:
    """A POST's fields once checked: single values, and every value of a repeated field.

    Attributes:
        fields: each field's (first) value.
        lists: each field's values, for checkboxes (``getall``).
    """

    fields: Mapping[str, str]
    lists: Mapping[str, list[str]]

    def get(self, name: str, default: str = "") -> str:
        """One field's value, ``default`` when absent."""
        return self.fields.get(name, default)

    def getall(self, name: str) -> list[str]:
        """Every value of a repeated field (checkboxes), empty when absent."""
        return self.lists.get(name, [])


class FormHost(Protocol):
    """What a form uses of the pages that serve it (:class:`bot.dashboard.editing.SettingsPages`).

    Attributes:
        app: the dashboard (its Discord directory, rights, public address).
        services: the process's services.
        config: the settings service.
        dashboard: the dashboard's service (access roles, money overview).
        showcases: the showcase service.
    """

    app: Dashboard
    services: Services
    config: GuildConfigService
    dashboard: DashboardService
    showcases: ShowcaseService

    def lock(self, guild_id: int) -> asyncio.Lock:
        """The server's page lock."""
        ...

    async def save(
        self, guild_id: int, user_id: int, base: str, scope: Scope, apply: Apply
    ) -> list[AuditEntry]:
        """Apply a change under the page lock if ``base`` still holds; audited by the service."""
        ...

    def later(self, work: Coroutine[Any, Any, None], guild_id: int) -> None:
        """Run ``work`` after the answer."""
        ...

    async def roles(self, guild_id: int) -> list[tuple[int, str]]:
        """The server's roles, ``(id, name)``."""
        ...

    async def role_colours(self, guild_id: int) -> dict[int, int]:
        """The server's roles' colours, ``id -> 0xRRGGBB`` (0: none)."""
        ...

    async def channels(self, guild_id: int) -> list[tuple[int, str]]:
        """The server's text channels, ``(id, name)``."""
        ...

    async def people(self, guild_id: int, user_ids: Iterable[int]) -> dict[int, Person]:
        """The members as the pages show them (``_member.html``)."""
        ...

    async def thumbs(self, items: Iterable[ResultItem]) -> dict[int, Thumbnail]:
        """The first file's thumbnail of each result that has one: job id -> thumbnail."""
        ...


class SettingsForm:
    """One settings page of a server: its fields, how it reads them, and how it saves.

    Subclasses set the class attributes and implement :meth:`values` and :meth:`save`; an
    instance serves one request.

    Attributes:
        name: the route's name (``url(name, guild_id=...)``) and the tab's key.
        path: the page's address, with ``{guild_id}``.
        template: the page's Jinja template (it extends ``base.html``).
        label: the tab's text.
        admin_only: saving needs Manage Server (a dashboard role with ``edit`` is not enough).
        refusal: the 403's sentence for a member who may not save (None: the settings
            pages' own, "You may view this server's settings but not change them.").
        pages: the handlers' helpers (the service, the page lock, Discord's roles...).
        request: the request being answered.
        signed: the signed-in member.
        guild_id: the server.
        rights: the member's rights there.
    """

    name: ClassVar[str]
    path: ClassVar[str]
    template: ClassVar[str]
    label: ClassVar[str]
    admin_only: ClassVar[bool] = False
    refusal: ClassVar[str | None] = None

    @classmethod
    def shown_to(cls, rights: Rights) -> bool:
        """Whether a member with ``rights`` (who may view the server's pages) has its tab.

        Everyone by default; a page of another duty says whose (the Review page: reviewers).
        """
        return True

    @classmethod
    def may_save(cls, rights: Rights) -> bool:
        """Whether a member with ``rights`` may post this form (before its token is read).

        Editors by default (Manage Server, or a dashboard role with ``edit``); a page of
        another duty says whose (the Review page: Manage Server or Manage Messages).
        """
        return rights.may_edit

    def __init__(
        self,
        pages: FormHost,
        request: web.Request,
        signed: Signed,
        guild_id: int,
        rights: Rights,
    ) -> None:
        self.pages = pages
        self.request = request
        self.signed = signed
        self.guild_id = guild_id
        self.rights = rights

    @property
    def config(self) -> GuildConfigService:
        """The service every save goes through, as ``/config``'s."""
        return self.pages.config

    async def values(self) -> dict[str, Any]:
        """What the template shows (the page's ``base`` digests among them)."""
        raise NotImplementedError

    async def save(self, posted: Posted) -> list[AuditEntry]:
        """Read ``posted``, validate it and save it (with :meth:`commit`).

        Returns:
            The audit entries written; empty when nothing changed.

        Raises:
            Refused: the page changed meanwhile (409), or another refusal.
            ValidationFailed: a field is wrong; nothing was changed.
            BotError: the service refused (a cooldown, no key storage).
            GenAPIError: the service could not check a key.
        """
        raise NotImplementedError

    async def base(self, scope: Scope) -> str:
        """The version of the settings in ``scope`` now (a form's hidden ``base``)."""
        return scoped(await self.config.snapshot(self.guild_id), scope)

    async def commit(self, posted: Posted, scope: Scope, apply: Apply) -> list[AuditEntry]:
        """Apply a change if the settings in ``scope`` are still those of the form's ``base``.

        Raises:
            Refused: they changed meanwhile (409); nothing was changed.
        """
        return await self.pages.save(
            self.guild_id, self.signed.user_id, posted.get("base"), scope, apply
        )


FormType = TypeVar("FormType", bound=type[SettingsForm])

FORMS: list[type[SettingsForm]] = []
"""The settings pages, in the order of the server's tabs (:func:`settings_form`)."""


def settings_form(form: FormType) -> FormType:
    """Register a settings page: its routes and its tab follow (decorator)."""
    FORMS.append(form)
    return form


def tabs(forms: list[type[SettingsForm]]) -> Callable[[Rights], list[tuple[str, str]]]:
    """The settings pages' tabs a member sees: ``(route name, label)``, in order.

    Returns:
        ``settings_tabs(rights)`` for the templates: the tabs of the pages
        :meth:`SettingsForm.shown_to` a member with ``rights``.
    """

    def settings_tabs(rights: Rights) -> list[tuple[str, str]]:
        return [(form.name, form.label) for form in forms if form.shown_to(rights)]

    return settings_tabs
