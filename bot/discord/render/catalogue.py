"""The model catalogue as pages of embeds, for ``/models``."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Final

import discord

from bot.discord.render import limits
from bot.discord.render.text import truncate
from bot.errors import format_cents
from bot.genapi.wire import Catalogue, ImageModel, TextModel, VideoModel
from bot.i18n import _, current, number

CATALOGUE_COLOUR = discord.Colour.blurple()
KINDS: Final = ("video", "image", "text")
# Fields per page, a multiple of 3 as Discord shows inline fields three to a row. Video entries
# are five lines each, so fewer of them make a page one can read without scrolling far.
_PER_PAGE: Final = {"video": 12, "image": 24, "text": 24}
# Room kept in each page's 6000 characters for the footer "Page i/n", set once n is known.
_FOOTER_ROOM: Final = 32


def catalogue_pages(
    catalogue: Catalogue, kind: str | None, available: Callable[[str], bool] | None = None
) -> list[discord.Embed]:
    """Render the catalogue as embeds, one per page, footed "Page i/n".

    Each model is one inline field: its label as the name, its id and details as the value.
    Video entries show tier, mode, durations, audio, camera lock and the price per 5 s; image
    entries are marked "async" when the service flags them so. A page holds at most 25 fields
    and 6000 characters (Discord's embed limits), names truncated to 256 and values to 1024.

    Args:
        catalogue: the service's catalogue.
        kind: ``"video"``, ``"image"`` or ``"text"``; None for all three, video first.
        available: whether the reader may use a model id (their role tiers); the
            others are marked "not available to you". None marks nothing.

    Returns:
        At least one embed; a single "no models" page when there is nothing to list.

    Raises:
        ValueError: for another ``kind``.
    """
    if kind is not None and kind not in KINDS:
        raise ValueError(f"unknown model kind {kind!r}")
    pages: list[discord.Embed] = []
    for each in KINDS if kind is None else (kind,):
        entries = _entries(catalogue, each)
        if available is not None:
            ids = [m.id for m in _models(catalogue, each)]
            entries = [
                (name if available(model_id) else _unavailable(name), value)
                for model_id, (name, value) in zip(ids, entries, strict=True)
            ]
        pages += _kind_pages(each, entries)
    if not pages:
        none = {
            None: _("No models are available."),
            "video": _("No video models are available."),
            "image": _("No image models are available."),
            "text": _("No text models are available."),
        }[kind]
        pages = [discord.Embed(title=_("Models"), description=none)]
    for index, page in enumerate(pages, start=1):
        page.set_footer(text=_("Page {page}/{pages}", page=number(index), pages=number(len(pages))))
    return pages


def _models(catalogue: Catalogue, kind: str) -> Sequence[TextModel | ImageModel | VideoModel]:
    if kind == "video":
        return catalogue.video
    return catalogue.image if kind == "image" else catalogue.text


_RENDERED_KEPT: Final = 64
"""Rendered entry lists kept (a kind in a language, for the catalogue of the moment)."""

_rendered: dict[tuple[int, str, str], tuple[Catalogue, list[tuple[str, str]]]] = {}
"""``(id of the catalogue, kind, locale)`` -> the catalogue (so that its id is not reused while
kept) and its entries: every ``/models`` of a burst renders the same ones."""


def _entries(catalogue: Catalogue, kind: str) -> list[tuple[str, str]]:
    """The kind's entries in the current locale, rendered once per catalogue and locale."""
    key = (id(catalogue), kind, current())
    kept = _rendered.get(key)
    if kept is not None and kept[0] is catalogue:
        return list(kept[1])
    if kind == "video":
        entries = [_video_entry(model) for model in catalogue.video]
    elif kind == "image":
        entries = [_plain_entry(model) for model in catalogue.image]
    else:
        entries = [_plain_entry(model) for model in catalogue.text]
    if len(_rendered) >= _RENDERED_KEPT:
        _rendered.clear()  # a refreshed catalogue: the old renderings are no longer asked for
    _rendered[key] = (catalogue, entries)
    return list(entries)


def _kind_pages(kind: str, entries: list[tuple[str, str]]) -> list[discord.Embed]:
    pages: list[discord.Embed] = []
    title = {"video": _("Video models"), "image": _("Image models")}.get(kind) or _("Text models")
    page: discord.Embed | None = None
    for name, value in entries:
        full = page is not None and (
            len(page.fields) >= min(_PER_PAGE[kind], limits.EMBED_FIELDS)
            or len(page) + len(name) + len(value) > limits.EMBED_TOTAL - _FOOTER_ROOM
        )
        if page is None or full:
            page = discord.Embed(title=title, colour=CATALOGUE_COLOUR)
            if not pages:
                page.description = _("{count} available", count=number(len(entries)))
            pages.append(page)
        page.add_field(name=name, value=value, inline=True)
    return pages


def _video_entry(model: VideoModel) -> tuple[str, str]:
    durations = ", ".join(_("{seconds} s", seconds=number(s)) for s in model.durations) or "—"
    audio, lock = _yes_no(model.supports_audio), _yes_no(model.supports_lock_camera)
    lines = [
        _code(model.id),
        _("Tier: {tier} · Mode: {mode}", tier=model.tier, mode=model.mode),
        _("Durations: {durations}", durations=durations),
        _("Audio: {audio} · Camera lock: {lock}", audio=audio, lock=lock),
        _("{amount} per 5 s", amount=format_cents(model.cost_cents_per_5s)),
    ]
    return _name(model.label), truncate("\n".join(lines), limits.FIELD_VALUE)


def _plain_entry(model: ImageModel | TextModel) -> tuple[str, str]:
    value = _code(model.id)
    # The spec does not show whether an image model answers at once; a newer service may say
    # so in an extra "async" field, and such a model's result arrives later.
    if isinstance(model, ImageModel) and (model.model_extra or {}).get("async"):
        value += " · " + _("async")
    return _name(model.label), truncate(value, limits.FIELD_VALUE)


def _name(label: str) -> str:
    return truncate(discord.utils.escape_markdown(label) or "—", limits.FIELD_NAME)


def _code(text: str) -> str:
    # A backtick would end the inline code early; ids do not contain one in practice.
    return f"`{text.replace('`', 'ˋ')}`"


def _unavailable(name: str) -> str:
    return _("{name} (not available to you)", name=name)


def _yes_no(flag: bool) -> str:
    return _("yes") if flag else _("no")
