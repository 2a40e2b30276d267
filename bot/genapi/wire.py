"""Typed resources of the Generation API, docs/genapi.md §2.

Unknown extra fields are kept (``extra="allow"``) so a newer service does not break us; a
missing required field raises :class:`pydantic.ValidationError`, which the client turns into
:class:`~bot.genapi.errors.MalformedResponseError`.

Money is :class:`~decimal.Decimal` cents, exactly as the service wrote it: the spec types every
amount as a JSON *number* (2.1, 2.2, 2.4, 2.5), so ``0.35`` is as valid as ``35``. The client
decodes bodies with ``parse_float=Decimal`` (no float round trip) and :data:`ReportedCents`
accepts any number, NaN, infinities and negatives included, and reads anything else (a string
of letters, ``true``, ``null``) as NaN: whether a reported charge makes sense is
:func:`bot.services.billing.charge_anomaly`'s to judge, after the paid result is safe. Only a
money field that is *absent* makes the response malformed.
"""

from __future__ import annotations

from decimal import Decimal
from typing import Annotated, Any, Literal

from pydantic import BaseModel, BeforeValidator, ConfigDict, Field, field_validator

TaskStatus = Literal["processing", "completed", "failed"]

Cents = Annotated[Decimal, Field(allow_inf_nan=True)]
"""An amount of cents as reported, exact; NaN and infinities are kept to be judged, not refused."""


def _number_or_nan(value: Any) -> Any:
    if isinstance(value, int | float | Decimal) and not isinstance(value, bool):
        return value
    if isinstance(value, str):
        try:
            return Decimal(value)
        except ArithmeticError:
            pass
    return Decimal("NaN")


ReportedCents = Annotated[Cents, BeforeValidator(_number_or_nan)]
"""A charge or balance in a generate response: any value reads, what is not a number as NaN.

A charging response is a paid result; an unreadable amount must not discard it (the anomaly is
recorded for the admins instead).
"""


class _Resource(BaseModel):
    model_config = ConfigDict(extra="allow", frozen=True)


class TextModel(_Resource):
    """Catalogue entry of a text model (docs/genapi.md §2.1)."""

    id: str
    label: str
    type: Literal["text"] = "text"


class ImageModel(_Resource):
    """Catalogue entry of an image model (docs/genapi.md §2.1).

    Whether it answers synchronously: not shown.
    """

    id: str
    label: str
    type: Literal["image"] = "image"


class VideoModel(_Resource):
    """Catalogue entry of a video model (docs/genapi.md §2.1), with every field the spec lists.

    ``durations`` are seconds; ``cost_cents_per_5s`` is cents per 5 seconds of video.
    """

    id: str
    label: str
    tier: str
    supports_audio: bool
    supports_lock_camera: bool
    durations: tuple[float, ...]
    cost_cents_per_5s: Cents
    type: Literal["video"] = "video"
    mode: str
    provider: str

    @property
    def needs_image(self) -> bool:
        """Whether the mode takes a source image (an image-to-video mode)."""
        mode = self.mode.lower().replace("_", "-")
        return "image-to" in mode or mode.startswith(("i2v", "img2"))


class Catalogue(_Resource):
    """The ``models`` object of ``GET /models`` (docs/genapi.md §4.1)."""

    text: tuple[TextModel, ...] = ()
    video: tuple[VideoModel, ...] = ()
    image: tuple[ImageModel, ...] = ()

    def video_model(self, model_id: str) -> VideoModel | None:
        """Return the video model ``model_id``, or None."""
        return next((m for m in self.video if m.id == model_id), None)

    def image_model(self, model_id: str) -> ImageModel | None:
        """Return the image model ``model_id``, or None."""
        return next((m for m in self.image if m.id == model_id), None)

    def text_model(self, model_id: str) -> TextModel | None:
        """Return the text model ``model_id``, or None."""
        return next((m for m in self.text if m.id == model_id), None)


class ModelsResponse(_Resource):
    """Body of ``GET /models``."""

    models: Catalogue


class Charged(_Resource):
    """Fields every charging response carries: cents charged and cents left on the key."""

    cost_cents: ReportedCents
    remaining_credits_cents: ReportedCents


class PendingTask(Charged):
    """An accepted asynchronous task, to be polled at ``poll_url``.

    The response of ``POST /video/generate`` (docs/genapi.md §2.2), and of an image model that
    does not answer synchronously (docs/genapi.md §4.4; its shape is not shown, we assume this one).

    ``poll_url`` is a path from the host root carrying ``provider``; poll it as given.
    """

    task_id: str
    status: TaskStatus = "processing"
    provider: str | None = None
    poll_url: str


class TaskState(_Resource):
    """Response of a status poll (docs/genapi.md §2.3). ``error`` is a readable message when failed.

    The spec does not show the shape of ``error``; a string, an object with ``message`` and an
    absent value are all accepted and reduced to a message.
    """

    task_id: str
    status: TaskStatus
    outputs: tuple[str, ...] = ()
    provider: str | None = None
    error: str | None = None

    @field_validator("outputs", mode="before")
    @classmethod
    def _null_outputs(cls, value: Any) -> Any:
        return () if value is None else value

    @field_validator("error", mode="before")
    @classmethod
    def _error_message(cls, value: Any) -> str | None:
        if value is None or isinstance(value, str):
            return value
        if isinstance(value, dict):
            message = value.get("message") or value.get("code")
            return str(message) if message else None
        return str(value)

    @property
    def finished(self) -> bool:
        """True once the task is ``completed`` or ``failed``."""
        return self.status != "processing"


class ImageResult(Charged):
    """Synchronous response of ``POST /image/generate`` (docs/genapi.md §2.4)."""

    task_id: str
    status: TaskStatus = "completed"
    outputs: tuple[str, ...] = ()


class Usage(_Resource):
    """Token counts of a text result."""

    prompt_tokens: int = 0
    completion_tokens: int = 0
    total_tokens: int = 0


class TextResult(Charged):
    """Response of ``POST /text/generate`` (docs/genapi.md §2.5)."""

    content: str
    model: str
    usage: Usage = Field(default_factory=Usage)


class _Request(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    def body(self) -> dict[str, Any]:
        """The JSON body, without the options left unset (the service applies its defaults)."""
        return self.model_dump(exclude_none=True)


class VideoRequest(_Request):
    """Body of ``POST /video/generate`` (docs/genapi.md §4.2). ``duration`` is seconds."""

    model: str
    prompt: str
    duration: int | float | None = None
    aspect_ratio: str | None = None
    image_url: str | None = None
    generate_audio: bool | None = None
    lock_camera: bool | None = None

    @field_validator("duration")
    @classmethod
    def _whole_seconds_as_int(cls, value: float | None) -> float | None:
        # Discord's number options arrive as floats; "5" matches a catalogue's [5, 10] even
        # for a service that compares types strictly, "5.0" might not.
        return int(value) if isinstance(value, float) and value.is_integer() else value


class ImageRequest(_Request):
    """Body of ``POST /image/generate`` (docs/genapi.md §4.4)."""

    model: str
    prompt: str
    aspect_ratio: str | None = None
    mode: Literal["t2i", "i2i", "i2i_text"] | None = None
    image_url: str | None = None
    image_urls: tuple[str, ...] | None = None


class TextRequest(_Request):
    """Body of ``POST /text/generate``; ``temperature`` is 0 to 2 (docs/genapi.md §4.5, §8.2)."""

    prompt: str
    model: str | None = None
    system: str | None = None
    max_tokens: int | None = Field(default=None, ge=1)
    temperature: float | None = Field(default=None, ge=0, le=2)
