"""Plain-text helpers: truncation, fence-aware message splitting, durations.

No library fits :func:`split_message`: ``discord.ext.commands.Paginator`` splits on lines only
and does not know about code fences, so a long code block would lose its formatting halfway.
"""

from __future__ import annotations

import bisect
import re
from collections.abc import Iterator
from dataclasses import dataclass
from enum import IntEnum

from babel.units import format_unit

from bot.discord.render import limits
from bot.i18n import SOURCE, current, locale_of

ELLIPSIS = "…"

# A reopened fence keeps its language tag only when the tag is this short: a tag is a word such
# as "python"; anything longer is not worth repeating at the top of every chunk.
_MAX_REOPEN_TAG = 32
# The smallest limit that still leaves room for text between a reopened and a closing fence.
_MIN_SPLIT_LIMIT = 16
_WHITESPACE = re.compile(r"\s+")
# A chunk ends at the best boundary in the last three quarters of its room, and earlier only
# when there is none: a short lead-in such as "Here is the code:" then joins the code that
# follows instead of becoming a message of its own.
_SPLIT_MIN_FILL = 0.25


def truncate(text: str, limit: int) -> str:
    """Shorten ``text`` to at most ``limit`` characters, ending with "…" when it was cut.

    Args:
        text: any text.
        limit: the maximum length, at least 1 (for example ``limits.EMBED_TITLE``).

    Returns:
        ``text`` unchanged when it fits; otherwise its start, trailing whitespace removed,
        followed by "…".

    Raises:
        ValueError: when ``limit`` is below 1.
    """
    if limit < 1:
        raise ValueError(f"limit must be at least 1, not {limit}")
    if len(text) <= limit:
        return text
    return text[: limit - 1].rstrip() + ELLIPSIS


def one_line(text: str) -> str:
    """Collapse every run of whitespace (newlines included) into one space, then strip."""
    return _WHITESPACE.sub(" ", text).strip()


def format_duration(seconds: float) -> str:
    """Render a duration for people: ``"45 s"``, ``"2 m 05 s"``, ``"1 h 02 m"``.

    Rounded to whole seconds; negative durations (clock skew) show as ``"0 s"``. Past an hour
    the seconds are dropped, as nobody waiting on a video cares about them. In another locale
    than English, the locale's unit words by Babel (``"2 Min. 5 Sek."``, ``"1 時間 2 分"``).
    """
    total = max(0, round(seconds))
    hours, rest = divmod(total, 3600)
    minutes, secs = divmod(rest, 60)
    if current() != SOURCE:
        # The locale's own unit words and number forms (CLDR, "short": "2 Min. 5 Sek.").
        where = locale_of()
        shown = [(secs, "duration-second")]
        if hours:
            shown = [(hours, "duration-hour"), (minutes, "duration-minute")]
        elif minutes:
            shown = [(minutes, "duration-minute"), (secs, "duration-second")]
        return " ".join(format_unit(v, u, length="short", locale=where) for v, u in shown)
    if hours:
        return f"{hours} h {minutes:02d} m"
    if minutes:
        return f"{minutes} m {secs:02d} s"
    return f"{secs} s"


def split_message(text: str, limit: int = limits.CONTENT) -> list[str]:
    """Split ``text`` into chunks of at most ``limit`` characters, keeping code blocks intact.

    Discord refuses message content over 2000 characters (developer docs, "Create Message").
    Each chunk ends at the best boundary that fits: a paragraph break (blank line), else a line
    break, else a space, else a hard cut; a boundary outside a code block beats one of the same
    kind inside. Boundaries in the first quarter of a chunk are used only when there is no
    other, so a short lead-in does not become a message of its own. A chunk that ends inside
    a fenced code block is closed with a fence (three backticks) and the next chunk reopens it
    with the same language tag, so both render as code.

    Joining the chunks gives back ``text`` once those added fences are removed, except that a
    chunk of nothing but whitespace is dropped (Discord refuses an empty message).

    Args:
        text: the text to split; fences are lines starting with three backticks, an opening
            one optionally followed by a language tag.
        limit: the maximum length of a chunk, at least 16.

    Returns:
        The chunks in order; an empty list for blank ``text``.

    Raises:
        ValueError: when ``limit`` is below 16.
    """
    return list(_iter_chunks(text, limit, min_fill=_SPLIT_MIN_FILL))


def excerpt(text: str, limit: int) -> str:
    """Return the start of ``text`` in at most ``limit`` characters, code fences balanced.

    Unlike the first chunk of :func:`split_message`, the excerpt fills at least half of
    ``limit`` when it can, so a short first paragraph does not make a one-line excerpt.
    """
    return next(_iter_chunks(text, limit, min_fill=0.5), "")


def ends_inside_fence(text: str) -> bool:
    """Whether ``text`` ends inside an unclosed code block (text appended would be code)."""
    return _Layout(text).fence_at(len(text)) is not None


class _Level(IntEnum):
    """How good a place to end a chunk is; higher is better."""

    HARD = 0
    WORD = 1
    LINE = 2
    PARAGRAPH = 3


@dataclass(frozen=True, slots=True)
class _Fence:
    """A fence line: ``start`` is its first character, ``end`` is just past its newline."""

    start: int
    end: int
    opens: bool
    lang: str


class _Layout:
    """Where the fences and the breakable whitespace of a text are."""

    def __init__(self, text: str) -> None:
        self.text = text
        self.fences = _find_fences(text)
        self._fence_starts = [f.start for f in self.fences]
        self._fence_ends = [f.end for f in self.fences]
        self.breaks: list[tuple[int, _Level]] = []
        for match in _WHITESPACE.finditer(text):
            run = match.group()
            newlines = run.count("\n")
            if newlines == 0:
                self.breaks.append((match.end(), _Level.WORD))
            else:
                # End after the run's last newline, not after the whole run: the next line's
                # indentation belongs to it, and inside a code block it matters.
                position = match.start() + run.rfind("\n") + 1
                level = _Level.PARAGRAPH if newlines >= 2 else _Level.LINE
                self.breaks.append((position, level))
        self.break_positions = [position for position, _ in self.breaks]

    def fence_at(self, position: int) -> str | None:
        """The language tag of the code block ``position`` is in ("" for none), or None."""
        index = bisect.bisect_right(self._fence_ends, position) - 1
        if index >= 0 and self.fences[index].opens:
            return self.fences[index].lang
        return None

    def can_end_at(self, position: int) -> bool:
        """Whether a chunk may end at ``position``.

        Not inside a fence line (it would no longer be a fence), not just after an opening
        fence and not just before a closing one (either would leave an empty code block).
        """
        index = bisect.bisect_right(self._fence_starts, position) - 1
        if index < 0:
            return True
        fence = self.fences[index]
        if fence.opens:
            return not fence.start < position <= fence.end
        return not fence.start <= position < fence.end


def _find_fences(text: str) -> list[_Fence]:
    fences: list[_Fence] = []
    open_lang: str | None = None
    start = 0
    for line in text.split("\n"):
        end = min(start + len(line) + 1, len(text))
        marker = line.lstrip(" \t")
        if marker.startswith("```"):
            rest = marker[3:]
            if open_lang is not None:
                fences.append(_Fence(start, end, opens=False, lang=open_lang))
                open_lang = None
            elif "```" not in rest:  # "```x```" on one line is a complete block, not an opening
                words = rest.split(maxsplit=1)
                open_lang = words[0] if words else ""
                fences.append(_Fence(start, end, opens=True, lang=open_lang))
        start = end
    return fences


def _closing(body: str) -> str:
    return "```" if body.endswith("\n") else "\n```"


def _iter_chunks(text: str, limit: int, *, min_fill: float) -> Iterator[str]:
    """Yield the chunks of :func:`split_message`.

    ``min_fill`` is the share of a chunk's room below which a boundary is used only when no
    boundary lies beyond it.
    """
    if limit < _MIN_SPLIT_LIMIT:
        raise ValueError(f"limit must be at least {_MIN_SPLIT_LIMIT}, not {limit}")
    layout = _Layout(text)
    start = 0
    while start < len(text):
        lang = layout.fence_at(start)
        if lang is not None and len(lang) > _MAX_REOPEN_TAG:
            lang = ""
        prefix = "" if lang is None else f"```{lang}\n"
        if prefix and len(prefix) + 4 > limit // 2:
            prefix = "```\n"
        room = limit - len(prefix)
        if len(text) - start <= room:
            end = len(text)
            chunk = prefix + text[start:]
        else:
            end = _best_end(layout, start, prefix, limit, min_fill)
            body = text[start:end]
            closing = "" if layout.fence_at(end) is None else _closing(body)
            chunk = prefix + body + closing
        if chunk.strip():
            yield chunk
        start = end


def _fits(layout: _Layout, start: int, end: int, prefix: str, limit: int) -> bool:
    body = layout.text[start:end]
    closing = "" if layout.fence_at(end) is None else _closing(body)
    return len(prefix) + len(body) + len(closing) <= limit


def _best_end(layout: _Layout, start: int, prefix: str, limit: int, min_fill: float) -> int:
    """Where the chunk starting at ``start`` should end, when the rest does not fit."""
    room = limit - len(prefix)
    first = bisect.bisect_right(layout.break_positions, start)
    last = bisect.bisect_right(layout.break_positions, start + room)
    preferred_from = start + min_fill * room
    best: tuple[bool, _Level, bool, int] | None = None
    for position, level in layout.breaks[first:last]:
        if not layout.can_end_at(position) or not _fits(layout, start, position, prefix, limit):
            continue
        if not layout.text[start:position].strip():
            continue
        # Compare by: long enough, kind of boundary, outside code, then the farthest.
        score = (
            position >= preferred_from,
            level,
            layout.fence_at(position) is None,
            position,
        )
        if best is None or score > best:
            best = score
    if best is not None:
        return best[3]
    # No boundary fits: cut hard at the farthest place that fits and does not split a fence.
    for position in range(start + room, start, -1):
        if layout.can_end_at(position) and _fits(layout, start, position, prefix, limit):
            return position
    # Only a fence line longer than the whole chunk gets here; cut it, as nothing else fits.
    return start + room - 4
