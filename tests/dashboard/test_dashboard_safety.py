"""The dashboard's Safety and Review pages, and held results kept from everyone but reviewers.

The Safety page is the server's policy as ``/config safety`` sets it (one form class and one
template, audited ``via="web"``); the Review page lists held, withheld and reported results
with Approve / Reject through the dashboard's one write path. A held result is in no gallery,
and its page, thumbnail and files answer 404 but to reviewers (Manage Server or Manage
Messages). docs/safety.md.
"""

from __future__ import annotations

import dataclasses
import io
from collections.abc import AsyncIterator
from pathlib import Path

import pytest
from PIL import Image

from bot.dashboard.rights import MANAGE_MESSAGES
from bot.domain import SafetyMode, SafetyRecord, Visibility
from bot.genapi.outputs import output_client
from bot.media.safety import SafetyScorer, load_model
from tests.support.dashboard_site import Site, open_site, post_forms
from tests.support.safety_model import write_classifier
from tests.support.stack import Stack

pytestmark = pytest.mark.parametrize("engine_settings", ["sqlite"], indirect=True)


@pytest.fixture
async def site(
    stack: Stack, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> AsyncIterator[Site]:
    scorer = SafetyScorer(load_model(str(write_classifier(tmp_path / "model")), ["nsfw"]))
    async with output_client(stack.api.base_url) as downloads:
        # SAFETY_MODEL set; results downloaded from the API emulator.
        services = dataclasses.replace(stack.services, safety=scorer, downloads=downloads)
        async with open_site(services, stack.clock, monkeypatch) as opened:
            yield opened
    scorer.close()


async def result_with_thumbnail(site: Site, prompt: str, rgb: tuple[int, int, int]) -> int:
    """A finished image of the member's with its kept thumbnail."""
    job = await site.charge("2", prompt=prompt, outputs=("https://files.example/a",))
    assert job is not None
    picture = io.BytesIO()
    Image.new("RGB", (256, 256), rgb).save(picture, "PNG")
    thumbnails = site.services.thumbnails
    assert await thumbnails.keep(job, "image", [picture.getvalue()]) == 1
    return job


async def hold(site: Site, job_id: int, state: Visibility = Visibility.HELD) -> str:
    ref = f"j{job_id}"
    record = SafetyRecord(
        ref, site.guild_id, site.channel_id, site.member_id, "image", "p", 0.7, state, "score", 0.0
    )
    assert await site.services.db.safety.add(record)
    return ref


async def test_the_safety_page_sets_the_policy_as_config_safety_does(site: Site) -> None:
    browser = site.browser()
    await browser.sign_in(site.owner_id)
    url = site.dashboard.url("safety", guild_id=site.guild_id)
    assert url == f"/servers/{site.guild_id}/settings/safety"
    page = await browser.text(url)
    assert f'href="/servers/{site.guild_id}/review"' in page  # linked by the route's name
    (form,) = post_forms(page)
    assert (form["mode"], form["review_above"], form["block_above"]) == ("review", "0.5", "0.85")
    bad = dict(form, review_above="1.5")
    answer = await browser.post(url, data=bad)
    assert answer.status == 400 and "Held from is a number from 0 to 1." in await answer.text()
    inverted = dict(form, review_above="0.9", block_above="0.6")
    assert (await browser.post(url, data=inverted)).status == 400
    safety = site.services.moderation
    assert (await safety.policy(site.guild_id)).review_above == 0.5  # nothing changed
    stale = dict(form)
    form.update(mode="block", review_above="0.4", reports_to_hide="5")
    answer = await browser.post(url, data=form)
    assert answer.status == 200 and "Saved." in await answer.text()
    policy = await safety.policy(site.guild_id)
    assert (policy.mode, policy.review_above, policy.reports_to_hide) == (SafetyMode.BLOCK, 0.4, 5)
    audit = await site.services.guild_config.audit(site.guild_id)
    assert sorted((e.what, e.old, e.new, e.via) for e in audit) == [
        ("safety mode", "review", "block", "web"),
        ("safety reports to hide", "3", "5", "web"),
        ("safety review above", "0.5", "0.4", "web"),
    ]
    assert (await browser.post(url, data=stale)).status == 409  # changed meanwhile
    # A member who may only view sees the policy and no form.
    viewer = site.browser()
    await viewer.sign_in(site.member_id)
    role = site.emulator.add_role(site.guild_id, "Viewers")
    site.emulator.give_role(site.guild_id, site.member_id, role.id)
    await site.services.dashboard.set_access_role(site.guild_id, role.id, "view")
    shown = await viewer.text(url)
    assert post_forms(shown) == [] and "block" in shown


async def test_without_a_model_the_safety_page_says_checking_is_unavailable(
    stack: Stack, monkeypatch: pytest.MonkeyPatch
) -> None:
    async with open_site(stack.services, stack.clock, monkeypatch) as site:
        browser = site.browser()
        await browser.sign_in(site.owner_id)
        url = f"/servers/{site.guild_id}/settings/safety"
        page = await browser.text(url)
        assert "Safety checking is unavailable on this bot" in page
        assert post_forms(page) == []
        token = site.dashboard.dashboard.form_token
        assert token  # the POST itself is refused by the service's rule
        assert await site.services.guild_config.audit(site.guild_id) == []


async def test_held_results_are_for_reviewers_only_and_the_review_page_decides(
    site: Site,
) -> None:
    held = await result_with_thumbnail(site, "a held kite", (220, 20, 20))
    shown = await result_with_thumbnail(site, "a blue kite", (20, 20, 220))
    ref = await hold(site, held)
    # The member who asked for it sees it nowhere: not in their results, nor by its address.
    member = site.browser()
    await member.sign_in(site.member_id)
    mine = await member.text("/me")
    assert f"/results/{shown}" in mine and f"/results/{held}" not in mine
    for path in (f"/results/{held}", f"/thumbs/{held}/0", f"/media/{held}/0"):
        assert (await member.get(path)).status == 404, path
    # A reviewer (the owner: Manage Server) sees it on the Review page, thumbnail included.
    owner = site.browser()
    await owner.sign_in(site.owner_id)
    gallery = await owner.text(f"/servers/{site.guild_id}/gallery")
    assert f"/results/{held}" not in gallery and f"/results/{shown}" in gallery
    review_url = site.dashboard.url("review", guild_id=site.guild_id)
    page = await owner.text(review_url)
    assert f'src="/thumbs/{held}/0?v=' in page and "score 0.70" in page
    assert (await owner.get(f"/thumbs/{held}/0")).status == 200
    assert (await owner.get(f"/results/{held}")).status == 200
    (form,) = post_forms(page)
    assert (form["ref"], form["base"] != "") == (ref, True)
    stale = dict(form)
    form["action"] = "approve"
    answer = await owner.post(review_url, data=form)
    assert answer.status == 200 and "Saved." in await answer.text()
    record = await site.services.moderation.record(ref)
    assert record is not None and record.state is Visibility.APPROVED
    audit = await site.services.guild_config.audit(site.guild_id)
    assert [(e.what, e.old, e.new, e.via, e.user_id) for e in audit] == [
        (f"safety review {ref}", "held", "approved", "web", site.owner_id)
    ]
    job = await site.services.db.jobs.get(held)
    assert job is not None and job.announced_at is None  # delivered again to its card
    stale["action"] = "reject"
    assert (await owner.post(review_url, data=stale)).status == 409  # decided meanwhile
    del stale["token"]
    assert (await owner.post(review_url, data=stale)).status == 403
    # Approved: the member sees it again.
    assert f"/results/{held}" in await member.text("/me")
    assert (await member.get(f"/thumbs/{held}/0")).status == 200


async def test_manage_messages_reviews_and_a_member_without_it_is_refused(site: Site) -> None:
    held = await result_with_thumbnail(site, "a withheld kite", (220, 20, 20))
    ref = await hold(site, held, Visibility.WITHHELD)
    viewers = site.emulator.add_role(site.guild_id, "Viewers")
    await site.services.dashboard.set_access_role(site.guild_id, viewers.id, "view")
    moderators = site.emulator.add_role(site.guild_id, "Moderators", permissions=MANAGE_MESSAGES)
    moderator = site.emulator.add_user("moderator")
    for user_id in (moderator.id, site.member_id):
        site.emulator.give_role(site.guild_id, user_id, viewers.id)
    site.emulator.give_role(site.guild_id, moderator.id, moderators.id)
    review_url = f"/servers/{site.guild_id}/review"

    member = site.browser()
    await member.sign_in(site.member_id)
    tab = f'href="{review_url}"'
    assert tab not in await member.text(f"/servers/{site.guild_id}")  # no Review tab
    page = await member.text(review_url)
    assert "Only members with Manage Server or Manage Messages review results." in page
    assert f"/thumbs/{held}" not in page and post_forms(page) == []
    owner = site.browser()
    await owner.sign_in(site.owner_id)
    (form,) = post_forms(await owner.text(review_url))
    answer = await member.post(review_url, data=dict(form, action="approve"))
    assert answer.status == 403  # before the token is even read: not a reviewer
    assert (await member.get(f"/thumbs/{held}/0")).status == 404

    mod = site.browser()
    await mod.sign_in(moderator.id)
    assert tab in await mod.text(f"/servers/{site.guild_id}")  # a reviewer's tab
    (form,) = post_forms(await mod.text(review_url))
    answer = await mod.post(review_url, data=dict(form, action="reject"))
    assert answer.status == 200
    record = await site.services.moderation.record(ref)
    assert record is not None and record.state is Visibility.REJECTED
    assert "Nothing waits for a review" in await mod.text(review_url)
    assert (await member.get(f"/thumbs/{held}/0")).status == 404  # rejected: still withheld


async def test_approve_on_the_web_shows_a_synchronous_image_on_its_card_as_discord_does(
    site: Site, stack: Stack
) -> None:
    """The review channel's Approve posts it as a reply to its card, pinging the member, with
    its file; the Review page's Approve does the same (through the dashboard's port)."""
    key = stack.api.create_key()
    async with output_client(stack.api.base_url) as http:
        made = await http.post(
            f"{stack.api.base_url}/image/generate",
            headers={"Authorization": f"Bearer {key}"},
            json={"model": "black-forest-labs/flux-schnell", "prompt": "a kite color:red"},
        )
    url = made.json()["outputs"][0]
    request_id = await site.services.db.result_requests.add_request(
        kind="image",
        guild_id=site.guild_id,
        user_id=site.member_id,
        options={"prompt": "a kite color:red"},
        outputs=[url],
        at=site.clock.time(),
    )
    ref = f"r{request_id}"
    card = await site.client.get_partial_messageable(site.channel_id).send("held answer")
    record = SafetyRecord(
        ref,
        site.guild_id,
        site.channel_id,
        site.member_id,
        "image",
        "a kite",
        0.9,
        Visibility.HELD,
        "score",
        0.0,
        card=(site.channel_id, card.id),
    )
    assert await site.services.db.safety.add(record)
    owner = site.browser()
    await owner.sign_in(site.owner_id)
    review_url = f"/servers/{site.guild_id}/review"
    (form,) = post_forms(await owner.text(review_url))
    assert form["ref"] == ref
    answer = await owner.post(review_url, data=dict(form, action="approve"))
    assert answer.status == 200
    await site.posted(site.channel_id, "your image is ready")
    (shown,) = [m for m in site.emulator.channel_messages(site.channel_id) if "ready" in m.content]
    assert shown.pinged_user_ids() == {site.member_id}
    assert shown.message_reference is not None
    assert int(shown.message_reference["message_id"]) == card.id
    assert len(shown.attachments) == 1  # its file, not only the service's link


async def test_reject_on_the_web_tells_the_member_and_their_card(site: Site) -> None:
    card = await site.client.get_partial_messageable(site.channel_id).send("held card")
    held = await site.charge(
        "2", prompt="a held kite", outputs=("https://files.example/a",), message_id=card.id
    )
    assert held is not None
    await hold(site, held)
    owner = site.browser()
    await owner.sign_in(site.owner_id)
    review_url = f"/servers/{site.guild_id}/review"
    (form,) = post_forms(await owner.text(review_url))
    answer = await owner.post(review_url, data=dict(form, action="reject"))
    assert answer.status == 200
    told = await site.posted(site.channel_id, "rejected your image")
    assert f"<@{site.member_id}>" in told
    (reply,) = [
        m for m in site.emulator.channel_messages(site.channel_id) if "rejected your" in m.content
    ]
    assert reply.pinged_user_ids() == {site.member_id}
    edited = site.emulator.messages[card.id]
    assert "rejected this result" in edited.text  # no longer "waiting for the moderators"
