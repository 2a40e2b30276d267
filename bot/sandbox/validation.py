"""Validation of generation request bodies; every failure is an :class:`ApiError` (400).

Nothing is charged for an invalid request, since validation runs before any billing.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

from bot.sandbox import catalogue as cat
from bot.sandbox.state import ApiError, invalid


@dataclass(frozen=True, slots=True)
class VideoRequest:
    """A valid ``POST /video/generate`` body; ``duration`` in seconds."""

    model: cat.VideoModel
    prompt: str
    duration: int


@dataclass(frozen=True, slots=True)
class ImageRequest:
    """A valid ``POST /image/generate`` body."""

    model: cat.ImageModel
    prompt: str


@dataclass(frozen=True, slots=True)
class TextRequest:
    """A valid ``POST /text/generate`` body."""

    model: cat.TextModel
    prompt: str
    system: str
    max_tokens: int


def _is_number(value: object) -> bool:
    # JSON true/false arrive as bool, which is an int subclass: not a number here.
    return isinstance(value, int | float) and not isinstance(value, bool) and math.isfinite(value)


def _prompt(body: dict[str, Any], limit: int) -> str:
    prompt = body.get("prompt")
    if not isinstance(prompt, str) or not prompt.strip():
        raise invalid("prompt is required and must be a non-empty string")
    if len(prompt) > limit:
        raise invalid(f"prompt is longer than {limit} characters")
    return prompt


def _model_id(body: dict[str, Any]) -> str:
    model = body.get("model")
    if model is None:
        raise invalid("model is required")
    if not isinstance(model, str):
        raise invalid("model must be a string")
    return model


def _unknown_model(model: str, kind: str) -> ApiError:
    return ApiError(400, "INVALID_MODEL", f"unknown {kind} model: {model}")


def _http_url(value: object, name: str) -> str:
    if not isinstance(value, str) or not value.startswith(("http://", "https://")):
        raise invalid(f"{name} must be an http or https URL")
    return value


def _aspect_ratio(body: dict[str, Any], default: str) -> None:
    if body.get("aspect_ratio", default) not in cat.ASPECT_RATIOS:
        raise invalid(f"aspect_ratio must be one of {', '.join(sorted(cat.ASPECT_RATIOS))}")


def _flag(body: dict[str, Any], name: str) -> bool:
    value = body.get(name, False)
    if not isinstance(value, bool):
        raise invalid(f"{name} must be a boolean")
    return value


def parse_video(body: dict[str, Any]) -> VideoRequest:
    """Validate a video request body.

    Raises:
        ApiError: 400 ``INVALID_MODEL`` for an unknown model, else 400 ``INVALID_PARAMS``.
    """
    model_id = _model_id(body)
    model = cat.VIDEO_BY_ID.get(model_id)
    if model is None:
        raise _unknown_model(model_id, "video")
    prompt = _prompt(body, cat.MAX_PROMPT_CHARS)
    # Spec default is 5 s; a model that cannot make 5 s gets its shortest duration instead.
    default = (
        cat.DEFAULT_VIDEO_DURATION
        if cat.DEFAULT_VIDEO_DURATION in model.durations
        else model.durations[0]
    )
    duration = body.get("duration", default)
    if not _is_number(duration) or duration not in model.durations:
        allowed = ", ".join(str(d) for d in model.durations)
        raise invalid(f"duration must be one of {allowed} for {model.id}")
    _aspect_ratio(body, cat.DEFAULT_VIDEO_ASPECT_RATIO)
    if _flag(body, "generate_audio") and not model.supports_audio:
        raise invalid(f"{model.id} does not support generate_audio")
    if _flag(body, "lock_camera") and not model.supports_lock_camera:
        raise invalid(f"{model.id} does not support lock_camera")
    if model.mode == "image-to-video" and "image_url" not in body:
        raise invalid(f"{model.id} needs image_url")
    if "image_url" in body:
        _http_url(body["image_url"], "image_url")
    return VideoRequest(model=model, prompt=prompt, duration=int(duration))


def parse_image(body: dict[str, Any]) -> ImageRequest:
    """Validate an image request body.

    Raises:
        ApiError: 400 ``INVALID_MODEL`` for an unknown model, else 400 ``INVALID_PARAMS``.
    """
    model_id = _model_id(body)
    model = cat.IMAGE_BY_ID.get(model_id)
    if model is None:
        raise _unknown_model(model_id, "image")
    prompt = _prompt(body, cat.MAX_PROMPT_CHARS)
    _aspect_ratio(body, cat.DEFAULT_IMAGE_ASPECT_RATIO)
    mode = body.get("mode", "t2i")
    if mode not in cat.IMAGE_MODES:
        raise invalid(f"mode must be one of {', '.join(sorted(cat.IMAGE_MODES))}")
    if "image_url" in body:
        _http_url(body["image_url"], "image_url")
    urls = body.get("image_urls", [])
    if not isinstance(urls, list):
        raise invalid("image_urls must be an array of URLs")
    if len(urls) > cat.MAX_IMAGE_URLS:
        raise invalid(f"image_urls holds at most {cat.MAX_IMAGE_URLS} URLs")
    for url in urls:
        _http_url(url, "each of image_urls")
    if mode != "t2i" and "image_url" not in body and not urls:
        raise invalid(f"mode {mode} needs image_url or image_urls")
    return ImageRequest(model=model, prompt=prompt)


def parse_text(body: dict[str, Any]) -> TextRequest:
    """Validate a text request body; ``model`` defaults to the first text model.

    Raises:
        ApiError: 400 ``INVALID_MODEL`` for an unknown model, else 400 ``INVALID_PARAMS``.
    """
    model_id = body.get("model", cat.TEXT_MODELS[0].id)
    if not isinstance(model_id, str):
        raise invalid("model must be a string")
    model = cat.TEXT_BY_ID.get(model_id)
    if model is None:
        raise _unknown_model(model_id, "text")
    prompt = _prompt(body, cat.MAX_TEXT_PROMPT_CHARS)
    system = body.get("system", "")
    if not isinstance(system, str) or len(system) > cat.MAX_SYSTEM_CHARS:
        raise invalid(f"system must be a string of at most {cat.MAX_SYSTEM_CHARS} characters")
    temperature = body.get("temperature", 0.7)
    if not _is_number(temperature) or not 0 <= temperature <= 2:
        raise invalid("temperature must be a number from 0 to 2")
    max_tokens = body.get("max_tokens", cat.DEFAULT_MAX_TOKENS)
    if (
        not isinstance(max_tokens, int)
        or isinstance(max_tokens, bool)
        or not 1 <= max_tokens <= cat.MAX_TOKENS_LIMIT
    ):
        raise invalid(f"max_tokens must be an integer from 1 to {cat.MAX_TOKENS_LIMIT}")
    return TextRequest(model=model, prompt=prompt, system=system, max_tokens=max_tokens)
