"""What ``/config`` changes: a guild's key, limits, channels, notices and policy, audited.

The policy: role tiers, the server-wide model list, blocked terms, cooldowns.

Every change is audited here, whichever surface made it (``/config``, the dashboard): each
mutating method takes the :class:`~bot.domain.Actor` who makes it, snapshots the settings
before, and after the change writes one audit row per setting that changed and posts them in
the server's admin channel (if one is set) through the outlet the Discord side set
(:meth:`GuildConfigService.set_change_outlet`); :class:`~bot.services.settings_audit.SettingsAudit`
does it, with the snapshot this service takes. Several calls that make one change (a
dashboard form's save) are audited as one inside :meth:`GuildConfigService.changing`.
A member's own wallet (``bot.services.personal``) is no server: its key is not audited.
"""

from __future__ import annotations

import contextlib
import logging
import re
from collections import OrderedDict
from dataclasses import dataclass, field, replace
from decimal import Decimal
from typing import TypeAlias

from pydantic import SecretStr

from bot.clock import Clock, SystemClock
from bot.domain import (
    UNLIMITED,
    UNSET,
    Actor,
    AuditEntry,
    BillingMode,
    Kind,
    LimitUpdate,
    ModelLists,
    Persona,
    Tier,
    Unset,
)
from bot.errors import CooldownActive, KeyEncryptionUnavailable, ValidationFailed
from bot.genapi.catalogue import CatalogueCache
from bot.genapi.client import GenAPIClient
from bot.genapi.errors import UnauthorizedError
from bot.i18n import N_, SHIPPED, SOURCE, money, using
from bot.services.billing import Billing, Limits
from bot.services.creative import audit_values as creative_values
from bot.services.guard import audit_values, settings_of
from bot.services.keys import KeyChange, KeyResolver, KeyVault
from bot.services.personal import is_personal
from bot.services.policy import (
    MAX_TERM_LENGTH,
    describe_allowance,
    describe_models,
    normalise_term,
)
from bot.services.safety import audit_values as safety_values
from bot.services.safety import policy_of
from bot.services.settings_audit import ChangeOutlet, Changes, SettingsAudit, SettingsCheck
from bot.storage import Database

log = logging.getLogger(__name__)

KEY_CHECK_COOLDOWN_SECONDS = 30.0
"""Seconds between two key checks by one member, whichever surface they use: their own key
(``/settings api-key set``), a server's (``/config api-key set``) or the dashboard's Key form.

Each check is a call to the service on the typed key: without a bound, a member (or a
script) could make the bot try keys as fast as forms are submitted, from every surface and
every server they manage at once. One cooldown per member, shared by the three.
Kept in the process's memory (a restart forgets it: at worst one more check)."""

KEY_CHECKS_REMEMBERED = 100_000
"""Members whose key-check cooldown is running, kept at most (the oldest dropped first)."""

MAX_PERSONA_CHARS = 2000
"""A persona's system prompt, characters: it is sent before a member's own (up to 4,000) on
every call in its channel."""

DEFAULT_WORDS = frozenset({"default", "server", "inherit"})
"""What an admin types for "the server default" in a tier's option."""

ModelsUpdate: TypeAlias = tuple[str, ...] | Unset | None
"""A tier's new models: patterns, None (the server's list), or UNSET (kept)."""

_KEY_SHAPE = re.compile(r"^\S{8,256}$")
"""An API key: one word of 8 to 256 characters (the spec shows only that it has a prefix)."""

_MONEY = re.compile(r"^\$?\s*(\d{1,9})(?:[.,](\d{1,2}))?$")
UNLIMITED_WORDS = frozenset({"none", "unlimited", "off", "default"})


def parse_budget(text: str) -> int | None:
    """Read a budget typed by an admin: ``"12.50"``, ``"$12"``, or ``"unlimited"``.

    Returns:
        Cents, or None for "back to the default" (``none``, ``unlimited``, ``off``, ``default``).

    Raises:
        ValidationFailed: not an amount in dollars.
    """
    cleaned = text.strip().casefold()
    if cleaned in UNLIMITED_WORDS:
        return None
    match = _MONEY.match(cleaned)
    if match is None:
        raise ValidationFailed(
            N_("`{value}` is not an amount in dollars, such as 25 or 12.50."), value=text[:20]
        )
    dollars, cents = match.groups()
    return int(dollars) * 100 + int((cents or "0").ljust(2, "0"))


def parse_allowance(text: str) -> int | None:
    """Read a tier's allowance: dollars, ``unlimited``, or ``default`` (the server's).

    Returns:
        Whole cents; :data:`~bot.domain.UNLIMITED`; None for the server default.

    Raises:
        ValidationFailed: none of these.
    """
    cleaned = text.strip().casefold()
    if cleaned in DEFAULT_WORDS:
        return None
    cents = parse_budget(text)
    return UNLIMITED if cents is None else cents


@dataclass(frozen=True, slots=True)
class ServerPolicy:
    """A guild's policy, as ``/config show`` and ``/config tier list`` display it.

    Attributes:
        tiers: the role tiers, by role name.
        models: the server-wide model list (members without a tier).
        blocked_terms: normalised, sorted.
        cooldowns: seconds per command.
    """

    tiers: list[Tier] = field(default_factory=list)
    models: ModelLists = field(default_factory=ModelLists)
    blocked_terms: list[str] = field(default_factory=list)
    cooldowns: dict[Kind, int] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class GuildConfig:
    """A guild's effective configuration, as ``/config show`` displays it.

    Attributes:
        key_source: whose key requests use: ``"guild"``, ``"default"`` or None (no key).
        key_last4: the guild key's last four characters, when it has one.
        limits: budgets (cents) and caps in force, defaults applied.
        allowed_channel_ids: channels the commands are limited to; empty = everywhere.
        admin_channel_id: where key problems are announced; None = nowhere.
        encryption_available: whether a guild key can be stored at all.
        policy: role tiers, model list, blocked terms and cooldowns.
        locale: the language an admin chose for public messages; None = Discord's.
    """

    key_source: str | None
    key_last4: str | None
    limits: Limits
    allowed_channel_ids: frozenset[int]
    admin_channel_id: int | None
    encryption_available: bool
    policy: ServerPolicy = field(default_factory=ServerPolicy)
    locale: str | None = None


LOCALE_CACHE_SECONDS = 60.0
"""How long a server's chosen language is kept in memory (another process's change shows
within this)."""

LOCALE_CACHE_SIZE = 10_000
"""Servers' languages kept at most before the expired ones are dropped."""


class KeyCheckCooldown:
    """Each member's key-check cooldown (:data:`KEY_CHECK_COOLDOWN_SECONDS`), in memory.

    One cooldown per member for ``/settings api-key set``, ``/config api-key set`` and the
    dashboard's Key form together: Manage Server bounds who may check a server's key, not
    how often, and a member may manage many servers.

    Args:
        clock: times the checks (seconds).
    """

    def __init__(self, clock: Clock) -> None:
        self._clock = clock
        # Members whose cooldown runs: user id -> when their last check started (clock time),
        # oldest first; at most KEY_CHECKS_REMEMBERED.
        self._checks: OrderedDict[int, float] = OrderedDict()

    def start(self, user_id: int, *, personal: bool) -> None:
        """Start a member's key-check cooldown, or refuse while it runs.

        Args:
            user_id: the member checking a key.
            personal: the key is their own (the refusal names ``/settings``, else ``/config``).

        Raises:
            CooldownActive: the member checked a key less than the cooldown ago.
        """
        now = self._clock.time()
        checks = self._checks
        while checks and next(iter(checks.values())) + KEY_CHECK_COOLDOWN_SECONDS <= now:
            checks.popitem(last=False)  # oldest first: only the running cooldowns are kept
        last = checks.get(user_id)
        if last is not None:
            command = "settings api-key set" if personal else "config api-key set"
            raise CooldownActive(command, last + KEY_CHECK_COOLDOWN_SECONDS)
        if len(checks) >= KEY_CHECKS_REMEMBERED:
            checks.popitem(last=False)
        checks[user_id] = now


class GuildConfigService:
    """Applies admins' configuration changes; every method is for a guild's admins only.

    Args:
        db: the database.
        keys: stores and resolves keys.
        vault: whether keys can be encrypted.
        billing: the effective limits.
        client: the API client, to check a key before storing it.
        default_key_set: whether ``GENAPI_API_KEY`` is set.
        catalogue: the catalogue cache, told to stop refreshing with a key that is replaced or
            removed (it then uses the default key).
        clock: stamps the audit log (UTC epoch seconds).
        credit_packs_offered: whether ``CREDIT_PACKS`` offers packs, without which members
            cannot pay (``/config billing`` keeps ``server``).
    """

    def __init__(
        self,
        *,
        db: Database,
        keys: KeyResolver,
        vault: KeyVault,
        billing: Billing,
        client: GenAPIClient,
        default_key_set: bool,
        catalogue: CatalogueCache | None = None,
        clock: Clock | None = None,
        credit_packs_offered: bool = False,
    ) -> None:
        self._clock = clock or SystemClock()
        self._packs_offered = credit_packs_offered
        self._db = db
        self._keys = keys
        self._vault = vault
        self._billing = billing
        self._client = client
        self._default_key_set = default_key_set
        self._catalogue = catalogue
        self._key_checks = KeyCheckCooldown(self._clock)
        # Servers' chosen languages, read for every public card the poller edits: guild id ->
        # (locale or None, until (monotonic clock)). Another process's change is seen within
        # LOCALE_CACHE_SECONDS; this one's at once.
        self._locales: dict[int, tuple[str | None, float]] = {}
        self._audit = SettingsAudit(db, self._clock, self.snapshot, self.admin_channel)

    def set_change_outlet(self, outlet: ChangeOutlet | None) -> None:
        """Set where audited changes are posted (the process's Discord side); None: nowhere."""
        self._audit.set_outlet(outlet)

    async def set_api_key(self, guild_id: int, api_key: str, *, actor: Actor) -> KeyChange:
        """Check ``api_key`` with a free ``GET /models`` call, then store it encrypted.

        The previous key is kept (encrypted) until the jobs submitted with it end.

        Args:
            guild_id: the server, or a member's wallet (``bot.services.personal.wallet_id``).
            api_key: the key typed.
            actor: the member who typed it: their key-check cooldown
                (:data:`KEY_CHECK_COOLDOWN_SECONDS`) applies, whichever surface they used.

        Returns:
            What changed: the new key's last four characters, the jobs left on the old key.

        Raises:
            KeyEncryptionUnavailable: ``KEY_ENCRYPTION_KEY`` is unset; checked before any call.
            ValidationFailed: the key is malformed or the service rejected it; nothing stored
                (and nothing of a rejected key is kept: no limiter, no rate-window rows).
            CooldownActive: the member checked a key (any, from any surface) less than
                :data:`KEY_CHECK_COOLDOWN_SECONDS` ago; nothing is sent.
            GenAPIError: the check could not be made (service down, rate limited).
        """
        api_key = api_key.strip()
        if not self._vault.available:
            raise KeyEncryptionUnavailable
        if not _KEY_SHAPE.match(api_key):
            raise ValidationFailed(N_("That does not look like an API key; nothing was stored."))
        self._key_checks.start(actor.user_id, personal=is_personal(guild_id))
        try:
            await self._client.list_models(SecretStr(api_key))
        except UnauthorizedError:
            await self._forget_rejected(SecretStr(api_key))
            raise ValidationFailed(
                N_("The service rejected that key; nothing was stored.")
            ) from None
        async with self.changing(guild_id, actor):
            change = await self._keys.replace_key(guild_id, api_key)
            await self._db.guilds.set_notified_problem(guild_id, None)
        self._forget(change)
        return change

    async def _forget_rejected(self, key: SecretStr) -> None:
        """Drop what the limiter made for a key the service rejected; failures only logged."""
        try:
            await self._client.forget_key(key)
        except Exception as exc:  # the refusal still stands; old rows are swept with the window
            log.warning("could not forget a rejected key's rate window: %s", type(exc).__name__)

    async def remove_api_key(self, guild_id: int, *, actor: Actor) -> KeyChange:
        """Remove the guild's own key; requests then use ``GENAPI_API_KEY`` if set.

        The key is kept (encrypted) until the jobs submitted with it end.

        Returns:
            What changed, with the jobs left on the removed key.
        """
        async with self.changing(guild_id, actor):
            change = await self._keys.clear_key(guild_id)
        self._forget(change)
        return change

    def _forget(self, change: KeyChange) -> None:
        if self._catalogue is not None and change.old_fingerprint is not None:
            self._catalogue.forget_key(change.old_fingerprint, self._keys.default_key)

    async def set_budgets(
        self,
        guild_id: int,
        *,
        monthly: LimitUpdate = UNSET,
        daily_per_user: LimitUpdate = UNSET,
        actor: Actor,
    ) -> None:
        """Set the monthly guild budget and the daily per-user budget, in cents."""
        async with self.changing(guild_id, actor):
            await self._db.guilds.update_limits(
                guild_id, monthly_budget_cents=monthly, user_daily_budget_cents=daily_per_user
            )

    async def set_caps(
        self,
        guild_id: int,
        *,
        per_user: LimitUpdate = UNSET,
        per_guild: LimitUpdate = UNSET,
        actor: Actor,
    ) -> None:
        """Set the caps on concurrently pending videos."""
        async with self.changing(guild_id, actor):
            await self._db.guilds.update_limits(
                guild_id,
                max_pending_videos_per_user=per_user,
                max_pending_videos_per_guild=per_guild,
            )

    async def allow_channel(
        self, guild_id: int, channel_id: int, *, allowed: bool, actor: Actor
    ) -> frozenset[int]:
        """Add a channel to (or remove it from) those the commands are limited to.

        Returns:
            The channels now allowed; empty means every channel.
        """
        async with self.changing(guild_id, actor):
            current = set((await self._db.guilds.settings(guild_id)).allowed_channel_ids)
            if allowed:
                current.add(channel_id)
            else:
                current.discard(channel_id)
            await self._db.guilds.set_allowed_channels(guild_id, current)
        return frozenset(current)

    async def allow_everywhere(self, guild_id: int, *, actor: Actor) -> None:
        """Let the commands be used in every channel again."""
        async with self.changing(guild_id, actor):
            await self._db.guilds.set_allowed_channels(guild_id, ())

    async def set_admin_channel(
        self, guild_id: int, channel_id: int | None, *, actor: Actor
    ) -> None:
        """Set (None: clear) the channel where key problems are announced."""
        async with self.changing(guild_id, actor):
            await self._db.guilds.set_admin_channel(guild_id, channel_id)

    async def set_locale(self, guild_id: int, locale: str | None, *, actor: Actor) -> None:
        """Set the language of the server's public messages (``/config language``).

        Args:
            guild_id: the guild.
            locale: a shipped Discord locale code (``bot.i18n.SHIPPED`` or ``"en-US"``);
                None: Discord's preferred locale of the server again.
            actor: who changes it (audited).

        Raises:
            ValidationFailed: ``locale`` is no language the bot speaks.
        """
        if locale is not None and locale not in (SOURCE, *SHIPPED):
            raise ValidationFailed(N_("The bot does not speak that language."))
        async with self.changing(guild_id, actor):
            await self._db.guilds.set_locale(guild_id, locale)
            self._locales[guild_id] = (locale, self._clock.monotonic() + LOCALE_CACHE_SECONDS)

    async def set_billing_mode(self, guild_id: int, mode: BillingMode, *, actor: Actor) -> None:
        """Set who pays the server's paid commands (``/config billing``; docs/credits.md).

        Only who pays changes: tiers' models, cooldowns, caps and blocked terms apply as before.

        Raises:
            ValidationFailed: a mode where members pay, while the bot offers no credit packs
                (``CREDIT_PACKS``), or in a member's own wallet.
        """
        if mode is not BillingMode.SERVER and (not self._packs_offered or is_personal(guild_id)):
            raise ValidationFailed(
                N_("This bot offers no credit packs, so members cannot pay for commands here.")
            )
        async with self.changing(guild_id, actor):
            await self._db.credits.set_mode(guild_id, mode)

    async def billing_mode(self, guild_id: int) -> BillingMode:
        """Who pays the server's paid commands."""
        return await self._db.credits.mode(guild_id)

    async def locale(self, guild_id: int) -> str | None:
        """The language an admin chose for the server's public messages; None when unset.

        Kept :data:`LOCALE_CACHE_SECONDS` per guild: every progress edit of a card asks.
        """
        now = self._clock.monotonic()
        cached = self._locales.get(guild_id)
        if cached is not None and cached[1] > now:
            return cached[0]
        if len(self._locales) >= LOCALE_CACHE_SIZE:
            self._locales = {g: v for g, v in self._locales.items() if v[1] > now}
        chosen = (await self._db.guilds.settings(guild_id)).locale
        self._locales[guild_id] = (chosen, now + LOCALE_CACHE_SECONDS)
        return chosen

    async def admin_channel(self, guild_id: int) -> int | None:
        """Return the channel where notices to the guild's admins go, or None when unset."""
        return (await self._db.guilds.settings(guild_id)).admin_channel_id

    async def set_showcase_channel(
        self, guild_id: int, channel_id: int | None, *, actor: Actor
    ) -> None:
        """Set (None: clear) the channel shared results are posted in (``/config showcase``)."""
        async with self.changing(guild_id, actor):
            await self._db.showcase.set_channel(guild_id, channel_id)

    async def set_showcase_public(self, guild_id: int, public: bool, *, actor: Actor) -> None:
        """Make the server's showcase page readable without signing in (off by default).

        Made public now, it lists the entries shared from now on (not those shared before).
        """
        async with self.changing(guild_id, actor):
            await self._db.showcase.set_public(guild_id, public, self._clock.time())

    async def has_own_key(self, guild_id: int) -> bool:
        """True when the guild (or a member's wallet id) stored an API key of its own."""
        return (await self._db.guilds.settings(guild_id)).api_key_ciphertext is not None

    async def has_key(self, guild_id: int) -> bool:
        """True when the guild's requests have a key: its own, or the bot's default.

        The bot's default is ``GENAPI_API_KEY``, or in sandbox mode the emulator's own key;
        False means every generation command of the guild fails until an admin sets a key.
        """
        return self._default_key_set or await self.has_own_key(guild_id)

    async def key_last4(self, guild_id: int) -> str | None:
        """Return the last 4 characters of the guild's (or wallet's) own key, or None."""
        return (await self._db.guilds.settings(guild_id)).api_key_last4

    async def confirm_above(self, guild_id: int) -> Decimal | None:
        """Return the price above which a video asks to confirm first, cents; None: never.

        ``/config confirm-above``; off by default.
        """
        return await self._db.result_requests.confirm_above(guild_id)

    async def set_confirm_above(
        self, guild_id: int, cents: Decimal | None, *, actor: Actor
    ) -> None:
        """Set (None: turn off) the price above which a video asks to confirm first, cents."""
        async with self.changing(guild_id, actor):
            await self._db.result_requests.set_confirm_above(guild_id, cents)

    async def show(self, guild_id: int) -> GuildConfig:
        """Return the guild's effective configuration (never the key itself)."""
        settings = await self._db.guilds.settings(guild_id)
        if settings.api_key_ciphertext is not None:
            source: str | None = "guild"
        else:
            source = "default" if self._default_key_set else None
        return GuildConfig(
            key_source=source,
            key_last4=settings.api_key_last4,
            limits=await self._billing.limits(guild_id),
            allowed_channel_ids=settings.allowed_channel_ids,
            admin_channel_id=settings.admin_channel_id,
            encryption_available=self._vault.available,
            policy=await self.policy(guild_id),
            locale=settings.locale,
        )

    # -- policy --------------------------------------------------------------------

    async def policy(self, guild_id: int) -> ServerPolicy:
        """Return the guild's tiers, model list, blocked terms and cooldowns."""
        return ServerPolicy(
            tiers=await self._db.policy.tiers(guild_id),
            models=await self._db.policy.model_lists(guild_id),
            blocked_terms=await self._db.policy.blocked_terms(guild_id),
            cooldowns=await self._db.policy.cooldowns(guild_id),
        )

    async def set_tier(
        self,
        guild_id: int,
        role_id: int,
        role_name: str,
        *,
        daily_per_user: LimitUpdate = UNSET,
        monthly_per_user: LimitUpdate = UNSET,
        videos_at_once: LimitUpdate = UNSET,
        models: ModelsUpdate = UNSET,
        actor: Actor,
    ) -> Tier:
        """Create or change a role's tier; options left :data:`UNSET` keep their value.

        A new tier's unset options are the server defaults (None). Allowances are whole
        cents or :data:`~bot.domain.UNLIMITED`; ``models`` patterns (``("*",)`` = all).

        Returns:
            The tier as stored.
        """
        tiers = await self._db.policy.tiers(guild_id)
        old = next((t for t in tiers if t.role_id == role_id), Tier(guild_id, role_id, role_name))
        tier = Tier(
            guild_id,
            role_id,
            role_name,
            daily_per_user_cents=_kept(daily_per_user, old.daily_per_user_cents),
            monthly_per_user_cents=_kept(monthly_per_user, old.monthly_per_user_cents),
            videos_at_once=_kept(videos_at_once, old.videos_at_once),
            models=old.models if models is UNSET else models,
        )
        async with self.changing(guild_id, actor):
            await self._db.policy.set_tier(tier)
        return tier

    async def remove_tier(self, guild_id: int, role_id: int, *, actor: Actor) -> bool:
        """Delete a role's tier; False if it had none."""
        async with self.changing(guild_id, actor):
            return await self._db.policy.delete_tier(guild_id, role_id)

    async def set_models(
        self,
        guild_id: int,
        *,
        allowed: tuple[str, ...] | None = None,
        blocked: tuple[str, ...] | None = None,
        actor: Actor,
    ) -> ModelLists:
        """Replace the allowed or the blocked part of the server-wide model list.

        Args:
            guild_id: the guild.
            allowed: patterns members without a tier may use; ``("*",)`` or empty = all;
                None keeps the current ones.
            blocked: patterns they may not use; None keeps the current ones.
            actor: who changes them (audited).

        Returns:
            The model list now in force.
        """
        async with self.changing(guild_id, actor):
            lists = await self._db.policy.model_lists(guild_id)
            if allowed is not None:
                lists = replace(lists, allowed=() if allowed == ("*",) else allowed)
            if blocked is not None:
                lists = replace(lists, blocked=blocked)
            await self._db.policy.set_model_lists(guild_id, lists)
        return await self._db.policy.model_lists(guild_id)

    async def add_blocked_term(self, guild_id: int, text: str, *, actor: Actor) -> str:
        """Add a blocked term (normalised as prompts are compared).

        Returns:
            The term as stored.

        Raises:
            ValidationFailed: empty after normalisation, or too long.
        """
        term = _checked_term(text)
        async with self.changing(guild_id, actor):
            await self._db.policy.add_blocked_term(guild_id, term)
        return term

    async def remove_blocked_term(self, guild_id: int, text: str, *, actor: Actor) -> bool:
        """Remove a blocked term; False if it was not blocked.

        Raises:
            ValidationFailed: empty after normalisation, or too long.
        """
        term = _checked_term(text)
        async with self.changing(guild_id, actor):
            return await self._db.policy.remove_blocked_term(guild_id, term)

    async def set_cooldown(
        self, guild_id: int, command: Kind, seconds: int, *, actor: Actor
    ) -> None:
        """Set a command's per-member cooldown, seconds; 0 removes it."""
        async with self.changing(guild_id, actor):
            await self._db.policy.set_cooldown(guild_id, command, seconds)

    # -- personas ----------------------------------------------------------------

    async def set_persona(
        self,
        guild_id: int,
        channel_id: int,
        system: str,
        model: str | None,
        *,
        locked: bool = False,
        actor: Actor,
    ) -> Persona:
        """Set a channel's persona: a system prompt and a default text model.

        It applies to ``/chat`` and ``/text`` in the channel and its threads. ``locked``: a
        member's own ``system`` is refused there, so that it cannot countermand the persona
        (:meth:`bot.services.conversations.ConversationService.persona_for`).

        Raises:
            ValidationFailed: the system prompt is empty or over :data:`MAX_PERSONA_CHARS`.
        """
        system = system.strip()
        if not system:
            raise ValidationFailed(N_("The persona's system prompt is empty."))
        if len(system) > MAX_PERSONA_CHARS:
            raise ValidationFailed(
                N_(
                    "The persona's system prompt is too long (at most {max_persona_chars} "
                    "characters)."
                ),
                max_persona_chars=MAX_PERSONA_CHARS,
            )
        persona = Persona(guild_id, channel_id, system, model or None, locked)
        async with self.changing(guild_id, actor):
            await self._db.conversations.set_persona(persona, self._clock.time())
        return persona

    async def remove_persona(self, guild_id: int, channel_id: int, *, actor: Actor) -> bool:
        """Remove a channel's persona; False if it had none."""
        async with self.changing(guild_id, actor):
            return await self._db.conversations.remove_persona(channel_id)

    async def personas(self, guild_id: int) -> list[Persona]:
        """The guild's personas, by channel id."""
        return await self._db.conversations.personas(guild_id)

    # -- audit --------------------------------------------------------------------------------

    async def snapshot(self, guild_id: int) -> dict[str, str]:
        """Return every setting as ``{what: value for people}``, to diff around a change.

        The API key appears only as whose it is and its last four characters, never itself.
        The audit's records stay English whatever the admin's language.
        """
        with using(SOURCE):
            return await self._snapshot(guild_id)

    async def _snapshot(self, guild_id: int) -> dict[str, str]:
        config = await self.show(guild_id)
        values = _config_values(config)
        values["confirm above"] = _confirm_above(
            await self._db.result_requests.confirm_above(guild_id)
        )
        values["language"] = await self.locale(guild_id) or "server default"
        values["billing"] = (await self.billing_mode(guild_id)).value
        showcase_channel, public = await self._db.showcase.settings(guild_id)
        values["showcase channel"] = f"<#{showcase_channel}>" if showcase_channel else "off"
        values["public showcase page"] = "on" if public else "off"
        values.update(audit_values(settings_of(await self._db.guard.settings(guild_id))))
        values.update(safety_values(policy_of(await self._db.safety.settings(guild_id))))
        values.update(creative_values(await self._db.creative.settings(guild_id)))
        for style in await self._db.creative.styles(guild_id):
            tiers = "".join(f" · <@&{role}>" for role in style.roles)
            values[f"style {style.name}"] = (
                f"{style.suffix} · {len(style.references)} references{tiers}"
            )
        for persona in await self.personas(guild_id):
            model = persona.model or "default model"
            lock = " · locked" if persona.locked else ""
            values[f"persona <#{persona.channel_id}>"] = f"{model}{lock} · {persona.system}"
        values.update(_policy_values(config.policy))
        return values

    def changing(
        self, guild_id: int, actor: Actor, *, check: SettingsCheck | None = None
    ) -> contextlib.AbstractAsyncContextManager[Changes]:
        """Audit the changes made in the block as one (:meth:`SettingsAudit.changing`)."""
        return self._audit.changing(guild_id, actor, check=check)

    async def record(
        self, guild_id: int, actor: Actor, what: str, old: str, new: str, *, announce: bool = True
    ) -> AuditEntry:
        """Audit one change made by another service (:meth:`SettingsAudit.record`)."""
        return await self._audit.record(guild_id, actor, what, old, new, announce=announce)

    async def audit(self, guild_id: int, limit: int = 10) -> list[AuditEntry]:
        """Return the guild's latest audit entries, newest first."""
        return await self._audit.latest(guild_id, limit)


def _config_values(config: GuildConfig) -> dict[str, str]:
    """The key, limits, channels and model lists as the audit log records them (in order)."""
    limits = config.limits
    if config.key_source == "guild":
        key = f"this server's own, ending in {config.key_last4}"
    else:
        key = "not set"
    return {
        "API key": key,
        "monthly budget": _dollars(limits.monthly_budget_cents),
        "daily budget per member": _dollars(limits.user_daily_budget_cents),
        "videos in progress per member": str(limits.max_pending_videos_per_user),
        "videos in progress per server": str(limits.max_pending_videos_per_guild),
        "channels": " ".join(f"<#{c}>" for c in sorted(config.allowed_channel_ids)) or "all",
        "admin channel": f"<#{config.admin_channel_id}>" if config.admin_channel_id else "off",
        "allowed models": describe_models(config.policy.models.allowed or ("*",)),
        "blocked models": describe_models(config.policy.models.blocked),
    }


def _policy_values(policy: ServerPolicy) -> dict[str, str]:
    """Blocked terms, cooldowns and tiers as the audit log records them (in order)."""
    values = {f"blocked term `{term}`": "blocked" for term in policy.blocked_terms}
    for kind, seconds in policy.cooldowns.items():
        values[f"cooldown /{kind.value}"] = f"{seconds} s"
    for tier in policy.tiers:
        name = f"tier {tier.role_name} (<@&{tier.role_id}>)"
        values[f"{name}: daily per member"] = describe_allowance(tier.daily_per_user_cents)
        values[f"{name}: monthly per member"] = describe_allowance(tier.monthly_per_user_cents)
        values[f"{name}: videos at once"] = (
            "server default" if tier.videos_at_once is None else str(tier.videos_at_once)
        )
        values[f"{name}: models"] = describe_models(tier.models)
    return values


def _kept(update: LimitUpdate, old: int | None) -> int | None:
    return old if update is UNSET else update


def _dollars(cents: int | None) -> str:
    return "unlimited" if cents is None else money(cents)


def _checked_term(text: str) -> str:
    term = normalise_term(text)
    if not term:
        raise ValidationFailed(N_("The term is empty."))
    if len(term) > MAX_TERM_LENGTH:
        raise ValidationFailed(
            N_("A term has at most {max_term_length} characters."), max_term_length=MAX_TERM_LENGTH
        )
    return term


def _confirm_above(cents: Decimal | None) -> str:
    return "off" if cents is None else money(cents)
