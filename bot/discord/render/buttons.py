"""The buttons under a finished result, and the texts of the flows they open.

Custom ids are ``gb:<action>:<ref>``: ``ref`` is ``j<job id>`` for an asynchronous result or
``r<result request id>`` for a synchronous one, so a click finds its request in the database
after any restart (``discord.ui.DynamicItem``; Discord: custom ids at most 100 characters).
"""

from __future__ import annotations

import re
from decimal import Decimal
from typing import Final, Literal

from bot.i18n import N_, _, money

Action = Literal[
    "again",
    "vary",
    "animate",
    "edit",
    "delete",
    "show",
    "continue",
    "remix",
    "join",
    "share",
    "enhance",
    "final",
]
ACTIONS: Final[tuple[Action, ...]] = (
    "share",
    "again",
    "vary",
    "animate",
    "edit",
    "delete",
    "show",
    "continue",
    "remix",
    "join",
    "enhance",
    "final",
)
_REF: Final = r"(?P<ref>[jr][0-9]{1,20})"
RESULT_CUSTOM_ID: Final = r"gb:(?P<action>again|vary|animate|edit|delete|show|enhance):" + _REF
"""The custom ids of the buttons ``cogs/results.py`` answers."""
SEQUENCE_CUSTOM_ID: Final = r"gb:(?P<action>continue|remix|join):" + _REF
"""The custom ids of a video card's Continue, Remix and Join (``cogs/sequences.py``)."""
CUSTOM_ID: Final = r"gb:(?P<action>" + "|".join(ACTIONS) + "):" + _REF
"""The template every action button's custom id matches."""
FINAL_CUSTOM_ID: Final = r"gb:(?P<action>final):" + _REF
"""The custom id of a draft's Final (:mod:`bot.discord.draft_flow`)."""
SHOWCASE_CUSTOM_ID: Final = r"gb:(?P<action>share|vote):(?P<ref>[js][0-9]{1,20})"
"""Share (``gb:share:j<job id>``, under a result) and Vote (``gb:vote:s<entry id>``, under a
showcase post), answered by ``cogs/showcase.py``."""

_LABELS: Final[dict[Action, str]] = {
    "again": N_("Again"),
    "vary": N_("Vary"),
    "animate": N_("Animate"),
    "edit": N_("Edit"),
    "delete": N_("Delete"),
    "show": N_("Show result"),
    "continue": N_("Continue"),
    "remix": N_("Remix"),
    "join": N_("Join"),
    "share": N_("Share"),
    "enhance": N_("Enhance"),
    "final": N_("Final"),
}
"""English labels, shown through the catalogue (:func:`bot.i18n._`) in the message's locale."""


def custom_id(action: Action, ref: str) -> str:
    """The custom id of ``action`` on the result ``ref`` (``j12`` or ``r7``).

    Raises:
        ValueError: ``ref`` is not a reference.
    """
    value = f"gb:{action}:{ref}"
    if re.fullmatch(CUSTOM_ID, value) is None:
        raise ValueError(f"not a result reference: {ref!r}")
    return value


def result_buttons(
    kind: str,
    ref: str,
    *,
    completed: bool = True,
    price_cents: Decimal | None = None,
    joinable: bool = False,
    shareable: bool = False,
    share_ref: str | None = None,
    draft: bool = False,
) -> tuple[tuple[str, str], ...]:
    """The ``(label, custom_id)`` action buttons under a finished result.

    Text: Again, Vary (a higher temperature), Delete. Image: Again, Animate (a video from
    it), Edit, Delete. Video: Again, Continue (a next clip from its last frame), Remix (the
    prompt changed), Join (a continued clip: its sequence up to it as one film), Delete, with
    the known price on Again and Remix (``Again · $0.50``); an image and a video also get ✨
    Enhance (the prompt rewritten, then generated: :mod:`bot.discord.enhance_flow`), before
    Delete, or in a row of its own when the first is full. A failed job gets Again and
    Delete. Images and videos get no Vary: their requests (docs/genapi.md §4.2, §4.4) take no
    seed or strength, so it would only be Again.

    Args:
        kind: ``"text"``, ``"image"`` or ``"video"``.
        ref: the result reference (``j<job id>`` or ``r<id>``).
        completed: False for a failed job.
        price_cents: the price of one more, when known (video), exact cents.
        joinable: a video continued from another (clip 2 or later of a sequence): adds Join.
        shareable: a finished image or video job (``j`` reference): adds Share (to the
            server's showcase) when the row has room (five buttons at most).
        share_ref: the job (``j<job id>``) Share offers when ``ref`` is not it: a
            synchronous image's buttons carry its request (``r<id>``), its Share the finished
            job recorded for it (docs/results.md); implies ``shareable``.
        draft: a draft's result (``draft:true``): **Final** comes first (the draft made
            again on the member's model: :mod:`bot.discord.draft_flow`).
    """
    if not completed:
        actions: tuple[Action, ...] = ("again", "delete")
    elif kind == "image":
        actions = ("again", "animate", "edit", "delete")
    elif kind == "video":
        joined: tuple[Action, ...] = ("join",) if joinable else ()
        actions = ("again", "continue", "remix", *joined, "delete")
    else:
        actions = ("again", "vary", "delete")
    shareable = shareable or share_ref is not None
    if shareable and completed and kind in ("image", "video") and len(actions) < 5:
        actions = (*actions[:-1], "share", actions[-1])  # Delete stays last
    if completed and kind in ("image", "video"):
        # Before Delete where the row has room, else a row of its own.
        full = len(actions) >= 5
        actions = (*actions, "enhance") if full else (*actions[:-1], "enhance", actions[-1])
    if draft and completed and kind in ("image", "video"):
        actions = ("final", *actions)
    price = "" if price_cents is None else f" · {money(price_cents)}"
    return tuple(
        (
            _(_LABELS[a]) + (price if a in ("again", "vary", "remix") else ""),
            custom_id(a, share_ref if a == "share" and share_ref is not None else ref),
        )
        for a in actions
    )


def vote_button(entry_id: int, votes: int) -> tuple[str, str]:
    """The ``(label, custom_id)`` Vote button of a showcase post, with its votes so far."""
    return (_("Vote · {votes}", votes=votes), f"gb:vote:s{entry_id}")


def show_buttons(job_id: int) -> tuple[tuple[str, str], ...]:
    """The Show result button of a personal job's card: ``gb:show:j<job id>``.

    Where the bot is not a member, the card is an interaction response the bot can edit only
    for 15 minutes; a click brings a fresh interaction token, answered by updating the card
    with the job's current state (its result once finished).
    """
    return ((_(_LABELS["show"]), custom_id("show", f"j{job_id}")),)


DM_ACTIONS: Final[frozenset[Action]] = frozenset({"delete"})
"""The actions a result delivered by direct message keeps once the bot left the server it came
from: Again, Vary, Animate and Edit in a DM act in that server (its key, budgets, checks), so
they could only be refused there, and Share has no server's showcase left to go to; Delete
acts on the DM message itself. (A private result's card in the DM of a member of a server the
bot is in keeps every button, Share included: its owner may show it.)"""


def dm_buttons(buttons: tuple[tuple[str, str], ...]) -> tuple[tuple[str, str], ...]:
    """The ``(label, custom_id)`` buttons of ``buttons`` that work in a DM without a server."""
    kept = []
    for label, cid in buttons:
        found = re.fullmatch(CUSTOM_ID, cid)
        if found is not None and found["action"] in DM_ACTIONS:
            kept.append((label, cid))
    return tuple(kept)


def confirm_text(price_cents: Decimal | None, threshold_cents: Decimal) -> str:
    """The question asked before spending above the threshold of ``/config confirm-above``.

    ``price_cents`` None: the catalogue's price is unusable (NaN, infinite, negative), so the
    cost is unknown and may be above the threshold: asked too.
    """
    threshold = money(threshold_cents)
    if price_cents is None:
        return _(
            "The service lists no usable price for this model, so its cost is unknown; this "
            "server asks before spending more than {threshold}. Generate it? (This question "
            "expires in 5 minutes.)",
            threshold=threshold,
        )
    return _(
        "This costs {price}, above this server's confirmation threshold of {threshold}. "
        "Generate it? (This question expires in 5 minutes.)",
        price=money(price_cents),
        threshold=threshold,
    )


def confirm_label(price_cents: Decimal | None) -> str:
    """The confirming button's label: ``Generate · $0.50`` (``Generate · price unknown``)."""
    price = _("price unknown") if price_cents is None else money(price_cents)
    return _("Generate · {price}", price=price)


SUGGESTED_CONFIRM_ABOVE_CENTS: Final = Decimal(100)
"""The threshold ``/config show`` suggests to servers on a paid key ($1.00): a short video
of the cheaper models runs at once, a long or premium one asks first."""


def confirm_above_text(threshold_cents: Decimal | None) -> str:
    """The ``/config show`` line of the confirmation threshold, with a suggestion when off."""
    if threshold_cents is not None:
        return _(
            "Requests above {amount} ask for confirmation first.",
            amount=money(threshold_cents),
        )
    command = f"`/config confirm-above {SUGGESTED_CONFIRM_ABOVE_CENTS / 100:.2f}`"
    return _("Off: requests run at once. On a paid key, consider {command}.", command=command)
