"""The server's settings pages, one :class:`~bot.dashboard.forms.SettingsForm` each.

Showcase, Key, Budgets and limits, Tiers, Models, Blocked terms, Channels, Dashboard access,
Safety and Review, in the order of the server's tabs. Every save calls the same
:class:`~bot.services.guild_config.GuildConfigService` methods as ``/config``, so the very next
slash command is judged by it, and the service audits it (marked ``via="web"``) and posts it in
the admin channel as ``/config``'s changes are. Each form's ``base`` is the digest of the
audited settings it shows (its scope): a save whose base no longer matches changes nothing.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Mapping
from typing import Any, Final

from bot.dashboard.forms import (
    CHANGED_MEANWHILE,
    Posted,
    Refused,
    SettingsForm,
    digest,
    scoped,
    settings_form,
    web_actor,
)
from bot.dashboard.rights import Rights
from bot.domain import (
    UNLIMITED,
    UNSET,
    Actor,
    AuditEntry,
    Kind,
    LimitUpdate,
    SafetyMode,
    SafetyRecord,
)
from bot.domain.safety import DEFAULT_REPORTS_TO_HIDE
from bot.errors import BotError, ValidationFailed
from bot.i18n import N_, _, money, number
from bot.services.guild_config import DEFAULT_WORDS, ModelsUpdate, parse_allowance, parse_budget
from bot.services.policy import describe_models, find_blocked_term, model_matches, parse_models
from bot.services.showcase import PERIODS as SHOWCASE_PERIODS

ACCESS_LEVELS: Final = ("view", "edit")
"""Dashboard access a role may be granted below Manage Server."""

UNKNOWN_ROLE: Final = N_("Pick one of the server's roles.")
NO_SUCH_ENTRY: Final = N_("That entry is not in this server's showcase (removed already?).")
UNKNOWN_CHANNEL: Final = N_("Pick one of the server's text channels.")
UNKNOWN_MODEL: Final = N_("Pick models of the catalogue.")
NO_MODEL_PICKED: Final = N_("Pick at least one model, or all of them, or the server's list.")

MODEL_MODES: Final = ("default", "all", "picked")
"""A tier's models on its form: the server's list, every model, or the ones ticked."""
BAD_NUMBER: Final = N_("{what} is a whole number from {low} to {high}, or empty for the default.")

BUDGET_SETTINGS: Final = (
    "monthly budget",
    "daily budget per member",
    "videos in progress per member",
    "videos in progress per server",
)

NONE_WORDS: Final = ("none", "nothing", "off")
"""What an admin types for an empty block list."""


# -- scopes: the audited settings each form shows ------------------------------------------


def budgets_scope(what: str) -> bool:
    """The settings of the Budgets and limits form: budgets, caps and cooldowns."""
    return what in BUDGET_SETTINGS or what.startswith("cooldown /")


def tier_scope(role_id: int) -> Callable[[str], bool]:
    """The audited settings of one role's tier (the snapshot's ``tier <name> (<@&id>): ...``)."""
    marker = f"(<@&{role_id}>):"
    return lambda what: what.startswith("tier ") and marker in what


def terms_scope(what: str) -> bool:
    """The settings of the Blocked terms form."""
    return what.startswith("blocked term ")


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


def public_scope(what: str) -> bool:
    """The setting of the Showcase page's form: whether it is public."""
    return what == "public showcase page"


# -- fields ---------------------------------------------------------------------------------


def _number(raw: str, what: str, low: int, high: int) -> int | None:
    raw = raw.strip()
    if not raw:
        return None
    if not raw.isdigit() or not low <= int(raw) <= high:
        raise ValidationFailed(BAD_NUMBER, what=_(what), low=number(low), high=number(high))
    return int(raw)


def _money_field(cents: int | None) -> str:
    """A budget as its form field shows it: dollars, empty for unlimited."""
    return "" if cents is None else f"{cents // 100}.{cents % 100:02d}"


def _allowance_text(cents: int | None) -> str:
    """A tier's allowance as its form field shows it (what ``parse_allowance`` reads back)."""
    if cents is None:
        return "default"
    if cents == UNLIMITED:
        return "unlimited"
    return _money_field(cents)


def _models_field(models: tuple[str, ...] | None) -> str:
    """A tier's models as its form field shows them (what ``parse_models`` reads back)."""
    if models is None:
        return "default"
    return "all" if models == ("*",) else ", ".join(models)


def _model_mode(models: tuple[str, ...] | None) -> str:
    """Which of :data:`MODEL_MODES` a tier's models are."""
    if models is None:
        return "default"
    return "all" if models == ("*",) else "picked"


def _model_groups(catalogue: Any, models: tuple[str, ...] | None) -> list[dict[str, Any]]:
    """The catalogue's models as a tier's checkboxes, grouped by kind, with their prices.

    Each group: ``{"kind", "models": [{"id", "label", "price", "checked"}]}``; a model is
    ticked when one of the tier's patterns covers it. Videos carry the catalogue's price per
    5 seconds; text and images are priced by the service per request (no catalogue price).
    """
    patterns = () if models is None or models == ("*",) else models
    groups = []
    for kind, entries in (
        ("text", catalogue.text),
        ("image", catalogue.image),
        ("video", catalogue.video),
    ):
        shown = []
        for model in entries:
            per_5s = getattr(model, "cost_cents_per_5s", None)
            shown.append(
                {
                    "id": model.id,
                    "label": model.label,
                    "price": "" if per_5s is None else _("{amount} per 5 s", amount=money(per_5s)),
                    "checked": any(model_matches(p, model.id) for p in patterns),
                }
            )
        if shown:
            groups.append({"kind": kind, "models": shown})
    return groups


async def _catalogue(form: SettingsForm) -> Any:
    """The server's catalogue, None when it cannot be read (the form's typed fields then)."""
    try:
        return await form.pages.services.generation.catalogue(form.guild_id)
    except Exception:  # no key, the service down: the form falls back to text
        return None


def _with_other(groups: list[dict[str, Any]], patterns: tuple[str, ...]) -> list[dict[str, Any]]:
    """``groups`` and, as a group ``other`` (ticked), the patterns no catalogue model is.

    A prefix (``motion-pro/``) or a model gone from the catalogue stays on the list as long as
    it is ticked: saving the picker never drops what ``/config`` set.
    """
    ids = {m["id"] for g in groups for m in g["models"]}
    other = [p for p in patterns if p not in ids and p != "*"]
    if not other:
        return groups
    shown = [{"id": p, "label": p, "price": "", "checked": True} for p in other]
    return [*groups, {"kind": "other", "models": shown}]


def _picked_models(posted: Posted, known: set[str] | None) -> ModelsUpdate:
    """A tier's models as its form posted them (the mode and the ticked models).

    Without the catalogue (``known`` None) the form has the typed field ``models`` instead.

    Raises:
        ValidationFailed: a model not of the catalogue, none ticked, or what ``/config``
            refuses (:func:`parse_models`).
    """
    if known is None or not posted.get("models_mode"):
        raw = posted.get("models").strip()
        if not raw or raw.casefold() in DEFAULT_WORDS:
            return None
        return parse_models(raw)
    mode = posted.get("models_mode")
    if mode == "default":
        return None
    if mode == "all":
        return parse_models("all")
    picked = posted.getall("model")
    if any(m not in known for m in picked):
        raise ValidationFailed(UNKNOWN_MODEL)
    if not picked:
        raise ValidationFailed(NO_MODEL_PICKED)
    return parse_models(", ".join(picked))


def _id_in(raw: str, known: Mapping[int, str], refusal: str) -> int | None:
    """An id picked in a form: None for none; refused unless it is one of ``known``."""
    if not raw:
        return None
    if not raw.isdigit() or int(raw) not in known:
        raise ValidationFailed(refusal)
    return int(raw)


def _channel_id(raw: str, known: Mapping[int, str]) -> int | None:
    """A channel picked in a form: None for none; refused unless it is the server's."""
    return _id_in(raw, known, UNKNOWN_CHANNEL)


def _role_id(raw: str, known: Mapping[int, str]) -> int:
    """A role picked in a form: refused unless it is the server's."""
    role_id = _id_in(raw, known, UNKNOWN_ROLE)
    if role_id is None:
        raise ValidationFailed(UNKNOWN_ROLE)
    return role_id


def period_of(query: Mapping[str, str]) -> tuple[str, int | None]:
    """A showcase page's ``?period=``: its key, and its days (None: all time)."""
    raw = query.get("period", "30")
    raw = raw if raw in SHOWCASE_PERIODS else "30"
    return raw, SHOWCASE_PERIODS[raw]


# -- the pages, in the order of the tabs ----------------------------------------------------


@settings_form
class ShowcaseForm(SettingsForm):
    """``/servers/<id>/showcase?period=7|30|365|all``: shared results, most votes first.

    Its form makes the showcase public or not (audited); an admin's removal of an entry is
    audited (not announced) and its post leaves the showcase channel too.
    """

    name = "showcase"
    path = "/servers/{guild_id}/showcase"
    template = "showcase.html"
    label = N_("Showcase")

    async def values(self) -> dict[str, Any]:
        """What the page's template shows."""
        showcases = self.pages.showcases
        period, days = period_of(self.request.query)
        entries = await showcases.ranked(self.guild_id, days)
        channel_id, public = await showcases.settings(self.guild_id)
        return {
            "entries": entries,
            "thumbs": await self.pages.thumbs([e.result for e in entries]),
            "people": await self.pages.people(self.guild_id, [e.user_id for e in entries]),
            "period": period,
            "periods": list(SHOWCASE_PERIODS),
            "public": public,
            "channel_id": channel_id,
            "base": await self.base(public_scope),
            "public_url": f"{self.pages.app.public_url}/showcase/{self.guild_id}",
        }

    async def save(self, posted: Posted) -> list[AuditEntry]:
        """Validate ``posted`` and save it; the entries audited (empty: nothing changed)."""
        if posted.get("action") == "remove":
            return await self._remove(posted.get("entry"))
        public = posted.get("public") == "on"

        async def apply(actor: Actor) -> None:
            await self.config.set_showcase_public(self.guild_id, public, actor=actor)

        return await self.commit(posted, public_scope, apply)

    async def _remove(self, raw: str) -> list[AuditEntry]:
        showcases = self.pages.showcases
        if not raw.isdigit():
            raise ValidationFailed(NO_SUCH_ENTRY)
        entry = await showcases.entry(int(raw))
        if entry is None or not await showcases.remove(
            self.guild_id, int(raw), self.signed.user_id
        ):
            raise ValidationFailed(NO_SUCH_ENTRY)
        removal = await self.config.record(
            self.guild_id,
            web_actor(self.signed.user_id),
            f"showcase: result {entry.result.job_id} shared by <@{entry.user_id}>",
            "shown",
            "removed",
            announce=False,
        )
        if entry.post is not None:  # its post leaves the showcase channel too
            self.pages.later(self.pages.app.directory.delete_message(*entry.post), self.guild_id)
        return [removal]


@settings_form
class KeyForm(SettingsForm):
    """``/servers/<id>/settings/key``: whose key, its fingerprint, credits left; set/rotate.

    The key itself is never shown nor sent back: the field is write-only (a password field,
    never filled in). Saved as ``/config api-key set|remove``.
    """

    name = "key"
    path = "/servers/{guild_id}/settings/key"
    template = "settings_key.html"
    label = N_("Key")

    async def values(self) -> dict[str, Any]:
        """What the page's template shows."""
        fingerprint, source = None, None
        with contextlib.suppress(BotError):
            resolved = await self.pages.services.keys.resolve(self.guild_id)
            fingerprint, source = resolved.fingerprint, resolved.source
        money = await self.pages.dashboard.overview(
            self.guild_id, fingerprint if source == "guild" else None
        )
        config = await self.config.show(self.guild_id)
        return {
            "fingerprint": fingerprint,
            "source": source,
            "last4": config.key_last4,
            "balance_micro": money.balance_micro,
            "encryption": config.encryption_available,
            "base": await self.base(key_scope),
        }

    async def save(self, posted: Posted) -> list[AuditEntry]:
        """Validate ``posted`` and save it; the entries audited (empty: nothing changed)."""

        async def apply(actor: Actor) -> None:
            if posted.get("action") == "remove":
                await self.config.remove_api_key(self.guild_id, actor=actor)
            else:
                await self.config.set_api_key(self.guild_id, posted.get("api_key"), actor=actor)

        return await self.commit(posted, key_scope, apply)


@settings_form
class BudgetsForm(SettingsForm):
    """``/servers/<id>/settings/budgets``: budgets, caps and cooldowns.

    Saved as ``/config budget``, ``/config limits`` and ``/config cooldown``.
    """

    name = "budgets"
    path = "/servers/{guild_id}/settings/budgets"
    template = "settings_budgets.html"
    label = N_("Budgets and limits")

    async def values(self) -> dict[str, Any]:
        """What the page's template shows."""
        config = await self.config.show(self.guild_id)
        limits = config.limits
        return {
            "base": await self.base(budgets_scope),
            "monthly": _money_field(limits.monthly_budget_cents),
            "daily": _money_field(limits.user_daily_budget_cents),
            "per_user": limits.max_pending_videos_per_user,
            "per_guild": limits.max_pending_videos_per_guild,
            "cooldowns": {k.value: config.policy.cooldowns.get(k, 0) for k in Kind},
        }

    async def save(self, posted: Posted) -> list[AuditEntry]:
        """Validate ``posted`` and save it; the entries audited (empty: nothing changed)."""
        monthly: LimitUpdate = parse_budget(posted.get("monthly") or "unlimited")
        daily: LimitUpdate = parse_budget(posted.get("daily") or "unlimited")
        per_user = _number(posted.get("per_user"), N_("Videos per member"), 1, 100)
        per_guild = _number(posted.get("per_guild"), N_("Videos per server"), 1, 1000)
        cooldowns = {
            kind: _number(posted.get(f"cooldown_{kind.value}"), N_("A cooldown"), 0, 86400)
            for kind in Kind
        }
        config, guild_id = self.config, self.guild_id

        async def apply(actor: Actor) -> None:
            await config.set_budgets(guild_id, monthly=monthly, daily_per_user=daily, actor=actor)
            await config.set_caps(
                guild_id,
                per_user=UNSET if per_user is None else per_user,
                per_guild=UNSET if per_guild is None else per_guild,
                actor=actor,
            )
            for kind, seconds in cooldowns.items():
                await config.set_cooldown(guild_id, kind, seconds or 0, actor=actor)

        return await self.commit(posted, budgets_scope, apply)


@settings_form
class TiersForm(SettingsForm):
    """``/servers/<id>/settings/tiers``: each role tier's allowances, cap and models.

    Each tier is a form of its own (its own ``base``); saved as ``/config tier set|remove``.
    """

    name = "tiers"
    path = "/servers/{guild_id}/settings/tiers"
    template = "settings_tiers.html"
    label = N_("Tiers")

    async def values(self) -> dict[str, Any]:
        """What the page's template shows."""
        policy = await self.config.policy(self.guild_id)
        snapshot = await self.config.snapshot(self.guild_id)
        roles = await self.pages.roles(self.guild_id)
        colours = await self.pages.role_colours(self.guild_id)
        catalogue = await _catalogue(self)
        rows = [
            {
                "tier": tier,
                "base": scoped(snapshot, tier_scope(tier.role_id)),
                "daily": _allowance_text(tier.daily_per_user_cents),
                "monthly": _allowance_text(tier.monthly_per_user_cents),
                "videos": "" if tier.videos_at_once is None else str(tier.videos_at_once),
                "models": _models_field(tier.models),
                "models_text": describe_models(tier.models),
                "models_mode": _model_mode(tier.models),
                "groups": [] if catalogue is None else _model_groups(catalogue, tier.models),
                "colour": colours.get(tier.role_id, 0),
            }
            for tier in policy.tiers
        ]
        tiered = {t.role_id for t in policy.tiers}
        return {
            "rows": rows,
            "free_roles": [(i, n, colours.get(i, 0)) for i, n in roles if i not in tiered],
            "new_base": digest({}),
            "new_groups": [] if catalogue is None else _model_groups(catalogue, None),
            "modes": MODEL_MODES,
        }

    async def _known_models(self) -> set[str] | None:
        catalogue = await _catalogue(self)
        if catalogue is None:
            return None
        return {m.id for m in (*catalogue.text, *catalogue.image, *catalogue.video)}

    async def save(self, posted: Posted) -> list[AuditEntry]:
        """Validate ``posted`` and save it; the entries audited (empty: nothing changed)."""
        roles = dict(await self.pages.roles(self.guild_id))
        role_id = _role_id(posted.get("role_id"), roles)
        config, guild_id = self.config, self.guild_id
        if posted.get("action") == "remove":

            async def remove(actor: Actor) -> None:
                await config.remove_tier(guild_id, role_id, actor=actor)

            return await self.commit(posted, tier_scope(role_id), remove)
        daily = parse_allowance(posted.get("daily") or "default")
        monthly = parse_allowance(posted.get("monthly") or "default")
        videos = _number(posted.get("videos"), N_("Videos at once"), 1, 100)
        models = _picked_models(posted, await self._known_models())

        async def apply(actor: Actor) -> None:
            await config.set_tier(
                guild_id,
                role_id,
                roles[role_id],
                daily_per_user=daily,
                monthly_per_user=monthly,
                videos_at_once=videos,
                models=models,
                actor=actor,
            )

        return await self.commit(posted, tier_scope(role_id), apply)


@settings_form
class ModelsForm(SettingsForm):
    """``/servers/<id>/settings/models``: the server's model lists; each tier's, shown.

    Saved as ``/config models allow|block``.
    """

    name = "models"
    path = "/servers/{guild_id}/settings/models"
    template = "settings_models.html"
    label = N_("Models")

    async def values(self) -> dict[str, Any]:
        """What the page's template shows."""
        policy = await self.config.policy(self.guild_id)
        lists = policy.models
        catalogue = await _catalogue(self)
        allowed_groups, blocked_groups = [], []
        if catalogue is not None:
            allowed_groups = _with_other(_model_groups(catalogue, lists.allowed), lists.allowed)
            blocked_groups = _with_other(_model_groups(catalogue, lists.blocked), lists.blocked)
        return {
            "allowed": ", ".join(lists.allowed) or "all",
            "blocked": ", ".join(lists.blocked) or "none",
            "allowed_mode": "picked" if lists.allowed else "all",
            "allowed_groups": allowed_groups,
            "blocked_groups": blocked_groups,
            "tiers": [(t.role_name, describe_models(t.models)) for t in policy.tiers],
            "base": await self.base(models_scope),
        }

    async def save(self, posted: Posted) -> list[AuditEntry]:
        """Validate ``posted`` and save it; the entries audited (empty: nothing changed).

        The picker posts ``allowed_mode`` (``all`` or ``picked``) and the ticked ``allow`` and
        ``block`` models; without the catalogue the form has the typed lists instead.

        Raises:
            ValidationFailed: a model neither of the catalogue nor already listed, none ticked
                for "only the models ticked", or what ``/config`` refuses.
        """
        allowed, blocked = await self._posted_lists(posted)

        async def apply(actor: Actor) -> None:
            await self.config.set_models(
                self.guild_id, allowed=allowed, blocked=blocked, actor=actor
            )

        return await self.commit(posted, models_scope, apply)

    async def _posted_lists(self, posted: Posted) -> tuple[tuple[str, ...], tuple[str, ...]]:
        catalogue = await _catalogue(self)
        if catalogue is None or not posted.get("allowed_mode"):
            allowed = parse_models(posted.get("allowed") or "all")
            raw_blocked = posted.get("blocked").strip()
            if not raw_blocked or raw_blocked.casefold() in NONE_WORDS:
                return allowed, ()
            return allowed, parse_models(raw_blocked)
        lists = (await self.config.policy(self.guild_id)).models
        known = {m.id for m in (*catalogue.text, *catalogue.image, *catalogue.video)}
        known |= {*lists.allowed, *lists.blocked}  # prefixes already listed stay pickable
        allow, block = posted.getall("allow"), posted.getall("block")
        if any(m not in known for m in (*allow, *block)):
            raise ValidationFailed(UNKNOWN_MODEL)
        if posted.get("allowed_mode") == "all":
            allowed = parse_models("all")
        elif not allow:
            raise ValidationFailed(NO_MODEL_PICKED)
        else:
            allowed = parse_models(", ".join(allow))
        return allowed, parse_models(", ".join(block)) if block else ()


@settings_form
class TermsForm(SettingsForm):
    """``/servers/<id>/settings/blocked-terms``: the terms, and "try a prompt" (``?prompt=``).

    The try box uses :func:`bot.services.policy.find_blocked_term` over the stored terms, the
    very check a command makes before any reservation. Saved as
    ``/config blocked-terms add|remove``.
    """

    name = "terms"
    path = "/servers/{guild_id}/settings/blocked-terms"
    template = "settings_terms.html"
    label = N_("Blocked terms")

    async def values(self) -> dict[str, Any]:
        """What the page's template shows."""
        terms = (await self.config.policy(self.guild_id)).blocked_terms
        query = self.request.query
        prompt = query.get("prompt", "")[:4000] if self.request.method == "GET" else ""
        return {
            "terms": terms,
            "base": await self.base(terms_scope),
            "prompt": prompt,
            "matched": find_blocked_term(prompt, terms) if prompt else None,
        }

    async def save(self, posted: Posted) -> list[AuditEntry]:
        """Validate ``posted`` and save it; the entries audited (empty: nothing changed)."""
        term = posted.get("term")

        async def apply(actor: Actor) -> None:
            if posted.get("action") == "remove":
                await self.config.remove_blocked_term(self.guild_id, term, actor=actor)
            else:
                await self.config.add_blocked_term(self.guild_id, term, actor=actor)

        return await self.commit(posted, terms_scope, apply)


@settings_form
class ChannelsForm(SettingsForm):
    """``/servers/<id>/settings/channels``: channels, the admin and showcase ones, personas.

    Where the commands may be used, where notices and shared results go, and each channel's
    persona with its lock. Saved as ``/config channels``, ``admin-channel`` and ``showcase``,
    or ``/config persona set|remove`` (each persona a form of its own).
    """

    name = "channels"
    path = "/servers/{guild_id}/settings/channels"
    template = "settings_channels.html"
    label = N_("Channels")

    async def values(self) -> dict[str, Any]:
        """What the page's template shows."""
        config = await self.config.show(self.guild_id)
        showcase_channel, _public = await self.pages.showcases.settings(self.guild_id)
        snapshot = await self.config.snapshot(self.guild_id)
        personas = [
            (p, scoped(snapshot, persona_scope(p.channel_id)))
            for p in await self.config.personas(self.guild_id)
        ]
        catalogue = await _catalogue(self)
        return {
            "text_models": [] if catalogue is None else [(m.id, m.label) for m in catalogue.text],
            "channels": await self.pages.channels(self.guild_id),
            "allowed": config.allowed_channel_ids,
            "admin_channel": config.admin_channel_id,
            "showcase_channel": showcase_channel,
            "personas": personas,
            "base": scoped(snapshot, channels_scope),
            "new_persona_base": digest({}),
        }

    async def save(self, posted: Posted) -> list[AuditEntry]:
        """Validate ``posted`` and save it; the entries audited (empty: nothing changed)."""
        known = dict(await self.pages.channels(self.guild_id))
        if posted.get("action") in ("persona", "remove-persona"):
            return await self._persona(posted, known)
        # Allowed channels are checkboxes: one field name, many values.
        picked = (_channel_id(raw, known) for raw in posted.getall("allowed"))
        allowed = {c for c in picked if c is not None}
        admin = _channel_id(posted.get("admin_channel"), known)
        showcase = _channel_id(posted.get("showcase_channel"), known)
        config, guild_id = self.config, self.guild_id

        async def apply(actor: Actor) -> None:
            current = (await config.show(guild_id)).allowed_channel_ids
            if not allowed:
                await config.allow_everywhere(guild_id, actor=actor)
            for channel_id in allowed - current:
                await config.allow_channel(guild_id, channel_id, allowed=True, actor=actor)
            for channel_id in current - allowed if allowed else ():
                await config.allow_channel(guild_id, channel_id, allowed=False, actor=actor)
            await config.set_admin_channel(guild_id, admin, actor=actor)
            await config.set_showcase_channel(guild_id, showcase, actor=actor)

        return await self.commit(posted, channels_scope, apply)

    async def _persona(self, posted: Posted, known: Mapping[int, str]) -> list[AuditEntry]:
        channel_id = _channel_id(posted.get("channel_id"), known)
        if channel_id is None:
            raise ValidationFailed(UNKNOWN_CHANNEL)
        config, guild_id = self.config, self.guild_id

        async def persona(actor: Actor) -> None:
            if posted.get("action") == "remove-persona":
                await config.remove_persona(guild_id, channel_id, actor=actor)
            else:
                await config.set_persona(
                    guild_id,
                    channel_id,
                    posted.get("system"),
                    posted.get("model").strip() or None,
                    locked=posted.get("locked") == "on",
                    actor=actor,
                )

        return await self.commit(posted, persona_scope(channel_id), persona)


@settings_form
class AccessForm(SettingsForm):
    """``/servers/<id>/settings/access``: roles that may view or edit below Manage Server.

    A role is granted ``view`` or ``edit`` (or nothing), audited like a setting. Only Manage
    Server may change who else may edit (a role with ``edit`` could otherwise hand the
    dashboard to anyone).
    """

    name = "access"
    path = "/servers/{guild_id}/settings/access"
    template = "settings_access.html"
    label = N_("Dashboard access")
    admin_only = True

    async def values(self) -> dict[str, Any]:
        """What the page's template shows."""
        granted = await self.pages.dashboard.access_roles(self.guild_id)
        roles = await self.pages.roles(self.guild_id)
        colours = await self.pages.role_colours(self.guild_id)
        return {
            "roles": [(i, n, granted.get(i, ""), colours.get(i, 0)) for i, n in roles],
            "base": digest({str(k): v for k, v in granted.items()}),
            "levels": ACCESS_LEVELS,
        }

    async def save(self, posted: Posted) -> list[AuditEntry]:
        """Validate ``posted`` and save it; the entries audited (empty: nothing changed)."""
        roles = dict(await self.pages.roles(self.guild_id))
        role_id = _role_id(posted.get("role_id"), roles)
        level = posted.get("access")
        new = level if level in ACCESS_LEVELS else None
        dashboard, guild_id = self.pages.dashboard, self.guild_id
        async with self.pages.lock(guild_id):
            granted = await dashboard.access_roles(guild_id)
            if digest({str(k): v for k, v in granted.items()}) != posted.get("base"):
                raise Refused(CHANGED_MEANWHILE, 409)
            old = granted.get(role_id)
            if old == new:
                return []
            await dashboard.set_access_role(guild_id, role_id, new)
            entry = await self.config.record(
                guild_id,
                web_actor(self.signed.user_id),
                f"dashboard access of {roles[role_id]} (<@&{role_id}>)",
                old or "none",
                new or "none",
            )
        self.pages.app.rights.forget_guild(guild_id)
        return [entry]


# -- safety checking of results (docs/safety.md) ----------------------------------------------

SAFETY_UNAVAILABLE: Final = N_(
    "Safety checking is unavailable on this bot: no model is configured."
)
"""The Safety page without ``SAFETY_MODEL`` (as ``/config safety`` says)."""

BAD_SCORE: Final = N_("{what} is a number from 0 to 1.")
REVIEWERS_ONLY: Final = N_("Only members with Manage Server or Manage Messages review results.")
REVIEW_CHANGED: Final = N_(
    "That result was decided since you opened the page (by another moderator, here or on "
    "Discord); nothing was done. The page now shows what still waits."
)
UNKNOWN_RESULT: Final = N_("That result is not in this server's review queue.")


def safety_scope(what: str) -> bool:
    """The settings of the Safety form: the server's policy (``audit_values``' keys)."""
    return what.startswith("safety ")


def _score(raw: str, what: str) -> float:
    try:
        value = float(raw.strip())
    except ValueError:
        raise ValidationFailed(BAD_SCORE, what=_(what)) from None
    if not 0.0 <= value <= 1.0:
        raise ValidationFailed(BAD_SCORE, what=_(what))
    return value


@settings_form
class SafetyForm(SettingsForm):
    """``/servers/<id>/settings/safety``: the server's safety policy, as ``/config safety``.

    Mode, the two thresholds, the review channel, the reports that withhold a result and what
    age-restricted channels get; saved through :meth:`bot.services.safety.SafetyService.update`
    and audited like every setting (``via="web"``). Without ``SAFETY_MODEL`` it says that
    checking is unavailable on this bot, and has no form.
    """

    name = "safety"
    path = "/servers/{guild_id}/settings/safety"
    template = "settings_safety.html"
    label = N_("Safety")

    async def values(self) -> dict[str, Any]:
        """What the page's template shows."""
        safety = self.pages.services.moderation
        if not safety.available:
            return {"available": False, "unavailable": _(SAFETY_UNAVAILABLE)}
        return {
            "available": True,
            "policy": await safety.policy(self.guild_id),
            "modes": [m.value for m in SafetyMode],
            "channels": await self.pages.channels(self.guild_id),
            "base": await self.base(safety_scope),
        }

    async def save(self, posted: Posted) -> list[AuditEntry]:
        """Validate ``posted`` and save it; the entries audited (empty: nothing changed)."""
        safety = self.pages.services.moderation
        if not safety.available:
            raise ValidationFailed(SAFETY_UNAVAILABLE)
        known = dict(await self.pages.channels(self.guild_id))
        channel = _channel_id(posted.get("review_channel"), known)
        reports = _number(
            posted.get("reports_to_hide"), N_("Reports that withhold a result"), 1, 100
        )
        values: dict[str, Any] = {
            "mode": posted.get("mode"),
            "review_above": _score(posted.get("review_above"), N_("Held from")),
            "block_above": _score(posted.get("block_above"), N_("Withheld from")),
            "review_channel_id": channel or 0,  # 0: the admin channel
            "reports_to_hide": reports or DEFAULT_REPORTS_TO_HIDE,
            "nsfw_channels": posted.get("nsfw_channels"),
        }
        guild_id = self.guild_id

        async def apply(actor: Actor) -> None:
            await safety.update(guild_id, **values)

        return await self.commit(posted, safety_scope, apply)


def review_base(record: SafetyRecord) -> str:
    """The version of one queued result a Review row was rendered from (its state)."""
    return digest({"ref": record.ref, "state": record.state.value})


@settings_form
class ReviewForm(SettingsForm):
    """``/servers/<id>/review``: held, withheld and reported results, with Approve / Reject.

    For reviewers (Manage Server or Manage Messages, as the review channel's buttons); others
    see one sentence and no result. Each row shows the result's thumbnail when one is kept
    (served to reviewers only: ``Pages._seen_result``), its score, prompt, member and state.
    A decision goes through the one write path (the form's token and origin, the write limit,
    the page lock) and an optimistic check: the row carries the state it was rendered from,
    and a result decided meanwhile (here or on Discord) changes nothing (409). The service
    audits it (``safety review j12: held → approved``, ``via="web"``) and the review channel's
    card of the result is removed. Then the member's side is done exactly as the review
    channel's buttons do it, through the dashboard's Discord port (``settle_review``): Approve
    shows the result on its card with the member's ping (a job delivered again by the poller,
    a synchronous image posted as a reply to its card), Reject edits the card and tells them.
    """

    name = "review"
    path = "/servers/{guild_id}/review"
    template = "review.html"
    label = N_("Review")
    refusal = REVIEWERS_ONLY

    @classmethod
    def shown_to(cls, rights: Rights) -> bool:
        """Its tab: reviewers only (Manage Server, or Manage Messages with dashboard access)."""
        return rights.may_review

    @classmethod
    def may_save(cls, rights: Rights) -> bool:
        """Reviewers: Manage Server or Manage Messages."""
        return rights.may_review

    async def values(self) -> dict[str, Any]:
        """What the page's template shows."""
        safety = self.pages.services.moderation
        if not self.rights.may_review:
            return {"reviewer": False, "rows": [], "refusal": _(REVIEWERS_ONLY)}
        records = await safety.queue(self.guild_id)
        results = {}
        for record in records:
            if record.ref.startswith("j"):
                item = await self.pages.dashboard.result(int(record.ref[1:]))
                if item is not None and item.guild_id == self.guild_id:
                    results[record.ref] = item
        thumbs = await self.pages.thumbs(results.values())
        people = await self.pages.people(self.guild_id, [r.user_id for r in records])
        rows = [
            {
                "record": record,
                "item": results.get(record.ref),
                "thumb": thumbs.get(results[record.ref].job_id) if record.ref in results else None,
                "person": people.get(record.user_id),
                "base": review_base(record),
            }
            for record in records
        ]
        return {"reviewer": True, "rows": rows, "available": safety.available}

    async def save(self, posted: Posted) -> list[AuditEntry]:
        """Approve or Reject one result; the audit entry written (the service's)."""
        safety = self.pages.services.moderation
        action, ref = posted.get("action"), posted.get("ref")
        if action not in ("approve", "reject"):
            raise ValidationFailed(UNKNOWN_RESULT)
        user_id = self.signed.user_id
        async with self.pages.lock(self.guild_id):
            record = await safety.record(ref) if ref else None
            if record is None or record.guild_id != self.guild_id:
                raise ValidationFailed(UNKNOWN_RESULT)
            if review_base(record) != posted.get("base") or not record.state.pending:
                raise Refused(REVIEW_CHANGED, 409)
            decide = safety.approve if action == "approve" else safety.reject
            try:
                decided = await decide(ref, guild_id=self.guild_id, user_id=user_id, via="web")
            except ValidationFailed:  # decided on Discord in between
                raise Refused(REVIEW_CHANGED, 409) from None
        directory = self.pages.app.directory
        if record.review is not None:  # its buttons there would only refuse now
            self.pages.later(directory.delete_message(*record.review), self.guild_id)
        # The member's side, as the review channel's buttons: Approve shows it on its card
        # with the ping (a job by the poller), Reject tells the member.
        self.pages.later(directory.settle_review(decided), self.guild_id)
        return [
            AuditEntry(
                self.guild_id,
                user_id,
                f"safety review {ref}",
                record.state.value,
                decided.state.value,
                decided.decided_at or 0.0,
                "web",
            )
        ]
