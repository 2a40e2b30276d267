"""One card for the takes of one request: a media gallery that fills in as they arrive.

Each take is its own job (and ledger row); their card is one message, edited as each take
progresses or finishes: the finished takes in a media gallery, a line per take (done, running,
or failed with the service's reason), and a select choosing which take the action buttons
(Again, Continue, Remix...) act on. A take the server's safety policy holds or withholds shows
neither its file nor its link there, only why (docs/safety.md).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence
from typing import Final, Protocol

import discord

from bot.discord.render import limits
from bot.discord.render.buttons import result_buttons
from bot.discord.render.jobs import (
    DONE_COLOUR,
    FAILED_COLOUR,
    NO_REASON,
    PENDING_COLOUR,
    JobView,
    base_card,
    clip_number,
)
from bot.discord.render.parts import MessageParts, Select
from bot.discord.render.results import is_web_url
from bot.discord.render.text import one_line, truncate
from bot.domain import DRAFT, Visibility
from bot.i18n import _, n_, number, using

TAKE_SELECT: Final = r"gb:take:(?P<ref>j[0-9]{1,20})"
"""The custom id of a takes card's select: ``gb:take:j<the first take's job id>``."""

_REASON: Final = 200
"""Characters of a failed take's reason on its line."""


class TakeView(JobView, Protocol):
    """What a take's rendering needs besides :class:`JobView`: its job id."""

    @property
    def id(self) -> int:
        """The job's id."""


def chosen_take(
    takes: Sequence[TakeView], hidden: Mapping[int, Visibility] | None = None
) -> TakeView:
    """The take the buttons act on by default: the first finished one members may see.

    A take with a result and none of ``hidden``'s job ids; else the first take.
    """
    for take in takes:
        if take.id in (hidden or {}):
            continue
        if take.status == "completed" and any(is_web_url(url) for url in take.outputs):
            return take
    return takes[0]


def takes_card(
    takes: Sequence[TakeView],
    *,
    sandbox: bool,
    chosen: int | None = None,
    attached: Mapping[int, str] | None = None,
    hidden: Mapping[int, Visibility] | None = None,
    locale: str | None = None,
) -> MessageParts:
    """The card of ``takes`` (two or more jobs of one request) as they stand.

    Args:
        takes: the takes' jobs, in order.
        sandbox: whether they run on the sandbox service.
        chosen: the job id the action buttons act on; None: :func:`chosen_take`.
        attached: job id -> the name of its result attached to the message: the gallery
            shows ``attachment://<name>`` (the file outlives the service's link, which stays
            in the take's line).
        hidden: job id -> the safety decision of a take members may not see (held, withheld
            or rejected): its line says why, without its link, and the gallery leaves it out.
        locale: the server's locale (a public card); None: the current one.

    Returns:
        The message (a Components V2 card, with its old form); it pings nobody.
    """
    with using(locale):
        return _takes_card(
            takes, sandbox=sandbox, chosen=chosen, attached=attached, hidden=hidden or {}
        )


def _takes_card(
    takes: Sequence[TakeView],
    *,
    sandbox: bool,
    chosen: int | None,
    attached: Mapping[int, str] | None,
    hidden: Mapping[int, Visibility],
) -> MessageParts:
    pick = next((t for t in takes if t.id == chosen), None) or chosen_take(takes, hidden)
    done = [t for t in takes if t.status == "completed"]
    failed = [t for t in takes if t.status not in ("completed", "pending")]
    pending = len(takes) - len(done) - len(failed)
    colour = PENDING_COLOUR if pending else (DONE_COLOUR if done else FAILED_COLOUR)
    progress = [_("{count} done", count=number(len(done)))]
    if failed:
        progress.append(_("{count} failed", count=number(len(failed))))
    if pending:
        progress.append(_("{count} running", count=number(pending)))
    state = n_(
        "{count} take · {progress}",
        "{count} takes · {progress}",
        len(takes),
        progress=", ".join(progress),
    )
    base = base_card(takes[0], state, colour, "", sandbox=sandbox)
    video = takes[0].kind == "video"
    media, lines = _take_lines(takes, attached, hidden, video=video)
    notes = (truncate("\n".join(lines), limits.FIELD_VALUE * 2), *base.notes)
    card = dataclasses.replace(base, media=tuple(media[: limits.FILES_PER_MESSAGE]), notes=notes)
    actions: tuple[tuple[str, str], ...] = ()
    select: Select | None = None
    if pending < len(takes):
        price = pick.cost_cents if pick.kind == "video" else None
        actions = result_buttons(
            pick.kind,
            f"j{pick.id}",
            completed=pick.status == "completed",
            price_cents=price,
            joinable=clip_number(pick) >= 2,
            draft=pick.details.get("stage") == DRAFT,
        )
        select = Select(
            custom_id=f"gb:take:j{takes[0].id}",
            options=tuple(
                (_("Buttons act on take {number}", number=number(n)), f"j{t.id}")
                for n, t in enumerate(takes, 1)
            ),
            chosen=f"j{pick.id}",
        )
    embed = discord.Embed(
        title=_("Video · {state}", state=state) if video else _("Image · {state}", state=state),
        description=truncate(takes[0].prompt_summary, limits.EMBED_DESCRIPTION) or None,
        colour=colour,
    )
    embed.add_field(
        name=_("Takes"), value=truncate("\n".join(lines), limits.FIELD_VALUE), inline=False
    )
    return MessageParts(embeds=(embed,), card=card, action_buttons=actions, select=select)


def _take_lines(
    takes: Sequence[TakeView],
    attached: Mapping[int, str] | None,
    hidden: Mapping[int, Visibility],
    *,
    video: bool,
) -> tuple[list[tuple[str, str]], list[str]]:
    """Each take's line on the card, and the media shown: ``(url, description)``, in order.

    ``attached``: job id -> the file name a take's result is attached under (shown from the
    message's attachment rather than its URL); ``hidden``: job id -> the safety decision of
    a take members may not see (its line says so, and shows nothing of it).
    """
    media: list[tuple[str, str]] = []
    lines: list[str] = []
    for index, take in enumerate(takes, start=1):
        at = number(index)
        urls = [url for url in take.outputs if is_web_url(url)]
        withheld = hidden.get(take.id)
        if take.status == "completed" and withheld is Visibility.HELD:
            lines.append(_("Take {number} · waiting for the server's moderators", number=at))
        elif take.status == "completed" and withheld is not None:
            lines.append(_("Take {number} · withheld by the server's safety policy", number=at))
        elif take.status == "completed" and urls:
            name = (attached or {}).get(take.id)
            shown = urls[0] if name is None else f"attachment://{name}"
            if video:
                media.append((shown, _("video take {number}", number=at)))
                lines.append(_("Take {number} · done · [video]({url})", number=at, url=urls[0]))
            else:
                media.append((shown, _("image take {number}", number=at)))
                lines.append(_("Take {number} · done · [image]({url})", number=at, url=urls[0]))
        elif take.status == "completed":
            if video:
                lines.append(
                    _("Take {number} · done, but the service returned no video", number=at)
                )
            else:
                lines.append(
                    _("Take {number} · done, but the service returned no image", number=at)
                )
        elif take.status == "pending":
            lines.append(_("Take {number} · running", number=at))
        else:
            reason = truncate(one_line(take.error or "") or _(NO_REASON), _REASON)
            reason = discord.utils.escape_mentions(reason)
            lines.append(_("Take {number} · failed: {reason}", number=at, reason=reason))
    return media, lines


def takes_ready(takes: Sequence[TakeView], *, locale: str | None = None) -> str:
    """The reply that pings the requester once every take has finished.

    Args:
        takes: the takes' jobs, in order.
        locale: the server's locale (a public reply); None: the current one.
    """
    done = sum(1 for t in takes if t.status == "completed")
    values = {
        "user": takes[0].user_id,
        "count": number(len(takes)),
        "done": number(done),
        "failed": number(len(takes) - done),
    }
    with using(locale):
        if takes[0].kind == "video":
            if done < len(takes):
                return _(
                    "<@{user}> your {count} video takes are ready ({done} done, {failed} failed).",
                    **values,
                )
            return _("<@{user}> your {count} video takes are ready.", **values)
        if done < len(takes):
            return _(
                "<@{user}> your {count} image takes are ready ({done} done, {failed} failed).",
                **values,
            )
        return _("<@{user}> your {count} image takes are ready.", **values)
