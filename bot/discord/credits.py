"""Discord's side of credit packs: entitlements listed and consumed, premium buttons.

Implements :class:`bot.services.credits.EntitlementDesk` over discord.py's REST calls
(``GET /applications/{app}/entitlements``, ``POST .../entitlements/{id}/consume``), turns
discord.py's entitlements into the domain's, and builds the premium buttons (style 6, a
``sku_id``: Discord's own buy button, which answers the click itself). ``docs/credits.md``.
"""

from __future__ import annotations

import logging
from collections.abc import Collection, Sequence

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
    )


class DiscordEntitlements:
    """The application's entitlements through discord.py (the credit service's desk).

    Args:
        client: the logged-in client (its ``application_id`` is known after login).
    """

    def __init__(self, client: discord.Client) -> None:
        self._client = client

    async def unconsumed(self, sku_ids: Collection[int]) -> list[Entitlement]:
        """Every live, unconsumed entitlement of ``sku_ids`` (all pages, ended ones left out)."""
        found: list[Entitlement] = []
        skus = [discord.Object(id=sku) for sku in sku_ids]
        async for entitlement in self._client.entitlements(
            limit=None, skus=skus, exclude_ended=True
        ):
            mapped = entitlement_of(entitlement)
            if mapped is not None and not mapped.consumed:
                found.append(mapped)
        return found

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
    credits: CreditService, entitlements: Sequence[discord.Entitlement]
) -> None:
    """Settle the unconsumed pack purchases an event or an interaction reports; never raises."""
    for entitlement in entitlements:
        mapped = entitlement_of(entitlement)
        if mapped is None or mapped.consumed or mapped.sku_id not in credits.packs:
            continue
        try:
            await credits.settle(mapped)
        except Exception:
            log.exception("purchase %s not settled now; the reconciliation will", mapped.id)


async def reconcile_forever(credits: CreditService, clock: Clock) -> None:
    """Reconcile purchases with Discord at start-up, then every :data:`RECONCILE_SECONDS`."""
    while True:
        try:
            await credits.reconcile()
        except Exception as exc:
            log.warning("credit purchases not reconciled now (%r); again in an hour", exc)
        await clock.sleep(RECONCILE_SECONDS)
