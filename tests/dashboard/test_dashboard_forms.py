"""A settings page is one form class and one template: its route, its tab, its guards and its
audit follow from the form pattern (``bot.dashboard.forms``), as for the pages shipped."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import jinja2
import pytest

from bot.dashboard.forms import FORMS, Posted, SettingsForm
from bot.domain import Actor, AuditEntry, Kind
from tests.support.dashboard_site import Site, open_site, post_forms
from tests.support.stack import Stack

TEMPLATES = Path(__file__).resolve().parents[2] / "bot" / "dashboard" / "templates"


class TextCooldownForm(SettingsForm):
    """A page a contributor adds: /text's cooldown alone."""

    name = "text-cooldown"
    path = "/servers/{guild_id}/settings/text-cooldown"
    template = "settings_text_cooldown.html"
    label = "Text cooldown"

    async def values(self) -> dict[str, Any]:
        """The cooldown now, and the form's base."""
        policy = await self.config.policy(self.guild_id)
        return {
            "seconds": policy.cooldowns.get(Kind.TEXT, 0),
            "base": await self.base(lambda what: what == "cooldown /text"),
        }

    async def save(self, posted: Posted) -> list[AuditEntry]:
        """Set it, as ``/config cooldown text``."""
        seconds = int(posted.get("seconds") or 0)

        async def apply(actor: Actor) -> None:
            await self.config.set_cooldown(self.guild_id, Kind.TEXT, seconds, actor=actor)

        return await self.commit(posted, lambda what: what == "cooldown /text", apply)


TEXT_COOLDOWN_TEMPLATE = """{% extends "base.html" %}
{% block main %}{% include "_settings.html" %}
<form method="post"><input type="hidden" name="token" value="{{ form_token }}">
<input type="hidden" name="base" value="{{ base }}">
<input name="seconds" value="{{ seconds }}"><button>Save</button></form>{% endblock %}"""


def test_every_registered_page_has_its_template_and_a_name_of_its_own() -> None:
    assert [f.name for f in FORMS] == [
        "showcase",
        "key",
        "budgets",
        "billing",
        "tiers",
        "models",
        "terms",
        "channels",
        "access",
        "safety",
        "review",
        "styles",
    ]
    assert len({f.path for f in FORMS}) == len(FORMS)
    for form in FORMS:
        assert (TEMPLATES / form.template).read_text().startswith('{% extends "base.html" %}')


@pytest.mark.parametrize("engine_settings", ["sqlite"], indirect=True)
async def test_a_new_page_is_one_form_class_and_one_template(
    stack: Stack, monkeypatch: pytest.MonkeyPatch
) -> None:
    forms = [*FORMS, TextCooldownForm]
    async with open_site(stack.services, stack.clock, monkeypatch, forms=forms) as site:
        loader = site.dashboard.templates.loader
        assert loader is not None
        site.dashboard.templates.loader = jinja2.ChoiceLoader(
            [jinja2.DictLoader({TextCooldownForm.template: TEXT_COOLDOWN_TEMPLATE}), loader]
        )
        await saved_through_the_pattern(site)


async def saved_through_the_pattern(site: Site) -> None:
    browser = site.browser()
    assert (await browser.sign_in(site.owner_id)).status == 302
    url = f"/servers/{site.guild_id}/settings/text-cooldown"
    # Its tab is on every server page, after the pages shipped, linked by the route's name.
    overview = await browser.text(f"/servers/{site.guild_id}")
    nav = re.search(r'<nav class="tabs".*?</nav>', overview, re.S)  # not the page's own links
    assert nav is not None
    tabs = re.findall(r'<a href="(/servers/\d+[^"]*)"[^>]*>([^<]+)</a>', nav[0])
    at = tabs.index((url, "Text cooldown"))
    assert tabs[at - 1 : at + 1] == [
        (f"/servers/{site.guild_id}/styles", "Styles"),
        (url, "Text cooldown"),
    ]
    form = post_forms(await browser.text(url))[0]
    stale = dict(form)
    form["seconds"] = "30"
    answer = await browser.post(url, data=form)
    assert answer.status == 200 and "Saved." in await answer.text()
    assert (await site.services.guild_config.policy(site.guild_id)).cooldowns[Kind.TEXT] == 30
    audit = await site.services.guild_config.audit(site.guild_id)
    assert [(e.what, e.old, e.new, e.via, e.user_id) for e in audit] == [
        ("cooldown /text", "—", "30 s", "web", site.owner_id)
    ]
    # The shared guards: a save over a value changed meanwhile changes nothing (409)...
    stale["seconds"] = "5"
    assert (await browser.post(url, data=stale)).status == 409
    assert (await site.services.guild_config.policy(site.guild_id)).cooldowns[Kind.TEXT] == 30
    # ...and a form without the member's token is refused.
    del stale["token"]
    assert (await browser.post(url, data=stale)).status == 403
