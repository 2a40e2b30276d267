"""A server's policy: role tiers, model access, blocked terms, cooldowns, audit.

The rules on their own, then through the real services (``stack``: the sandbox emulator over
loopback, the database of each engine), as ``/video`` and ``/text`` and ``/config`` use them.
"""

from __future__ import annotations

import math
from decimal import Decimal
from pathlib import Path

import pytest

from bot.clock import ManualClock
from bot.domain import UNLIMITED, Actor, AuditEntry, ConstraintError, Kind, ModelLists, Tier
from bot.errors import BudgetExceeded, CooldownActive, PromptBlocked, ValidationFailed, user_message
from bot.genapi.errors import GenAPIError
from bot.services.generation import ImageOptions, Requester, TextOptions, VideoOptions
from bot.services.guild_config import parse_allowance
from bot.services.policy import (
    BLOCKED_TERMS_RULE,
    find_blocked_term,
    member_policy,
    model_matches,
    normalise_term,
    parse_models,
)
from bot.storage.copy_db import copy_sqlite_to_postgres
from bot.storage.database import Database as SqlDatabase
from tests.support.stack import ADMIN_ACTOR, Stack

GUILD = 1
PATRON, STAFF, OTHER = 501, 502, 503
CHEAP = "aurora-lite/text-to-video"  # 20 cents per 5 s in the sandbox catalogue
DEAR = "zenith-ultra/text-to-video"  # 150 cents per 5 s


def member(user_id: int = 100, *roles: int, manage_guild: bool = False) -> Requester:
    return Requester(GUILD, 10, user_id, role_ids=frozenset(roles), manage_guild=manage_guild)


# -- the rules ---------------------------------------------------------------------------------


def test_a_blocked_term_matches_whatever_the_case_width_or_hidden_characters() -> None:
    terms = [normalise_term("Bad  Word")]
    assert terms == ["bad word"]
    assert find_blocked_term("a ＢＡＤ\u200b word here", terms) == "bad word"
    assert find_blocked_term("B\u200dad Word!", terms) == "bad word"
    assert find_blocked_term("badword", terms) is None
    assert find_blocked_term("a classic", [normalise_term("ass")]) is None


def test_a_blocked_term_matches_inside_text_written_without_spaces() -> None:
    # Chinese, Japanese and Thai have no spaces to find words by.
    terms = [normalise_term(t) for t in ("暴力", "ばか", "สวัสดี", "bad")]
    assert find_blocked_term("这是暴力视频", terms) == "暴力"
    assert find_blocked_term("おまえはばかだ", terms) == "ばか"
    assert find_blocked_term("ผมสวัสดีครับ", terms) == "สวัสดี"
    assert find_blocked_term("这是bad视频", terms) == "bad"  # a Chinese neighbour ends a word
    assert find_blocked_term("a badge", terms) is None  # words with spaces stay whole


def test_a_blocked_term_matches_look_alike_letters() -> None:
    terms = [normalise_term(t) for t in ("bad", "paypal", "kill")]
    assert find_blocked_term("a b\u0430d idea", terms) == "bad"  # Cyrillic a
    assert find_blocked_term("\u0412\u0410D", terms) == "bad"  # Cyrillic capitals
    assert find_blocked_term("log in to PAYPAI", terms) == "paypal"  # capital I for l
    assert find_blocked_term("ki11", terms) == "kill"
    assert find_blocked_term("skill", terms) is None


def test_a_blocked_term_matches_with_marks_that_show_nothing_inside() -> None:
    # Unicode's skeleton leaves out Default_Ignorable_Code_Point characters (UTS #39
    # section 4): these are not format characters, so case folding and NFKC keep them.
    terms = [normalise_term("bad")]
    assert find_blocked_term("b\ufe0fad", terms) == "bad"  # a variation selector
    assert find_blocked_term("ba\u3164d", terms) == "bad"  # the Hangul filler
    assert find_blocked_term("b\u034fad", terms) == "bad"  # the combining grapheme joiner
    assert find_blocked_term("b\u180bad idea", terms) == "bad"  # a Mongolian variation selector


def test_the_blocked_terms_command_says_what_is_matched() -> None:
    assert len(BLOCKED_TERMS_RULE) <= 100  # Discord's limit for a description
    for promise in ("any case", "look-alike", "whole words", "CJK/Thai anywhere"):
        assert promise in BLOCKED_TERMS_RULE


def test_model_lists_take_ids_and_prefixes() -> None:
    assert parse_models(" Motion-Pro/, acme/image-, acme/chat ") == (
        "motion-pro/",
        "acme/image-",
        "acme/chat",
    )
    assert parse_models("all") == ("*",)
    assert model_matches("motion-pro/", "motion-pro/v2")
    assert model_matches("acme/image-", "acme/image-2")
    assert not model_matches("acme/chat", "acme/chat-large")  # an id is exact
    with pytest.raises(ValidationFailed):
        parse_models("not a model")


def test_a_tier_allowance_is_dollars_unlimited_or_the_servers() -> None:
    assert parse_allowance("0.50") == 50
    assert parse_allowance("$12") == 1200
    assert parse_allowance("unlimited") == UNLIMITED
    assert parse_allowance("default") is None
    with pytest.raises(ValidationFailed):
        parse_allowance("lots")


def test_the_most_generous_tier_wins_for_each_limit() -> None:
    tiers = [
        Tier(GUILD, PATRON, "Patron", 50, UNLIMITED, 1, ("aurora-lite/",)),
        Tier(GUILD, STAFF, "Staff", 200, 1000, None, None),
    ]
    lists = ModelLists(allowed=("flash-clip/",))
    both = member_policy(tiers, {PATRON, STAFF}, daily_default=30, videos_default=3, lists=lists)
    assert (both.daily.value, both.daily.source) == (200, "role Staff")
    assert (both.monthly.value, both.monthly.source) == (None, "role Patron")  # unlimited
    assert both.videos_at_once.value == 3  # Staff leaves it at the server's 3 > Patron's 1
    assert both.allows("aurora-lite/x") and both.allows("flash-clip/x")
    assert not both.allows(DEAR)
    assert both.tier_role_id == STAFF

    nobody = member_policy(tiers, {OTHER}, daily_default=30, videos_default=3, lists=lists)
    assert (nobody.daily.value, nobody.daily.source) == (30, "server default")
    assert nobody.monthly.value is None
    assert nobody.allows("flash-clip/x") and not nobody.allows("aurora-lite/x")
    assert nobody.tier_role_id is None


# -- through the services ----------------------------------------------------------------------


async def test_a_tier_refusal_names_the_allowance_and_what_is_left(stack: Stack) -> None:
    await stack.services.guild_config.set_budgets(GUILD, daily_per_user=30, actor=ADMIN_ACTOR)
    await stack.services.guild_config.set_tier(
        GUILD, PATRON, "Patron", daily_per_user=50, actor=ADMIN_ACTOR
    )
    patron, plain = member(100, PATRON), member(200, OTHER)
    for _ in range(2):
        await stack.generation.video(patron, VideoOptions("a fox", CHEAP, duration=5))
    posts = stack.posts()
    with pytest.raises(BudgetExceeded) as refused:
        await stack.generation.video(patron, VideoOptions("a fox", CHEAP, duration=5))
    assert user_message(refused.value) == (
        "Your daily allowance ($0.50, role Patron) has $0.10 left; this request needs about $0.20."
    )
    await stack.generation.video(plain, VideoOptions("a fox", CHEAP, duration=5))
    with pytest.raises(BudgetExceeded) as refused:
        await stack.generation.video(plain, VideoOptions("a fox", CHEAP, duration=5))
    assert "($0.30, server default) has $0.10 left" in user_message(refused.value)
    assert stack.posts() == posts + 1  # only the one accepted video reached the service
    assert await stack.db.ledger.reserved_cents(GUILD, stack.clock.time()) == 0


async def test_a_monthly_allowance_refuses_across_days(stack: Stack) -> None:
    await stack.services.guild_config.set_tier(
        GUILD, PATRON, "Patron", monthly_per_user=40, actor=ADMIN_ACTOR
    )
    patron = member(100, PATRON)
    await stack.generation.video(patron, VideoOptions("a fox", CHEAP, duration=5))
    stack.clock.advance(86_400)
    await stack.generation.video(patron, VideoOptions("a fox", CHEAP, duration=5))
    with pytest.raises(BudgetExceeded) as refused:
        await stack.generation.video(patron, VideoOptions("a fox", CHEAP, duration=5))
    assert refused.value.scope == "user_month"
    assert "Your monthly allowance ($0.40, role Patron) has $0.00 left" in user_message(
        refused.value
    )


async def test_a_model_outside_the_members_tiers_is_refused_before_any_call(
    stack: Stack,
) -> None:
    config = stack.services.guild_config
    await config.set_models(GUILD, allowed=parse_models("aurora-lite/"), actor=ADMIN_ACTOR)
    await config.set_tier(GUILD, STAFF, "Staff", models=("*",), actor=ADMIN_ACTOR)
    posts = stack.posts()
    with pytest.raises(ValidationFailed, match="not available to your roles"):
        await stack.generation.video(member(100, OTHER), VideoOptions("a fox", DEAR))
    assert stack.posts() == posts
    await stack.generation.video(member(100, OTHER), VideoOptions("a fox", CHEAP))
    await stack.generation.video(member(200, STAFF), VideoOptions("a fox", DEAR))
    await config.set_models(GUILD, blocked=("aurora-lite/",), actor=ADMIN_ACTOR)
    with pytest.raises(ValidationFailed, match="not available"):
        await stack.generation.video(member(100, OTHER), VideoOptions("a fox", CHEAP))


async def test_an_image_without_a_model_uses_the_first_the_member_may_use(stack: Stack) -> None:
    await stack.services.guild_config.set_models(GUILD, allowed=("stability/",), actor=ADMIN_ACTOR)
    outcome = await stack.generation.image(member(), ImageOptions("a fox"))
    assert outcome.model == "stability/sdxl"


async def test_a_blocked_term_costs_nothing_and_is_logged_for_the_admins(stack: Stack) -> None:
    logged: list[tuple[int, int, str]] = []

    async def admin_log(guild_id: int, channel_id: int, text: str) -> None:
        logged.append((guild_id, channel_id, text))

    stack.generation.set_admin_log(admin_log)
    await stack.services.guild_config.add_blocked_term(GUILD, "Forbidden Fruit", actor=ADMIN_ACTOR)
    await stack.services.guild_config.set_admin_channel(GUILD, 77, actor=ADMIN_ACTOR)
    posts = stack.posts()
    with pytest.raises(PromptBlocked) as refused:
        await stack.generation.text(member(), TextOptions("draw the FORBIDDEN\u200b fruit"))
    assert user_message(refused.value) == (
        "This prompt uses a term this server does not allow; nothing was sent."
    )
    assert stack.posts() == posts
    assert await stack.db.ledger.reserved_cents(GUILD, stack.clock.time()) == 0
    assert logged == [(GUILD, 77, logged[0][2])]
    assert "`forbidden fruit`" in logged[0][2] and "<@100>" in logged[0][2]
    await stack.generation.text(member(), TextOptions("draw a forbidden-looking apple"))


async def test_a_cooldown_refuses_the_second_command_until_it_passes(stack: Stack) -> None:
    await stack.services.guild_config.set_cooldown(GUILD, Kind.TEXT, 60, actor=ADMIN_ACTOR)
    await stack.generation.catalogue(GUILD)  # /text reads it first (the rate limiter may wait)
    started = stack.clock.time()
    await stack.generation.text(member(), TextOptions("one"))
    stack.clock.advance(10)
    posts = stack.posts()
    with pytest.raises(CooldownActive) as refused:
        await stack.generation.text(member(), TextOptions("two"))
    assert refused.value.until == started + 60
    assert user_message(refused.value).endswith(f"try again <t:{math.ceil(started + 60)}:R>.")
    assert stack.posts() == posts
    await stack.generation.text(member(200), TextOptions("someone else"))
    await stack.generation.text(member(manage_guild=True), TextOptions("an admin is exempt"))
    await stack.generation.video(member(), VideoOptions("another command", CHEAP))
    stack.clock.advance(started + 60 - stack.clock.time())
    await stack.generation.text(member(), TextOptions("three"))


async def test_a_request_refused_for_free_leaves_no_cooldown(stack: Stack) -> None:
    # The use is a charged request, not a reserved one.
    await stack.services.guild_config.set_cooldown(GUILD, Kind.TEXT, 600, actor=ADMIN_ACTOR)
    with pytest.raises(GenAPIError):  # 500 GENERATION_FAILED: nothing charged
        await stack.generation.text(member(), TextOptions("[fail] one"))
    with pytest.raises(GenAPIError):  # 400 INVALID_PARAMS (above the service's 8,192)
        await stack.generation.text(member(), TextOptions("one", max_tokens=9000))
    await stack.generation.text(member(), TextOptions("two"))  # no cooldown started
    with pytest.raises(CooldownActive):
        await stack.generation.text(member(), TextOptions("three"))  # the charged one did


async def test_text_without_a_model_uses_the_first_the_member_may_use(stack: Stack) -> None:
    # The service's default model is not the server's choice.
    await stack.services.guild_config.set_models(GUILD, allowed=("anthropic/",), actor=ADMIN_ACTOR)
    for prompt in ("one", "two"):
        result = await stack.generation.text(member(), TextOptions(prompt))
        assert result.model == "anthropic/claude-3-haiku"
    await stack.services.guild_config.set_models(GUILD, allowed=("nobody/",), actor=ADMIN_ACTOR)
    posts = stack.posts()
    with pytest.raises(ValidationFailed, match="No text model is available to your roles"):
        await stack.generation.text(member(), TextOptions("three"))
    assert stack.posts() == posts


async def test_usage_shows_spend_by_tier(stack: Stack) -> None:
    await stack.services.guild_config.set_tier(
        GUILD, PATRON, "Patron", daily_per_user=UNLIMITED, actor=ADMIN_ACTOR
    )
    await stack.generation.video(member(100, PATRON), VideoOptions("a fox", CHEAP, duration=10))
    await stack.generation.video(member(200), VideoOptions("a fox", CHEAP, duration=5))
    report = await stack.billing.report(GUILD)
    assert report.by_tier == [("Patron", Decimal(40)), ("no tier", Decimal(20))]
    assert (await stack.billing.report(GUILD, 100)).by_tier == []


async def test_every_config_change_is_audited_and_kept(stack: Stack) -> None:
    config = stack.services.guild_config
    async with config.changing(GUILD, ADMIN_ACTOR) as change:  # one change, in two calls
        await config.set_tier(
            GUILD, PATRON, "Patron", daily_per_user=50, models=("aurora-lite/",), actor=ADMIN_ACTOR
        )
        await config.set_budgets(GUILD, monthly=2500, actor=ADMIN_ACTOR)
    entries = change.entries
    changes = {e.what: (e.old, e.new) for e in entries}
    assert changes["monthly budget"] == ("unlimited", "$25.00")
    assert changes[f"tier Patron (<@&{PATRON}>): daily per member"] == ("—", "$0.50")
    assert changes[f"tier Patron (<@&{PATRON}>): models"] == ("—", "`aurora-lite/`")
    kept = await config.audit(GUILD)
    assert {e.what for e in kept} == set(changes)
    assert all(e.user_id == 9 and e.via == "discord" for e in kept)
    await config.set_budgets(GUILD, monthly=2500, actor=Actor(7, "web"))  # the same value
    assert await config.audit(GUILD) == kept  # nothing changed: nothing audited
    await config.remove_tier(GUILD, PATRON, actor=Actor(7, "web"))  # each call audits itself
    removed = await config.audit(GUILD, 20)
    assert {(e.user_id, e.via, e.new) for e in removed[: len(removed) - len(kept)]} == {
        (7, "web", "—")
    }


# -- storage (every engine) --------------------------------------------------------------------


async def test_the_policy_repository_round_trips(stack: Stack) -> None:
    policy = stack.db.policy
    await policy.set_tier(Tier(GUILD, STAFF, "Staff", UNLIMITED, None, 2, ("*",)))
    await policy.set_tier(Tier(GUILD, PATRON, "Patron", 50, 1000, None, ("a/", "b-")))
    await policy.set_tier(Tier(GUILD, PATRON, "Patrons", 60, None, None, None))
    assert await policy.tiers(GUILD) == [
        Tier(GUILD, PATRON, "Patrons", 60, None, None, None),
        Tier(GUILD, STAFF, "Staff", UNLIMITED, None, 2, ("*",)),
    ]
    assert await policy.tiers(2) == []
    assert await policy.delete_tier(GUILD, STAFF) and not await policy.delete_tier(GUILD, STAFF)

    await policy.set_model_lists(GUILD, ModelLists(("b/", "a/"), ("z/",)))
    assert await policy.model_lists(GUILD) == ModelLists(("a/", "b/"), ("z/",))
    await policy.set_model_lists(GUILD, ModelLists((), ()))
    assert await policy.model_lists(GUILD) == ModelLists()

    assert await policy.add_blocked_term(GUILD, "b term")
    assert not await policy.add_blocked_term(GUILD, "b term")
    await policy.add_blocked_term(GUILD, "a term")
    assert await policy.blocked_terms(GUILD) == ["a term", "b term"]
    assert await policy.remove_blocked_term(GUILD, "a term")
    assert not await policy.remove_blocked_term(GUILD, "a term")

    await policy.set_cooldown(GUILD, Kind.VIDEO, 30)
    await policy.set_cooldown(GUILD, Kind.TEXT, 5)
    await policy.set_cooldown(GUILD, Kind.VIDEO, 60)
    assert await policy.cooldowns(GUILD) == {Kind.TEXT: 5, Kind.VIDEO: 60}
    await policy.set_cooldown(GUILD, Kind.TEXT, 0)
    assert await policy.cooldowns(GUILD) == {Kind.VIDEO: 60}
    assert await policy.last_use(GUILD, 100, Kind.VIDEO) is None
    await policy.record_use(GUILD, 100, Kind.VIDEO, 1000.5)
    await policy.record_use(GUILD, 100, Kind.VIDEO, 2000.5)
    assert await policy.last_use(GUILD, 100, Kind.VIDEO) == 2000.5

    for n in range(3):
        await policy.add_audit(AuditEntry(GUILD, 9, f"what {n}", "old", "new", 10.0 + n))
    assert [e.what for e in await policy.audit(GUILD, 2)] == ["what 2", "what 1"]


async def test_a_tier_cannot_hold_a_negative_allowance(stack: Stack) -> None:
    with pytest.raises(ConstraintError):
        await stack.db.policy.set_tier(Tier(GUILD, PATRON, "Patron", -5))


async def test_copy_db_moves_the_policy_to_postgresql(tmp_path: Path, pg_url: str) -> None:
    clock = ManualClock()
    source = await SqlDatabase.open_sqlite(tmp_path / "bot.db", clock=clock)
    tier = Tier(GUILD, PATRON, "Patron", 50, UNLIMITED, 2, ("aurora-lite/",))
    await source.policy.set_tier(tier)
    await source.policy.set_model_lists(GUILD, ModelLists(("a/",), ("a/b",)))
    await source.policy.add_blocked_term(GUILD, "forbidden fruit")
    await source.policy.set_cooldown(GUILD, Kind.TEXT, 30)
    await source.policy.record_use(GUILD, 100, Kind.TEXT, 1234.5)
    await source.policy.add_audit(AuditEntry(GUILD, 9, "monthly budget", "unlimited", "$25", 1.0))
    await source.close()

    report = await copy_sqlite_to_postgres(tmp_path / "bot.db", pg_url, clock=clock)
    assert report.rows["policy_tiers"] == 1 and report.rows["config_audit"] == 1
    target = await SqlDatabase.open_postgresql(pg_url, clock=clock)
    try:
        assert await target.policy.tiers(GUILD) == [tier]
        assert await target.policy.model_lists(GUILD) == ModelLists(("a/",), ("a/b",))
        assert await target.policy.blocked_terms(GUILD) == ["forbidden fruit"]
        assert await target.policy.cooldowns(GUILD) == {Kind.TEXT: 30}
        assert await target.policy.last_use(GUILD, 100, Kind.TEXT) == 1234.5
        await target.policy.add_audit(AuditEntry(GUILD, 9, "later", "a", "b", 2.0))
        assert [e.what for e in await target.policy.audit(GUILD)] == ["later", "monthly budget"]
    finally:
        await target.close()
