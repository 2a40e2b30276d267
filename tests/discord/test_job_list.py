"""``/jobs`` rendering: every job reachable, within Discord's limits, whatever its status."""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import discord

from bot.discord.render import job_list_pages, limits

NOW = 1_700_000_000.0
GUILD, CHANNEL = 10, 20


@dataclass(frozen=True)
class Listed:
    id: int
    status: str = "pending"
    prompt_summary: str = "a red fox running through snow"
    model: str = "aurora-lite/text-to-video"
    kind: str = "video"
    details: Mapping[str, Any] = field(default_factory=dict)
    cost_cents: int = 40
    user_id: int = 111
    created_at: float = NOW - 90
    finished_at: float | None = None
    outputs: Sequence[str] = ()
    error: str | None = None
    poll_count: int = 3
    guild_id: int = GUILD
    channel_id: int = CHANNEL
    message_id: int | None = None
    unwatched_at: float | None = None
    delivery_route: str = "placeholder"


def text(embed: discord.Embed) -> str:
    return "\n".join(f"{f.name}\n{f.value}" for f in embed.fields)


def assert_within_limits(pages: list[discord.Embed]) -> None:
    for page in pages:
        assert len(page) <= limits.EMBED_TOTAL
        assert len(page.fields) <= limits.EMBED_FIELDS
        assert len(page.description or "") <= limits.EMBED_DESCRIPTION
        for each in page.fields:
            assert len(each.name or "") <= limits.FIELD_NAME
            assert len(each.value or "") <= limits.FIELD_VALUE


def test_each_status_says_where_the_job_stands() -> None:
    jobs = [
        Listed(1, message_id=501),
        Listed(
            2,
            status="completed",
            finished_at=NOW - 10,
            outputs=("https://cdn.example.com/2.mp4",),
            message_id=502,
        ),
        Listed(3, status="failed", finished_at=NOW - 5, error="Content policy: <@&1> nope"),
        Listed(
            4,
            status="expired",
            finished_at=NOW - 1,
            outputs=("https://cdn.example.com/4.png",),
            kind="image",
        ),
        Listed(5, status="delivery_failed", finished_at=None),
    ]
    (page,) = job_list_pages(
        jobs, now=NOW, estimates={1: NOW + 45}, whose="your", show_requester=False
    )
    pending, done, failed, expired, odd = (f.value or "" for f in page.fields)
    assert "1 m 30 s elapsed" in pending
    assert f"ready <t:{int(NOW + 45)}:R>" in pending
    assert f"[Message](https://discord.com/channels/{GUILD}/{CHANNEL}/501)" in pending
    assert "Completed in 1 m 20 s" in done
    assert "[Video](https://cdn.example.com/2.mp4)" in done
    assert "/502)" in done
    assert "Failed" in failed and "Content policy" in failed
    assert expired.startswith("> ") and "Expired" in expired
    assert "[Image](https://cdn.example.com/4.png)" in expired
    assert "Delivery failed" in odd
    assert "$0.40" in done
    assert "<@111>" not in text(page)  # one's own listing does not name oneself


def test_a_pending_job_without_history_has_no_estimate() -> None:
    (page,) = job_list_pages(
        [Listed(1)], now=NOW, estimates={1: None}, whose="your", show_requester=True
    )
    value = page.fields[0].value or ""
    assert "no estimate yet" in value
    assert "by <@111>" in value


def test_thirty_jobs_are_paged_newest_first() -> None:
    jobs = [Listed(i) for i in range(30, 0, -1)]
    pages = job_list_pages(jobs, now=NOW, estimates={}, whose="this server's", show_requester=True)
    assert len(pages) == 3
    assert [page.footer.text for page in pages] == ["Page 1/3", "Page 2/3", "Page 3/3"]
    shown = [f.name or "" for page in pages for f in page.fields]
    assert [int(name.split("#")[1].split(" ")[0]) for name in shown] == list(range(30, 0, -1))
    assert "30 most recent" in (pages[0].description or "")
    assert_within_limits(pages)


def test_long_prompts_reasons_and_urls_stay_within_discords_limits() -> None:
    long_url = "https://cdn.example.com/" + "v" * 380 + ".mp4"
    jobs = [
        Listed(
            i,
            status=("completed", "failed", "expired", "pending")[i % 4],
            prompt_summary="word " * 1200,
            model="m" * 300,
            error="because " * 800,
            finished_at=None if i % 4 == 3 else NOW,
            outputs=tuple(long_url + str(n) for n in range(10)),
            message_id=10**18 + i,
        )
        for i in range(40)
    ]
    pages = job_list_pages(jobs, now=NOW, estimates={}, whose="your", show_requester=True)
    assert_within_limits(pages)
    assert sum(len(page.fields) for page in pages) == 40
    for page in pages:
        for each in page.fields:
            value = each.value or ""
            # A link is shown whole or not at all: never cut in half by a truncation.
            assert value.count("](") == len(re.findall(r"\]\(https://[^\s)]+\)", value))


def test_no_jobs_is_one_page_saying_so() -> None:
    (page,) = job_list_pages([], now=NOW, estimates={}, whose="your", show_requester=False)
    assert "No jobs" in (page.description or "")


def test_a_job_no_longer_watched_says_so_and_that_jobs_checks_it() -> None:
    (page,) = job_list_pages(
        [Listed(1, unwatched_at=NOW - 30)],
        now=NOW,
        estimates={},
        whose="your",
        show_requester=False,
    )
    shown = text(page)
    assert "Still processing at the service" in shown
    assert "checked again now" in shown
    assert "no estimate" not in shown


def test_a_result_only_reachable_here_says_so() -> None:
    done = Listed(
        1,
        status="completed",
        finished_at=NOW - 5,
        outputs=("https://cdn.example.com/1.mp4",),
        delivery_route="jobs",
    )
    (page,) = job_list_pages([done], now=NOW, estimates={}, whose="your", show_requester=False)
    assert "could not be posted in its channel or by DM" in text(page)
    assert "https://cdn.example.com/1.mp4" in text(page)


def test_a_private_results_card_is_linked_where_it_lives_or_not_at_all() -> None:
    """Private results: a DM card's message id is the DM's, not the channel's."""
    dm_card = Listed(1, status="completed", finished_at=NOW, message_id=501)
    ephemeral = Listed(2, message_id=502)
    channel_card = Listed(3, message_id=503)
    links = {1: "https://discord.com/channels/@me/900/501", 2: None}
    (page,) = job_list_pages(
        [dm_card, ephemeral, channel_card],
        now=NOW,
        estimates={},
        whose="your",
        show_requester=False,
        message_links=links,
    )
    in_dm, in_response, in_channel = (f.value or "" for f in page.fields)
    assert "[Message](https://discord.com/channels/@me/900/501)" in in_dm
    assert f"/{GUILD}/{CHANNEL}/501" not in in_dm
    assert "[Message]" not in in_response
    assert f"[Message](https://discord.com/channels/{GUILD}/{CHANNEL}/503)" in in_channel
