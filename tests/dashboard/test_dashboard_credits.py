"""Credit packs on the dashboard (docs/credits.md): who pays, set on the Who pays page as with
``/config billing`` (audited as made on the web, refused without ``CREDIT_PACKS``), and a
member's balance with its history on My results; admins see the packs bought in their
server in its Ledger and CSV."""

from __future__ import annotations

import csv
import io
from collections.abc import AsyncIterator
from decimal import Decimal

import pytest

from bot.domain import BillingMode, Entitlement
from tests.support.dashboard_site import Site, open_site, post_forms
from tests.support.stack import Stack

PACK = 1100000000000000001
PACKS = {"credit_packs": f"{PACK}=500"}

pytestmark = pytest.mark.parametrize("engine_settings", ["sqlite"], indirect=True)


@pytest.fixture
async def site(stack: Stack, monkeypatch: pytest.MonkeyPatch) -> AsyncIterator[Site]:
    async with open_site(stack.services, stack.clock, monkeypatch) as opened:
        yield opened


def billing_url(site: Site) -> str:
    return f"/servers/{site.guild_id}/settings/billing"


@pytest.mark.parametrize("stack_overrides", [PACKS])
async def test_who_pays_saved_on_the_web_is_the_mode_audited_and_a_stale_form_changes_nothing(
    site: Site,
) -> None:
    browser = site.browser()
    assert (await browser.sign_in(site.owner_id)).status == 302
    form = post_forms(await browser.text(billing_url(site)))[0]
    assert form["mode"] == "server"
    stale = dict(form)
    form["mode"] = "members"
    saved = await browser.post(billing_url(site), data=form)
    assert saved.status == 200 and "Saved." in await saved.text()
    config = site.services.guild_config
    assert await config.billing_mode(site.guild_id) is BillingMode.MEMBERS
    audit = await config.audit(site.guild_id)
    assert [(e.what, e.old, e.new, e.via, e.user_id) for e in audit] == [
        ("billing", "server", "members", "web", site.owner_id)
    ]
    # A form shown before that save changes nothing.
    stale["mode"] = "server-then-members"
    assert (await browser.post(billing_url(site), data=stale)).status == 409
    assert await config.billing_mode(site.guild_id) is BillingMode.MEMBERS
    assert len(await config.audit(site.guild_id)) == 1


async def test_without_credit_packs_members_cannot_be_made_to_pay(site: Site) -> None:
    browser = site.browser()
    assert (await browser.sign_in(site.owner_id)).status == 302
    page = await browser.text(billing_url(site))
    assert "This bot offers no credit packs" in page
    form = post_forms(page)[0]
    form["mode"] = "members"
    refused = await browser.post(billing_url(site), data=form)
    assert refused.status == 400
    assert "members cannot pay for commands here" in await refused.text()
    assert await site.services.guild_config.billing_mode(site.guild_id) is BillingMode.SERVER
    assert await site.services.guild_config.audit(site.guild_id) == []


@pytest.mark.parametrize("stack_overrides", [PACKS])
async def test_my_results_shows_the_balance_and_its_purchases_refunds_and_spends(
    site: Site,
) -> None:
    credits = site.services.credits
    member = site.member_id
    await credits.settle(Entitlement(id=9001, sku_id=PACK, user_id=member))
    await credits.settle(Entitlement(id=9002, sku_id=PACK, user_id=member))
    await credits.refund(9002)
    async with site.services.db.transaction() as tx:
        await tx.credits.spend(
            user_id=member,
            paid_cents=Decimal("37.5"),
            cost_cents=Decimal("37.5"),
            guild_id=site.guild_id,
            model="image-model",
            task_id="t-1",
            at=site.services.clock.time(),
            settlement_id="s-1",
        )
    browser = site.browser()
    assert (await browser.sign_in(member)).status == 302
    page = await browser.text("/me")
    section = page[page.index('id="credits"') :]
    assert "Balance: $4.625" in section
    history = section[section.index('id="credit-history"') :]
    assert history.count("Pack bought") == 2
    assert "Pack refunded" in history and "-$5.00" in history
    assert "image-model" in history and "-$0.375" in history and "Kites" in history


async def test_my_results_says_nothing_of_credits_when_the_bot_offers_none(site: Site) -> None:
    browser = site.browser()
    assert (await browser.sign_in(site.member_id)).status == 302
    assert 'id="credits"' not in await browser.text("/me")


@pytest.mark.parametrize("stack_overrides", [PACKS])
async def test_admins_see_the_packs_bought_in_their_server_in_the_ledger_and_its_csv(
    site: Site,
) -> None:
    credits = site.services.credits
    member = site.member_id
    await site.charge("2", prompt="a kite")
    await credits.settle(Entitlement(9101, PACK, member), guild_id=site.guild_id)
    await credits.settle(Entitlement(9102, PACK, member), guild_id=site.guild_id)
    await credits.refund(9102)
    await credits.settle(Entitlement(9103, PACK, member), guild_id=site.guild_id + 1)  # elsewhere
    ledger_url = f"/servers/{site.guild_id}/ledger"

    admin = site.browser()
    assert (await admin.sign_in(site.owner_id)).status == 302
    page = await admin.text(ledger_url)
    assert page_total(page) == "0.02"  # the server's charges only: purchases are not its spend
    packs = page[page.index('id="credit-packs"') :]
    assert packs.count("<td>bought</td>") == 2 and packs.count("<td>refunded</td>") == 1
    assert "-$5.00" in packs and str(PACK) in packs
    exported = await (await admin.get(f"{ledger_url}.csv")).text()
    rows = list(csv.reader(io.StringIO(exported)))
    lines = [dict(zip(rows[0], row, strict=True)) for row in rows[1:]]
    bought = [(x["kind"], x["task_id"], x["amount_usd"]) for x in lines if x["kind"] != "image"]
    assert bought == [
        ("credit_purchase", "9101", "5.000000"),
        ("credit_purchase", "9102", "5.000000"),
        ("credit_refund", "9102", "-5.000000"),
    ]
    assert {x["model"] for x in lines if x["kind"].startswith("credit_")} == {str(PACK)}
    only_images = await (await admin.get(f"{ledger_url}.csv?kind=image")).text()
    assert "credit_" not in only_images

    # A viewer who is not an admin sees the charges, not the members' purchases.
    viewer_id = site.emulator.add_user("treasurer").id
    site.emulator.world.ensure_member(site.guild_id, viewer_id)
    role = site.emulator.add_role(site.guild_id, "Treasurers")
    site.emulator.give_role(site.guild_id, viewer_id, role.id)
    await site.services.dashboard.set_access_role(site.guild_id, role.id, "view")
    viewer = site.browser()
    await viewer.sign_in(viewer_id)
    assert 'id="credit-packs"' not in await viewer.text(ledger_url)
    assert "credit_" not in await (await viewer.get(f"{ledger_url}.csv")).text()


def page_total(page: str) -> str:
    """The Ledger's total figure (``id="ledger-total"``), digits only."""
    start = page.index('id="ledger-total">') + len('id="ledger-total">')
    return "".join(c for c in page[start : page.index("</span>", start)] if c.isdigit() or c == ".")
