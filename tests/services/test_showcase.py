"""The showcase's rules on both engines: who may share, one vote per member, removal, public."""

from __future__ import annotations

from decimal import Decimal

import pytest

from bot.discord.render.showcase import showcase_post
from bot.domain import Charge, JobStatus, Kind, NewJob, SafetyRecord, Visibility
from bot.errors import ValidationFailed
from bot.services.generation import Requester
from tests.support.stack import ADMIN_ACTOR, Stack

GUILD, OWNER, OTHER = 7, 70, 71


async def finished(
    stack: Stack, prompt: str, *, user_id: int = OWNER, guild_id: int = GUILD
) -> int:
    db = stack.services.db
    now = stack.clock.time()
    task = f"task-{prompt}"
    await db.ledger.insert_charge(
        Charge(
            guild_id=guild_id,
            channel_id=1,
            user_id=user_id,
            kind=Kind.VIDEO,
            model="aurora-lite/text-to-video",
            task_id=task,
            cost_cents=Decimal(20),
            remaining_credits_cents=None,
            key_fingerprint="fp",
            at=now,
        )
    )
    job = await db.jobs.insert(
        NewJob(
            task_id=task,
            provider="sandbox",
            poll_url="",
            kind=Kind.VIDEO,
            model="aurora-lite/text-to-video",
            guild_id=guild_id,
            channel_id=1,
            message_id=None,
            user_id=user_id,
            prompt_summary=prompt,
            details={},
            cost_cents=Decimal(20),
            key_fingerprint="fp",
            created_at=now,
            next_poll_at=now + 10,
        )
    )
    await db.jobs.finish(job.id, JobStatus.COMPLETED, ("https://cdn.example/v.mp4",), None, now)
    return job.id


async def test_share_vote_remove_and_the_public_list(stack: Stack) -> None:
    showcase = stack.services.showcases
    fox, owl = await finished(stack, "a fox"), await finished(stack, "an owl")
    with pytest.raises(ValidationFailed, match="Only the member who asked"):
        await showcase.share(fox, OTHER)
    fox_entry, added = await showcase.share(fox, OWNER)
    assert added
    assert (await showcase.share(fox, OWNER))[1] is False  # one entry per result
    owl_entry, _ = await showcase.share(owl, OWNER)
    assert await showcase.vote(owl_entry.id, OTHER) == (True, 1)
    assert await showcase.vote(owl_entry.id, OTHER) == (False, 1)  # twice counts once
    assert await showcase.vote(owl_entry.id, OWNER) == (True, 2)
    ranked = await showcase.ranked(GUILD, None)
    assert [(e.result.prompt, e.votes) for e in ranked] == [("an owl", 2), ("a fox", 0)]
    assert await showcase.public(GUILD, None) is None  # off by default
    stack.clock.advance(1)
    await stack.services.guild_config.set_showcase_public(GUILD, True, actor=ADMIN_ACTOR)
    assert await showcase.public(GUILD, None) == []  # shared before the switch: in-server only
    stack.clock.advance(1)
    hen, _ = await showcase.share(await finished(stack, "a hen"), OWNER)
    assert await showcase.remove(GUILD, owl_entry.id, OWNER)
    assert not await showcase.remove(GUILD + 1, fox_entry.id, OWNER)  # another server's: no
    public = await showcase.public(GUILD, None)
    assert public is not None and [e.result.prompt for e in public] == ["a hen"]
    assert await showcase.remove(GUILD, hen.id, OWNER)
    assert await showcase.public(GUILD, None) == []
    with pytest.raises(ValidationFailed, match="no longer in the showcase"):
        await showcase.vote(owl_entry.id, OTHER)
    assert (await showcase.share(owl, OWNER))[1] is False  # a removal is not undone


async def test_a_result_of_a_members_own_wallet_has_no_showcase(stack: Stack) -> None:
    job = await finished(stack, "mine", guild_id=-OWNER)
    with pytest.raises(ValidationFailed, match="no server's showcase"):
        await stack.services.showcases.share(job, OWNER)


async def test_public_shows_only_what_was_shared_after_the_switch(stack: Stack) -> None:
    showcase = stack.services.showcases
    config = stack.services.guild_config
    await showcase.share(await finished(stack, "before"), OWNER)
    stack.clock.advance(60)
    await config.set_showcase_public(GUILD, True, actor=ADMIN_ACTOR)
    stack.clock.advance(60)
    await showcase.share(await finished(stack, "after"), OWNER)
    await config.set_showcase_public(
        GUILD, True, actor=ADMIN_ACTOR
    )  # saved again: still public since the switch
    public = await showcase.public(GUILD, None)
    assert public is not None and [e.result.prompt for e in public] == ["after"]
    # Off, then on again: public from the new switch on.
    await config.set_showcase_public(GUILD, False, actor=ADMIN_ACTOR)
    assert await showcase.public(GUILD, None) is None
    stack.clock.advance(60)
    await config.set_showcase_public(GUILD, True, actor=ADMIN_ACTOR)
    assert await showcase.public(GUILD, None) == []
    ranked = await showcase.ranked(GUILD, None)  # the server's own page keeps every entry
    assert sorted(e.result.prompt for e in ranked) == ["after", "before"]


async def test_echoed_prompts_lose_their_markdown_links(stack: Stack) -> None:
    showcase = stack.services.showcases
    await stack.services.guild_config.set_showcase_public(GUILD, True, actor=ADMIN_ACTOR)
    stack.clock.advance(1)
    prompt = (
        "a [cute cat](https://evil.example/x) and [https://good.example](<https://evil.example>)"
        ' with [a [nested] label](https://e.example "title") at https://plain.example'
    )
    job = await finished(stack, prompt)
    entry, _ = await showcase.share(job, OWNER)
    plain = "a cute cat and https://good.example with a [nested] label at https://plain.example"
    assert entry.result.prompt == plain
    assert [e.result.prompt for e in await showcase.ranked(GUILD, None)] == [plain]
    public = await showcase.public(GUILD, None)
    assert public is not None and [e.result.prompt for e in public] == [plain]
    again = await showcase.entry(entry.id)
    assert again is not None and again.result.prompt == plain
    post = showcase_post(entry).content or ""
    assert "](" not in post and "evil.example" not in post and "a cute cat" in post


async def withhold(stack: Stack, job_id: int, state: Visibility) -> None:
    """Record the safety policy's decision on the job's result (as screening does)."""
    record = SafetyRecord(
        f"j{job_id}", GUILD, 1, OWNER, "video", "p", 0.9, state, "score", stack.clock.time()
    )
    assert await stack.db.safety.add(record)


async def test_held_and_withheld_results_never_reach_the_showcase_or_the_gallery(
    stack: Stack,
) -> None:
    showcase = stack.services.showcases
    views = stack.db.dashboard_views
    held, withheld, approved, shown = [
        await finished(stack, name) for name in ("held", "withheld", "approved", "shown")
    ]
    await withhold(stack, held, Visibility.HELD)
    await withhold(stack, withheld, Visibility.WITHHELD)
    await withhold(stack, approved, Visibility.APPROVED)
    for job_id in (held, withheld):
        with pytest.raises(ValidationFailed, match="withheld by the server's safety policy"):
            await showcase.share(job_id, OWNER)
    await showcase.share(approved, OWNER)
    entry, _ = await showcase.share(shown, OWNER)
    await stack.services.guild_config.set_showcase_public(GUILD, True, actor=ADMIN_ACTOR)

    async def gallery(user_id: int | None = None) -> list[str]:
        items = await views.results(
            guild_id=None if user_id else GUILD,
            user_id=user_id,
            kind=None,
            model=None,
            since=None,
            until=None,
            before=None,
            limit=10,
        )
        return sorted(item.prompt for item in items)

    assert await gallery() == await gallery(OWNER) == ["approved", "shown"]  # Gallery, My results
    # A shared result withheld later (members reported it) leaves every showcase page.
    await withhold(stack, shown, Visibility.WITHHELD)
    assert [e.result.prompt for e in await showcase.ranked(GUILD, None)] == ["approved"]
    assert await showcase.public_entry(entry.id) is None
    with pytest.raises(ValidationFailed, match="no longer in the showcase"):
        await showcase.vote(entry.id, OTHER)
    assert await gallery() == ["approved"]


async def test_a_held_synchronous_image_kept_as_a_job_is_hidden_by_its_request(
    stack: Stack,
) -> None:
    """A synchronous image is screened as its request (``r<id>``) and kept as a finished job
    (Share, the galleries): the job is hidden with its request."""
    showcase = stack.services.showcases
    job_id = await finished(stack, "a sync image")
    who = Requester(GUILD, 1, OWNER)
    request_id = await stack.services.generation.remember_request(
        "image", who, {"prompt": "a sync image"}, job_id=job_id, outputs=("https://x/a.png",)
    )
    record = SafetyRecord(
        f"r{request_id}", GUILD, 1, OWNER, "image", "p", None, Visibility.HELD, "failed", 0.0
    )
    assert await stack.db.safety.add(record)
    assert await stack.services.moderation.hidden([f"j{job_id}"]) == {f"j{job_id}"}
    with pytest.raises(ValidationFailed, match="withheld by the server's safety policy"):
        await showcase.share(job_id, OWNER)
    items = await stack.db.dashboard_views.results(
        guild_id=GUILD,
        user_id=None,
        kind=None,
        model=None,
        since=None,
        until=None,
        before=None,
        limit=10,
    )
    assert items == []
