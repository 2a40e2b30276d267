"""Safety checking of results: a server's policy, what a result's score decided, reports.

Scores are 0.0 (safe) to 1.0 (unsafe), from the operator's classifier (``bot.media.safety``).
Times are UTC epoch seconds. docs/safety.md.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum


class SafetyMode(StrEnum):
    """What a server does with results scored at or above its ``review-above``."""

    OFF = "off"
    """Nothing is scored: every result is shown."""
    REVIEW = "review"
    """Between the thresholds: held for the server's moderators (Approve / Reject)."""
    BLOCK = "block"
    """Between the thresholds: withheld (shown only to reviewers)."""


class Visibility(StrEnum):
    """What members see of one result (the state of its ``safety_results`` row).

    ``HELD`` and ``WITHHELD`` wait for a reviewer; ``APPROVED`` is shown, ``REJECTED`` stays
    withheld for good.
    """

    SHOWN = "shown"
    SPOILER = "spoiler"
    HELD = "held"
    WITHHELD = "withheld"
    APPROVED = "approved"
    REJECTED = "rejected"

    @property
    def hidden(self) -> bool:
        """Whether members (other than reviewers) do not see the result."""
        return self in (Visibility.HELD, Visibility.WITHHELD, Visibility.REJECTED)

    @property
    def pending(self) -> bool:
        """Whether a reviewer's Approve or Reject is awaited."""
        return self in (Visibility.HELD, Visibility.WITHHELD)


DEFAULT_REVIEW_ABOVE = 0.5
DEFAULT_BLOCK_ABOVE = 0.85
DEFAULT_REPORTS_TO_HIDE = 3
NO_POLICY_SPOILER_ABOVE = 0.5
"""Where no server policy applies (DMs, a member's own install): scores at or above this are
sent as spoilers (issue's rule; docs/safety.md)."""


@dataclass(frozen=True, slots=True)
class SafetyPolicy:
    """A server's ``/config safety`` (defaults applied).

    Attributes:
        mode: off, review or block; default review (an operator who set ``SAFETY_MODEL``
            wants results checked).
        review_above: scores at or above this are held (review) or withheld (block), 0-1.
        block_above: scores at or above this are withheld whatever the mode, 0-1.
        review_channel_id: where review cards go; None = the admin channel.
        reports_to_hide: members' reports that withhold a shown result pending review.
        nsfw_spoiler: in an age-restricted channel results at or above ``review_above`` are
            shown as spoilers (True, the default) rather than held or withheld.
    """

    mode: SafetyMode = SafetyMode.REVIEW
    review_above: float = DEFAULT_REVIEW_ABOVE
    block_above: float = DEFAULT_BLOCK_ABOVE
    review_channel_id: int | None = None
    reports_to_hide: int = DEFAULT_REPORTS_TO_HIDE
    nsfw_spoiler: bool = True


@dataclass(frozen=True, slots=True)
class SafetyRecord:
    """A result whose visibility was decided by more than "shown", or that was reported.

    Attributes:
        ref: ``j<job id>`` or ``r<result request id>``.
        guild_id: the server (or a member's wallet id).
        channel_id: where it was asked.
        user_id: who asked.
        kind: ``image`` or ``video``.
        prompt: the prompt's summary, for reviewers.
        score: the highest score of its files; None when the scorer failed.
        state: what members see.
        reason: ``score``, ``failed`` (the scorer), or ``reports`` (members reported it).
        at: when it was decided.
        card: ``(channel id, message id)`` of the member's card when known (a synchronous
            result's response, a reported card).
        review: ``(channel id, message id)`` of its card in the review channel, once posted.
        decided_by: the reviewer who approved or rejected it.
        decided_at: when.
        reports: how many members reported it.
    """

    ref: str
    guild_id: int
    channel_id: int
    user_id: int
    kind: str
    prompt: str
    score: float | None
    state: Visibility
    reason: str
    at: float
    card: tuple[int, int] | None = None
    review: tuple[int, int] | None = None
    decided_by: int | None = None
    decided_at: float | None = None
    reports: int = 0
