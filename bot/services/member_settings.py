"""A member's own defaults (``/settings``), and applying them to a command's options.

A member sets, once, what their commands use where they give no option: a model per kind
(text, image, video), an aspect ratio, a video duration, a prompt suffix, private results,
remix and a DM when a job is finished. They follow the member everywhere (servers, the bot's
DM, group DMs): they are keyed by user id, not by server.

Server policy still wins ("a default the member's tiers forbid is ignored with a
note"): :meth:`MemberSettingsService.apply_member_defaults` is the one place a command's
options get the member's defaults, and it leaves out a default model the member's tiers (or the
server's model list) do not allow here, one the catalogue no longer offers, and a default
duration the chosen model does not make, each with a short note for the answer. The rest of the
request's checks (budgets, caps, blocked terms, the catalogue) run afterwards as for any option
the member typed, so a default can never spend more than the same option typed would.
"""

from __future__ import annotations

import dataclasses
from collections import OrderedDict
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Generic, TypeVar

from bot.clock import Clock
from bot.domain import MemberSettings
from bot.errors import ValidationFailed
from bot.genapi.catalogue import CatalogueCache
from bot.genapi.wire import Catalogue
from bot.i18n import N_, _, number
from bot.services.billing import Billing
from bot.services.generation import (
    ASPECT_RATIOS,
    MAX_DURATION_SECONDS,
    MAX_PROMPT_LENGTH,
    MIN_DURATION_SECONDS,
    ImageOptions,
    Requester,
    TextOptions,
    VideoOptions,
)
from bot.services.policy import MemberPolicy
from bot.storage import Database

MAX_SUFFIX_LENGTH = 200

"""Characters of a prompt suffix: a style note ("cinematic, 35 mm"), not a second prompt."""

CHOOSE_VIDEO_MODEL = N_(
    "Choose a video model (`model`), or set your default one with `/settings defaults`."
)
"""The refusal of a ``/video`` without a model and without a usable default model."""

# One sentence per kind of model: the word differs by language (gender, case), so it is never
# glued in. The notes are written while the member's answer is (its locale, set by admission).
_NOT_A_MODEL = {
    "text": N_("`{model}` is not a text model; pick one from the list."),
    "image": N_("`{model}` is not an image model; pick one from the list."),
    "video": N_("`{model}` is not a video model; pick one from the list."),
}
_NOT_AVAILABLE = {
    "text": N_(
        "Your default text model `{model}` is not available to you here, so it was not used."
    ),
    "image": N_(
        "Your default image model `{model}` is not available to you here, so it was not used."
    ),
    "video": N_(
        "Your default video model `{model}` is not available to you here, so it was not used."
    ),
}
_NOT_OFFERED = {
    "text": N_("Your default text model `{model}` is no longer offered, so it was not used."),
    "image": N_("Your default image model `{model}` is no longer offered, so it was not used."),
    "video": N_("Your default video model `{model}` is no longer offered, so it was not used."),
}

SETTABLE = frozenset(field.name for field in dataclasses.fields(MemberSettings)) - {"user_id"}
"""The names :meth:`MemberSettingsService.update` accepts."""

OptionsT = TypeVar("OptionsT", TextOptions, ImageOptions, VideoOptions)


@dataclass(frozen=True, slots=True)
class Applied(Generic[OptionsT]):
    """A command's options with the member's defaults in, and why any default was left out.

    Attributes:
        options: the options to run.
        notes: one short sentence per default left out (shown with the answer).
    """

    options: OptionsT
    notes: tuple[str, ...] = ()

    @property
    def note(self) -> str | None:
        """The notes as one line, or None when every default applied."""
        return " ".join(self.notes) or None


CACHED_MEMBERS = 10_000
"""Members whose settings a process keeps (the most recently used), when it keeps any."""


class MemberSettingsService:
    """Reads, changes and applies members' own defaults.

    Args:
        db: the database (``db.members``).
        billing: the member's effective policy here (:meth:`Billing.member_policy`).
        catalogue: the cached catalogue, to check a default model still exists; never fetched
            here (a command fetches it itself when none is cached).
        clock: stamps changes (UTC epoch seconds).
        cache: keep the :data:`CACHED_MEMBERS` most recently read members' settings in
            memory. Only for the one process that runs every command (:meth:`update` is the
            only writer of the table), so that what it keeps is never stale: the wiring
            turns it on where ``Settings.rate_limit_shared`` is off (SQLite, no
            ``SHARD_IDS``, the poller in-process). Several commands read these settings before
            their acknowledgement (whether the answer is private), where a database read
            waited 30-80 ms in a burst behind the other commands' work
            (docs/benchmarks.md, "The acknowledgement first").
    """

    def __init__(
        self,
        *,
        db: Database,
        billing: Billing,
        catalogue: CatalogueCache,
        clock: Clock,
        cache: bool = False,
    ) -> None:
        self._db = db
        self._billing = billing
        self._catalogue = catalogue
        self._clock = clock
        self._cache: OrderedDict[int, MemberSettings] | None = OrderedDict() if cache else None
        self._writes = 0  # counts the starts and ends of updates: an overlapping read is not kept

    async def get(self, user_id: int) -> MemberSettings:
        """Return the member's settings (the defaults when they set none)."""
        cache = self._cache
        if cache is None:
            return await self._db.members.get(user_id)
        found = cache.get(user_id)
        if found is not None:
            cache.move_to_end(user_id)
            return found
        writes = self._writes
        found = await self._db.members.get(user_id)
        if writes == self._writes:  # no update began or ended during the read: it is current
            self._keep(found)
        return found

    def _keep(self, settings: MemberSettings) -> None:
        if self._cache is None:
            return
        self._cache[settings.user_id] = settings
        self._cache.move_to_end(settings.user_id)
        while len(self._cache) > CACHED_MEMBERS:
            self._cache.popitem(last=False)

    async def update(self, user_id: int, changes: Mapping[str, object]) -> MemberSettings:
        """Validate and store changes to the member's settings; return the new settings.

        Args:
            user_id: the member.
            changes: setting name (:data:`SETTABLE`) -> new value; None clears a default.

        Raises:
            ValidationFailed: an unknown model of its kind (when the catalogue is cached), an
                aspect ratio not in :data:`ASPECT_RATIOS`, a duration outside ``/video``'s
                bounds, or a suffix longer than :data:`MAX_SUFFIX_LENGTH`. Nothing is stored.
        """
        unknown = set(changes) - SETTABLE
        if unknown:
            raise ValueError(f"not member settings: {sorted(unknown)}")
        checked = {name: self._check(name, value) for name, value in changes.items()}
        current = await self._db.members.get(user_id)
        updated = dataclasses.replace(current, **checked)  # type: ignore[arg-type]
        self._writes += 1
        if self._cache is not None:
            self._cache.pop(user_id, None)
        try:
            await self._db.members.save(updated, self._clock.time())
        finally:
            self._writes += 1  # a read that began while the row was written is not kept
        self._keep(updated)
        return updated

    def _check(self, name: str, value: object) -> object:
        if value is None or isinstance(value, bool):
            return value
        catalogue = self._catalogue.current
        if name in ("text_model", "image_model", "video_model"):
            model = str(value).strip()
            kind = name.removesuffix("_model")
            if catalogue is not None and _find(catalogue, kind, model) is None:
                raise ValidationFailed(_NOT_A_MODEL[kind], model=model)
            return model
        if name == "aspect_ratio":
            if value not in ASPECT_RATIOS:
                raise ValidationFailed(
                    N_("Aspect ratio must be one of {join}."), join=", ".join(ASPECT_RATIOS)
                )
            return value
        if name == "video_duration":
            seconds = float(str(value))
            if not MIN_DURATION_SECONDS <= seconds <= MAX_DURATION_SECONDS:
                raise ValidationFailed(
                    N_(
                        "Duration must be between {min_duration_seconds} and "
                        "{max_duration_seconds} seconds."
                    ),
                    min_duration_seconds=MIN_DURATION_SECONDS,
                    max_duration_seconds=MAX_DURATION_SECONDS,
                )
            return seconds
        if name == "prompt_suffix":
            suffix = " ".join(str(value).split())
            if len(suffix) > MAX_SUFFIX_LENGTH:
                raise ValidationFailed(
                    N_("The prompt suffix is too long (at most {max_suffix_length} characters)."),
                    max_suffix_length=MAX_SUFFIX_LENGTH,
                )
            return suffix or None
        return value

    async def apply_member_defaults(
        self, who: Requester, options: OptionsT, settings: MemberSettings | None = None
    ) -> Applied[OptionsT]:
        """Fill the options the member did not give with their defaults, where policy allows.

        The one place a command's options meet the member's defaults (``/text``, ``/image``,
        ``/video``); buttons re-run a stored request as it was and do not come here.

        - model (a :class:`VideoOptions` without one has ``model == ""``): the member's
          default of that kind, unless their tiers (or the server's model list) do not allow
          it here, or the cached catalogue no longer offers it: then left out, with a note,
          and the command's own default applies (``/video`` has none: refused).
        - ``aspect_ratio`` (images, videos) and ``duration`` (videos): when not given; a
          default duration the video's model does not make is left out with a note (the
          model's default applies).
        - ``prompt_suffix`` (images, videos): added after the prompt, unless the prompt would
          then pass :data:`MAX_PROMPT_LENGTH` (left out, with a note).

        Args:
            who: who asked, and where (their tiers are those of ``who.guild_id``).
            options: the options the member gave.
            settings: the member's settings when already read (e.g. to defer privately).

        Returns:
            The options to run and the notes for the answer.

        Raises:
            ValidationFailed: a ``/video`` without a model, and no usable default model (the
                notes, then :data:`CHOOSE_VIDEO_MODEL`); nothing is reserved or sent.
        """
        mine = await self.get(who.user_id) if settings is None else settings
        defaults = _Defaults(who, mine, self._billing, self._catalogue.current)
        if isinstance(options, TextOptions):
            options = await defaults.text(options)
        elif isinstance(options, ImageOptions):
            options = await defaults.image(options)
        else:
            options = await defaults.video(options)
        return Applied(options, tuple(defaults.notes))


ShapedT = TypeVar("ShapedT", ImageOptions, VideoOptions)


class _Defaults:
    """One member's defaults applied to one command's options, one method per kind.

    Collects the notes of the defaults left out (:meth:`MemberSettingsService.apply_member_defaults`
    says which and why). The member's policy here is read once, and only when a default model
    is to be checked.
    """

    def __init__(
        self, who: Requester, mine: MemberSettings, billing: Billing, catalogue: Catalogue | None
    ) -> None:
        self._who = who
        self._mine = mine
        self._billing = billing
        self._catalogue = catalogue
        self._policy: MemberPolicy | None = None
        self.notes: list[str] = []

    async def text(self, options: TextOptions) -> TextOptions:
        """``/text``: the default text model, when none was given."""
        model = self._mine.text_model
        if options.model is None and model is not None and await self._usable(model, "text"):
            options = dataclasses.replace(options, model=model)
        return options

    async def image(self, options: ImageOptions) -> ImageOptions:
        """``/image``: the default image model, aspect ratio and prompt suffix."""
        model = self._mine.image_model
        if options.model is None and model is not None and await self._usable(model, "image"):
            options = dataclasses.replace(options, model=model)
        return self._suffixed(self._shaped(options))

    async def video(self, options: VideoOptions) -> VideoOptions:
        """``/video``: the default video model (required), aspect ratio, duration and suffix.

        Raises:
            ValidationFailed: no model given and no usable default model.
        """
        if not options.model:
            model = self._mine.video_model
            if model is not None and await self._usable(model, "video"):
                options = dataclasses.replace(options, model=model)
            else:
                # No model is chosen for the member: a video is dear, its model their choice.
                raise ValidationFailed(" ".join([*self.notes, _(CHOOSE_VIDEO_MODEL)]))
        options = self._shaped(options)
        if options.duration is None:
            options = self._duration(options)
        return self._suffixed(options)

    async def _usable(self, model: str, kind: str) -> bool:
        """Whether the default ``model`` may be used here; if not, a note says why."""
        if self._policy is None:
            self._policy = await self._billing.member_policy(self._who.guild_id, self._who.role_ids)
        if not self._policy.allows(model):
            self.notes.append(_(_NOT_AVAILABLE[kind], model=model))
            return False
        if self._catalogue is not None and _find(self._catalogue, kind, model) is None:
            self.notes.append(_(_NOT_OFFERED[kind], model=model))
            return False
        return True

    def _shaped(self, options: ShapedT) -> ShapedT:
        """The default aspect ratio, when none was given."""
        if options.aspect_ratio is None and self._mine.aspect_ratio is not None:
            options = dataclasses.replace(options, aspect_ratio=self._mine.aspect_ratio)
        return options

    def _duration(self, options: VideoOptions) -> VideoOptions:
        """The default duration, unless the video's model does not make it (with a note)."""
        seconds = self._mine.video_duration
        if seconds is None:
            return options
        catalogue = self._catalogue
        model = (
            None if catalogue is None or not options.model else catalogue.video_model(options.model)
        )
        if model is not None and model.durations and seconds not in model.durations:
            self.notes.append(
                _(
                    "{model} does not make {seconds} s videos (your default); its default "
                    "length was used.",
                    model=model.label,
                    seconds=number(seconds),
                )
            )
            return options
        return dataclasses.replace(options, duration=seconds)

    def _suffixed(self, options: ShapedT) -> ShapedT:
        """The prompt suffix after the prompt, unless the prompt would then be too long."""
        if self._mine.prompt_suffix:
            prompt = f"{options.prompt.rstrip()} {self._mine.prompt_suffix}"
            if len(prompt.strip()) <= MAX_PROMPT_LENGTH:
                options = dataclasses.replace(options, prompt=prompt)
            else:
                self.notes.append(_("Your prompt suffix was left out: the prompt is long enough."))
        return options


def _find(catalogue: Catalogue, kind: str, model: str) -> object | None:
    if kind == "text":
        return catalogue.text_model(model)
    if kind == "image":
        return catalogue.image_model(model)
    return catalogue.video_model(model)
