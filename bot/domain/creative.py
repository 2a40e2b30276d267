"""Creative control's records: a server's Enhance and Draft settings, styles, characters.

A reference image is never a URL: Discord's attachment URLs expire, so a reference is the
message that holds it (:class:`ImageRef`), asked for a fresh URL each time it is sent.
docs/creative.md.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class CreativeSettings:
    """A server's ``/config enhance`` and ``/config draft``; None everywhere is the default.

    Attributes:
        enhance_model: the text model that rewrites prompts; None: the cheapest text model.
        image_system: the system prompt of an image prompt's rewrite; None: the default.
        video_system: the same for a video prompt.
        draft_image_model: the image model of ``/image draft:true``; None: the cheapest.
        draft_video_model: the video model of ``/video draft:true``; None: the cheapest.
    """

    enhance_model: str | None = None
    image_system: str | None = None
    video_system: str | None = None
    draft_image_model: str | None = None
    draft_video_model: str | None = None


@dataclass(frozen=True, slots=True)
class ImageRef:
    """A reference image: attachment ``attachment`` (0 first) of a Discord message."""

    channel_id: int
    message_id: int
    attachment: int = 0


@dataclass(frozen=True, slots=True)
class Style:
    """A server's style: a prompt suffix and up to four reference images, in order.

    Attributes:
        id: its row.
        guild_id: the server.
        name: what members pick it by (unique in the server).
        suffix: appended to the prompt.
        references: the images; the first is a video's ``image_url``.
        created_by: the admin who added it.
        roles: the role ids of the tiers whose members may use it (``/config style tiers``);
            empty: every member.
    """

    id: int
    guild_id: int
    name: str
    suffix: str
    references: tuple[ImageRef, ...] = ()
    created_by: int = 0
    roles: tuple[int, ...] = ()

    def allows(self, role_ids: frozenset[int], manage_guild: bool = False) -> bool:
        """Whether a member with ``role_ids`` (and Manage Server or not) may use it.

        Every member when it names no tier, else a member holding one of its tiers' roles;
        an admin (Manage Server) always.
        """
        return not self.roles or manage_guild or not role_ids.isdisjoint(self.roles)


@dataclass(frozen=True, slots=True)
class StyleThumbnail:
    """The small picture of a style's reference (``style_thumbnails``), for the dashboard.

    Attributes:
        style_id: the style.
        position: the reference's place among the style's (0 first).
        digest: hex, the first 32 characters of the picture's SHA-256 (its ETag).
        mime: ``image/webp``.
        width: pixels.
        height: pixels.
        data: the picture's bytes (empty when only described).
        duration: always None (a reference is a picture; as ``Thumbnail``'s for templates).
    """

    style_id: int
    position: int
    digest: str
    mime: str
    width: int
    height: int
    data: bytes = b""
    duration: float | None = None


@dataclass(frozen=True, slots=True)
class Character:
    """A member's character: a named reference image, private unless shared to its server.

    Attributes:
        id: its row.
        user_id: its owner.
        guild_id: the server it was made in (and shared to).
        name: what its owner picks it by (unique per owner).
        image: the reference image.
        shared: others of ``guild_id`` may use it too.
    """

    id: int
    user_id: int
    guild_id: int
    name: str
    image: ImageRef
    shared: bool = False


@dataclass(frozen=True, slots=True)
class CameraPreset:
    """A video camera movement members pick by name (``/video camera:``).

    Attributes:
        value: its key (the command's choice value).
        label: its name in the command's list (English; translated by the command tree).
        phrase: what is appended to the prompt, as video models read camera directions.
        lock: also send ``lock_camera: true`` when the model supports it (docs/genapi.md §4.2).
    """

    value: str
    label: str
    phrase: str
    lock: bool = False


CAMERA_PRESETS: tuple[CameraPreset, ...] = (
    CameraPreset("static", "Static", "static shot, locked-off camera, no camera movement", True),
    CameraPreset("dolly-in", "Dolly in", "slow dolly in toward the subject"),
    CameraPreset("dolly-out", "Dolly out", "slow dolly out, revealing the surroundings"),
    CameraPreset("orbit", "Orbit", "the camera slowly orbits around the subject"),
    CameraPreset("crane-up", "Crane up", "crane shot rising upward to reveal the scene"),
    CameraPreset("pan", "Pan", "slow horizontal pan across the scene"),
    CameraPreset("tracking", "Tracking", "tracking shot, the camera follows the subject"),
    CameraPreset("handheld", "Handheld", "handheld camera with a subtle natural shake"),
    CameraPreset("drone", "Aerial", "aerial drone shot gliding over the scene"),
    CameraPreset("zoom-in", "Zoom in", "slow zoom in on the subject"),
)
"""The camera presets, in the order ``/video`` lists them (docs/creative.md)."""

CAMERA_BY_VALUE: dict[str, CameraPreset] = {preset.value: preset for preset in CAMERA_PRESETS}
