"""Discord's side of credit packs: entitlements listed and consumed, premium buttons.

Implements :class:`bot.services.credits.EntitlementDesk` over discord.py's REST calls
(``GET /applications/{app}/entitlements``, ``POST .../entitlements/{id}/consume``), turns
discord.py's entitlements into the domain's, and builds the premium buttons (style 6, a
``sku_id``: Discord's own buy button, which answers the click itself). ``docs/credits.md``.
"""

from __future__ import annotations

import logging
from collections.abc import Collection, Sequence
from typing import Any

import discord

from bot.clock import Clock
from bot.domain import Entitlement
from bot.services.credits import RECONCILE_SECONDS, CreditService

log = logging.getLogger(__name__)

PAGE = 100
"""Entitlements Discord returns per page (its maximum)."""


def entitlement_of(entitlement: discord.Entitlement) -> Entitlement | None:
    """The domain's purchase for a discord.py entitlement; None without a member (a server's)."""
    if entitlement.user_id is None:
        return None
    return Entitlement(
        id=entitlement.id,
        sku_id=entitlement.sku_id,
        user_id=entitlement.user_id,
        consumed=entitlement.consumed,
        deleted=entitlement.deleted,
    )


class DiscordEntitlements:
    """The application's entitlements through discord.py (the credit service's desk).

    Args:
        client: the logged-in client (its ``application_id`` is known after login).
    """

    def __init__(self, client: discord.Client) -> None:
        self._client = client

    async def listed(self, sku_ids: Collection[int]) -> list[Entitlement]:
        """Every entitlement of ``sku_ids``, refunded (deleted) ones included (all pages).

        ``exclude_deleted=false``: a purchase refunded while the bot was stopped is listed
        with ``deleted`` set (Discord's List Entitlements; the default leaves it out). Paged
        here, ascending by ``after``: discord.py 2.7's ``Client.entitlements`` drops
        ``exclude_deleted`` on that path (only its ``before`` path sends it).
        """
        application_id = self._client.application_id
        assert application_id is not None  # known once logged in
        found: list[Entitlement] = []
        after = 0  # from the oldest: without it a page may be the newest
        while True:
            page = await self._client.http.get_entitlements(
                application_id,
                sku_ids=list(sku_ids),
                after=after,
                limit=PAGE,
                exclude_ended=True,
                exclude_deleted=False,
            )
            for raw in page:
                user_id = raw.get("user_id")
                if user_id is not None:  # a server's entitlement is no member's purchase
                    found.append(
                        Entitlement(
                            id=int(raw["id"]),
                            sku_id=int(raw["sku_id"]),
                            user_id=int(user_id),
                            consumed=bool(raw.get("consumed", False)),
                            deleted=bool(raw.get("deleted", False)),
                        )
                    )
            if len(page) < PAGE:
                return found
            after = max(int(raw["id"]) for raw in page)

    async def consume(self, entitlement_id: int) -> None:
        """Mark the entitlement consumed. Raises: discord.HTTPException: Discord refused."""
        application_id = self._client.application_id
        assert application_id is not None  # known once logged in
        await self._client.http.consume_entitlement(application_id, entitlement_id)


def premium_buttons(packs: Sequence[tuple[int, int]]) -> discord.ui.View | None:
    """A view of one premium button per pack (Discord labels them with the SKU's name, price).

    Returns:
        None when no pack is offered.
    """
    if not packs:
        return None
    view = discord.ui.View(timeout=None)
    for sku_id, _cents in packs[:25]:
        view.add_item(discord.ui.Button(style=discord.ButtonStyle.premium, sku_id=sku_id))
    return view


async def settle_reported(
    credits: CreditService,
    entitlements: Sequence[discord.Entitlement],
    guild_id: int | None = None,
) -> None:
    """Settle the unconsumed pack purchases an event or an interaction reports; never raises.

    ``guild_id``: the server of the interaction that carried them (None: an event, a DM): the
    purchase's server in the Ledger (:meth:`CreditService.settle`).
    """
    for entitlement in entitlements:
        mapped = entitlement_of(entitlement)
        if (
            mapped is None
            or mapped.consumed
            or mapped.deleted
            or mapped.sku_id not in credits.packs
        ):
            continue
        try:
            await credits.settle(mapped, guild_id)
        except Exception:
            log.exception("purchase %s not settled now; the reconciliation will", mapped.id)


async def note_offer(interaction: discord.Interaction[Any]) -> None:
    """Remember the server where the member is being shown the premium buttons; never raises.

    A purchase Discord then reports without a server is recorded in it
    (:meth:`CreditService.offered`). Reached through the bot's services (``GenBot.services``);
    a client without them remembers nothing.
    """
    services = getattr(interaction.client, "services", None)
    credits = getattr(services, "credits", None)
    if not isinstance(credits, CreditService):
        return
    try:
        await credits.offered(interaction.user.id, interaction.guild_id)
    except Exception as exc:
        log.warning("where member %s saw the packs not recorded (%r)", interaction.user.id, exc)


async def reconcile_forever(credits: CreditService, clock: Clock) -> None:
    """Reconcile purchases with Discord at start-up, then every :data:`RECONCILE_SECONDS`."""
    while True:
        try:
            await credits.reconcile()
        except Exception as exc:
            log.warning("credit purchases not reconciled now (%r); again in an hour", exc)
        await clock.sleep(RECONCILE_SECONDS)
