"""Premium Apps: SKUs, entitlements (purchases), consumption, refunds, as Discord keeps them.

REST: ``GET /applications/{app}/skus``, ``GET /applications/{app}/entitlements`` (``user_id``,
``sku_ids``, ``exclude_ended``, ``exclude_deleted``, ``before``/``after``, ``limit``), ``POST
/applications/{app}/entitlements/{id}/consume`` (recorded; a second call is Discord's 400).
The gateway: ``ENTITLEMENT_CREATE`` when a member buys, ``ENTITLEMENT_DELETE`` when a purchase
is refunded. Interactions carry the member's live entitlements (``interaction.entitlements``).
Premium buttons (style 6 with a ``sku_id``) are accepted in components (:mod:`.limits`).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from aiohttp import web

from .errors import DiscordAPIError
from .routing import RouteBase, _flag, _int

if TYPE_CHECKING:
    from .models import World

PURCHASE = 1
"""Entitlement type of a purchase made in the client (Discord's ``PURCHASE``)."""

CONSUMABLE = 3
"""SKU type of a consumable (Discord's ``CONSUMABLE``)."""


@dataclass
class EntitlementRecord:
    """One purchase: who bought which SKU, and whether it is consumed or refunded."""

    id: int
    sku_id: int
    user_id: int
    consumed: bool = False
    deleted: bool = False
    consume_calls: int = 0


@dataclass
class Shop:
    """The application's SKUs and entitlements (``DiscordEmulator.shop``)."""

    skus: dict[int, str] = field(default_factory=dict)
    entitlements: dict[int, EntitlementRecord] = field(default_factory=dict)

    def payload(self, record: EntitlementRecord, application_id: int) -> dict[str, Any]:
        """The entitlement object as Discord sends it."""
        return {
            "id": str(record.id),
            "sku_id": str(record.sku_id),
            "application_id": str(application_id),
            "user_id": str(record.user_id),
            "type": PURCHASE,
            "deleted": record.deleted,
            "consumed": record.consumed,
            "starts_at": None,
            "ends_at": None,
        }

    def live_for(self, user_id: int) -> list[EntitlementRecord]:
        """The member's entitlements an interaction carries: not refunded, not consumed."""
        return [
            e
            for e in self.entitlements.values()
            if e.user_id == user_id and not e.deleted and not e.consumed
        ]


class MonetizationRoutes(RouteBase):
    """The REST handlers of SKUs and entitlements."""

    world: World

    def _shop(self) -> Shop:
        return self.emu.shop  # type: ignore[no-any-return]

    def _app(self, request: web.Request) -> int:
        app_id = _int(
            request.match_info["app_id"], DiscordAPIError(404, 10002, "Unknown Application")
        )
        if app_id != self.world.application_id:
            raise DiscordAPIError(403, 50001, "Missing Access")
        return app_id

    async def list_skus(self, request: web.Request) -> web.Response:
        app_id = self._app(request)
        skus = [
            {
                "id": str(sku),
                "type": CONSUMABLE,
                "application_id": str(app_id),
                "name": name,
                "slug": name.lower().replace(" ", "-"),
                "flags": 4,
            }
            for sku, name in self._shop().skus.items()
        ]
        return self._json(request, skus)

    async def list_entitlements(self, request: web.Request) -> web.Response:
        app_id = self._app(request)
        query = request.query
        user = query.get("user_id")
        skus = {int(s) for s in query.get("sku_ids", "").split(",") if s.strip()}
        before = int(query["before"]) if "before" in query else None
        after = int(query["after"]) if "after" in query else None
        limit = min(int(query.get("limit", 100)), 100)
        # Discord's boolean query strings: true/1, false/0; leaving it out means true.
        exclude_deleted = "exclude_deleted" not in query or _flag(query, "exclude_deleted")
        _flag(query, "exclude_ended")  # purchases of consumables never end
        found = []
        for record in sorted(self._shop().entitlements.values(), key=lambda e: e.id):
            if user is not None and record.user_id != int(user):
                continue
            if skus and record.sku_id not in skus:
                continue
            if exclude_deleted and record.deleted:
                continue
            if before is not None and record.id >= before:
                continue
            if after is not None and record.id <= after:
                continue
            found.append(record)
        found = found[-limit:] if after is None else found[:limit]
        return self._json(request, [self._shop().payload(e, app_id) for e in found])

    async def consume_entitlement(self, request: web.Request) -> web.Response:
        self._app(request)
        unknown = DiscordAPIError(404, 10075, "Unknown Entitlement")
        record = self._shop().entitlements.get(_int(request.match_info["entitlement_id"], unknown))
        if record is None or record.deleted:
            raise unknown
        record.consume_calls += 1
        if record.consumed:
            raise DiscordAPIError(400, 40074, "Entitlement already consumed")
        record.consumed = True
        return self._empty(request)
