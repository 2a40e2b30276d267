"""What a result's safety score decides: shown, a spoiler, held for review, or withheld.

The scorer (:class:`bot.media.safety.SafetyScorer`) gives each image or video result a score
from 0.0 (safe) to 1.0 (unsafe) before anyone sees it; this service applies the server's
policy (``/config safety``, the dashboard's Safety page) and keeps what was decided, members'
reports and reviewers' decisions (``safety_*`` tables, revision 0012). The rules
(issue 37, docs/safety.md):

* below ``review-above``: shown;
* from ``review-above`` to below ``block-above``: held for the server's moderators (mode
  ``review``) or withheld (mode ``block``); at or above ``block-above``: withheld;
* a failed verdict (the scorer erred or timed out, or the file could not be fetched): held
  (fail closed);
* in an age-restricted channel (the channel's ``nsfw`` flag), results at or above
  ``review-above`` are shown as spoilers instead, unless the server chose otherwise;
* where no server policy applies (DMs, a member's own install elsewhere): scores at or above
  0.5 are spoilers (:data:`bot.domain.safety.NO_POLICY_SPOILER_ABOVE`);
* ``reports-to-hide`` members reporting a shown result withhold it pending review;
* Approve shows a held or withheld result (its card gets it as an ordinary completion);
  Reject keeps it withheld for good. Reports and decisions are audited (via ``discord`` or
  ``web``).

The charge of a held or withheld result stays in the ledger: the service made it.
No ``discord`` import: the Discord side and the dashboard call it alike.
"""

from __future__ import annotations

import logging
from collections.abc import Collection, Sequence
from dataclasses import dataclass, replace
from typing import Any, Literal

from bot.clock import Clock, SystemClock
from bot.domain import AuditEntry, SafetyMode, SafetyPolicy, SafetyRecord, Visibility
from bot.domain.safety import NO_POLICY_SPOILER_ABOVE
from bot.errors import ValidationFailed
from bot.i18n import N_
from bot.media.safety import Outcome, SafetyScorer, Verdict
from bot.services.personal import is_personal
from bot.storage import Database

log = logging.getLogger(__name__)

Via = Literal["discord", "web"]

NSFW_CHOICES = ("spoiler", "policy")
"""``nsfw-channels``: ``spoiler`` (results at or above review-above shown there as spoilers,
the default) or ``policy`` (the policy applies there as anywhere)."""

REPORT_REASONS = ("sexual", "violent", "hateful", "other")
"""The Report select's reasons, as stored."""

UNAVAILABLE = N_("Safety checking is unavailable on this bot: no model is configured.")
"""What ``/config safety`` and the dashboard say without ``SAFETY_MODEL``."""

NOT_PENDING = N_("That result is not waiting for a review (someone decided already).")
"""A decision on a result that is no longer held or withheld."""

REVIEW_QUEUE_LIMIT = 50
"""Results the review queue lists at most."""


@dataclass(frozen=True, slots=True)
class Screening:
    """What :meth:`SafetyService.screen` decided for one result.

    Attributes:
        visibility: what members see.
        score: the highest score of its files (None: not scored, or the scorer failed).
        review_channel_id: where its review card goes (held or withheld, newly decided);
            None: nowhere (no channel set, or nothing to review).
        new: the decision was made now (False: read from an earlier delivery's record).
    """

    visibility: Visibility
    score: float | None = None
    review_channel_id: int | None = None
    new: bool = False

    @property
    def spoiler(self) -> bool:
        """Whether the files go as spoilers (``SPOILER_`` names)."""
        return self.visibility is Visibility.SPOILER

    @property
    def hidden(self) -> bool:
        """Whether members other than reviewers must not see the result."""
        return self.visibility.hidden


@dataclass(frozen=True, slots=True)
class Reported:
    """What a member's report did.

    Attributes:
        counted: False when the member had reported the result before (nothing changed).
        reports: members who reported it so far.
        hidden_now: this report withheld the result pending review.
        review_channel_id: where its review card goes, when hidden now.
    """

    counted: bool
    reports: int
    hidden_now: bool = False
    review_channel_id: int | None = None


def decide(
    verdict: Verdict, policy: SafetyPolicy | None, *, nsfw_channel: bool = False
) -> Visibility:
    """A result's visibility from its verdict and the server's policy (pure; module rules).

    Args:
        verdict: the scorer's verdict on the result (its files' highest score).
        policy: the server's; None where no server policy applies (DMs, user installs).
        nsfw_channel: the result's channel is age-restricted (its ``nsfw`` flag).
    """
    if verdict.outcome is Outcome.UNAVAILABLE:
        return Visibility.SHOWN
    if policy is None:
        if verdict.outcome is Outcome.FAILED:
            return Visibility.SPOILER  # no reviewer to hold it for: the careful form of shown
        assert verdict.score is not None
        return Visibility.SPOILER if verdict.score >= NO_POLICY_SPOILER_ABOVE else Visibility.SHOWN
    if policy.mode is SafetyMode.OFF:
        return Visibility.SHOWN
    if verdict.outcome is Outcome.FAILED:
        return Visibility.HELD  # fail closed
    assert verdict.score is not None
    if verdict.score < policy.review_above:
        return Visibility.SHOWN
    if nsfw_channel and policy.nsfw_spoiler:
        return Visibility.SPOILER
    if verdict.score >= policy.block_above or policy.mode is SafetyMode.BLOCK:
        return Visibility.WITHHELD
    return Visibility.HELD


def policy_of(row: Any) -> SafetyPolicy:
    """A server's :class:`SafetyPolicy` from its ``safety_settings`` row (None: defaults)."""
    default = SafetyPolicy()
    if row is None:
        return default

    def pick(name: str, fallback: Any) -> Any:
        value = row[name]
        return fallback if value is None else value

    return SafetyPolicy(
        mode=SafetyMode(pick("mode", default.mode.value)),
        review_above=float(pick("review_above", default.review_above)),
        block_above=float(pick("block_above", default.block_above)),
        review_channel_id=row["review_channel_id"],
        reports_to_hide=int(pick("reports_to_hide", default.reports_to_hide)),
        nsfw_spoiler=pick("nsfw_channels", "spoiler") == "spoiler",
    )


def audit_values(policy: SafetyPolicy) -> dict[str, str]:
    """The policy as the audit log shows it (English, for people)."""
    channel = policy.review_channel_id
    return {
        "safety mode": policy.mode.value,
        "safety review above": f"{policy.review_above:g}",
        "safety block above": f"{policy.block_above:g}",
        "safety review channel": f"<#{channel}>" if channel else "admin channel",
        "safety reports to hide": str(policy.reports_to_hide),
        "safety in age-restricted channels": "spoiler" if policy.nsfw_spoiler else "policy",
    }


def spoiler_name(name: str) -> str:
    """``name`` as Discord blurs it until clicked (``SPOILER_`` prefix; kept if present)."""
    return name if name.startswith("SPOILER_") else f"SPOILER_{name}"


class SafetyService:
    """Applies servers' safety policies to results; keeps holds, reports and decisions.

    Args:
        db: the database.
        scorer: the scorer (``Services.safety``); unavailable: every result is shown.
        clock: stamps records and the audit log (UTC epoch seconds).
    """

    def __init__(self, db: Database, scorer: SafetyScorer, clock: Clock | None = None) -> None:
        self._db = db
        self._scorer = scorer
        self._clock = clock or SystemClock()
        self._store = db.safety

    @property
    def available(self) -> bool:
        """Whether results are checked at all on this bot (``SAFETY_MODEL`` is set)."""
        return self._scorer.available

    # -- the policy ------------------------------------------------------------------------

    async def policy(self, guild_id: int) -> SafetyPolicy:
        """The server's policy, defaults applied."""
        return policy_of(await self._store.settings(guild_id))

    async def update(
        self,
        guild_id: int,
        *,
        mode: str | None = None,
        review_above: float | None = None,
        block_above: float | None = None,
        review_channel_id: int | None = None,
        reports_to_hide: int | None = None,
        nsfw_channels: str | None = None,
    ) -> SafetyPolicy:
        """Change the server's policy; options left None keep their value.

        Audit it by :meth:`GuildConfigService.snapshot` around the call (its values include
        :func:`audit_values`).

        Returns:
            The policy now in force.

        Raises:
            ValidationFailed: checking is unavailable on this bot; a mode or choice unknown; a
                threshold outside 0-1; ``review_above`` above ``block_above`` (as they would
                stand); ``reports_to_hide`` below 1. Nothing is stored then.
        """
        if not self.available:
            raise ValidationFailed(UNAVAILABLE)
        current = await self.policy(guild_id)
        values: dict[str, Any] = {}
        if mode is not None:
            if mode not in {m.value for m in SafetyMode}:
                raise ValidationFailed(N_("The mode is off, review or block."))
            values["mode"] = mode
        for name, value in (("review_above", review_above), ("block_above", block_above)):
            if value is None:
                continue
            if not 0.0 <= value <= 1.0:
                raise ValidationFailed(N_("A score threshold is a number from 0 to 1."))
            values[name] = float(value)
        low = values.get("review_above", current.review_above)
        high = values.get("block_above", current.block_above)
        if low > high:
            raise ValidationFailed(
                N_("review-above ({low}) must not be above block-above ({high})."),
                low=f"{low:g}",
                high=f"{high:g}",
            )
        if review_channel_id is not None:
            values["review_channel_id"] = review_channel_id or None  # 0: the admin channel
        if reports_to_hide is not None:
            if not 1 <= reports_to_hide <= 100:
                raise ValidationFailed(N_("reports-to-hide is a number from 1 to 100."))
            values["reports_to_hide"] = reports_to_hide
        if nsfw_channels is not None:
            if nsfw_channels not in NSFW_CHOICES:
                raise ValidationFailed(N_("Age-restricted channels: spoiler or policy."))
            values["nsfw_channels"] = nsfw_channels
        await self._store.set(guild_id, values)
        return await self.policy(guild_id)

    async def review_channel(self, guild_id: int) -> int | None:
        """Where the server's review cards go: its review channel, else its admin channel."""
        policy = await self.policy(guild_id)
        if policy.review_channel_id is not None:
            return policy.review_channel_id
        return (await self._db.guilds.settings(guild_id)).admin_channel_id

    # -- screening -------------------------------------------------------------------------

    async def screen(
        self,
        ref: str,
        *,
        guild_id: int,
        channel_id: int,
        user_id: int,
        kind: str,
        prompt: str,
        files: Sequence[bytes],
        nsfw_channel: bool = False,
    ) -> Screening:
        """Decide (or read the earlier decision on) one result before it is shown.

        A result decided before (a delivery tried again, a re-show, an Approve's delivery)
        keeps that decision and is not scored again. Otherwise its files are scored in the
        scorer's pool (never on the event loop) and the highest score decides
        (:func:`decide`); no file to score (its download failed, too large) is a failed
        verdict. Anything but "shown" is recorded before this returns.

        Args:
            ref: ``j<job id>`` or ``r<result request id>``.
            guild_id: the server, or a member's wallet id (no server policy applies).
            channel_id: where it was asked.
            user_id: who asked.
            kind: ``image`` or ``video`` (others are shown unscored).
            prompt: the prompt's summary, for reviewers.
            files: the result's files' bytes.
            nsfw_channel: the channel is age-restricted.
        """
        earlier = await self._store.result(ref)
        if earlier is not None:
            shown = earlier.state in (Visibility.APPROVED, Visibility.SHOWN)
            return Screening(Visibility.SHOWN if shown else earlier.state, earlier.score)
        if not self.available or kind not in ("image", "video"):
            return Screening(Visibility.SHOWN)
        policy = None if is_personal(guild_id) else await self.policy(guild_id)
        if policy is not None and policy.mode is SafetyMode.OFF:
            return Screening(Visibility.SHOWN)
        verdict = await self._verdict(files, "video" if kind == "video" else "image")
        visibility = decide(verdict, policy, nsfw_channel=nsfw_channel)
        if visibility is Visibility.SHOWN:
            return Screening(visibility, verdict.score)
        record = SafetyRecord(
            ref=ref,
            guild_id=guild_id,
            channel_id=channel_id,
            user_id=user_id,
            kind=kind,
            prompt=prompt,
            score=verdict.score,
            state=visibility,
            reason="failed" if verdict.outcome is Outcome.FAILED else "score",
            at=self._clock.time(),
        )
        new = await self._store.add(record)
        if not new:  # another process decided first: its decision stands
            return await self.screen(
                ref,
                guild_id=guild_id,
                channel_id=channel_id,
                user_id=user_id,
                kind=kind,
                prompt=prompt,
                files=files,
                nsfw_channel=nsfw_channel,
            )
        review = await self.review_channel(guild_id) if visibility.pending else None
        return Screening(visibility, verdict.score, review, new=True)

    async def _verdict(self, files: Sequence[bytes], kind: Literal["image", "video"]) -> Verdict:
        """The highest verdict over ``files``: any failure (or no file) fails it all."""
        if not files:
            return Verdict(Outcome.FAILED)
        best: float = 0.0
        for data in files:
            verdict = await self._scorer.score(data, kind)
            if verdict.outcome is not Outcome.SCORED or verdict.score is None:
                return verdict
            best = max(best, verdict.score)
        return Verdict(Outcome.SCORED, best)

    # -- what members see ------------------------------------------------------------------

    async def record(self, ref: str) -> SafetyRecord | None:
        """The result's record (None: it was simply shown and never reported)."""
        return await self._store.result(ref)

    async def hidden(self, refs: Collection[str]) -> set[str]:
        """Those of ``refs`` members may not see (held, withheld or rejected).

        The gallery, the showcase, ``/jobs show``, Share, Continue, Join and Remix filter by it.
        """
        return await self._store.hidden(refs)

    async def is_hidden(self, ref: str) -> bool:
        """Whether members may not see the result ``ref``."""
        return bool(await self._store.hidden((ref,)))

    async def is_held(self, ref: str) -> bool:
        """Whether the result ``ref`` is held for the server's moderators (Approve may show it)."""
        record = await self._store.result(ref)
        return record is not None and record.state is Visibility.HELD

    async def check_visible(self, ref: str) -> None:
        """Refuse an action on a result members may not see.

        Raises:
            ValidationFailed: the result is held, withheld or rejected.
        """
        if await self.is_hidden(ref):
            raise ValidationFailed(
                N_("That result is withheld by the server's safety policy; it cannot be used.")
            )

    async def set_review_message(self, ref: str, channel_id: int, message_id: int) -> None:
        """Remember the result's card in the review channel (to edit it once decided)."""
        await self._store.set_review(ref, channel_id, message_id)

    async def set_card(self, ref: str, channel_id: int, message_id: int) -> None:
        """Remember the member's card of the result (a synchronous result's response)."""
        await self._store.set_card(ref, channel_id, message_id)

    async def queue(self, guild_id: int, limit: int = REVIEW_QUEUE_LIMIT) -> list[SafetyRecord]:
        """The server's held, withheld and reported results, newest first."""
        return await self._store.queue(guild_id, limit)

    # -- reports -----------------------------------------------------------------------------

    async def report(
        self,
        ref: str,
        *,
        reporter_id: int,
        reason: str,
        guild_id: int,
        channel_id: int,
        user_id: int,
        kind: str,
        prompt: str,
        card: tuple[int, int] | None = None,
    ) -> Reported:
        """Record a member's report of a shown result; enough reports withhold it.

        One report per member and result (a second one changes nothing). Once the server's
        ``reports-to-hide`` members reported it, a shown (or spoiler) result is withheld
        pending review; an approved one stays shown (a moderator decided). Audited
        (``via`` discord).

        Args:
            ref: the result.
            reporter_id: the member reporting.
            reason: one of :data:`REPORT_REASONS`.
            guild_id: the result's server.
            channel_id: where it was asked.
            user_id: who asked for it.
            kind: ``image`` or ``video``.
            prompt: its prompt's summary, for reviewers.
            card: the result's card ``(channel id, message id)``, to remove its files.

        Raises:
            ValidationFailed: an unknown reason; the result is already withheld.
        """
        if reason not in REPORT_REASONS:
            raise ValidationFailed(N_("Choose a reason from the list."))
        now = self._clock.time()
        record = SafetyRecord(
            ref=ref,
            guild_id=guild_id,
            channel_id=channel_id,
            user_id=user_id,
            kind=kind,
            prompt=prompt,
            score=None,
            state=Visibility.SHOWN,
            reason="reports",
            at=now,
            card=card,
        )
        await self._store.add(record)
        if card is not None:
            await self._store.set_card(ref, *card)
        counted = await self._store.add_report(ref, reporter_id, guild_id, reason, now)
        reports = await self._store.report_count(ref)
        if not counted:
            return Reported(False, reports)
        await self._audit(guild_id, reporter_id, f"safety report {ref}", "—", reason, "discord")
        policy = None if is_personal(guild_id) else await self.policy(guild_id)
        if policy is None or reports < policy.reports_to_hide:
            return Reported(True, reports)
        hidden = await self._store.change_state(
            ref,
            Visibility.WITHHELD,
            only_from=(Visibility.SHOWN, Visibility.SPOILER),
            reason="reports",
        )
        if not hidden:
            return Reported(True, reports)
        return Reported(True, reports, True, await self.review_channel(guild_id))

    # -- decisions ---------------------------------------------------------------------------

    async def approve(self, ref: str, *, guild_id: int, user_id: int, via: Via) -> SafetyRecord:
        """Show a held or withheld result; an asynchronous one is delivered again to its card.

        Its job falls due for delivery at once (``JobStore.redeliver``): the poller shows it
        as an ordinary completion (files, buttons, the requester's ping). Audited.

        Returns:
            The record as decided.

        Raises:
            ValidationFailed: no such result of this server, or it is not awaiting review.
        """
        record = await self._decide(ref, guild_id, user_id, via, Visibility.APPROVED)
        if ref.startswith("j"):
            await self._db.jobs.redeliver(int(ref[1:]), self._clock.time())
        return record

    async def reject(self, ref: str, *, guild_id: int, user_id: int, via: Via) -> SafetyRecord:
        """Keep a held or withheld result withheld for good (the charge stays). Audited.

        Raises:
            ValidationFailed: no such result of this server, or it is not awaiting review.
        """
        return await self._decide(ref, guild_id, user_id, via, Visibility.REJECTED)

    async def _decide(
        self, ref: str, guild_id: int, user_id: int, via: Via, state: Visibility
    ) -> SafetyRecord:
        record = await self._store.result(ref)
        if record is None or record.guild_id != guild_id:
            raise ValidationFailed(N_("That result is not known here."))
        now = self._clock.time()
        moved = await self._store.change_state(
            ref,
            state,
            only_from=[v for v in Visibility if v.pending],
            decided_by=user_id,
            decided_at=now,
        )
        if not moved:
            raise ValidationFailed(NOT_PENDING)
        decision = "approve" if state is Visibility.APPROVED else "reject"
        await self._store.add_decision(ref, guild_id, user_id, decision, via, now)
        await self._audit(
            guild_id, user_id, f"safety review {ref}", record.state.value, state.value, via
        )
        return replace(record, state=state, decided_by=user_id, decided_at=now)

    async def _audit(
        self, guild_id: int, user_id: int, what: str, old: str, new: str, via: str
    ) -> None:
        entry = AuditEntry(guild_id, user_id, what, old, new, self._clock.time(), via)
        await self._db.policy.add_audit(entry)
