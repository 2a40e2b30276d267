"""The safety policy on both engines: every decision, holds, reports, Approve and Reject.

The scorer is the real one on the tiny red classifier (``tests/support/safety_model.py``):
red pictures score about 1, blue about 0, mid-grey 0.5; a scorer whose model fails gives a
failed verdict.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Sequence
from decimal import Decimal
from pathlib import Path

import pytest
from PIL import Image

from bot.clock import ManualClock
from bot.domain import JobStatus, Kind, NewJob, SafetyMode, SafetyPolicy, Visibility
from bot.errors import ValidationFailed
from bot.media.safety import Outcome, SafetyScorer, Verdict, load_model
from bot.services.personal import wallet_id
from bot.services.safety import SafetyService, decide, spoiler_name
from bot.storage import Database
from tests.support.safety_model import BLUE, RED, solid_png, write_classifier
from tests.support.stack import ADMIN_ACTOR, Stack

GUILD, CHANNEL, MEMBER, ADMIN = 7, 70, 700, 701


class _Broken:
    """A model that always fails (the scorer's error path)."""

    description = "broken"

    def load(self) -> None:
        return None

    def score(self, images: Sequence[Image.Image]) -> list[float]:
        raise RuntimeError("boom")


@pytest.fixture
async def scorer(tmp_path: Path) -> AsyncIterator[SafetyScorer]:
    model = load_model(str(write_classifier(tmp_path / "model")), ["nsfw"])
    scorer = SafetyScorer(model)
    yield scorer
    scorer.close()


@pytest.fixture
def service(store: Database, scorer: SafetyScorer, clock: ManualClock) -> SafetyService:
    return SafetyService(store, scorer, clock)


def grey(level: int) -> bytes:
    """A picture whose red channel is ``level`` (0-255): the model's score follows it."""
    return solid_png((level, 128, 128))


async def screened(
    service: SafetyService,
    ref: str,
    files: Sequence[bytes],
    *,
    guild_id: int = GUILD,
    nsfw: bool = False,
    kind: str = "image",
) -> Visibility:
    screening = await service.screen(
        ref,
        guild_id=guild_id,
        channel_id=CHANNEL,
        user_id=MEMBER,
        kind=kind,
        prompt="a prompt",
        files=files,
        nsfw_channel=nsfw,
    )
    return screening.visibility


# -- the rules, pure ------------------------------------------------------------------------

POLICY = SafetyPolicy()
BLOCKING = SafetyPolicy(mode=SafetyMode.BLOCK)
NOT_IN_NSFW = SafetyPolicy(nsfw_spoiler=False)


@pytest.mark.parametrize(
    ("score", "policy", "nsfw", "expected"),
    [
        (0.2, POLICY, False, Visibility.SHOWN),
        (0.49, POLICY, False, Visibility.SHOWN),
        (0.5, POLICY, False, Visibility.HELD),
        (0.7, POLICY, False, Visibility.HELD),
        (0.85, POLICY, False, Visibility.WITHHELD),
        (0.99, POLICY, False, Visibility.WITHHELD),
        (0.7, BLOCKING, False, Visibility.WITHHELD),
        (0.2, BLOCKING, False, Visibility.SHOWN),
        (0.7, POLICY, True, Visibility.SPOILER),
        (0.99, POLICY, True, Visibility.SPOILER),
        (0.2, POLICY, True, Visibility.SHOWN),
        (0.7, NOT_IN_NSFW, True, Visibility.HELD),
        (0.99, NOT_IN_NSFW, True, Visibility.WITHHELD),
        (0.99, SafetyPolicy(mode=SafetyMode.OFF), False, Visibility.SHOWN),
        (0.6, None, False, Visibility.SPOILER),
        (0.5, None, False, Visibility.SPOILER),
        (0.4, None, False, Visibility.SHOWN),
    ],
)
def test_a_score_decides_what_members_see(
    score: float, policy: SafetyPolicy | None, nsfw: bool, expected: Visibility
) -> None:
    assert decide(Verdict(Outcome.SCORED, score), policy, nsfw_channel=nsfw) is expected


def test_a_failed_verdict_holds_even_in_an_age_restricted_channel() -> None:
    failed = Verdict(Outcome.FAILED)
    assert decide(failed, POLICY) is Visibility.HELD
    assert decide(failed, BLOCKING, nsfw_channel=True) is Visibility.HELD
    assert decide(Verdict(Outcome.UNAVAILABLE), POLICY) is Visibility.SHOWN


def test_spoiler_names_blur_a_file_once() -> None:
    assert spoiler_name("a.png") == "SPOILER_a.png"
    assert spoiler_name("SPOILER_a.png") == "SPOILER_a.png"


# -- screening with the real scorer ---------------------------------------------------------


async def test_below_between_and_above_the_thresholds(service: SafetyService) -> None:
    assert await screened(service, "j1", [solid_png(BLUE)]) is Visibility.SHOWN
    assert await screened(service, "j2", [grey(140)]) is Visibility.HELD
    assert await screened(service, "j3", [solid_png(RED)]) is Visibility.WITHHELD
    assert await service.record("j1") is None  # shown: nothing kept
    held = await service.record("j2")
    assert held is not None and held.state is Visibility.HELD
    assert held.score is not None and 0.5 <= held.score < 0.85
    assert await service.hidden(["j1", "j2", "j3"]) == {"j2", "j3"}


async def test_the_highest_file_decides_and_a_decision_is_not_scored_again(
    service: SafetyService, scorer: SafetyScorer
) -> None:
    assert await screened(service, "j1", [solid_png(BLUE), solid_png(RED)]) is Visibility.WITHHELD
    scorer.close()  # a second screening of the same result reads its record
    assert await screened(service, "j1", [solid_png(BLUE)]) is Visibility.WITHHELD


async def test_a_new_hold_names_the_review_channel_once(service: SafetyService) -> None:
    await service._db.guilds.set_admin_channel(GUILD, 55)
    first = await service.screen(
        "j9",
        guild_id=GUILD,
        channel_id=1,
        user_id=2,
        kind="image",
        prompt="p",
        files=[grey(140)],
    )
    again = await service.screen(
        "j9",
        guild_id=GUILD,
        channel_id=1,
        user_id=2,
        kind="image",
        prompt="p",
        files=[grey(140)],
    )
    assert (first.new, first.review_channel_id) == (True, 55)
    assert (again.new, again.review_channel_id) == (False, None)


async def test_an_age_restricted_channel_gets_a_spoiler(service: SafetyService) -> None:
    assert await screened(service, "j1", [solid_png(RED)], nsfw=True) is Visibility.SPOILER
    await service.update(GUILD, nsfw_channels="policy")
    assert await screened(service, "j2", [solid_png(RED)], nsfw=True) is Visibility.WITHHELD


async def test_without_a_server_policy_high_scores_are_spoilers(service: SafetyService) -> None:
    personal = wallet_id(MEMBER)
    assert await screened(service, "j1", [solid_png(RED)], guild_id=personal) is Visibility.SPOILER
    assert await screened(service, "j2", [solid_png(BLUE)], guild_id=personal) is Visibility.SHOWN


async def test_a_scorer_that_fails_holds(store: Database, clock: ManualClock) -> None:
    scorer = SafetyScorer(_Broken())
    try:
        service = SafetyService(store, scorer, clock)
        assert await screened(service, "j1", [solid_png(BLUE)]) is Visibility.HELD
        record = await service.record("j1")
        assert record is not None and (record.reason, record.score) == ("failed", None)
        assert await screened(service, "j2", []) is Visibility.HELD  # nothing to score
    finally:
        scorer.close()


async def test_mode_off_and_no_model_show_everything(
    service: SafetyService, store: Database, clock: ManualClock
) -> None:
    await service.update(GUILD, mode="off")
    assert await screened(service, "j1", [solid_png(RED)]) is Visibility.SHOWN
    unavailable = SafetyService(store, SafetyScorer(None), clock)
    assert await screened(unavailable, "j2", [solid_png(RED)]) is Visibility.SHOWN
    with pytest.raises(ValidationFailed, match="unavailable"):
        await unavailable.update(GUILD, mode="block")


async def test_a_text_result_is_not_scored(service: SafetyService) -> None:
    assert await screened(service, "r1", [b"words"], kind="text") is Visibility.SHOWN


# -- the policy --------------------------------------------------------------------------


async def test_the_policy_defaults_and_changes(service: SafetyService) -> None:
    assert await service.policy(GUILD) == SafetyPolicy()
    changed = await service.update(GUILD, mode="block", review_above=0.3, review_channel_id=9)
    assert (changed.mode, changed.review_above, changed.review_channel_id) == (
        SafetyMode.BLOCK,
        0.3,
        9,
    )
    assert changed.block_above == 0.85
    assert await service.review_channel(GUILD) == 9
    await service.update(GUILD, review_channel_id=0)  # back to the admin channel
    await service._db.guilds.set_admin_channel(GUILD, 55)
    assert await service.review_channel(GUILD) == 55


@pytest.mark.parametrize(
    "changes",
    [
        {"mode": "loud"},
        {"review_above": 1.5},
        {"block_above": -0.1},
        {"review_above": 0.9},  # above block-above's 0.85
        {"reports_to_hide": 0},
        {"nsfw_channels": "maybe"},
    ],
)
async def test_bad_settings_are_refused_and_change_nothing(
    service: SafetyService, changes: dict[str, object]
) -> None:
    with pytest.raises(ValidationFailed):
        await service.update(GUILD, **changes)  # type: ignore[arg-type]
    assert await service.policy(GUILD) == SafetyPolicy()


async def test_a_policy_change_is_audited_through_the_config_snapshot(stack: Stack) -> None:
    config = stack.services.guild_config
    before = await config.snapshot(GUILD)
    assert before["safety mode"] == "review"
    async with config.changing(GUILD, ADMIN_ACTOR) as change:
        await stack.services.db.safety.set(GUILD, {"mode": "block", "review_above": 0.4})
    assert [(e.what, e.old, e.new) for e in change.entries] == [
        ("safety mode", "review", "block"),
        ("safety review above", "0.5", "0.4"),
    ]


# -- reports -----------------------------------------------------------------------------


async def report(service: SafetyService, ref: str, reporter: int) -> bool:
    outcome = await service.report(
        ref,
        reporter_id=reporter,
        reason="sexual",
        guild_id=GUILD,
        channel_id=CHANNEL,
        user_id=MEMBER,
        kind="image",
        prompt="a prompt",
        card=(CHANNEL, 5000),
    )
    return outcome.hidden_now


async def test_reports_to_hide_members_withhold_a_shown_result(service: SafetyService) -> None:
    assert not await report(service, "j1", 1)
    assert not await report(service, "j1", 1)  # one report per member
    assert not await report(service, "j1", 2)
    record = await service.record("j1")
    assert record is not None and (record.state, record.reports) == (Visibility.SHOWN, 2)
    assert await report(service, "j1", 3)
    record = await service.record("j1")
    assert record is not None
    assert (record.state, record.reason, record.card) == (
        Visibility.WITHHELD,
        "reports",
        (CHANNEL, 5000),
    )
    assert [r.ref for r in await service.queue(GUILD)] == ["j1"]
    audit = await service._db.policy.audit(GUILD, 10)
    assert sum(e.what == "safety report j1" for e in audit) == 3


async def test_a_report_with_an_unknown_reason_is_refused(service: SafetyService) -> None:
    with pytest.raises(ValidationFailed):
        await service.report(
            "j1",
            reporter_id=1,
            reason="boring",
            guild_id=GUILD,
            channel_id=1,
            user_id=2,
            kind="image",
            prompt="p",
        )


# -- decisions ---------------------------------------------------------------------------


async def _job(store: Database, clock: ManualClock) -> int:
    now = clock.time()
    job = await store.jobs.insert(
        NewJob(
            task_id="t1",
            provider="sandbox",
            poll_url="",
            kind=Kind.IMAGE,
            model="m",
            guild_id=GUILD,
            channel_id=CHANNEL,
            message_id=1,
            user_id=MEMBER,
            prompt_summary="p",
            details={},
            cost_cents=Decimal(4),
            key_fingerprint="fp",
            created_at=now,
            next_poll_at=now,
        )
    )
    await store.jobs.finish(job.id, JobStatus.COMPLETED, ("https://x/a.png",), None, now)
    await store.jobs.mark_announced(job.id, now)
    return job.id


async def test_approve_shows_a_held_result_and_delivers_its_job_again(
    service: SafetyService, store: Database, clock: ManualClock
) -> None:
    job_id = await _job(store, clock)
    ref = f"j{job_id}"
    assert await screened(service, ref, [grey(140)]) is Visibility.HELD
    record = await service.approve(ref, guild_id=GUILD, user_id=ADMIN, via="discord")
    assert (record.state, record.decided_by) == (Visibility.APPROVED, ADMIN)
    assert not await service.is_hidden(ref)
    assert await screened(service, ref, [grey(140)]) is Visibility.SHOWN
    job = await store.jobs.get(job_id)
    assert job is not None and job.announced_at is None
    assert job.next_delivery_at == clock.time()
    with pytest.raises(ValidationFailed):  # decided already
        await service.reject(ref, guild_id=GUILD, user_id=ADMIN, via="web")
    audit = await store.policy.audit(GUILD, 10)
    assert [(e.what, e.old, e.new, e.via) for e in audit] == [
        (f"safety review {ref}", "held", "approved", "discord")
    ]


async def test_reject_keeps_it_withheld_and_another_server_cannot_decide(
    service: SafetyService,
) -> None:
    await screened(service, "j4", [solid_png(RED)])
    with pytest.raises(ValidationFailed):
        await service.approve("j4", guild_id=GUILD + 1, user_id=ADMIN, via="web")
    record = await service.reject("j4", guild_id=GUILD, user_id=ADMIN, via="web")
    assert record.state is Visibility.REJECTED
    assert await service.is_hidden("j4")
    with pytest.raises(ValidationFailed):
        await service.check_visible("j4")
    assert await service.queue(GUILD) == []
