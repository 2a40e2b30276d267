"""Result buttons without Discord: ids and rows, stored requests, the confirmation threshold."""

from decimal import Decimal

import discord
import pytest

from bot.clock import ManualClock
from bot.discord.click_debounce import CLICK_DEBOUNCE_SECONDS, ClickDebounce
from bot.discord.render import MessageParts
from bot.discord.render.buttons import (
    confirm_above_text,
    confirm_label,
    custom_id,
    dm_buttons,
    result_buttons,
)
from bot.discord.request_flows import upload_expired, varied
from bot.services.generation import TextOptions
from bot.storage import Database


def test_custom_ids_fit_discord_and_refuse_anything_but_a_reference() -> None:
    longest = custom_id("animate", "j" + "9" * 20)
    assert len(longest) <= 100  # Discord's custom id limit
    with pytest.raises(ValueError, match="reference"):
        custom_id("again", "x1")


def test_image_results_get_every_action_in_one_row_beside_25_links() -> None:
    actions = result_buttons("image", "r3")
    assert [label for label, _ in actions] == ["Again", "Animate", "Edit", "Enhance", "Delete"]
    links = tuple((f"Open image {n}", f"https://x.test/{n}.png") for n in range(25))
    view = MessageParts(link_buttons=links, action_buttons=actions).view()
    assert view is not None
    children = [c for c in view.children if isinstance(c, discord.ui.Button)]
    assert len(children) == 25  # 5 rows of 5: the actions take the last row, 20 links remain
    assert [c.custom_id for c in children[-5:]] == [cid for _, cid in actions]
    assert len(view.to_components()) == 5


def test_vary_raises_the_temperature_within_the_spec() -> None:
    assert varied(TextOptions("hi")).temperature == pytest.approx(1.2)
    assert varied(TextOptions("hi", temperature=1.9)).temperature == 2.0


def test_confirmation_texts() -> None:
    assert confirm_label(Decimal(180)) == "Generate · $1.80"
    assert "confirm-above 1.00" in confirm_above_text(None)
    assert "$2.50" in confirm_above_text(Decimal(250))


async def test_result_requests_are_found_by_job_or_by_id(store: Database) -> None:
    synchronous = await store.result_requests.add_request(
        kind="image",
        guild_id=1,
        user_id=2,
        options={"prompt": "a kite", "model": "m"},
        outputs=["https://x.test/1.png"],
        at=10.0,
    )
    await store.result_requests.add_request(
        kind="video", guild_id=1, user_id=3, options={"prompt": "p"}, job_id=77, at=11.0
    )
    found = await store.result_requests.request(f"r{synchronous}")
    assert found is not None
    assert (found.kind, found.user_id, found.outputs) == ("image", 2, ("https://x.test/1.png",))
    assert found.options == {"prompt": "a kite", "model": "m"}
    by_job = await store.result_requests.request("j77")
    assert by_job is not None and (by_job.user_id, by_job.job_id) == (3, 77)
    assert await store.result_requests.request("j78") is None
    assert await store.result_requests.request("rx") is None


async def test_the_confirmation_threshold_is_off_until_set(store: Database) -> None:
    assert await store.result_requests.confirm_above(5) is None
    await store.result_requests.set_confirm_above(5, Decimal("150.5"))
    assert await store.result_requests.confirm_above(5) == Decimal("150.5")
    await store.result_requests.set_confirm_above(5, None)
    assert await store.result_requests.confirm_above(5) is None


def test_an_expired_discord_upload_link_is_recognised() -> None:
    url = "https://cdn.discordapp.com/attachments/1/2/a.png?ex=65f0a000&is=1&hm=ff"
    assert upload_expired(url, now=0x65F0A000)
    assert not upload_expired(url, now=0x65F0A000 - 1)
    assert not upload_expired("https://example.com/a.png", now=1e12)


def test_vary_is_offered_only_where_something_varies() -> None:
    # An image or video request takes no seed or strength (docs/genapi.md §4.2, §4.4), so Vary
    # there was Again at the same price; a text varies by its temperature.
    assert "Vary" in [label for label, _ in result_buttons("text", "r1")]
    for kind in ("image", "video"):
        labels = [label for label, _ in result_buttons(kind, "j1", price_cents=Decimal(20))]
        assert not any(label.startswith("Vary") for label in labels), kind


def test_a_card_sent_by_direct_message_keeps_only_delete() -> None:
    # A click in a DM has no server to check and charge, so paid buttons go.
    video = result_buttons("video", "j5", price_cents=Decimal(50))
    assert dm_buttons(video) == (("Delete", "gb:delete:j5"),)
    assert dm_buttons(result_buttons("image", "j6")) == (("Delete", "gb:delete:j6"),)


def test_a_double_click_is_held_back_while_the_first_runs_and_for_a_few_seconds() -> None:
    clock = ManualClock()
    debounce = ClickDebounce(clock)
    assert debounce.claim(user_id=1, message_id=10)
    assert not debounce.claim(user_id=1, message_id=10)  # the second click of a double click
    assert debounce.claim(user_id=2, message_id=10)  # another member
    assert debounce.claim(user_id=1, message_id=11)  # another message
    assert debounce.claim(user_id=1, message_id=10, button="vary")  # another button
    clock.advance(CLICK_DEBOUNCE_SECONDS * 3)
    assert not debounce.claim(user_id=1, message_id=10)  # still running
    debounce.release(user_id=1, message_id=10)
    assert debounce.claim(user_id=1, message_id=10)  # it ran longer than the hold
    debounce.release(user_id=1, message_id=10)
    clock.advance(CLICK_DEBOUNCE_SECONDS - 0.5)
    assert not debounce.claim(user_id=1, message_id=10)  # finished, but a moment ago
    clock.advance(0.5)
    assert debounce.claim(user_id=1, message_id=10)
    # A click refused before any request (a budget, a channel) may be retried at once.
    debounce.release(user_id=1, message_id=10, hold=False)
    assert debounce.claim(user_id=1, message_id=10)
