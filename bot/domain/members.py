"""A member's own defaults (``/settings``), wherever they use the bot."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class MemberSettings:
    """A member's own defaults (``/settings``), wherever they use the bot.

    A member without a row gets :meth:`default` (nothing set). Each default applies where the
    member did not give the option; server policy still wins (a model the member's tiers do
    not allow is ignored, :mod:`bot.services.member_settings`).

    Attributes:
        user_id: the Discord user id.
        text_model, image_model, video_model: catalogue ids; None: the command's own default.
        aspect_ratio: ``/image`` and ``/video``'s shape, e.g. ``"16:9"`` (docs/genapi.md §4.2,
            §4.4).
        video_duration: seconds of a ``/video``; None: the model's default (5 s).
        prompt_suffix: text added after every ``/image`` and ``/video`` prompt.
        private: ``/text`` and synchronous ``/image`` answers are ephemeral.
        remix: Vary on a text result opens a form prefilled with the prompt.
        notify_dm: a DM when a video or an asynchronous image is finished, besides its card.
    """

    user_id: int
    text_model: str | None = None
    image_model: str | None = None
    video_model: str | None = None
    aspect_ratio: str | None = None
    video_duration: float | None = None
    prompt_suffix: str | None = None
    private: bool = False
    remix: bool = False
    notify_dm: bool = False

    @classmethod
    def default(cls, user_id: int) -> MemberSettings:
        """Return the settings of a member who never set any."""
        return cls(user_id=user_id)
