"""``/jobs``: a member's (or a server's) recent jobs as pages of embeds.

One inline-free field per job, newest first: what was asked, where it stands (pending with
the time elapsed and an estimate, finished with links to its outputs and to its message,
failed with the reason) and what it cost. A status this module does not know (a later
version may add one, e.g. "expired") is shown by name, with whatever outputs, error and
message the job has, so no job is ever hidden.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping, Sequence
from typing import Final, Protocol

import discord

from bot.discord.render import limits
from bot.discord.render.jobs import NO_REASON, JobView
from bot.discord.render.results import is_web_url
from bot.discord.render.text import format_duration, one_line, truncate
from bot.i18n import _, money, number
from bot.services.personal import is_personal

LIST_COLOUR = discord.Colour.blurple()
JOBS_PER_PAGE: Final = 10
"""Jobs (fields) per page: ten entries of up to five lines read without much scrolling."""
_PROMPT_CHARS: Final = 200
_REASON_CHARS: Final = 300
# What the prompt keeps at least when long links need the room of a field's 1024 characters.
_MIN_PROMPT_CHARS: Final = 60
# Room kept in each page's 6000 characters for the footer "Page i/n", set once n is known.
_FOOTER_ROOM: Final = 40
_ICONS: Final = {"pending": "⏳", "completed": "✅", "failed": "❌"}


class ListedJob(JobView, Protocol):
    """What the listing needs of a job beyond :class:`JobView`; a stored ``Job`` has it all."""

    @property
    def id(self) -> int:
        """The store's id of the job."""

    @property
    def guild_id(self) -> int:
        """The guild it was made in."""

    @property
    def channel_id(self) -> int:
        """The channel (or thread) its messages are in."""

    @property
    def message_id(self) -> int | None:
        """Its placeholder or result message; None if none was posted."""

    @property
    def unwatched_at(self) -> float | None:
        """When the poller stopped watching it (still processing past the job timeout)."""

    @property
    def delivery_route(self) -> str:
        """How its result was (or will be) shown: ``placeholder``, ``channel``, ``dm``, ``jobs``."""


def message_link(guild_id: int, channel_id: int, message_id: int) -> str:
    """Return a Discord jump link to a message (``https://discord.com/channels/g/c/m``)."""
    return f"https://discord.com/channels/{guild_id}/{channel_id}/{message_id}"


def job_list_pages(
    jobs: Sequence[ListedJob],
    *,
    now: float,
    estimates: Mapping[int, float | None],
    whose: str,
    show_requester: bool,
    message_links: Mapping[int, str | None] | None = None,
    withheld: Collection[int] = (),
) -> list[discord.Embed]:
    """Render recent jobs as embeds, one per page of at most :data:`JOBS_PER_PAGE`.

    Each job is one field: its name is the kind and model, its value the prompt (at most 200
    characters), the status line, links to its outputs and its message, the cost and, with
    ``show_requester``, who asked. Every page stays within Discord's embed limits (field
    value 1024, field name 256, 25 fields, 6000 characters) and is footed "Page i/n".

    Args:
        jobs: the jobs, newest first.
        now: the current time, UTC epoch seconds (for the time elapsed).
        estimates: job id -> estimated finish of pending jobs, UTC epoch seconds, or None
            when there is no estimate.
        whose: the description's subject, e.g. ``"your"``, ``"<@123>'s"``, ``"this server's"``.
        show_requester: name who asked each job (listings of the whole server).
        message_links: job id -> the link to its card where it is not its channel's message
            (a private result's card in the member's DM), None for no link (an
            ephemeral card, or a DM card listed to someone else); jobs absent link to
            ``guild_id/channel_id/message_id``.
        withheld: ids of finished jobs the server's safety policy holds, withholds or rejected
            (``SafetyService.hidden``): listed without links to their files, saying so.

    Returns:
        At least one embed; a single "no jobs" page when ``jobs`` is empty. They ping nobody
        (mentions inside embeds never ping).
    """
    if not jobs:
        return [discord.Embed(title=_("Jobs"), description=_empty(whose), colour=LIST_COLOUR)]
    pages: list[discord.Embed] = []
    page: discord.Embed | None = None
    for job in jobs:
        link = _message_link(job, message_links or {})
        name, value = _entry(
            job,
            now,
            estimates.get(job.id),
            link,
            show_requester=show_requester,
            withheld=job.id in withheld,
        )
        full = page is not None and (
            len(page.fields) >= min(JOBS_PER_PAGE, limits.EMBED_FIELDS)
            or len(page) + len(name) + len(value) > limits.EMBED_TOTAL - _FOOTER_ROOM
        )
        if page is None or full:
            page = discord.Embed(title=_("Jobs"), colour=LIST_COLOUR)
            if not pages:
                page.description = _most_recent(whose, len(jobs))
            pages.append(page)
        page.add_field(name=name, value=value, inline=False)
    for index, each in enumerate(pages, start=1):
        each.set_footer(text=_("Page {page}/{pages}", page=number(index), pages=number(len(pages))))
    return pages


def _empty(whose: str) -> str:
    """The page of an empty history; ``whose`` as :func:`job_list_pages` takes it."""
    if whose == "your":
        return _("No jobs in your history yet: videos and images that take a while appear here.")
    if whose == "this server's":
        return _(
            "No jobs in this server's history yet: videos and images that take a while appear here."
        )
    member = whose.removesuffix("'s")
    return _(
        "No jobs in {member}'s history yet: videos and images that take a while appear here.",
        member=member,
    )


def _most_recent(whose: str, count: int) -> str:
    """The first page's description; ``whose`` as :func:`job_list_pages` takes it."""
    shown = number(count)
    if whose == "your":
        return _("{count} most recent of your jobs, newest first.", count=shown)
    if whose == "this server's":
        return _("{count} most recent of this server's jobs, newest first.", count=shown)
    member = whose.removesuffix("'s")
    return _("{count} most recent of {member}'s jobs, newest first.", count=shown, member=member)


def _entry(
    job: ListedJob,
    now: float,
    estimate: float | None,
    message: str | None,
    *,
    show_requester: bool,
    withheld: bool = False,
) -> tuple[str, str]:
    status = str(job.status)
    noun = _("Video") if job.kind == "video" else _("Image")
    icon = _ICONS.get(status, "•")
    name = truncate(f"{icon} {noun} #{job.id} · {job.model}", limits.FIELD_NAME)
    state = _status_line(job, status, now, estimate)
    if withheld:
        state += " · " + _("not shown: held or withheld by the server's safety policy")
    tail = _("Cost {amount}", amount=money(job.cost_cents))
    if show_requester:
        member = f"<@{job.user_id}>"
        tail += " · " + _("by {member}", member=member)
    # The links come before the prompt: they may be the only way to the result, and a
    # provider's signed URL can be long. Each is shown whole or not at all.
    room = limits.FIELD_VALUE - len(state) - len(tail) - _MIN_PROMPT_CHARS - 3
    shown: list[str] = []
    every = _links(job, message, files=not withheld)
    for link in every:
        if sum(len(item) + 3 for item in shown) + len(link) > room:
            break
        shown.append(link)
    links = " · ".join(shown)
    if len(shown) < len(every):
        more = _("more in its message") if message is not None else _("links too long to list")
        links += (" · " if links else "") + more
    prompt_room = limits.FIELD_VALUE - len(state) - len(tail) - len(links) - 4
    prompt = truncate(f"> {_plain(job.prompt_summary) or '—'}", min(_PROMPT_CHARS, prompt_room))
    lines = [prompt, state, links, tail] if links else [prompt, state, tail]
    return name, truncate("\n".join(lines), limits.FIELD_VALUE)


def _status_line(job: ListedJob, status: str, now: float, estimate: float | None) -> str:
    at = f"<t:{int(job.created_at)}:R>"
    started = _("started {when}", when=at)
    if status == "pending" and job.unwatched_at is not None:
        # /jobs has just polled it again (cogs/jobs.py): say so, rather than a stale estimate.
        elapsed = format_duration(max(0.0, now - job.created_at))
        return _(
            "Still processing at the service after {elapsed} · {started} · checked again now; "
            "the bot no longer checks it by itself, `/jobs` does",
            elapsed=elapsed,
            started=started,
        )
    if status == "pending":
        elapsed = format_duration(max(0.0, now - job.created_at))
        if estimate is not None:
            at_estimate = f"<t:{int(estimate)}:R>"
            ready = _("ready {when}", when=at_estimate)
        else:
            ready = _("no estimate yet")
        return _(
            "Processing · {started} · {elapsed} elapsed · {ready}",
            started=started,
            elapsed=elapsed,
            ready=ready,
        )
    when = f" <t:{int(job.finished_at)}:R>" if job.finished_at is not None else ""
    if status == "completed":
        line = _("Completed")
        if job.finished_at is not None:
            took = format_duration(job.finished_at - job.created_at)
            line = _("Completed in {duration}", duration=took)
        line += f" ·{when or ' ' + started}"
        if job.delivery_route == "jobs":
            show = f"`/jobs show:{job.id}`"
            line += " · " + _(
                "could not be posted in its channel or by DM: the links here are its result; "
                "{command} posts its card",
                command=show,
            )
        return line
    reason = truncate(_plain(one_line(job.error or "")), _REASON_CHARS)
    if status == "failed":
        return _("Failed") + f"{when}: {reason or _(NO_REASON)}"
    # A status added after this module: shown by name, with the service's note if any.
    label = status.replace("_", " ").capitalize() or "Unknown"
    return f"{label}{when or ' · ' + started}" + (f": {reason}" if reason else "")


def _message_link(job: ListedJob, overrides: Mapping[int, str | None]) -> str | None:
    """The link to ``job``'s card: from ``overrides`` when there, else its channel message's."""
    if job.id in overrides:
        return overrides[job.id]
    if job.message_id is None or is_personal(job.guild_id):
        # A personal job's card is an interaction response where no server id is stored
        # (the wallet id is not a guild): Show result and `/jobs show` reach it instead.
        return None
    return message_link(job.guild_id, job.channel_id, job.message_id)


def _links(job: ListedJob, message: str | None, *, files: bool = True) -> list[str]:
    noun = _("Video") if job.kind == "video" else _("Image")
    urls = [url for url in job.outputs if is_web_url(url)] if files else []
    links = [
        f"[{noun}{'' if len(urls) == 1 else f' {index}'}]({url})"
        for index, url in enumerate(urls, start=1)
    ]
    if message is not None:
        links.insert(0, f"[{_('Message')}]({message})")
    return links


def _plain(text: str) -> str:
    # Prompts and reasons are free text: no markdown links, headings or masked mentions.
    return discord.utils.escape_markdown(" ".join(text.split()))
