"""The emulator's model catalogue: what ``GET /models`` lists, with prices and task durations.

Prices are cents; task durations are *service* seconds (the emulator divides them by its
``time_scale``). Text and image entries carry fields beyond the spec's ``id``/``label``/``type``
(``context_window``, ``async``, prices...) on purpose: a client must tolerate unknown fields.
Video entries carry exactly the fields of docs/genapi.md §2.1.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Final, Literal

Provider = Literal["alpha", "beta"]
"""The two upstream providers of docs/genapi.md §4.3; ``alpha`` is the default one."""

DEFAULT_PROVIDER: Final[Provider] = "alpha"

ASPECT_RATIOS: Final = frozenset({"16:9", "9:16", "1:1", "4:3", "3:4", "21:9"})
IMAGE_MODES: Final = frozenset({"t2i", "i2i", "i2i_text"})

DEFAULT_VIDEO_DURATION: Final = 5  # seconds, docs/genapi.md §8.2
DEFAULT_VIDEO_ASPECT_RATIO: Final = "16:9"
DEFAULT_IMAGE_ASPECT_RATIO: Final = "1:1"
DEFAULT_MAX_TOKENS: Final = 1000
MAX_TOKENS_LIMIT: Final = 8192
MAX_PROMPT_CHARS: Final = 4000  # video and image prompts
MAX_TEXT_PROMPT_CHARS: Final = 32_000
MAX_SYSTEM_CHARS: Final = 8000
MAX_IMAGE_URLS: Final = 4


@dataclass(frozen=True, slots=True)
class TextModel:
    """A text model; ``cents_per_1k_tokens`` prices prompt and completion tokens alike."""

    id: str
    label: str
    cents_per_1k_tokens: int
    context_window: int

    def to_json(self) -> dict[str, Any]:
        """Return the catalogue entry (spec fields plus two extras)."""
        return {
            "id": self.id,
            "label": self.label,
            "type": "text",
            "context_window": self.context_window,
            "cost_cents_per_1k_tokens": self.cents_per_1k_tokens,
        }


@dataclass(frozen=True, slots=True)
class ImageModel:
    """An image model: a fixed price in cents per request, sync or async (polled)."""

    id: str
    label: str
    cost_cents: int
    images: int = 1
    is_async: bool = False
    provider: Provider = DEFAULT_PROVIDER
    task_seconds: float = 0.0  # service seconds, async models only

    def to_json(self) -> dict[str, Any]:
        """Return the catalogue entry (spec fields plus extras, ``async`` among them)."""
        return {
            "id": self.id,
            "label": self.label,
            "type": "image",
            "async": self.is_async,
            "cost_cents_per_request": self.cost_cents,
            "images_per_request": self.images,
        }


@dataclass(frozen=True, slots=True)
class VideoModel:
    """A video model; ``task_seconds`` is how long generation takes, in service seconds."""

    id: str
    label: str
    tier: Literal["standard", "pro", "premium"]
    supports_audio: bool
    supports_lock_camera: bool
    durations: tuple[int, ...]
    cost_cents_per_5s: int
    mode: Literal["text-to-video", "image-to-video"]
    provider: Provider
    task_seconds: float

    def to_json(self) -> dict[str, Any]:
        """Return the catalogue entry with exactly the fields of docs/genapi.md §2.1."""
        return {
            "id": self.id,
            "label": self.label,
            "tier": self.tier,
            "supports_audio": self.supports_audio,
            "supports_lock_camera": self.supports_lock_camera,
            "durations": list(self.durations),
            "cost_cents_per_5s": self.cost_cents_per_5s,
            "type": "video",
            "mode": self.mode,
            "provider": self.provider,
        }


TEXT_MODELS: Final = (
    TextModel("openai/gpt-4o-mini", "GPT-4o mini", cents_per_1k_tokens=1, context_window=128_000),
    TextModel("anthropic/claude-3-haiku", "Claude 3 Haiku", 2, 200_000),
    TextModel("meta/llama-3.1-70b", "Llama 3.1 70B", 3, 128_000),
)

IMAGE_MODELS: Final = (
    ImageModel("black-forest-labs/flux-schnell", "FLUX.1 schnell", cost_cents=3),
    ImageModel("stability/sdxl", "Stable Diffusion XL", cost_cents=4, images=2),
    ImageModel(
        "ideogram/ideogram-v2",
        "Ideogram v2",
        cost_cents=8,
        is_async=True,
        provider="beta",
        task_seconds=15.0,
    ),
)

VIDEO_MODELS: Final = (
    VideoModel(
        "aurora-lite/text-to-video", "Aurora Lite", "standard", False, False, (5, 10), 20,
        "text-to-video", "alpha", 30.0,
    ),
    VideoModel(
        "aurora-lite/image-to-video", "Aurora Lite (image)", "standard", False, False, (5, 10), 25,
        "image-to-video", "alpha", 40.0,
    ),
    VideoModel(
        "flash-clip/text-to-video", "Flash Clip", "standard", False, True, (5,), 30,
        "text-to-video", "beta", 30.0,
    ),
    VideoModel(
        "nimbus-pro/text-to-video", "Nimbus Pro", "pro", True, True, (4, 8, 12), 60,
        "text-to-video", "beta", 60.0,
    ),
    VideoModel(
        "nimbus-pro/image-to-video", "Nimbus Pro (image)", "pro", True, True, (4, 8, 12), 70,
        "image-to-video", "beta", 75.0,
    ),
    VideoModel(
        "zenith-ultra/text-to-video", "Zenith Ultra", "premium", True, False, (6, 10), 150,
        "text-to-video", "alpha", 120.0,
    ),
)  # fmt: skip

TEXT_BY_ID: Final = {m.id: m for m in TEXT_MODELS}
IMAGE_BY_ID: Final = {m.id: m for m in IMAGE_MODELS}
VIDEO_BY_ID: Final = {m.id: m for m in VIDEO_MODELS}


def catalogue_json() -> dict[str, Any]:
    """Return the body of ``GET /models``."""
    return {
        "models": {
            "text": [m.to_json() for m in TEXT_MODELS],
            "video": [m.to_json() for m in VIDEO_MODELS],
            "image": [m.to_json() for m in IMAGE_MODELS],
        }
    }
