"""Discord's request validation, reported with Discord's error bodies."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from .errors import FormErrors

Path = tuple[str | int, ...]

MAX_CONTENT = 2000
MAX_EMBEDS = 10
MAX_EMBED_TOTAL = 6000
MAX_ACTION_ROWS = 5
MAX_ROW_ITEMS = 5
MAX_CHOICES = 25
MAX_UPLOAD_BYTES = 10 * 1024 * 1024
COMPONENTS_V2 = 1 << 15
MAX_V2_COMPONENTS = 40
MAX_V2_TEXT = 4000
MAX_GALLERY_ITEMS = 10
V2_TYPES = {1, 2, 3, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 17}
"""Component types a Components V2 message may hold (Discord: "Component reference")."""


def validate_message(
    payload: dict[str, Any], errors: FormErrors, prefix: Path = (), *, v2: bool = False
) -> None:
    """Validate the message fields present in ``payload`` (create or edit).

    A Components V2 message (the flag in ``payload``, or ``v2`` for an edit of a message that
    has it) may not carry content or embeds, holds at most 40 components counting nested
    ones and at most 4000 characters across its text displays (Discord: "Component
    reference"); empty content and embeds are accepted, as they clear a message upgraded by
    an edit.

    Args:
        payload: Message create/edit body.
        errors: Collector that receives errors.
        prefix: Path prefix (``("data",)`` for interaction callbacks).
        v2: The edited message already has the IS_COMPONENTS_V2 flag.
    """
    v2 = v2 or bool((payload.get("flags") or 0) & COMPONENTS_V2)
    content = payload.get("content")
    if content is not None:
        errors.max_length((*prefix, "content"), str(content), MAX_CONTENT)
    embeds = payload.get("embeds")
    if v2:
        for key in ("content", "embeds", "stickers", "poll"):
            if payload.get(key):
                errors.add(
                    (*prefix, key),
                    "MESSAGE_CANNOT_USE_LEGACY_FIELDS_WITH_COMPONENTS_V2",
                    "The 'content', 'embeds', 'stickers' and 'poll' fields cannot be used "
                    "when using MessageFlags.IS_COMPONENTS_V2",
                )
    if embeds:
        _validate_embeds(embeds, errors, (*prefix, "embeds"))
    components = payload.get("components")
    if components:
        _validate_components(components, errors, (*prefix, "components"), v2=v2)
        if v2:
            _validate_v2(components, errors, (*prefix, "components"))
    mentions = payload.get("allowed_mentions")
    if mentions:
        parse = mentions.get("parse") or []
        for kind in ("users", "roles"):
            if kind in parse and mentions.get(kind):
                errors.add(
                    (*prefix, "allowed_mentions"),
                    "MESSAGE_ALLOWED_MENTIONS_PARSE_EXCLUSIVE",
                    f'parse:["{kind}"] and {kind}: [ids...] are mutually exclusive.',
                )


def _validate_embeds(embeds: Sequence[dict[str, Any]], errors: FormErrors, path: Path) -> None:
    if len(embeds) > MAX_EMBEDS:
        errors.max_length(path, embeds, MAX_EMBEDS)
    total = 0
    for i, embed in enumerate(embeds):
        here = (*path, i)
        title = embed.get("title")
        description = embed.get("description")
        errors.max_length((*here, "title"), title, 256)
        errors.max_length((*here, "description"), description, 4096)
        total += len(title or "") + len(description or "")
        fields = embed.get("fields") or []
        errors.max_length((*here, "fields"), fields, 25)
        for j, fld in enumerate(fields):
            errors.required((*here, "fields", j, "name"), fld.get("name"))
            errors.required((*here, "fields", j, "value"), fld.get("value"))
            errors.max_length((*here, "fields", j, "name"), fld.get("name"), 256)
            errors.max_length((*here, "fields", j, "value"), fld.get("value"), 1024)
            total += len(fld.get("name") or "") + len(fld.get("value") or "")
        footer = (embed.get("footer") or {}).get("text")
        errors.max_length((*here, "footer", "text"), footer, 2048)
        author = (embed.get("author") or {}).get("name")
        errors.max_length((*here, "author", "name"), author, 256)
        total += len(footer or "") + len(author or "")
    if total > MAX_EMBED_TOTAL:
        errors.add(
            path, "MAX_EMBED_SIZE_EXCEEDED", f"Embed size exceeds maximum size of {MAX_EMBED_TOTAL}"
        )


def _validate_components(
    components: Sequence[dict[str, Any]], errors: FormErrors, path: Path, *, v2: bool
) -> None:
    if not v2:
        errors.max_length(path, components, MAX_ACTION_ROWS)
    seen: set[str] = set()
    for i, row in enumerate(components):
        if row.get("type") != 1:
            _validate_item(row, errors, (*path, i), seen)
            continue
        children = row.get("components") or []
        errors.max_length((*path, i, "components"), children, MAX_ROW_ITEMS)
        if any(c.get("type") in (3, 5, 6, 7, 8) for c in children) and len(children) > 1:
            errors.add(
                (*path, i, "components"),
                "COMPONENT_LAYOUT_WIDTH_EXCEEDED",
                "The specified component exceeds the maximum width",
            )
        for j, child in enumerate(children):
            _validate_item(child, errors, (*path, i, "components", j), seen)


def walk_components(components: Sequence[dict[str, Any]]) -> list[dict[str, Any]]:
    """Every component of a message, nested ones included, in display order."""
    out: list[dict[str, Any]] = []
    for item in components:
        out.append(item)
        for key in ("components", "accessory", "component"):
            nested = item.get(key)
            if isinstance(nested, list):
                out.extend(walk_components(nested))
            elif isinstance(nested, dict):
                out.extend(walk_components([nested]))
    return out


def _validate_v2(components: Sequence[dict[str, Any]], errors: FormErrors, path: Path) -> None:
    every = walk_components(components)
    if len(every) > MAX_V2_COMPONENTS:
        errors.add(
            path,
            "BASE_TYPE_MAX_LENGTH",
            f"Must be {MAX_V2_COMPONENTS} or fewer in length (nested components included).",
        )
    text = sum(len(str(c.get("content") or "")) for c in every if c.get("type") == 10)
    if text > MAX_V2_TEXT:
        errors.add(
            path,
            "MESSAGE_COMPONENTS_TEXT_TOO_LONG",
            f"Text displays must be {MAX_V2_TEXT} or fewer characters in total.",
        )
    for i, item in enumerate(every):
        kind = item.get("type")
        if kind not in V2_TYPES:
            errors.add(
                (*path, i, "type"), "UNION_TYPE_CHOICES", f"Value must be one of {V2_TYPES}."
            )
        if kind == 10:
            errors.required((*path, i, "content"), item.get("content"))
        elif kind == 12:
            items = item.get("items") or []
            errors.required((*path, i, "items"), items or None)
            errors.max_length((*path, i, "items"), items, MAX_GALLERY_ITEMS)
            for k, media in enumerate(items):
                errors.required(
                    (*path, i, "items", k, "media", "url"), media.get("media", {}).get("url")
                )
        elif kind == 11:
            errors.required((*path, i, "media", "url"), (item.get("media") or {}).get("url"))
        elif kind == 9:
            errors.required((*path, i, "accessory"), item.get("accessory"))


def _validate_item(item: dict[str, Any], errors: FormErrors, path: Path, seen: set[str]) -> None:
    custom_id = item.get("custom_id")
    if custom_id is not None:
        errors.max_length((*path, "custom_id"), custom_id, 100)
        if custom_id in seen:
            errors.add(
                (*path, "custom_id"),
                "COMPONENT_CUSTOM_ID_DUPLICATED",
                "Component custom id cannot be duplicated",
            )
        seen.add(custom_id)
    kind = item.get("type")
    if kind == 2:
        errors.max_length((*path, "label"), item.get("label"), 80)
        if item.get("style") == 5:
            errors.required((*path, "url"), item.get("url"))
        elif item.get("style") != 6:
            errors.required((*path, "custom_id"), custom_id)
    elif kind == 3:
        errors.max_length((*path, "placeholder"), item.get("placeholder"), 150)
        options = item.get("options") or []
        errors.max_length((*path, "options"), options, 25)
        for k, option in enumerate(options):
            errors.max_length((*path, "options", k, "label"), option.get("label"), 100)
            errors.max_length((*path, "options", k, "value"), option.get("value"), 100)
            errors.max_length((*path, "options", k, "description"), option.get("description"), 100)
    for key in ("components", "accessory", "component"):
        nested = item.get(key)
        if isinstance(nested, list):
            for k, child in enumerate(nested):
                _validate_item(child, errors, (*path, key, k), seen)
        elif isinstance(nested, dict):
            _validate_item(nested, errors, (*path, key), seen)


def validate_autocomplete(data: dict[str, Any], errors: FormErrors) -> None:
    """Validate an APPLICATION_COMMAND_AUTOCOMPLETE_RESULT ``data`` object."""
    choices = data.get("choices") or []
    errors.max_length(("data", "choices"), choices, MAX_CHOICES)
    for i, choice in enumerate(choices):
        errors.required(("data", "choices", i, "name"), choice.get("name"))
        errors.max_length(("data", "choices", i, "name"), choice.get("name"), 100)
        if isinstance(choice.get("value"), str):
            errors.max_length(("data", "choices", i, "value"), choice["value"], 100)


def validate_modal(data: dict[str, Any], errors: FormErrors) -> None:
    """Validate a MODAL callback ``data`` object."""
    errors.required(("data", "title"), data.get("title"))
    errors.max_length(("data", "title"), data.get("title"), 45)
    errors.required(("data", "custom_id"), data.get("custom_id"))
    errors.max_length(("data", "custom_id"), data.get("custom_id"), 100)
    components = data.get("components") or []
    errors.required(("data", "components"), components or None)
    errors.max_length(("data", "components"), components, 5)
    for i, row in enumerate(components):
        children = row.get("components") or ([row["component"]] if "component" in row else [])
        if row.get("type") == 18:
            errors.max_length(("data", "components", i, "label"), row.get("label"), 45)
        for j, child in enumerate(children):
            here = ("data", "components", i, "components", j)
            errors.max_length((*here, "custom_id"), child.get("custom_id"), 100)
            if child.get("type") == 4:
                errors.max_length((*here, "label"), child.get("label"), 45)
                errors.max_length((*here, "placeholder"), child.get("placeholder"), 100)
                errors.max_length((*here, "value"), child.get("value"), 4000)


def validate_commands(commands: Sequence[dict[str, Any]], errors: FormErrors) -> None:
    """Validate a bulk-overwrite list of application commands."""
    errors.max_length((), commands, 100)
    names: set[tuple[str, int]] = set()
    for i, command in enumerate(commands):
        kind = command.get("type", 1)
        name = command.get("name") or ""
        errors.required((i, "name"), name)
        errors.max_length((i, "name"), name, 32)
        if kind == 1:
            if name != name.lower() or " " in name:
                errors.add(
                    (i, "name"), "APPLICATION_COMMAND_INVALID_NAME", "Command name is invalid"
                )
            errors.required((i, "description"), command.get("description"))
            errors.max_length((i, "description"), command.get("description"), 100)
        if (name, kind) in names:
            errors.add(
                (i, "name"),
                "APPLICATION_COMMANDS_DUPLICATE_NAME",
                f"Application command names must be unique: {name}",
            )
        names.add((name, kind))
        _validate_options(command.get("options") or [], errors, (i, "options"))


def _validate_options(options: Sequence[dict[str, Any]], errors: FormErrors, path: Path) -> None:
    errors.max_length(path, options, 25)
    for i, option in enumerate(options):
        errors.max_length((*path, i, "name"), option.get("name"), 32)
        errors.required((*path, i, "description"), option.get("description"))
        errors.max_length((*path, i, "description"), option.get("description"), 100)
        errors.max_length((*path, i, "choices"), option.get("choices") or [], MAX_CHOICES)
        if option.get("choices") and option.get("autocomplete"):
            errors.add(
                (*path, i, "autocomplete"),
                "AUTOCOMPLETE_AND_CHOICES_MUTUALLY_EXCLUSIVE",
                "Autocomplete cannot be enabled with choices",
            )
        if option.get("type") in (1, 2):
            _validate_options(option.get("options") or [], errors, (*path, i, "options"))
